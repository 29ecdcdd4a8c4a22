package lock_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
)

// Locks kept in a table (InTable) exclude as locks of their own do: 32
// goroutines over 4 clients and 2 child processes of 8 contend on one name
// for 3 seconds, with the overlap detector; fences increase.
func TestTable_exclusion_goroutinesAndProcesses(t *testing.T) {
	rdb, perProc := contendAcrossProcesses(t, "TestTable_exclusion_goroutinesAndProcesses", 2, 32, lock.InTable("t"))
	if len(perProc) != 3 {
		t.Fatalf("holds per process %v: want all 3 processes to have held the lock", perProc)
	}
	// Every hold of "hot" was in the table: nothing else was created.
	if n := rdb.Exists(context.Background(), "fs:lock:{hot}").Val(); n != 0 {
		t.Fatal("a key of its own was created for a table lock")
	}
}

// Names of one table are separate locks; each is a field of the table's
// hash, which is kept a while after its last obtain; HolderIn tells who
// holds one; a release frees it.
func TestTable_namesAreSeparateLocks_holderIn_tableExpires(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	in := lock.InTable("sale:1")
	a := mustObtain(t, c, "7", 5*time.Second, in, lock.WithLabel("user 7"))
	b := mustObtain(t, c, "8", 5*time.Second, in)
	if _, err := c.TryObtain(ctx, "7", time.Second, in); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("7 again: %v, want ErrNotObtained", err)
	}
	if _, err := c.TryObtain(ctx, "7", time.Second); err != nil {
		t.Fatalf("a lock of its own named 7 is another lock: %v", err)
	}
	h, err := c.HolderIn(ctx, "sale:1", "7")
	if err != nil || h.Label != "user 7" || h.TTL <= 4*time.Second || h.TTL > 5*time.Second || h.PID != os.Getpid() {
		t.Fatalf("HolderIn: %+v, %v", h, err)
	}
	if ttl := rdb.PTTL(ctx, "fs:ltab:{sale:1}").Val(); ttl < 50*time.Second || ttl > time.Minute {
		t.Fatalf("the table is kept %v, want about a minute past its last obtain", ttl)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HolderIn(ctx, "sale:1", "7"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("HolderIn after release: %v, want ErrNotHeld", err)
	}
	if got := rdb.HKeys(ctx, "fs:ltab:{sale:1}").Val(); len(got) != 1 || got[0] != "8" {
		t.Fatalf("table fields %v, want only 8's", got)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second release: %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A holder whose time ran out (killed: no release, no renewal) stops
// blocking others within its ttl although its field is still there; the
// new holder's obtain takes it over.
func TestTable_expiredHolder_isTakenOver(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	in := lock.InTable("t")
	dead := mustObtain(t, c, "k", 300*time.Millisecond, in, lock.WithoutRenewal())
	_ = dead // never released: its process "died"
	other := newClient(t, rdb, lock.Config{})
	start := time.Now()
	l, err := other.Obtain(ctx, "k", time.Second, in)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("obtained after %v; the dead holder's ttl was 300ms", d)
	}
	select {
	case <-dead.Lost():
	default:
		t.Fatal("the expired holder's Lost is open")
	}
	if err := dead.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("the expired holder's release: %v, want ErrNotHeld (and the new hold untouched)", err)
	}
	if _, err := other.HolderIn(ctx, "t", "k"); err != nil {
		t.Fatalf("the new hold after the old holder's release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The watchdog keeps a table lock past its ttl; when its field is taken
// behind its back, the renewal fails and Lost closes.
func TestTable_renewedWhileHeld_lostWhenTakenOver(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	in := lock.InTable("t")
	l := mustObtain(t, c, "k", 300*time.Millisecond, in)
	time.Sleep(900 * time.Millisecond) // three ttls
	if _, err := newClient(t, rdb, lock.Config{}).TryObtain(ctx, "k", time.Second, in); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("after three ttls, renewed: %v, want ErrNotObtained", err)
	}
	rdb.HSet(ctx, "fs:ltab:{t}", "k", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)+"|someone else")
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("Lost not closed after the field was taken")
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after loss: %v, want ErrNotHeld", err)
	}
	if v := rdb.HGet(ctx, "fs:ltab:{t}", "k").Val(); v == "" {
		t.Fatal("the other owner's field was deleted")
	}
}

// A waiter in another process is woken by the release (a marker and a
// publish), not by its recheck interval; fences of a table increase.
func TestTable_releaseWakesAWaiterElsewhere_fencesIncrease(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	in := lock.InTable("t")
	l := mustObtain(t, c, "k", 10*time.Second, in)
	waiter := newClient(t, rdb, lock.Config{RecheckInterval: 5 * time.Second})
	got := make(chan *lock.Lock, 1)
	go func() {
		w, err := waiter.Obtain(ctx, "k", 10*time.Second, in)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(300 * time.Millisecond) // the waiter failed once and marked the lock
	if v := rdb.HGet(ctx, "fs:ltab:{t}", "w|k").Val(); v == "" {
		t.Fatal("the waiter left no marker")
	}
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var w *lock.Lock
	select {
	case w = <-got:
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	if d := time.Since(released); d > time.Second {
		t.Fatalf("woken %v after the release", d)
	}
	if w.Fence() <= l.Fence() || l.Fence() == 0 {
		t.Fatalf("fences %d then %d: want increasing", l.Fence(), w.Fence())
	}
	if rdb.HExists(ctx, "fs:ltab:{t}", "w|k").Val() {
		t.Fatal("the marker outlived the release that woke its waiter")
	}
	other := mustObtain(t, c, "other", time.Second, in)
	if other.Fence() <= w.Fence() {
		t.Fatalf("another name's fence %d is not above %d: one counter per table", other.Fence(), w.Fence())
	}
	_ = w.Release(ctx)
	_ = other.Release(ctx)
}

// A name in a table may not hold '|' (its waiting marker is "w|<name>"):
// such a name could be another lock's marker.
func TestTable_nameWithBar_isRefused(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "w|7", time.Second, lock.InTable("t")); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("obtain of w|7 in a table: %v, want ErrInvalid", err)
	}
	if _, err := c.HolderIn(ctx, "t", "a|b"); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("HolderIn a|b: %v, want ErrInvalid", err)
	}
	if l, err := c.TryObtain(ctx, "w|7", time.Second); err != nil { // a lock of its own may
		t.Fatalf("a lock of its own named w|7: %v", err)
	} else {
		_ = l.Release(ctx)
	}
}

// A release takes the lock's waiting marker with it even when its time has
// passed, so markers do not pile up in a busy table.
func TestTable_release_dropsAStaleMarker(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	in := lock.InTable("t")
	l := mustObtain(t, c, "k", 5*time.Second, in)
	rdb.HSet(ctx, "fs:ltab:{t}", "w|k", time.Now().Add(-time.Minute).UnixMilli())
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.HLen(ctx, "fs:ltab:{t}").Val(); n != 0 {
		t.Fatalf("%d fields left after the release, want none (the stale marker too)", n)
	}
}
