package lock_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The overlap detector: every holder appends "E <fence> <who>" when it enters
// the critical section and "X <fence> <who>" before it leaves, each with one
// O_APPEND write. The kernel orders appends to one file, so the file is a
// clock-free record of the order of events across all goroutines and
// processes. Mutual exclusion means the records alternate E, X, E, X, each X
// closes the E before it, and fences increase.

type critLog struct{ f *os.File }

func openCritLog(t testing.TB, path string) *critLog {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &critLog{f: f}
}

func (c *critLog) write(kind string, fence int64, who string) error {
	_, err := c.f.WriteString(kind + " " + strconv.FormatInt(fence, 10) + " " + who + "\n")
	return err
}

// contend obtains key in a loop until stop, logging each hold. It returns the
// number of holds.
func contend(ctx context.Context, c *lock.Client, key string, log *critLog, who string, until time.Time, opts ...lock.Option) (int, error) {
	n := 0
	for time.Now().Before(until) {
		l, err := c.Obtain(ctx, key, 2*time.Second, opts...)
		if err != nil {
			return n, err
		}
		if err := log.write("E", l.Fence(), who); err != nil {
			return n, err
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		if err := log.write("X", l.Fence(), who); err != nil {
			return n, err
		}
		if err := l.Release(ctx); err != nil {
			return n, fmt.Errorf("release: %w", err)
		}
		n++
	}
	return n, nil
}

// checkCritLog proves no two holds overlapped and returns holds per process.
func checkCritLog(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	perProc := map[string]int{}
	var open []string // the E record waiting for its X
	var lastFence int64
	line := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line++
		rec := strings.Fields(sc.Text())
		if len(rec) != 3 {
			t.Fatalf("line %d: malformed record %q", line, sc.Text())
		}
		fence, _ := strconv.ParseInt(rec[1], 10, 64)
		switch rec[0] {
		case "E":
			if open != nil {
				t.Fatalf("line %d: %s entered while %s held the lock (overlap)", line, rec[2], open[2])
			}
			if fence <= lastFence {
				t.Fatalf("line %d: fence %d not above %d", line, fence, lastFence)
			}
			open, lastFence = rec, fence
		case "X":
			if open == nil || open[1] != rec[1] || open[2] != rec[2] {
				t.Fatalf("line %d: exit %v does not close entry %v", line, rec, open)
			}
			open = nil
			perProc[strings.SplitN(rec[2], "/", 2)[0]]++
		}
	}
	if open != nil {
		t.Fatalf("log ends inside a hold by %s", open[2])
	}
	return perProc
}

const (
	envRedisAddr = "LOCKTEST_REDIS_ADDR"
	envLogPath   = "LOCKTEST_LOG"
	envUntil     = "LOCKTEST_UNTIL"
)

// 64 goroutines in this process (over 4 clients) and 3 child processes of 8
// goroutines each contend on one key for 3 seconds.
func TestMutex_exclusion_goroutinesAndProcesses(t *testing.T) {
	_, perProc := contendAcrossProcesses(t, "TestMutex_exclusion_goroutinesAndProcesses", 3, 64)
	if len(perProc) != 4 {
		t.Fatalf("holds per process %v: want all 4 processes to have held the lock", perProc)
	}
	t.Logf("holds per process: %v", perProc)
}

// contendAcrossProcesses is the overlap test of a lock kind: parent
// goroutines in this process (over 4 clients, each with its own local queue
// and pub/sub connection, like a process) and children child processes of 8
// goroutines each contend on "hot", with opts, for 3 seconds; every hold is
// written to one log, checked for overlaps. test is the calling test's name
// (the children run it); in a child it runs the child's part and ends the
// test. It returns the server's client and the holds per process.
func contendAcrossProcesses(t *testing.T, test string, children, parent int, opts ...lock.Option) (*redis.Client, map[string]int) {
	if testenv.ChildRole() == "contender" {
		runContender(t, opts)
		t.SkipNow() // a child's part is done; the parent checks
	}
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	path := filepath.Join(t.TempDir(), "crit.log")
	log := openCritLog(t, path)
	until := time.Now().Add(3 * time.Second)

	var procs []*testenv.Child
	for range children {
		procs = append(procs, testenv.StartChild(t, test, "contender",
			envRedisAddr+"="+srv.Addr(), envLogPath+"="+path, envUntil+"="+until.Format(time.RFC3339Nano)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var clients []*lock.Client
	for range 4 {
		clients = append(clients, newClient(t, rdb, lock.Config{}))
	}
	var wg sync.WaitGroup
	for i := range parent {
		c := clients[i%4]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := contend(ctx, c, "hot", log, fmt.Sprintf("parent/%d", i), until, opts...); err != nil {
				t.Errorf("goroutine %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i, ch := range procs {
		if err := ch.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, ch.Output())
		}
	}
	return rdb, checkCritLog(t, path)
}

func runContender(t *testing.T, opts []lock.Option) {
	rdb := redis.NewClient(testenv.ClientOptions(os.Getenv(envRedisAddr)))
	defer rdb.Close()
	c := lock.New(rdb)
	defer c.Close()
	log := openCritLog(t, os.Getenv(envLogPath))
	until, err := time.Parse(time.RFC3339Nano, os.Getenv(envUntil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("pid%d/%d", os.Getpid(), i)
			if _, err := contend(ctx, c, "hot", log, who, until, opts...); err != nil {
				t.Errorf("%s: %v", who, err)
			}
		}()
	}
	wg.Wait()
}

// A holder process killed with -9 (no release, no more renewals) stops
// blocking others within its ttl.
func TestMutex_holderKilled9_stopsBlockingWithinTTL(t *testing.T) {
	if testenv.ChildRole() == "holder" {
		rdb := redis.NewClient(testenv.ClientOptions(os.Getenv(envRedisAddr)))
		if _, err := lock.New(rdb).TryObtain(context.Background(), "crash", time.Second); err != nil {
			t.Fatal(err)
		}
		select {} // hold, renewing, until killed
	}
	srv, _, c := setup(t)
	child := testenv.StartChild(t, "TestMutex_holderKilled9_stopsBlockingWithinTTL", "holder",
		envRedisAddr+"="+srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		h, err := c.Holder(ctx, "crash")
		if err == nil && h.PID == child.PID() {
			break
		}
		select {
		case <-child.Exited():
			t.Fatalf("holder exited early:\n%s", child.Output())
		case <-ctx.Done():
			t.Fatal("child never obtained the lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(1500 * time.Millisecond) // outlive the first ttl: the child must be renewing
	if _, err := c.TryObtain(ctx, "crash", time.Second); err == nil {
		t.Fatal("obtained the lock of a live, renewing holder")
	}

	got := make(chan time.Time, 1)
	go func() {
		if _, err := c.Obtain(ctx, "crash", time.Second); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	time.Sleep(50 * time.Millisecond) // the waiter is queued
	killed := time.Now()
	child.Kill()
	at := <-got
	if waited := at.Sub(killed); waited > 1500*time.Millisecond {
		t.Fatalf("waited %v after the kill; the ttl is 1s", waited)
	}
}
