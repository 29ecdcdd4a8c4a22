package waitingroom_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// calls is how many times Redis has run the commands named (all but INFO
// and CONFIG when none is named): INFO commandstats, by testenv.
func calls(t *testing.T, rdb redis.UniversalClient, names ...string) int {
	t.Helper()
	stats, err := testenv.CommandStats(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, st := range stats {
		if len(names) == 0 && name != "info" && !strings.HasPrefix(name, "config") || slices.Contains(names, name) {
			n += int(st.Calls)
		}
	}
	return n
}

// A poll of a waiting shopper is answered without a script most of the
// time, and the answer is queue.lua's: the same status and ticket, a
// position no better than the script's (the counter only moves forward),
// and admission, sold_out and closed as queue.lua answers them.
func TestRead_fastPath_answersAsScript_withoutScriptMostly(t *testing.T) {
	a := roomSale(1, 1000, 1, time.Now().Add(-time.Second)) // 1 a second: all but a few wait
	f := setup(t, a)
	ctx := context.Background()
	for u := int64(1); u <= 50; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	f.svc.SetFastRead(false)
	slow := map[int64]waitingroom.Place{}
	for u := int64(1); u <= 50; u++ {
		p, err := f.svc.Read(ctx, 1, u)
		if err != nil {
			t.Fatal(err)
		}
		slow[u] = p
	}
	f.svc.SetFastRead(true)
	rdb := f.rdb
	rdb.ConfigResetStat(ctx)
	const rounds = 20
	for range rounds {
		for u := int64(1); u <= 50; u++ {
			p, err := f.svc.Read(ctx, 1, u)
			if err != nil {
				t.Fatal(err)
			}
			s := slow[u]
			if p.Ticket != s.Ticket || (s.Status == waitingroom.Waiting && p.Position > s.Position) ||
				(s.Status == waitingroom.Admitted && p.Status != waitingroom.Admitted) {
				t.Fatalf("user %d: fast %+v, script %+v", u, p, s)
			}
			if p.Status == waitingroom.Admitted {
				if err := f.svc.Signer().Verify(p.Admission, u, 1); err != nil {
					t.Fatalf("user %d: fast admission token: %v", u, err)
				}
			} else if p.Status != waitingroom.Waiting || p.Position < 1 || p.EstimatedWait <= 0 {
				t.Fatalf("user %d: fast %+v", u, p)
			}
		}
	}
	if n := calls(t, rdb, "evalsha", "eval"); n*4 > rounds*50 {
		t.Fatalf("%d of %d polls ran a script: want most without", n, rounds*50)
	} else {
		t.Logf("%d of %d polls ran queue.lua", n, rounds*50)
	}
	if _, err := f.svc.Read(ctx, 1, 999); err != waitingroom.ErrNotInQueue {
		t.Fatalf("a user not in the queue: %v", err)
	}
	// Sold out and closed: at once, through the fast path too.
	if err := rdb.Set(ctx, rediskeys.For(1).Stock, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for u := int64(1); u <= 50; u++ {
		if p, err := f.svc.Read(ctx, 1, u); err != nil || p.Status != waitingroom.SoldOut {
			t.Fatalf("user %d after sold out: %+v, %v", u, p, err)
		}
	}
	if err := rdb.HSet(ctx, rediskeys.For(1).Meta, "status", "closed").Err(); err != nil {
		t.Fatal(err)
	}
	for u := int64(1); u <= 50; u++ {
		if p, err := f.svc.Read(ctx, 1, u); err != nil || p.Status != waitingroom.Closed {
			t.Fatalf("user %d after closed: %+v, %v", u, p, err)
		}
	}
}

// The memory path: shoppers seen waiting once are answered from the
// process's copy of the sale's figures (read by a pipeline at most 10 ms
// before) and their ticket: a crowd polling again costs Redis a few
// commands every 10 ms, not three a poll; and the answers are the fast
// path's (the same tickets, positions no worse than a fresh read's).
func TestRead_memoryPath_crowdPollsAgain_fewRedisCommands_sameAnswers(t *testing.T) {
	a := roomSale(1, 1000, 1, time.Now().Add(-time.Second))
	f := setup(t, a)
	ctx := context.Background()
	const users = 200
	first := map[int64]waitingroom.Place{}
	for u := int64(1); u <= users; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	for u := int64(1); u <= users; u++ { // each seen waiting once
		p, err := f.svc.Read(ctx, 1, u)
		if err != nil {
			t.Fatal(err)
		}
		first[u] = p
	}
	f.rdb.ConfigResetStat(ctx)
	before := calls(t, f.rdb)
	const rounds = 5
	for range rounds {
		for u := int64(1); u <= users; u++ {
			p, err := f.svc.Read(ctx, 1, u)
			if err != nil {
				t.Fatal(err)
			}
			if p.Status != waitingroom.Waiting && p.Status != waitingroom.Admitted {
				t.Fatalf("user %d: %+v", u, p)
			}
			if p.Status == waitingroom.Waiting && (p.Ticket != first[u].Ticket || p.Position > first[u].Position) {
				t.Fatalf("user %d polled again: %+v, first %+v: the same ticket and no worse a place", u, p, first[u])
			}
		}
	}
	polls := rounds * users
	cmds := calls(t, f.rdb) - before
	// The fast path alone: a pipeline of three commands a poll (or a
	// script). The memory path: a script and a pipeline each 10 ms.
	if cmds > polls {
		t.Fatalf("%d polls cost Redis %d commands; want well under one a poll (the fast path alone: three)", polls, cmds)
	}
	t.Logf("%d polls, %d Redis commands", polls, cmds)
}
