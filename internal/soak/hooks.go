package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/loadtest"
)

// The shop's webhooks among the faults (docs/webhooks.md): a real receiver
// process (internal/webhook/receiver, verifying every signature with the
// Standard Webhooks library) subscribed to every type from before the first
// sale, the receiver's misbehaviour one of the fault kinds, and at the end,
// after a drain, the outbox against what it received (invariants.Webhooks).
// Whatever appends events — activity.* and payment.flagged today, order.*
// once the worker's order write appends them — is covered by the same
// comparison. Not with Network: the receiver is not one of the network's
// hosts.

// WebhookReceiver is the receiver's fault: drawn among four — down for a
// while (killed, restarted later), answering 500s, answering after the
// worker's WEBHOOK_TIMEOUT (so it sends again), killed -9 mid-request
// (deliveries logged and unanswered: sent again) — for the fault's length.
const WebhookReceiver = "webhook receiver"

// The receiver fault's modes.
var receiverModes = []string{"down", "500s", "slow", "killed mid-request"}

// hookEnv is what the stack's processes need for the soak's receiver: a
// private address allowed, a retry schedule of about two minutes (a
// receiver down a few seconds is retried well within the drain) and a
// timeout shorter than the receiver's slow answers.
var hookEnv = []string{"WEBHOOK_ALLOW_PRIVATE=true", "WEBHOOK_RETRY_SCHEDULE=1s,2s,4s,8s,15s,30s,60s", "WEBHOOK_TIMEOUT=2s"}

// drainWithin bounds the wait, after the settle, for the receiver to have
// every outbox event: more than the retry schedule's span.
const drainWithin = 3 * time.Minute

type receiver struct {
	proc *loadtest.Proc
	log  string
}

// stackCurrency is the soak stack's PAYMENT_CURRENCY (its default), which
// the orders' order.accepted events report.
const stackCurrency = "cny"

// startReceiver builds and starts the receiver and subscribes it to every
// event type through the admin API.
func (r *run) startReceiver(ctx context.Context, root string) error {
	bin := filepath.Join(r.stack.Dir, "receiver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./internal/webhook/receiver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("soak: build the receiver: %w\n%s", err, out)
	}
	addr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	var ep struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	body, _ := json.Marshal(map[string]any{"url": "http://" + addr + "/hooks", "events": []string{"*"}, "description": "the soak's receiver"})
	req, _ := http.NewRequestWithContext(ctx, "POST", r.stack.URL+"/admin/v1/webhook-endpoints", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.stack.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("soak: create the receiver's endpoint: %w", err)
	}
	err = json.NewDecoder(resp.Body).Decode(&ep)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || ep.Secret == "" {
		return fmt.Errorf("soak: create the receiver's endpoint: %d %v", resp.StatusCode, err)
	}
	rc := &receiver{log: filepath.Join(r.stack.Dir, "deliveries.jsonl")}
	if rc.proc, err = loadtest.StartProc(r.stack.Dir, "receiver", addr, bin,
		[]string{"-addr", addr, "-secret", ep.Secret, "-log", rc.log}, nil); err != nil {
		return err
	}
	if err := rc.proc.WaitHTTP("http://"+addr+"/control", 30*time.Second); err != nil {
		return err
	}
	r.hooks = rc
	r.say("webhooks: receiver %s (pid %d) subscribed to every event as endpoint %d", addr, rc.proc.PID(), ep.ID)
	return nil
}

// control sets the receiver's share of 500s, of slow answers and their
// delay.
func (rc *receiver) control(fail, slow float64, delay time.Duration) error {
	u := fmt.Sprintf("http://%s/control?fail=%g&slow=%g&delay=%s", rc.proc.Addr, fail, slow, delay)
	resp, err := http.Post(u, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// injectReceiver misbehaves as mode for p.down and heals.
func (f *faults) injectReceiver(ctx context.Context, p plan, fault *Fault) error {
	rc := f.r.hooks
	mode := receiverModes[p.target%len(receiverModes)]
	fault.Target = "receiver (" + mode + ")"
	f.r.say("%s: %s for %.1fs", p.kind, mode, p.down.Seconds())
	switch mode {
	case "down":
		rc.proc.Kill()
		sleep(ctx, p.down)
		return restart(rc.proc, "/control")
	case "500s":
		if err := rc.control(0.6, 0, 0); err != nil {
			return err
		}
		sleep(ctx, p.down)
		return rc.control(0, 0, 0)
	case "slow":
		if err := rc.control(0, 0.5, 3*time.Second); err != nil { // past WEBHOOK_TIMEOUT (2s)
			return err
		}
		sleep(ctx, p.down)
		return rc.control(0, 0, 0)
	default: // killed mid-request: every delivery logged, none answered yet, then -9
		if err := rc.control(0, 1, 10*time.Second); err != nil {
			return err
		}
		sleep(ctx, time.Second)
		rc.proc.Kill()
		sleep(ctx, p.down)
		return restart(rc.proc, "/control")
	}
}

// received reads the receiver's log.
func (rc *receiver) received() ([]invariants.Received, error) {
	f, err := os.Open(rc.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []invariants.Received
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l invariants.Received
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line cut by a kill -9 (one write: whole or not at all, but be safe)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// checkWebhooks waits, the receiver well, until it has every outbox event
// (at most drainWithin), then checks it against the outbox.
func (r *run) checkWebhooks(ctx context.Context) error {
	if r.hooks == nil {
		return nil
	}
	if err := r.hooks.control(0, 0, 0); err != nil {
		return fmt.Errorf("soak: the receiver: %w", err)
	}
	start := time.Now()
	var outbox []invariants.OutboxEvent
	var got []invariants.Received
	for {
		var err error
		if outbox, err = invariants.ReadOutbox(ctx, r.db, stackCurrency); err != nil {
			return err
		}
		if got, err = r.hooks.received(); err != nil {
			return err
		}
		missing := invariants.Missing(outbox, got)
		if len(missing) == 0 || time.Since(start) > drainWithin || ctx.Err() != nil {
			break
		}
		r.say("webhooks: draining: %d of %d outbox events not received yet", len(missing), len(outbox))
		sleep(ctx, 5*time.Second)
	}
	rep := invariants.Webhooks(outbox, got)
	r.rep.Invariants = append(r.rep.Invariants, rep)
	r.rep.Checks += len(rep.Checks)
	r.rep.WebhookEvents, r.rep.WebhookDeliveries = len(outbox), len(got)
	r.say("webhooks: %d outbox events, %d deliveries received, drained in %.1fs", len(outbox), len(got), time.Since(start).Seconds())
	for _, c := range rep.Checks {
		if !c.OK {
			r.fail("webhooks: %s: %s", c.Name, c.Detail)
		}
	}
	return nil
}
