package lock

// Fault-injection tests that need the package's insides: script replies
// delayed or failed by a go-redis hook, and leases driven by fake stores.
// Each one reproduced a defect a review found (two holders, a lock that
// outlived its Lost, a hold dropped by another's clean-up) before it was
// fixed.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// scriptHook intercepts EVALSHA of one script.
type scriptHook struct {
	script *redis.Script
	// before runs before the command is sent; a non-nil error fails it unsent.
	before func(n int64) error
	// after runs after the answer arrived, before the caller sees it.
	after func(n int64)
	n     atomic.Int64
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if cmd.Name() != "evalsha" || len(a) < 2 || a[1] != h.script.Hash() {
			return next(ctx, cmd)
		}
		n := h.n.Add(1)
		if h.before != nil {
			if err := h.before(n); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		err := next(ctx, cmd)
		if h.after != nil {
			h.after(n)
		}
		return err
	}
}
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func loadAll(t *testing.T, rdb *redis.Client) {
	for _, s := range []*redis.Script{obtainScript, releaseScript, refreshScript, reentrantObtainScript,
		reentrantReleaseScript, reentrantRefreshScript, fairObtainScript, fairReleaseScript, fairLeaveScript, fairRefreshScript} {
		if err := s.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeOps: the first renewal's answer comes after the deadline (it landed in
// the store, its reply is late); every later renewal succeeds.
type fakeOps struct{ calls atomic.Int64 }

func (f *fakeOps) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	if f.calls.Add(1) == 1 {
		<-ctx.Done()
		return true, nil
	}
	return true, nil
}

// R1 (unit): once Lost is closed the watchdog keeps renewing forever.
func TestLease_afterLost_renewsNoMore(t *testing.T) {
	ops := &fakeOps{}
	ls := startLease(ops, observer{}, 90*time.Millisecond, options{}, time.Now(), nil)
	select {
	case <-ls.lost:
	case <-time.After(time.Second):
		t.Fatal("not lost")
	}
	at := ops.calls.Load()
	time.Sleep(500 * time.Millisecond)
	if after := ops.calls.Load(); after > at {
		t.Errorf("%d renewals ran after Lost closed", after-at)
	}
	ls.stop(context.Background())
}

// R1 (end to end): a renewal whose reply is late closes Lost; the next
// renewal succeeds and the "lost" lock then stays in Redis for as long as the
// process lives, blocking everyone, unless the holder still calls Release.
func TestMutex_lateRenewalAfterLost_doesNotKeepTheKey(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := srv.Client(t)
	opt := testenv.ClientOptions(srv.Addr())
	opt.ContextTimeoutEnabled = false // supported: "the watchdog does not depend on it"
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	loadAll(t, admin)
	rdb.AddHook(&scriptHook{script: refreshScript, after: func(n int64) {
		if n == 1 {
			time.Sleep(400 * time.Millisecond) // reply delayed (network); Redis did renew
		}
	}})
	c := NewClient(rdb, Config{})
	defer c.Close()
	other := NewClient(admin, Config{})
	defer other.Close()
	l, err := c.TryObtain(context.Background(), "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("not lost")
	}
	time.Sleep(2 * time.Second) // ~7 ttls after Lost closed
	if _, err := other.TryObtain(context.Background(), "k", time.Second); err != nil {
		h, _ := other.Holder(context.Background(), "k")
		t.Errorf("2s after Lost closed the key is still held and renewed: %v; holder %+v", err, h)
	}
}

// R2: a nested reentrant obtain that fails before reaching Redis triggers a
// background releaseOne that drops the owner's *outer* hold. Another owner
// then obtains while the outer Lock is still held (Lost open).
func TestReentrant_failedNestedObtain_keepsTheOuterHold(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	loadAll(t, rdb)
	var fail atomic.Bool
	rdb.AddHook(&scriptHook{script: reentrantObtainScript, before: func(int64) error {
		if fail.CompareAndSwap(true, false) {
			return errors.New("dial tcp: connection refused") // never sent
		}
		return nil
	}})
	c := NewClient(rdb, Config{})
	defer c.Close()
	r := c.Reentrant()
	a := WithOwner(context.Background(), "a")
	outer, err := r.TryObtain(a, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := r.TryObtain(a, "k", 10*time.Second); err == nil {
		t.Fatal("nested obtain should fail")
	}
	time.Sleep(100 * time.Millisecond)
	b := WithOwner(context.Background(), "b")
	if l, err := r.TryObtain(b, "k", 10*time.Second); err == nil {
		t.Errorf("owner b holds fence %d while owner a's outer hold (fence %d) is live", l.Fence(), outer.Fence())
	}
}

// R3: a stale hold's Release decrements the owner's new hold in Redis.
func TestReentrant_releaseOfAnExpiredHold_keepsTheOwnersNewHold(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	c := NewClient(rdb, Config{})
	defer c.Close()
	r := c.Reentrant()
	a := WithOwner(context.Background(), "a")
	old, err := r.TryObtain(a, "k", 200*time.Millisecond, WithoutRenewal())
	if err != nil {
		t.Fatal(err)
	}
	<-old.Lost()
	time.Sleep(20 * time.Millisecond) // expired in Redis
	cur, err := r.TryObtain(a, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Release(a); !errors.Is(err, ErrNotHeld) { // e.g. a deferred Release of the lost hold
		t.Errorf("Release of the expired hold: %v, want ErrNotHeld", err)
	}
	b := WithOwner(context.Background(), "b")
	if l, err := r.TryObtain(b, "k", 10*time.Second); err == nil {
		t.Errorf("owner b holds (fence %d) while a's current hold (fence %d) is live", l.Fence(), cur.Fence())
	}
}

// R3b: two concurrent first obtains of one owner whose answers come back in
// the other order: the later answer (count 1) marks the other's Lock lost.
func TestReentrant_answersInTheOtherOrder_loseNothing(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	loadAll(t, rdb)
	rdb.AddHook(&scriptHook{script: reentrantObtainScript, after: func(n int64) {
		if n == 1 {
			time.Sleep(100 * time.Millisecond)
		}
	}})
	c := NewClient(rdb, Config{})
	defer c.Close()
	r := c.Reentrant()
	a := WithOwner(context.Background(), "a")
	var wg sync.WaitGroup
	var l1, l2 *Lock
	wg.Add(2)
	go func() { defer wg.Done(); l1, _ = r.TryObtain(a, "k", 10*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	go func() { defer wg.Done(); l2, _ = r.TryObtain(a, "k", 10*time.Second) }()
	wg.Wait()
	if l1 == nil || l2 == nil {
		t.Fatal("obtain failed")
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-l2.Lost():
		t.Errorf("l2's Lost closed although Redis holds owner a with count 2: %v", rdb.HGetAll(context.Background(), "fs:rlock:{k}").Val())
	default:
	}
}

// R4: a fair confirm answered late spawns an async leave; Obtain retries with
// the same token, gets the lock, and the leave that lands afterwards deletes
// it. Another client then obtains it too.
func TestFair_lateConfirm_neverGivesTwoHolders(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	admin := srv.Client(t)
	loadAll(t, admin)
	rdb.AddHook(&scriptHook{script: fairObtainScript, after: func(n int64) {
		if n == 1 {
			time.Sleep(250 * time.Millisecond) // first answer comes after ttl-drift
		}
	}})
	rdb.AddHook(&scriptHook{script: fairLeaveScript, before: func(int64) error {
		time.Sleep(300 * time.Millisecond) // the leave goroutine is slower than the retry
		return nil
	}})
	c := NewClient(rdb, Config{})
	defer c.Close()
	other := NewClient(admin, Config{})
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.Fair().Obtain(ctx, "k", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 { // while l is held, renewed, nobody else may get it
		if l2, err := other.Fair().TryObtain(ctx, "k", 10*time.Second); err == nil {
			select {
			case <-l.Lost():
				t.Fatalf("l was lost: the leave of its first, late attempt released it")
			default:
				t.Fatalf("two fair holders: fence %d (Lost open) and %d", l.Fence(), l2.Fence())
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// R6: Close makes every held mutex unreleasable.
func TestClient_releaseAfterClose_deletesTheKey(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	c := NewClient(rdb, Config{})
	l, err := c.TryObtain(context.Background(), "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release after Close: %v", err)
	}
	if n := rdb.Exists(context.Background(), "fs:lock:{k}").Val(); n == 1 {
		t.Errorf("the key is still held after Release")
	}
}

// fakeNearDeadline: the first renewal's answer arrives just before its
// deadline (i.e. about when expire fires); later renewals succeed at once.
type fakeNearDeadline struct {
	calls, oks atomic.Int64
	slack      time.Duration
}

func (f *fakeNearDeadline) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	if f.calls.Add(1) == 1 {
		dl, _ := ctx.Deadline()
		time.Sleep(time.Until(dl) - f.slack)
		return true, nil
	}
	f.oks.Add(1)
	return true, nil
}

// R1b: expire and a renewal answered at the edge of the validity race; when
// expire wins, Lost is closed but the renewal's success re-arms the watchdog,
// which then renews successfully for ever: a "lost" lock that never lapses.
func TestLease_expireRacingALateRenewal_staysLost(t *testing.T) {
	const n = 400
	var zombies atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops := &fakeNearDeadline{slack: time.Duration(i%50) * 10 * time.Microsecond}
			ls := startLease(ops, observer{}, 60*time.Millisecond, options{}, time.Now(), nil)
			time.Sleep(400 * time.Millisecond)
			before := ops.oks.Load()
			time.Sleep(200 * time.Millisecond)
			if ls.isDead() && time.Now().Before(ls.validUntil()) && ops.oks.Load() > before {
				zombies.Add(1)
			}
			ls.stop(context.Background())
		}()
	}
	wg.Wait()
	if z := zombies.Load(); z > 0 {
		t.Errorf("%d of %d leases are lost (Lost closed) yet still renewing successfully and valid", z, n)
	}
}
