package app_test

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Opening and joining a group with an Idempotency-Key, over HTTP: the same
// request sent 5 times at once (a double tap, retries after lost answers)
// opens one group, or takes one place, and every answer names it. A key is
// the user's for one kind of request: the key that opened a group, sent
// with a join, is a new request (a place in the other group), not a replay
// of the opening; sent again with a join, it replays that join. And a key
// that joined one group, sent to join another, is a new request too (until
// 2026-11-26 a join's key was the sale's, and it replayed the first
// group's order).
func TestGroups_idempotencyKey_opensOnceJoinsOnce_openAndJoinKeysApart(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	act := s.groupBuy(100, 2, 3, 600, 600)
	openPath := fmt.Sprintf("/v1/activities/%d/groups", act)
	send := func(user int64, path, key string) reply {
		return s.call("POST", path, s.bearer(user), `{"quantity":1}`, "Idempotency-Key", key)
	}
	// same sends one request 5 times at once and wants one answer.
	same := func(what string, user int64, path, key string) reply {
		t.Helper()
		replies := make([]reply, 5)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() { replies[i] = send(user, path, key) })
		}
		wg.Wait()
		for _, r := range replies {
			if r.code != 202 || r.str("order_no") != replies[0].str("order_no") || r.str("group_id") != replies[0].str("group_id") {
				t.Fatalf("%s 5 times at once with key %s: %d %v (first %v); want one 202 five times", what, key, r.code, r.body, replies[0].body)
			}
		}
		return replies[0]
	}

	opened := same("open", 1, openPath, "tap-open")
	gid := opened.str("group_id")
	joined := same("join", 2, "/v1/groups/"+gid+"/join", "tap-join")
	if joined.str("group_id") != gid || joined.str("order_no") == opened.str("order_no") {
		t.Fatalf("join: %v; want a new order in group %s", joined.body, gid)
	}

	// User 3 opens a group with key k, then joins user 1's with the same k.
	own := send(3, openPath, "k")
	if own.code != 202 || own.str("group_id") == gid {
		t.Fatalf("user 3 opens: %d %v", own.code, own.body)
	}
	third := send(3, "/v1/groups/"+gid+"/join", "k")
	if third.code != 202 || third.str("group_id") != gid || third.str("order_no") == own.str("order_no") {
		t.Fatalf("user 3 joins group %s with the key that opened %s: %d %v; want a new order in %s",
			gid, own.str("group_id"), third.code, third.body, gid)
	}
	if again := send(3, "/v1/groups/"+gid+"/join", "k"); again.code != 202 || again.str("order_no") != third.str("order_no") {
		t.Fatalf("the join retried: %d %v; want order %s again", again.code, again.body, third.str("order_no"))
	}
	if again := send(3, openPath, "k"); again.code != 202 || again.str("group_id") != own.str("group_id") || again.str("order_no") != own.str("order_no") {
		t.Fatalf("the opening retried after the join: %d %v; want group %s, order %s again", again.code, again.body, own.str("group_id"), own.str("order_no"))
	}

	// User 4 joins user 3's group with key j, then a third group with j.
	inOwn := send(4, "/v1/groups/"+own.str("group_id")+"/join", "j")
	g3 := send(5, openPath, "g3")
	inG3 := send(4, "/v1/groups/"+g3.str("group_id")+"/join", "j")
	if inOwn.code != 202 || g3.code != 202 || inG3.code != 202 || inG3.str("group_id") != g3.str("group_id") ||
		inG3.str("order_no") == inOwn.str("order_no") {
		t.Fatalf("user 4 joins two groups with one key: %d %v, then %d %v; want a new order in %s",
			inOwn.code, inOwn.body, inG3.code, inG3.body, g3.str("group_id"))
	}

	if g := s.group(gid); g.code != 200 || g.body["members_count"] != float64(3) {
		t.Fatalf("group %s: %d %v; want 3 members", gid, g.code, g.body)
	}
	if left := s.stockLeft(act); left != 93 {
		t.Fatalf("%d units left; want 93: three groups opened, four places taken", left)
	}
	s.waitMySQL(3, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE activity_id = ?", act)
	s.checkInvariants(act, 7)
}
