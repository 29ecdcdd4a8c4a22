package testenv

import (
	"errors"
	"fmt"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// The faults a Network's links take, each a toxiproxy toxic (or, for
// Refuse, a disabled proxy). A link's stream "upstream" is what the host
// sends the server (requests), "downstream" what it gets back (replies).
// Heal takes every fault off a link.

// Both is a fault on both directions of a link.
const Both = "both"

func streams(dir string) []string {
	if dir == Both {
		return []string{"upstream", "downstream"}
	}
	return []string{dir}
}

// Cut drops everything on the link from h to s in direction dir
// (upstream, downstream or Both) and closes nothing: connections stay
// open and silent, new ones are accepted and hear nothing — a partition as
// a network has it (packets lost, no reset), which a client sees only by
// its own timeouts. One way (dir upstream) the server never gets the
// requests; (downstream) it runs them and its replies are lost.
func (n *Network) Cut(h, s, dir string) error {
	return n.toxic(h, s, "cut", "timeout", dir, 1, toxiproxy.Attributes{"timeout": 0})
}

// Refuse takes the link down hard: its open connections are closed and new
// ones refused, as a host whose peer went away answers.
func (n *Network) Refuse(h, s string) error {
	p, err := n.Link(h, s)
	if err != nil {
		return err
	}
	return p.Disable()
}

// Latency delays everything on the link by ms ± jitter milliseconds, each
// way.
func (n *Network) Latency(h, s string, ms, jitter int) error {
	return n.toxic(h, s, "latency", "latency", Both, 1, toxiproxy.Attributes{"latency": ms, "jitter": jitter})
}

// Bandwidth limits the link to kbps kilobytes a second, each way.
func (n *Network) Bandwidth(h, s string, kbps int) error {
	return n.toxic(h, s, "bandwidth", "bandwidth", Both, 1, toxiproxy.Attributes{"rate": kbps})
}

// Reset resets connections of the link (TCP RST) after afterMs
// milliseconds of life, a share (0–1] of them, drawn per connection.
func (n *Network) Reset(h, s string, afterMs int, share float32) error {
	return n.toxic(h, s, "reset", "reset_peer", "downstream", share, toxiproxy.Attributes{"timeout": afterMs})
}

// CutReplyAfter closes a connection of the link once the server has sent
// it bytes bytes: the reply in flight is cut in half, after the command
// ran — what go-redis resends a pipeline after.
func (n *Network) CutReplyAfter(h, s string, bytes int) error {
	return n.toxic(h, s, "halfreply", "limit_data", "downstream", 1, toxiproxy.Attributes{"bytes": bytes})
}

func (n *Network) toxic(h, s, name, kind, dir string, share float32, attrs toxiproxy.Attributes) error {
	p, err := n.Link(h, s)
	if err != nil {
		return err
	}
	for _, st := range streams(dir) {
		if _, err := p.AddToxic(name+"-"+st, kind, st, share, attrs); err != nil {
			return fmt.Errorf("testenv: %s on %s>%s (%s): %w", kind, h, s, st, err)
		}
	}
	return nil
}

// Heal takes every fault off the link from h to s: its toxics removed,
// the proxy enabled.
func (n *Network) Heal(h, s string) error {
	p, err := n.Link(h, s)
	if err != nil {
		return err
	}
	return heal(p)
}

func heal(p *toxiproxy.Proxy) error {
	toxics, err := p.Toxics()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range toxics {
		if err := p.RemoveToxic(t.Name); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err)
		}
	}
	if !p.Enabled {
		errs = append(errs, p.Enable())
	}
	return errors.Join(errs...)
}

// HealAll heals every link.
func (n *Network) HealAll() error {
	n.mu.Lock()
	ps := make([]*toxiproxy.Proxy, 0, len(n.links))
	for _, p := range n.links {
		ps = append(ps, p)
	}
	n.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, heal(p))
	}
	return errors.Join(errs...)
}
