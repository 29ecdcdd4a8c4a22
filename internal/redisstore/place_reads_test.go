package redisstore

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestPlace_readsEachNumberOnce: a run of place.lua with the rate limit on
// reads the orders hash at its calls' numbers once (the own-order check's
// read, which the accept reuses), not once for the rate limit and again for
// the accept, and answers as before: new orders accepted, a call whose
// order its own earlier run made (an answer lost, the call sent again)
// answered as that run did and not charged again, another's number refused.
func TestPlace_readsEachNumberOnce(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	m := flashMeta()
	m["limit"], m["total"] = 5, 1000
	seed(t, rdb, time.Now().UnixMilli(), sale(m, 1000, nil))

	call := func(user int64, no string) luascript.Call {
		return luascript.Call{Keys: []string{"fs:rl:{user}", act.Meta, act.Stock, act.Users, act.Orders, act.Idem, act.Outbox, act.Items, act.ItemUsers, act.Meta, act.Meta},
			Args: []any{"10", user, 1, no, "", "", "", "", "", lockNone}}
	}
	run := func(calls ...luascript.Call) [][]any {
		t.Helper()
		var out [][]any
		for _, c := range placeMerged.RunAll(ctx, rdb, calls) {
			r, err := c.Slice()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	first, other := order.NewNo(act.ID), order.NewNo(act.ID)
	before := run(call(7, first), call(8, other))
	if before[0][0] != int64(codeAccepted) || before[1][0] != int64(codeAccepted) {
		t.Fatalf("the first run: %v", before)
	}

	// The next run, watched: user 7's first order again (its own), user
	// 9 at user 8's number, and two new orders.
	lines := monitor(t, srv, func() {
		got := run(call(7, first), call(9, other), call(10, order.NewNo(act.ID)), call(11, order.NewNo(act.ID)))
		if got[0][0] != int64(codeAccepted) || got[0][1] != first || got[0][3] != int64(1) {
			t.Errorf("user 7's own order sent again: %v, want it answered as its first run (accepted, %s, 1 unit held)", got[0], first)
		}
		if got[1][0] != int64(codeNumberTaken) {
			t.Errorf("user 9 at user 8's number: %v, want code %d", got[1], codeNumberTaken)
		}
		for _, r := range got[2:] {
			if r[0] != int64(codeAccepted) {
				t.Errorf("a new order: %v, want accepted", r)
			}
		}
	})
	reads := 0
	for _, l := range lines {
		if strings.Contains(l, `"HMGET" "`+act.Orders+`"`) {
			reads++
		}
	}
	if reads != 1 {
		t.Fatalf("the run read the orders hash %d times, want once:\n%s", reads, strings.Join(lines, "\n"))
	}
	if held, _ := rdb.HGet(ctx, act.Users, "7").Result(); held != "1" {
		t.Fatalf("user 7 holds %s units after its order was sent twice, want 1", held)
	}
}

// monitor returns what Redis ran (MONITOR's lines, scripts' commands
// included) while do ran: a connection of its own, read until a marker
// command sent after do shows up.
func monitor(t *testing.T, srv *testenv.RedisServer, do func()) []string {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if l, err := rd.ReadString('\n'); err != nil || l != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", l, err)
	}
	do()
	const marker = "monitor-test-done"
	if err := srv.Client(t).Echo(context.Background(), marker).Err(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var lines []string
	for {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR after %d lines: %v", len(lines), err)
		}
		if strings.Contains(l, marker) {
			return lines
		}
		lines = append(lines, strings.TrimSpace(l))
	}
}
