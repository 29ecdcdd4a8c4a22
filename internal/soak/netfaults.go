package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The network's faults (Options.Network, issue 28): every process is a
// host of a testenv.Network, every link between a host and a server one
// toxiproxy proxy, and these break links while every process stays up.
const (
	// CutAPIRedis: one api's link to the Redis primary cut both ways
	// (silence, no reset) for ~10 s, then healed.
	CutAPIRedis = "cut an api from the redis primary"
	// RepliesLost: one api's link to the Redis primary cut one way, ~10 s:
	// its commands reach Redis and run, their replies never come back —
	// the api times out, and what it sends again must answer as the first
	// run did.
	RepliesLost = "an api's replies from the redis primary lost"
	// SplitBrain (Sentinel): the primary, one api and one worker on one
	// side; the replica, the sentinels, the other api and worker on the
	// other. The sentinels promote the replica; both primaries take
	// writes; healed, the old primary becomes a replica and drops what it
	// alone took.
	SplitBrain = "split brain"
	// CutWorkerMySQL: one worker's link to MariaDB cut, mid-batch.
	CutWorkerMySQL = "cut a worker from mysql"
	// CutWorkerRedis: one worker's link to the Redis primary cut, with a
	// batch read and not yet marked persisted.
	CutWorkerRedis = "cut a worker from the redis primary"
	// CutReplication (Sentinel): the replica's link to the primary cut:
	// no write can be acknowledged.
	CutReplication = "cut the replica from the primary"
	// SlowLinks: 50–200 ms (125 ± 75) on every link, each way.
	SlowLinks = "latency on every link"
	// NarrowLinks: every link held to 32 KB/s each way (a congested or
	// throttled network: a pipeline of many orders takes a while through).
	NarrowLinks = "bandwidth limited on every link"
	// ResetLinks: a third of the connections on every link reset (RST)
	// within a second of the fault, new ones too, while it lasts.
	ResetLinks = "connections reset"
	// HalfReplies: one api's connections to the Redis primary closed after
	// a few hundred bytes of reply: replies cut in half, after the scripts
	// ran.
	HalfReplies = "redis replies cut in half"
)

// NetworkKinds are the network's faults, in the order reports list them.
var NetworkKinds = []string{CutAPIRedis, RepliesLost, SplitBrain, CutWorkerMySQL, CutWorkerRedis, CutReplication, SlowLinks, NarrowLinks, ResetLinks, HalfReplies}

// needsSentinel are the kinds that need a replica and sentinels.
var needsSentinel = []string{SplitBrain, CutReplication}

// RecoverWithin bounds the time from a network fault healed until the
// stack serves again by itself (Stack.WaitRecovered: every api and worker
// ready, the replica online). The slowest is a split brain's: the
// sentinels turn the old primary into a replica on their next look
// (seconds) and it resyncs in full.
const RecoverWithin = 45 * time.Second

func isNetwork(kind string) bool { return slices.Contains(NetworkKinds, kind) }

// drawNet fills in a network fault's length.
func (f *faults) drawNet(p *plan) {
	switch p.kind {
	case SlowLinks:
		p.down = 10*time.Second + time.Duration(f.rng.Int64N(int64(20*time.Second)))
	case ResetLinks, HalfReplies, NarrowLinks:
		p.down = 3*time.Second + time.Duration(f.rng.Int64N(int64(5*time.Second)))
	case CutWorkerMySQL, CutWorkerRedis:
		p.down = 3*time.Second + time.Duration(f.rng.Int64N(int64(7*time.Second)))
	default: // the cuts the issue names at 10 s
		p.down = 10 * time.Second
	}
	p.bytes = 100 + f.rng.IntN(1900)
	if f.r.opt.NetFaultFor > 0 {
		p.down = f.r.opt.NetFaultFor
	}
}

// injectNet causes network fault p, waits it out, heals every link and
// waits until the stack serves again (RecoverWithin; longer is a failure,
// not an error).
func (f *faults) injectNet(ctx context.Context, p plan, fault *Fault) error {
	heal := context.WithoutCancel(ctx)
	st := f.r.stack
	n := st.Net
	primary, err := st.RedisPrimary(heal)
	if err != nil {
		return err
	}
	api, worker := st.APIs[p.target%len(st.APIs)].Name, st.Workers[p.target%len(st.Workers)].Name
	var what string
	switch p.kind {
	case CutAPIRedis:
		fault.Target, what = api+">"+primary, "cut both ways"
		err = n.Cut(api, primary, testenv.Both)
	case RepliesLost:
		fault.Target, what = api+">"+primary, "cut one way (the replies)"
		err = n.Cut(api, primary, "downstream")
	case SplitBrain:
		// The old primary's side: it, one api and one worker. The other:
		// everything else that is a host (MariaDB stays reachable by all).
		old := []string{primary, api, worker}
		var rest []string
		for _, h := range append(append(st.RedisServers(), st.Sentinels()...), st.ProcNames()...) {
			if !slices.Contains(old, h) {
				rest = append(rest, h)
			}
		}
		fault.Target, what = fmt.Sprintf("%v | %v", old, rest), "partitioned"
		err = n.Partition(old, rest)
	case CutWorkerMySQL:
		fault.Target, what = worker+">mysql", "cut both ways"
		err = n.Cut(worker, "mysql", testenv.Both)
	case CutWorkerRedis:
		fault.Target, what = worker+">"+primary, "cut both ways"
		err = n.Cut(worker, primary, testenv.Both)
	case CutReplication:
		for _, s := range st.RedisServers() {
			if s != primary {
				fault.Target, what = s+">"+primary, "cut both ways"
				err = n.Cut(s, primary, testenv.Both)
			}
		}
	case SlowLinks:
		fault.Target, what = "every link", "125±75 ms each way"
		for _, l := range n.Links() {
			h, s, _ := strings.Cut(l, ">")
			if err = n.Latency(h, s, 125, 75); err != nil {
				break
			}
		}
	case NarrowLinks:
		fault.Target, what = "every link", "32 KB/s each way"
		for _, l := range n.Links() {
			h, s, _ := strings.Cut(l, ">")
			if err = n.Bandwidth(h, s, 32); err != nil {
				break
			}
		}
	case ResetLinks:
		fault.Target, what = "every link", "a third of the connections reset"
		for _, l := range n.Links() {
			h, s, _ := strings.Cut(l, ">")
			if err = n.Reset(h, s, f.rng.IntN(1000), 0.33); err != nil {
				break
			}
		}
	case HalfReplies:
		fault.Target, what = api+">"+primary, fmt.Sprintf("connections closed after %d bytes of reply", p.bytes)
		err = n.CutReplyAfter(api, primary, p.bytes)
	}
	if err != nil {
		_ = n.HealAll()
		return err
	}
	f.r.say("%s: %s %s for %.1fs", p.kind, fault.Target, what, p.down.Seconds())
	var before int64
	if p.kind == SplitBrain {
		before, _ = st.ReplOffset(heal, primary)
	}
	sleep(ctx, p.down)
	if p.kind == SplitBrain {
		// Evidence that the split was one: the old primary took writes of
		// its own side (refused to their clients, unacknowledged) that its
		// resync as a replica drops.
		if after, err := st.ReplOffset(heal, primary); err == nil {
			f.r.say("%s: the old primary %s took %d bytes of writes while cut off, dropped at its resync", p.kind, primary, after-before)
		}
	}
	if err := n.HealAll(); err != nil {
		return err
	}
	took, err := st.WaitRecovered(heal, RecoverWithin)
	fault.Recovered = took
	if err != nil {
		f.r.fail("%s (%s): not recovered by itself within %v of the heal: %v", p.kind, fault.Target, RecoverWithin, err)
	}
	return nil
}
