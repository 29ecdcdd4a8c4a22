package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/testenv"
)

// shop is a Redis holding a flash sale of 10 units (activity 1) with an
// order store on it whose per-user locks go through their own lock client.
type shop struct {
	srv   *testenv.RedisServer
	rdb   *redis.Client
	store *Orders
	locks *lock.Client
}

func onSale(t *testing.T) *shop {
	t.Helper()
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	seed(t, rdb, time.Now().UnixMilli(), sale(flashMeta(), 10, nil))
	pipe := redispipe.New(rdb)
	lc := lock.NewClient(rdb, lock.Config{Pipeline: pipe, RecheckInterval: 50 * time.Millisecond})
	store := New(rdb, Config{Locks: lc})
	t.Cleanup(func() { store.Close(); lc.Close(); pipe.Close() })
	return &shop{srv: srv, rdb: rdb, store: store, locks: lc}
}

// turn is the user's turn as the order Service asks for it: the lock,
// and rps orders a second (0: no limit).
func turn(user int64, rps int) order.UserTurn {
	t := order.UserTurn{Lock: true, Key: strconv.FormatInt(user, 10), Options: userLockOptions,
		TTL: 5 * time.Second, Wait: 3 * time.Second}
	if rps > 0 {
		t.Limit = &order.RateLimit{Scope: "user", Who: strconv.FormatInt(user, 10), PerSecond: rps}
	}
	return t
}

func buy(user int64) order.PlaceRequest {
	return order.PlaceRequest{ActivityID: 1, UserID: user, Quantity: 1}
}

// userLockTable is the per-user locks' table of activity 1, and
// userLockOptions the options naming it (as order.Service names them).
const userLockTable = "fs:ltab:{order-user:1}"

var userLockOptions = order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:1"}

// The usual order: the lock nobody holds is not taken. One script checks
// it, charges the limit and accepts; nothing is written for the lock.
func TestOrders_accept_lockFree_oneScript_nothingWrittenForTheLock(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	if _, err := s.store.Accept(ctx, order.NewNo(1), buy(8), turn(8, 5)); err != nil {
		t.Fatal(err) // loads the script
	}
	before := testenv.ScriptCalls(t, s.rdb)
	acc, err := s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, 5))
	if err != nil || acc.Order.UserID != 7 || acc.Remaining != 8 {
		t.Fatalf("accept: %+v, %v", acc, err)
	}
	if ran := testenv.ScriptCalls(t, s.rdb) - before; ran != 1 {
		t.Fatalf("the order ran %d scripts, want 1", ran)
	}
	if n := s.rdb.Exists(ctx, userLockTable).Val(); n != 0 {
		t.Fatal("the user locks' table exists: a free lock was written")
	}
}

// A lock another request holds is waited for: the accept runs once it is
// released, holding it, and releases it in the same script; with Hold the
// lock is taken even when free, and released by the accept's script.
func TestOrders_accept_lockHeld_waitsItsTurn_acceptsAndReleasesInOneScript(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	other := lock.New(s.rdb)
	t.Cleanup(func() { other.Close() })
	key, opts := "7", lockOptions(userLockOptions)
	held, err := other.Obtain(ctx, key, 5*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var acc order.Accepted
	go func() {
		var err error
		acc, err = s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, 5))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if n := s.rdb.HLen(ctx, act.Orders).Val(); n != 0 {
		t.Fatal("accepted while another request held the user's lock")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || acc.Order.UserID != 7 {
			t.Fatalf("accept after the wait: %+v, %v", acc, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the accept did not run after the release")
	}
	if _, err := s.locks.HolderIn(ctx, "order-user:1", "7"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("the user's lock after the accept: %v, want released", err)
	}

	hold := turn(7, 5)
	hold.Hold = true
	before := testenv.ScriptCalls(t, s.rdb)
	if _, err := s.store.Accept(ctx, order.NewNo(1), buy(7), hold); err != nil {
		t.Fatal(err)
	}
	if ran := testenv.ScriptCalls(t, s.rdb) - before; ran != 2 {
		t.Fatalf("a held order ran %d scripts, want 2 (the obtain, the accept with the release)", ran)
	}
	if left := s.rdb.HLen(ctx, userLockTable).Val(); left != 0 {
		t.Fatalf("%d fields left in the user locks' table", left)
	}
}

// Waiting longer than the turn's Wait for a lock another request holds is
// an ErrLockWait, and nothing is accepted.
func TestOrders_accept_lockHeldPastTheWait_lockWaitError(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	key, opts := "7", lockOptions(userLockOptions)
	other := lock.New(s.rdb)
	t.Cleanup(func() { other.Close() })
	if _, err := other.Obtain(ctx, key, 5*time.Second, opts...); err != nil {
		t.Fatal(err)
	}
	tr := turn(7, 0)
	tr.Wait = 100 * time.Millisecond
	_, err := s.store.Accept(ctx, order.NewNo(1), buy(7), tr)
	if !errors.Is(err, order.ErrLockWait) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("accept behind a held lock, wait 100 ms: %v, want ErrLockWait of a deadline", err)
	}
	if n := s.rdb.HLen(ctx, act.Orders).Val(); n != 0 {
		t.Fatal("an order was accepted")
	}
}

// Over the rate limit the order is refused with when to retry, and
// nothing is written: no order, no unit, no lock.
func TestOrders_accept_overTheRateLimit_refusedNothingTaken(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	for i := range 2 {
		if _, err := s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, 2)); err != nil {
			t.Fatalf("order %d within 2 a second: %v", i+1, err)
		}
	}
	_, err := s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, 2))
	var limited *order.RateLimited
	if !errors.As(err, &limited) || limited.PerSecond != 2 || limited.RetryAfter <= 0 || limited.RetryAfter > 500*time.Millisecond {
		t.Fatalf("third order at 2 a second: %v (%+v), want RateLimited retrying within 500 ms", err, limited)
	}
	if n := s.rdb.HLen(ctx, act.Orders).Val(); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
	if left := s.rdb.Get(ctx, act.Stock).Val(); left != "8" {
		t.Fatalf("stock %s, want 8", left)
	}
}

// sentTwice is a go-redis hook that sends every pipeline a second time
// after it ran, as go-redis does after a read timeout whose commands had
// in fact run; the caller sees the second answers.
type sentTwice struct{}

func (sentTwice) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (sentTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (sentTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := next(ctx, cmds); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// An order whose answer was lost and whose pipeline go-redis sent again:
// the second run finds the order its first run made and answers it — not
// 429, though at 1 a second the limit would refuse a second charge, and
// not "not held" for the lock its first run released. One order, one
// unit, for the lock free and for the lock held.
func TestOrders_accept_sentAgain_answersTheOrderItsFirstRunMade(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run("hold="+strconv.FormatBool(hold), func(t *testing.T) {
			s := onSale(t)
			ctx := context.Background()
			if _, err := s.store.Accept(ctx, order.NewNo(1), buy(8), turn(8, 1)); err != nil {
				t.Fatal(err) // loads the script: no NOSCRIPT round below
			}
			s.rdb.AddHook(sentTwice{})
			tr := turn(7, 1)
			tr.Hold = hold
			no := order.NewNo(1)
			acc, err := s.store.Accept(ctx, no, buy(7), tr)
			if err != nil || acc.Order.No != no || acc.Order.UserID != 7 {
				t.Fatalf("accept sent twice: %+v, %v; want the order %s", acc.Order, err, no)
			}
			if n := s.rdb.HLen(ctx, act.Orders).Val(); n != 2 {
				t.Fatalf("%d orders in Redis, want 2 (the warm-up's and this one)", n)
			}
			if u, left := s.rdb.HGet(ctx, act.Users, "7").Val(), s.rdb.Get(ctx, act.Stock).Val(); u != "1" || left != "8" {
				t.Fatalf("user 7 holds %q units, stock %q; want 1 and 8", u, left)
			}
		})
	}
}

// An order holding the user's lock (Hold: obtained, then place.lua in
// 'held' mode) over the rate limit, its pipelines sent twice as go-redis
// does after a lost answer: refused with when to retry, and the lock is
// released at once, not left held for its ttl (issue 32: a resent guarded
// obtain refused by the limit kept its lock field). place.lua releases the
// lock before it charges the limit, in the same run: the first run
// releases and is refused, the resent run finds the lock no longer the
// request's, and the order, run again without it, is refused by the limit.
func TestOrders_accept_lockHeld_sentAgain_overTheRateLimit_refusedAndTheLockReleasedAtOnce(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	if _, err := s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, 1)); err != nil {
		t.Fatal(err) // user 7's one order this second, and the script loaded
	}
	s.rdb.AddHook(sentTwice{})
	tr := turn(7, 1)
	tr.Hold = true
	_, err := s.store.Accept(ctx, order.NewNo(1), buy(7), tr)
	var limited *order.RateLimited
	if !errors.As(err, &limited) || limited.PerSecond != 1 || limited.RetryAfter <= 0 {
		t.Fatalf("held order sent twice over 1 a second: %v (%+v), want RateLimited", err, limited)
	}
	// At once, not after the lock's 5 s ttl: a place.lua that refused the
	// call before releasing its lock would leave user 7's field here.
	if left := s.rdb.HLen(ctx, userLockTable).Val(); left != 0 {
		t.Fatalf("%d fields left in the user locks' table: %v", left, s.rdb.HGetAll(ctx, userLockTable).Val())
	}
	if h, err := s.locks.HolderIn(ctx, "order-user:1", "7"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("the user's lock after the refusal: %+v, %v; want ErrNotHeld", h, err)
	}
	if n, left := s.rdb.HLen(ctx, act.Orders).Val(), s.rdb.Get(ctx, act.Stock).Val(); n != 1 || left != "9" {
		t.Fatalf("%d orders, stock %s; want 1 and 9 (the first order's)", n, left)
	}
}

// A batch of one pipeline never spans two sales: a sale whose keys are of
// the wrong type (an outbox still a stream: api upgrade-redis not yet run)
// fails its own orders, and the healthy sale's orders, sent in the same
// pipeline, are accepted and answered (issue 32: the merged script ran
// both sales, failed every call, and had written the first sale's orders).
func TestOrders_accept_aFailingSaleBesideAHealthyOne_failsOnlyItself(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	broken := 2
	bk := actN(broken)
	seed(t, s.rdb, time.Now().UnixMilli(), saleOf(bk, flashMeta(), 10))
	s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: bk.Outbox, Values: []any{"no", "x"}})
	if _, err := s.store.Accept(ctx, order.NewNo(1), buy(90), turn(90, 0)); err != nil {
		t.Fatal(err) // loads the script
	}
	s.srv.Pause() // the orders pile up and go out in one pipeline
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := int64(1)
			if i%2 == 1 {
				a = int64(broken)
			}
			r := order.PlaceRequest{ActivityID: a, UserID: int64(10 + i), Quantity: 1}
			_, errs[i] = s.store.Accept(ctx, order.NewNo(a), r, turn(r.UserID, 0))
		}()
	}
	time.Sleep(200 * time.Millisecond)
	s.srv.Resume()
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("order %d of the healthy sale: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, order.ErrUnavailable) {
			t.Errorf("order %d of the broken sale: %v, want ErrUnavailable", i, err)
		}
	}
	if n := s.rdb.HLen(ctx, act.Orders).Val(); n != 5 {
		t.Errorf("%d orders in the healthy sale, want 5", n)
	}
	if n := s.rdb.Exists(ctx, bk.Orders, bk.Users).Val(); n != 0 || s.rdb.Get(ctx, bk.Stock).Val() != "10" {
		t.Errorf("the broken sale was written: %d of its orders and users keys, stock %s", n, s.rdb.Get(ctx, bk.Stock).Val())
	}
}

// actN is activity id's keys.
func actN(id int) rediskeys.Activity { return rediskeys.For(int64(id)) }

// saleOf seeds the sale of keys k with meta and stock units, as sale does
// activity 1's.
func saleOf(k rediskeys.Activity, meta fields, stock int) [][]any {
	return join(meta.hset(k.Meta, saleTTLms), [][]any{{"SET", k.Stock, stock, "PX", saleTTLms}})
}

// A reply cut after the script ran (the connection reset as the answer
// came back): go-redis sends the pipeline again, and the second run
// answers as the first — an order is its own order, not a second one nor
// a 429; a pay is paid, not 409 "the order is paid" (issue 32: transitions
// answered their own earlier run as a conflict, and the pay's sync waited
// for the reconciler).
func TestOrders_replyCutAfterTheScriptRan_resentScriptsAnswerTheFirstRun(t *testing.T) {
	srv := testenv.StartRedis(t)
	seed(t, srv.Client(t), time.Now().UnixMilli(), sale(flashMeta(), 10, nil))
	cut := testenv.StartReplyCutter(t, srv.Addr())
	opt := testenv.ClientOptions(cut.Addr())
	opt.MaxRetries = 3 // go-redis's default, as the service runs it
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	lc := lock.New(rdb)
	store := New(rdb, Config{Locks: lc})
	t.Cleanup(func() { store.Close(); lc.Close() })
	ctx := context.Background()
	warm, err := store.Accept(ctx, order.NewNo(1), buy(8), turn(8, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Transition(ctx, order.Change{No: warm.Order.No, Action: order.Cancel, Fence: 1, UserID: 8}); err != nil {
		t.Fatal(err) // the scripts are loaded: the cuts below cut their answers, not NOSCRIPT
	}

	cut.CutNextReply()
	no := order.NewNo(1)
	acc, err := store.Accept(ctx, no, buy(7), turn(7, 1))
	if err != nil || acc.Order.No != no || cut.Cuts() != 1 {
		t.Fatalf("accept whose reply was cut: %+v, %v (%d cuts); want the order %s", acc.Order, err, cut.Cuts(), no)
	}
	if n, left := rdb.HLen(ctx, act.Orders).Val(), rdb.Get(ctx, act.Stock).Val(); n != 2 || left != "9" {
		t.Fatalf("%d orders, stock %s; want 2 and 9 (the warm-up's cancelled)", n, left)
	}

	cut.CutNextReply()
	if _, err := store.Transition(ctx, order.Change{No: no, Action: order.Pay, Fence: 5, UserID: 7}); err != nil || cut.Cuts() != 2 {
		t.Fatalf("pay whose reply was cut: %v (%d cuts), want paid", err, cut.Cuts())
	}
	o, err := store.Get(ctx, no)
	if err != nil || o.Status != order.Paid || o.Fence != 5 {
		t.Fatalf("the order after the pay: %+v, %v", o, err)
	}
	if _, err := store.Transition(ctx, order.Change{No: no, Action: order.Pay, Fence: 6, UserID: 7}); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("another pay, its own fence: %v, want ErrConflict (paid)", err)
	}
}
