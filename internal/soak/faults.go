package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
)

// The kinds of fault.
const (
	KillAPI    = "kill -9 api"
	KillWorker = "kill -9 worker"
	PauseRedis = "pause redis"
	StopMySQL  = "stop mysql"
	// FailoverRedis (unless Options.SingleRedis): the primary killed -9, a
	// replica promoted, the old primary restarted as its replica.
	FailoverRedis = "kill -9 redis primary"
)

// Kinds is every kind of fault, in the order reports list them.
var Kinds = []string{KillAPI, KillWorker, PauseRedis, StopMySQL, FailoverRedis, WebhookReceiver}

// KindsFor are the faults a soak with o injects: every kind but
// FailoverRedis with SingleRedis, and but WebhookReceiver with Network (no
// receiver then: hooks.go).
// With Network, the network's kinds too (NetworkKinds; without Sentinel,
// those that need none).
func KindsFor(o Options) []string {
	var kinds []string
	for _, k := range Kinds {
		if (k == FailoverRedis && o.SingleRedis) || (k == WebhookReceiver && o.Network) {
			continue
		}
		kinds = append(kinds, k)
	}
	if o.Network {
		for _, k := range NetworkKinds {
			if !o.SingleRedis || !slices.Contains(needsSentinel, k) {
				kinds = append(slices.Clip(kinds), k)
			}
		}
	}
	if len(o.Only) > 0 {
		return o.Only
	}
	return kinds
}

func (f *faults) kinds() []string { return KindsFor(f.r.opt) }

// Fault is one fault injected.
type Fault struct {
	At     time.Duration // after the start
	Kind   string
	Target string        // api2, worker1, redis-server, mariadbd
	Down   time.Duration // from the fault until it was healed (a process back and ready)
	// Recovered, for a network fault: from the heal until the stack served
	// again (every api and worker ready, the replica online).
	Recovered time.Duration
}

func (f Fault) String() string {
	s := fmt.Sprintf("t+%.1fs %s: %s down %.1fs", f.At.Seconds(), f.Kind, f.Target, f.Down.Seconds())
	if f.Recovered > 0 {
		s += fmt.Sprintf(", serving %.1fs after the heal", f.Recovered.Seconds())
	}
	return s
}

// faults injects one fault at a time, each after a gap drawn from ½ to 1½
// of FaultEvery since the last one healed. Every draw — gap, kind, target,
// length — is made before the gap is waited, from the run's seed, so a seed
// replays the same schedule. The first faults are one of each kind in a
// drawn order, so even a short run sees every kind.
type faults struct {
	r     *run
	rng   *rand.Rand
	deck  []string // the kinds still to deal before drawing freely
	crowd *shopper // places a surge of orders just before a process is killed
}

// surgeOrders is how many orders a surge places at once.
const surgeOrders = 200

func newFaults(r *run, rng *rand.Rand, crowd *shopper) *faults {
	f := &faults{r: r, rng: rng, crowd: crowd}
	f.deck = append([]string(nil), f.kinds()...)
	rng.Shuffle(len(f.deck), func(i, j int) { f.deck[i], f.deck[j] = f.deck[j], f.deck[i] })
	return f
}

// plan is one fault, drawn.
type plan struct {
	gap    time.Duration
	kind   string
	target int           // index of the api or worker
	down   time.Duration // a pause's or a stop's length; a killed process's time dead
	lead   time.Duration // a kill comes this long into a surge of orders
	bytes  int           // HalfReplies: the bytes of reply a connection gets
}

func (f *faults) draw() plan {
	p := plan{gap: f.r.opt.FaultEvery/2 + time.Duration(f.rng.Int64N(int64(f.r.opt.FaultEvery)))}
	if len(f.deck) > 0 {
		p.kind, f.deck = f.deck[0], f.deck[1:]
	} else {
		p.kind = f.kinds()[f.rng.IntN(len(f.kinds()))]
	}
	p.target = f.rng.IntN(2) // the stack has two apis and two workers
	if p.kind == WebhookReceiver {
		p.target = f.rng.IntN(len(receiverModes))
	}
	switch {
	case isNetwork(p.kind):
		f.drawNet(&p)
	case p.kind == PauseRedis:
		p.down = time.Second + time.Duration(f.rng.Int64N(int64(4*time.Second)))
	case p.kind == StopMySQL:
		p.down = 2*time.Second + time.Duration(f.rng.Int64N(int64(8*time.Second)))
	case p.kind == WebhookReceiver:
		p.down = 2*time.Second + time.Duration(f.rng.Int64N(int64(8*time.Second)))
	default:
		p.down = time.Duration(f.rng.Int64N(int64(2 * time.Second)))
		p.lead = 10*time.Millisecond + time.Duration(f.rng.Int64N(int64(150*time.Millisecond)))
	}
	return p
}

// run injects faults until ctx ends. A fault in progress then is cut short
// and healed before run returns. An error is a fault that could not be
// healed: the run cannot go on.
func (f *faults) run(ctx context.Context) error {
	for {
		p := f.draw()
		if !sleep(ctx, p.gap) {
			return nil
		}
		if err := f.inject(ctx, p); err != nil {
			return err
		}
	}
}

// inject causes fault p and heals it. Waiting out the fault ends early when
// ctx does; healing never does.
func (f *faults) inject(ctx context.Context, p plan) error {
	heal := context.WithoutCancel(ctx)
	st := f.r.stack
	fault := Fault{At: f.r.since(), Kind: p.kind}
	var err error
	switch p.kind {
	case KillAPI, KillWorker:
		procs, ready := st.APIs, "/readyz"
		if p.kind == KillWorker {
			procs = st.Workers
		}
		proc := procs[p.target%len(procs)]
		fault.Target = proc.Name
		f.r.say("%s: %s (pid %d), %v into a surge of %d orders; restarted on %s after %.1fs",
			p.kind, proc.Name, proc.PID(), p.lead.Round(time.Millisecond), surgeOrders, proc.Addr, p.down.Seconds())
		// A kill mid-surge: an api's requests in flight are cut and its
		// relay most likely holds accepted orders' tasks it has not sent
		// yet, which the reconciler must find; a worker dies holding many
		// tasks, which asynq gives back only after their lease.
		f.crowd.surge(ctx, f.r.sales.roomiest(heal), surgeOrders)
		sleep(ctx, p.lead)
		proc.Kill()
		sleep(ctx, p.down)
		err = restart(proc, ready)
	case PauseRedis:
		fault.Target = "redis-server"
		var pid int
		if pid, err = st.PauseRedis(heal); err != nil {
			return err
		}
		f.r.say("%s: redis-server (pid %d) stopped (SIGSTOP) for %.1fs", p.kind, pid, p.down.Seconds())
		sleep(ctx, p.down)
		err = st.ResumeRedis(pid)
	case FailoverRedis:
		var old, promoted string
		var after time.Duration
		if old, promoted, _, after, err = st.KillRedisPrimary(heal); err != nil {
			return err
		}
		fault.Target = "redis-server " + old
		f.r.say("%s: %s killed -9; %s promoted %.1fs later; %s restarted as its replica", p.kind, old, promoted, after.Seconds(), old)
	case StopMySQL:
		fault.Target = "mariadbd"
		f.r.say("%s: mariadbd shut down for %.1fs", p.kind, p.down.Seconds())
		st.StopMySQL()
		sleep(ctx, p.down)
		err = st.StartMySQL()
	case WebhookReceiver:
		err = f.injectReceiver(ctx, p, &fault)
	default:
		err = f.injectNet(ctx, p, &fault)
	}
	fault.Down = f.r.since() - fault.At
	if err != nil {
		return fmt.Errorf("soak: heal %s (%s): %w", p.kind, fault.Target, err)
	}
	f.r.say("healed: %s back after %.1fs", fault.Target, fault.Down.Seconds())
	f.r.repMu.Lock()
	f.r.rep.Faults = append(f.r.rep.Faults, fault)
	f.r.repMu.Unlock()
	return nil
}

// restart starts a killed process again on its address and waits until it
// is ready. Its port was free a moment ago, but another socket may take it
// meanwhile (an outgoing connection's ephemeral port): a start that fails
// is tried again.
func restart(p *loadtest.Proc, ready string) error {
	var err error
	for range 5 {
		if err = p.Restart(); err != nil {
			return err
		}
		if err = p.WaitHTTP("http://"+p.Addr+ready, 90*time.Second); err == nil {
			return nil
		}
		p.Kill()
		time.Sleep(time.Second)
	}
	return err
}
