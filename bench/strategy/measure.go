package main

// What a run is measured by: Redis's commands and CPU, the serving
// process's CPU, a MONITOR sample of the round trips, and the orders
// accepted that MySQL does not hold yet.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// reading is what a run is measured by: Redis's commands and main-thread
// CPU, the CPU of the process serving the row, and of the processes
// around it (readProcs: redis-server whole, mariadbd, the worker).
type reading struct {
	commands      int64
	byCommand     map[string]loadtest.CommandStat // INFO commandstats: calls and µs by command
	redis, server time.Duration
	procs         map[string]time.Duration
}

func (b *bench) meter(ctx context.Context, r *row) (reading, error) {
	var m reading
	var err error
	if m.byCommand, err = loadtest.RedisCommandStats(ctx, b.rdb); err != nil {
		return m, err
	}
	for _, st := range m.byCommand {
		m.commands += st.Calls
	}
	if m.redis, err = loadtest.RedisMainCPU(ctx, b.rdb); err != nil {
		return m, err
	}
	if m.server, err = r.server.CPUTime(); err != nil {
		return m, err
	}
	return m, b.readProcs(&m)
}

// sample runs r for 3 s, not timed, with a one-second MONITOR sample in the
// middle: the commands clients sent (those scripts ran excluded), per order
// (one marker command per accepted order). MONITOR slows Redis, which is why
// it stays out of the timed runs.
func (b *bench) sample(ctx context.Context, r *row) error {
	marker := map[string]string{"(a)": `"DECR"`, "(d)": `"HSET" "fs:{act:`, "(e)": `"HSET" "fs:{act:`}[r.key]
	say("%s: MONITOR sample", r.key)
	done := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		// Our rows accept orders many at a time (one merged script per
		// pipeline), so no command marks one order: count the sale's
		// accepted counter instead.
		meta := rediskeys.For(b.current.Load()).Meta
		before, _ := b.rdb.HGet(ctx, meta, "accepted").Int64()
		sent, orders, err := monitorSample(ctx, b.rdb.Options().Addr, time.Second, marker)
		if marker == "" {
			after, _ := b.rdb.HGet(ctx, meta, "accepted").Int64()
			orders = int(after - before)
		}
		if orders > 0 {
			r.tripsPerOrder = float64(sent) / float64(orders)
		}
		done <- err
	}()
	if _, err := b.pass(ctx, r, 10_000_000, 3*time.Second, nil); err != nil {
		return err
	}
	return <-done
}

// backlog is how many orders our api accepted that MySQL does not hold yet.
func (b *bench) backlog(ctx context.Context) (int64, error) {
	accepted, err := b.accepted(ctx)
	if err != nil {
		return 0, err
	}
	var recorded int64
	err = b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&recorded)
	return accepted - recorded, err
}

func (b *bench) accepted(ctx context.Context) (int64, error) {
	var n int64
	for _, id := range b.ours {
		a, err := b.rdb.HGet(ctx, rediskeys.For(id).Meta, "accepted").Int64()
		if err != nil {
			return 0, err
		}
		n += a
	}
	return n, nil
}

// waitRecorded waits until MySQL holds every order our api accepted.
func (b *bench) waitRecorded(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := b.backlog(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d orders still not in MySQL after %v", n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// monitorSample watches Redis with MONITOR for d: how many commands clients
// sent (not those scripts ran: MONITOR marks those "[n lua]"), and how many
// lines contain marker (one per order). MONITOR slows Redis while it runs,
// which is why it is only a sample.
func monitorSample(ctx context.Context, addr string, d time.Duration, marker string) (sent, orders int, err error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		return 0, 0, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(d))
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// Each line is a RESP simple string: "+1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" …",
		// "[0 lua]" for a command a script ran; the first is MONITOR's own "+OK".
		line := strings.TrimPrefix(sc.Text(), "+")
		if line == "OK" {
			continue
		}
		if marker != "" && strings.Contains(strings.ToLower(line), strings.ToLower(marker)) { // go-redis sends lower case
			orders++
		}
		if !strings.Contains(line, " lua] ") {
			sent++
		}
	}
	return sent, orders, nil
}
