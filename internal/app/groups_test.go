package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/tasks"
)

// groupBuy creates and publishes a running group buy.
func (s *stack) groupBuy(stock, limit, size, groupTTL, payTTL int) int64 {
	s.t.Helper()
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := s.admin("POST", "/admin/v1/activities", fmt.Sprintf(`{"type":"groupbuy","name":"gb","sku":"GB","price_cents":300,
		"total_stock":%d,"per_user_limit":%d,"starts_at":%q,"ends_at":%q,"payment_ttl_seconds":%d,
		"group_size":%d,"group_ttl_seconds":%d}`, stock, limit, start, end, payTTL, size, groupTTL))
	if r.code != 201 {
		s.t.Fatalf("create group buy: %d %v", r.code, r.body)
	}
	id := int64(r.body["id"].(float64))
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		s.t.Fatalf("publish: %d %v", r.code, r.body)
	}
	return id
}

func (s *stack) open(user, act int64) reply {
	return s.call("POST", fmt.Sprintf("/v1/activities/%d/groups", act), s.bearer(user), `{"quantity":1}`)
}

func (s *stack) join(user int64, gid string) reply {
	return s.call("POST", "/v1/groups/"+gid+"/join", s.bearer(user), `{"quantity":1}`)
}

func (s *stack) pay(user int64, no string) reply {
	return s.call("POST", "/v1/orders/"+no+"/pay", s.bearer(user), "")
}

func (s *stack) group(gid string) reply { return s.call("GET", "/v1/groups/"+gid, s.bearer(1), "") }

// member is a group member's user and order.
type member struct {
	user int64
	no   string
}

// fill opens a group with user 1 and has users 2..n join it.
func (s *stack) fill(act int64, n int, firstUser int64) (string, []member) {
	s.t.Helper()
	r := s.open(firstUser, act)
	if r.code != 202 {
		s.t.Fatalf("open: %d %v", r.code, r.body)
	}
	gid := r.str("group_id")
	ms := []member{{firstUser, r.str("order_no")}}
	for u := firstUser + 1; u < firstUser+int64(n); u++ {
		j := s.join(u, gid)
		if j.code != 202 {
			s.t.Fatalf("join: %d %v", j.code, j.body)
		}
		ms = append(ms, member{u, j.str("order_no")})
	}
	return gid, ms
}

// waitGroup waits until the group's status in Redis is want.
func (s *stack) waitGroup(gid, want string, within time.Duration) reply {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := s.group(gid)
		if r.str("status") == want {
			return r
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("group %s is %q after %v, want %s", gid, r.str("status"), within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *stack) orderStatus(m member) string {
	return s.call("GET", "/v1/orders/"+m.no, s.bearer(m.user), "").str("status")
}

// waitMySQL waits until query counts want.
func (s *stack) waitMySQL(want int64, within time.Duration, query string, args ...any) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for s.count(query, args...) != want {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s = %d after %v, want %d", query, s.count(query, args...), within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGroups_200UsersRacingForOneGroupOf5_exactly5Members(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	act := s.groupBuy(1000, 1, 5, 600, 600)
	r := s.open(1, act)
	gid := r.str("group_id")
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for u := int64(2); u <= 201; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := s.join(u, gid)
			mu.Lock()
			defer mu.Unlock()
			if j.code == 202 {
				codes["joined"]++
			} else {
				codes[j.errCode()]++
			}
		}()
	}
	wg.Wait()
	if codes["joined"] != 4 || codes["GROUP_FULL"] != 196 {
		t.Fatalf("answers %v: want 4 joined and 196 GROUP_FULL", codes)
	}
	g := s.group(gid)
	if g.body["members_count"] != float64(5) || len(g.body["members"].([]any)) != 5 {
		t.Fatalf("group: %v", g.body)
	}
	if left := s.stockLeft(act); left != 995 {
		t.Fatalf("stock %d, want 1000 - 5", left)
	}
	s.waitMySQL(5, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE group_id = ?", gid)
	// The full group is not listed as open.
	if l := s.call("GET", fmt.Sprintf("/v1/activities/%d/groups?status=forming", act), "", ""); len(l.body["items"].([]any)) != 0 {
		t.Fatalf("a full group listed as open: %v", l.body)
	}
}

func TestGroups_successPath_lastPaymentSucceedsTheGroup(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	s.worker()
	act := s.groupBuy(100, 1, 3, 600, 600)
	gid, ms := s.fill(act, 3, 1)
	for i, m := range ms {
		if r := s.pay(m.user, m.no); r.code != 200 {
			t.Fatalf("pay: %d %v", r.code, r.body)
		}
		if want := map[bool]string{true: "succeeded", false: "forming"}[i == 2]; s.group(gid).str("status") != want {
			t.Fatalf("after %d payments the group is %q, want %s", i+1, s.group(gid).str("status"), want)
		}
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE group_id = ? AND status = 'succeeded' AND paid = 3", gid)
	s.waitMySQL(3, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE group_id = ? AND status = 'paid'", gid)
	if left := s.stockLeft(act); left != 97 {
		t.Fatalf("stock %d, want 97", left)
	}
	if r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d", act), ""); r.body["groups"].(map[string]any)["succeeded"] != float64(1) {
		t.Fatalf("admin view: %v", r.body["groups"])
	}
}

// At the deadline with 3 of 5 paid: 3 refunded once, 2 cancelled, the stock
// back where it started. Settling again, twice at once, refunds nobody twice.
func TestGroups_deadlineWith3Of5Paid_refundsOnceCancelsTheRest(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	s.worker()
	act := s.groupBuy(100, 1, 5, 10, 60)
	gid, ms := s.fill(act, 5, 1)
	for _, m := range ms[:3] {
		if r := s.pay(m.user, m.no); r.code != 200 {
			t.Fatalf("pay: %d %v", r.code, r.body)
		}
	}
	s.waitGroup(gid, "failed", 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := 0
		for i, m := range ms {
			want := map[bool]string{true: "refunded", false: "cancelled"}[i < 3]
			if s.orderStatus(m) == want {
				done++
			}
		}
		if done == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members not settled: %d of 5", done)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left := s.stockLeft(act); left != 100 {
		t.Fatalf("stock %d after settlement, want it back at 100", left)
	}

	// Settle again: two tasks at once, as two workers racing.
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: s.redis.Addr()})
	defer client.Close()
	for range 2 {
		if _, err := client.EnqueueContext(context.Background(), asynq.NewTask(tasks.TypeSettle, []byte(`{"no":"`+gid+`"}`)), asynq.Queue(tasks.QueueName)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	returned := s.redis.Client(t).HGet(context.Background(), fmt.Sprintf("fs:{act:%d}:meta", act), "returned").Val()
	if returned != "5" {
		t.Fatalf("units given back %s times, want 5 (each member once)", returned)
	}
	s.waitMySQL(3, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE group_id = ? AND status = 'refunded'", gid)
	s.waitMySQL(2, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE group_id = ? AND status = 'cancelled'", gid)
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE group_id = ? AND status = 'failed'", gid)

	// Paying after the group failed is refused; joining it too.
	if r := s.pay(ms[3].user, ms[3].no); r.code != 409 {
		t.Fatalf("pay after failure: %d %v", r.code, r.body)
	}
	if r := s.join(99, gid); r.code != 409 || r.errCode() != "GROUP_CLOSED" {
		t.Fatalf("join after the deadline: %d %v", r.code, r.body)
	}
}

func TestGroups_limitAlreadyMemberAndKinds(t *testing.T) {
	s := newStack(t, "")
	act := s.groupBuy(100, 1, 3, 600, 600)
	gid := s.open(1, act).str("group_id")
	if r := s.join(1, gid); r.code != 409 || r.errCode() != "ALREADY_MEMBER" {
		t.Fatalf("leader joining again: %d %v", r.code, r.body)
	}
	if r := s.join(7, gid); r.code != 202 {
		t.Fatalf("join: %d %v", r.code, r.body)
	}
	other := s.open(2, act).str("group_id")
	if r := s.join(7, other); r.code != 409 || r.errCode() != "LIMIT_EXCEEDED" {
		t.Fatalf("a user at their limit joining a second group: %d %v", r.code, r.body)
	}
	if r := s.open(7, act); r.code != 409 || r.errCode() != "LIMIT_EXCEEDED" {
		t.Fatalf("a user at their limit opening a group: %d %v", r.code, r.body)
	}
	if r := s.order(9, act, 1); r.code != 409 || r.errCode() != "CONFLICT" {
		t.Fatalf("a plain order on a group buy: %d %v", r.code, r.body)
	}
	sale := s.sale(10, 1, 600)
	if r := s.open(9, sale); r.code != 409 || r.errCode() != "CONFLICT" {
		t.Fatalf("a group on a flash sale: %d %v", r.code, r.body)
	}
	if r := s.join(9, "1-0000000000000000"); r.code != 404 {
		t.Fatalf("join an unknown group: %d %v", r.code, r.body)
	}
	l := s.call("GET", fmt.Sprintf("/v1/activities/%d/groups?status=forming", act), "", "")
	if items := l.body["items"].([]any); len(items) != 2 {
		t.Fatalf("forming groups: %v", l.body)
	}
}

// Payments raced against the deadline on many groups: each group ends
// succeeded or failed, consistently with its members' orders.
func TestGroups_payRacingTheDeadline_eachGroupEndsConsistently(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	s.worker()
	act := s.groupBuy(1000, 1, 2, 10, 60)
	type grp struct {
		gid     string
		ms      []member
		expires time.Time
	}
	groups := make([]grp, 30)
	for i := range groups {
		gid, ms := s.fill(act, 2, int64(1+2*i))
		exp, _ := time.Parse(time.RFC3339Nano, s.group(gid).str("expires_at"))
		groups[i] = grp{gid, ms, exp}
	}
	var wg sync.WaitGroup
	for i, g := range groups {
		for j, m := range g.ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The leader pays early; the other member from 250 ms before
				// the deadline to 50 ms after it. (A window of ±40 ms left
				// the race unexercised on CI's loaded cores, where a pay
				// took longer than 40 ms: all 30 groups failed. Whatever a
				// pay's latency, some land before the deadline, some after,
				// and some at it.)
				at := g.expires.Add(-5 * time.Second)
				if j == 1 {
					at = g.expires.Add(time.Duration((i*37)%301-250) * time.Millisecond)
				}
				time.Sleep(time.Until(at))
				s.pay(m.user, m.no)
			}()
		}
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, g := range groups {
		st := s.waitGroupDone(g.gid)
		outcomes[st]++
		for _, m := range g.ms {
			got := s.waitOrderSettled(m, st)
			if st == "succeeded" && got != "paid" {
				t.Fatalf("group %s succeeded but a member's order is %s", g.gid, got)
			}
			if st == "failed" && got != "refunded" && got != "cancelled" {
				t.Fatalf("group %s failed but a member's order is %s", g.gid, got)
			}
		}
	}
	if outcomes["succeeded"] == 0 || outcomes["failed"] == 0 {
		t.Fatalf("outcomes %v: the race was not exercised", outcomes)
	}
	t.Logf("outcomes: %v", outcomes)
	s.waitMySQL(int64(outcomes["succeeded"]), 30*time.Second,
		"SELECT COUNT(*) FROM `groups` WHERE activity_id = ? AND status = 'succeeded'", act)
	s.waitMySQL(int64(outcomes["failed"]), 30*time.Second,
		"SELECT COUNT(*) FROM `groups` WHERE activity_id = ? AND status = 'failed'", act)
	paid := s.count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'paid'", act)
	if left := s.stockLeft(act); left != 1000-paid || paid != int64(2*outcomes["succeeded"]) {
		t.Fatalf("stock %d with %d paid orders, %d groups succeeded", left, paid, outcomes["succeeded"])
	}
	s.checkInvariants(act, -1)
}

func (s *stack) waitGroupDone(gid string) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.group(gid).str("status")
		if st == "succeeded" || st == "failed" {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("group %s still %s", gid, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitOrderSettled waits until member m's order is settled the way its
// group ended (groupStatus): a succeeded group's orders leave
// pending_payment; a failed group's end refunded or cancelled. It returns
// the order's status then, or what it still is after 30 s. A failed
// group's paid order stays "paid" for a moment after the group's status
// turns failed: the settlement fails the group first and then refunds its
// members one by one (Service.Settle); reading it then is not a defect.
func (s *stack) waitOrderSettled(m member, groupStatus string) string {
	s.t.Helper()
	settled := func(st string) bool { return st != "pending_payment" }
	if groupStatus == "failed" {
		settled = func(st string) bool { return st == "refunded" || st == "cancelled" }
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.orderStatus(m)
		if settled(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A member who does not pay in time is cancelled: their slot reopens for
// someone else, their stock returns, and the group can still succeed.
func TestGroups_unpaidMemberTimesOut_slotReopensAndGroupStillSucceeds(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	s.worker()
	act := s.groupBuy(100, 1, 3, 600, 10) // pay within 10s (the minimum)
	gid, ms := s.fill(act, 3, 1)
	for _, m := range ms[:2] {
		if r := s.pay(m.user, m.no); r.code != 200 {
			t.Fatalf("pay: %d %v", r.code, r.body)
		}
	}
	if r := s.join(50, gid); r.code != 409 || r.errCode() != "GROUP_FULL" {
		t.Fatalf("join a full group: %d %v", r.code, r.body)
	}

	deadline := time.Now().Add(30 * time.Second)
	for s.orderStatus(ms[2]) != "cancelled" {
		if time.Now().After(deadline) {
			t.Fatalf("unpaid member is %q after 30s, want cancelled", s.orderStatus(ms[2]))
		}
		time.Sleep(100 * time.Millisecond)
	}
	g := s.group(gid)
	if g.str("status") != "forming" || g.body["members_count"] != float64(2) {
		t.Fatalf("after the timeout the group is %v, want forming with 2 members", g.body)
	}
	if left := s.stockLeft(act); left != 98 {
		t.Fatalf("stock %d, want 98 (the unpaid unit back)", left)
	}
	// A cancelled order gives its user's participation back (as for plain
	// orders), so the timed-out member may take the slot again; then it is full.
	j := s.join(ms[2].user, gid)
	if j.code != 202 {
		t.Fatalf("timed-out member rejoining the reopened slot: %d %v", j.code, j.body)
	}
	if r := s.join(50, gid); r.code != 409 || r.errCode() != "GROUP_FULL" {
		t.Fatalf("join after the slot was taken again: %d %v", r.code, r.body)
	}
	if r := s.pay(ms[2].user, j.str("order_no")); r.code != 200 {
		t.Fatalf("pay: %d %v", r.code, r.body)
	}
	if st := s.group(gid).str("status"); st != "succeeded" {
		t.Fatalf("group %q after the third payment, want succeeded", st)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE group_id = ? AND status = 'succeeded' AND paid = 3", gid)
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE group_id = ? AND status = 'cancelled'", gid)
	if left := s.stockLeft(act); left != 97 {
		t.Fatalf("stock %d, want 97", left)
	}
}

// A group's members come in one order, whoever looks and however often: the
// opener first, then in the order they joined; each viewer finds "you" at
// their own place, and a payment's "paid" at the payer's.
func TestGroups_members_listTheOpenerFirstThenInJoinOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	act := s.groupBuy(100, 1, 5, 600, 600)
	gid, ms := s.fill(act, 4, 21) // 21 opens; 22, 23, 24 join in turn
	if r := s.pay(ms[2].user, ms[2].no); r.code != 200 {
		t.Fatalf("pay: %d %v", r.code, r.body)
	}
	for range 10 { // a map's order would differ within a few reads
		for _, viewer := range append([]int64{99}, ms[0].user, ms[1].user, ms[2].user, ms[3].user) {
			r := s.call("GET", "/v1/groups/"+gid, s.bearer(viewer), "")
			list, _ := r.body["members"].([]any)
			if r.code != 200 || len(list) != len(ms) {
				t.Fatalf("user %d views the group: %d %v", viewer, r.code, r.body)
			}
			for i, m := range list {
				got := m.(map[string]any)
				if you, paid := got["you"] == true, got["paid"] == true; you != (ms[i].user == viewer) || paid != (i == 2) {
					t.Fatalf("user %d sees member %d as you=%v paid=%v, want member %d to be user %d (the opener, then by joining): %v",
						viewer, i, you, paid, i, ms[i].user, list)
				}
			}
		}
	}
}
