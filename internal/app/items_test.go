package app_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// itemSale creates and publishes a flash sale of items ("sku:stock:price"
// or "sku:stock:price:own limit" each), perUser a user across them, on
// for an hour, and returns its id.
func (s *stack) itemSale(perUser int, items ...string) int64 {
	s.t.Helper()
	body := ""
	for i, it := range items {
		var sku string
		var stock, price, limit int
		if n, _ := fmt.Sscanf(it, "%1s:%d:%d:%d", &sku, &stock, &price, &limit); n < 3 {
			s.t.Fatalf("item %q", it)
		}
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"sku":%q,"label":%q,"price_cents":%d,"stock":%d`, sku, "item "+sku, price, stock)
		if limit > 0 {
			body += fmt.Sprintf(`,"per_user_limit":%d`, limit)
		}
		body += "}"
	}
	r := s.admin("POST", "/admin/v1/activities", fmt.Sprintf(`{"type":"seckill","name":"items","per_user_limit":%d,
		"starts_at":%q,"ends_at":%q,"payment_ttl_seconds":600,"items":[%s]}`, perUser,
		time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339), body))
	if r.code != 201 {
		s.t.Fatalf("create: %d %v", r.code, r.body)
	}
	id := int64(r.body["id"].(float64))
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		s.t.Fatalf("publish: %d %v", r.code, r.body)
	}
	return id
}

// orderAt places user's order of qty of item at the api at base, as a
// shopper's app does: with an Idempotency-Key, sent again on a 503 until
// the answer is final.
func (s *stack) orderAt(base string, user, act int64, item string, qty int, key string) reply {
	path := fmt.Sprintf("/v1/activities/%d/orders", act)
	body := fmt.Sprintf(`{"item":%q,"quantity":%d}`, item, qty)
	r := s.callAt(base, "POST", path, s.bearer(user), body, "Idempotency-Key", key)
	for try := 0; r.code == 503 && try < 5; try++ {
		r = s.callAt(base, "POST", path, s.bearer(user), body, "Idempotency-Key", key)
	}
	return r
}

// sold is what the answers accepted: units by item, by user and item, and
// the orders (number -> "user item qty").
type sold struct {
	mu      sync.Mutex
	units   map[string]int
	perUser map[int64]map[string]int
	orders  map[string]string
	codes   map[string]int
}

func newSold() *sold {
	return &sold{units: map[string]int{}, perUser: map[int64]map[string]int{}, orders: map[string]string{}, codes: map[string]int{}}
}

// note records r, user's order of qty of item; false for an answer that
// is neither accepted nor a refusal of the sale's.
func (o *sold) note(r reply, user int64, item string, qty int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.codes[fmt.Sprint(r.code, " ", r.errCode())]++
	switch {
	case r.code == 202:
		if r.str("item") != item {
			return false
		}
		o.units[item] += qty
		if o.perUser[user] == nil {
			o.perUser[user] = map[string]int{}
		}
		o.perUser[user][item] += qty
		o.orders[r.str("order_no")] = fmt.Sprint(user, " ", item, " ", qty)
	case r.code == 409 && (r.errCode() == "SOLD_OUT" || r.errCode() == "LIMIT_EXCEEDED" || r.errCode() == "PAUSED"):
	default:
		return false
	}
	return true
}

// checkRows checks that MySQL holds every accepted order once, of its user
// and item, at the item's price (prices: by sku), and nothing else.
func (s *stack) checkRows(act int64, o *sold, prices map[string]int64) {
	s.t.Helper()
	s.waitPersisted(act, int64(len(o.orders)), 60*time.Second)
	rows, err := s.db.Query("SELECT order_no, user_id, COALESCE(item_sku, ''), quantity, price_cents, amount_cents FROM orders WHERE activity_id = ?", act)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var no, item string
		var user, qty, price, amount int64
		if err := rows.Scan(&no, &user, &item, &qty, &price, &amount); err != nil {
			s.t.Fatal(err)
		}
		if o.orders[no] != fmt.Sprint(user, " ", item, " ", qty) || price != prices[item] || amount != qty*price {
			s.t.Fatalf("MySQL's order %s: user %d, %d of %q at %d (%d), accepted as %q", no, user, qty, item, price, amount, o.orders[no])
		}
		seen++
	}
	if seen != len(o.orders) {
		s.t.Fatalf("%d rows, %d orders accepted", seen, len(o.orders))
	}
}

// 2,000 shoppers' goroutines, through 3 api processes, at a sale of 3
// items with a limit of 2 a user across them, and one of its own on B:
// no item oversold, nobody over either limit, every accepted order in
// MySQL once with its item and its price; the invariant checker agrees,
// item by item.
func TestItems_twoThousandShoppers_threeAPIProcesses_noItemOversold_noLimitBroken(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	_, b2 := s.apiProcess(t.Name())
	_, b3 := s.apiProcess(t.Name())
	bases := []string{s.base, b2, b3}
	act := s.itemSale(2, "R:300:500", "B:200:400:1", "G:100:900")
	stock := map[string]int{"R": 300, "B": 200, "G": 100}
	skus := []string{"R", "B", "G"}
	o := newSold()
	var wg sync.WaitGroup
	for i := range 2000 {
		// 1,000 users, two goroutines each: what they ask for together is
		// often over a limit, and the items together five times the stock.
		user, item, qty := int64(i/2+1), skus[i%3], 1+(i/3)%2
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.orderAt(bases[i%3], user, act, item, qty, fmt.Sprint("k", i))
			if !o.note(r, user, item, qty) {
				t.Errorf("user %d, %d of %s: %d %v", user, qty, item, r.code, r.body)
			}
		}()
	}
	wg.Wait()
	t.Logf("answers %v; units sold %v of %v; %d orders", o.codes, o.units, stock, len(o.orders))
	for sku, n := range o.units {
		if n > stock[sku] {
			t.Errorf("item %s: %d units sold of %d", sku, n, stock[sku])
		}
	}
	for user, items := range o.perUser {
		if items["R"]+items["B"]+items["G"] > 2 || items["B"] > 1 {
			t.Errorf("user %d holds %v: over a limit", user, items)
		}
	}
	if o.units["R"]+o.units["B"]+o.units["G"] < 550 {
		t.Errorf("only %v sold of 600 units, five times asked for", o.units)
	}
	s.checkRows(act, o, map[string]int64{"R": 500, "B": 400, "G": 900})
	s.checkInvariants(act, int64(len(o.orders)))
}

// Restocks and a removal racing the last orders of a sale of two items,
// through 3 api processes: every unit the sale ever had is sold once —
// sold = created + added − removed, item by item, and MySQL's ledger says
// the same — none twice, none lost. Then, the sale sold out and each api
// refusing it locally (a sold-out flag that would last a minute), a
// restock sells again at once in every api: the notice let the flags go.
func TestItems_restockRacingTheLastOrders_everyUnitSoldOnce_andEveryAPISellsAgainAtOnce(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"SOLD_OUT_TTL": "1m"})
	s.worker()
	_, b2 := s.apiProcess(t.Name())
	_, b3 := s.apiProcess(t.Name())
	bases := []string{s.base, b2, b3}
	act := s.itemSale(5, "R:40:500", "B:20:400")
	path := fmt.Sprintf("/admin/v1/activities/%d", act)
	o := newSold()
	var adminDone atomic.Bool
	var added sync.Map // sku -> units added less removed, as answered
	var wg sync.WaitGroup
	for i := range 150 {
		user, item := int64(i+1), []string{"R", "B"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				r := s.orderAt(bases[(i+n)%3], user, act, item, 1, fmt.Sprint("k", i, "-", n))
				if !o.note(r, user, item, 1) {
					t.Errorf("user %d: %d %v", user, r.code, r.body)
					return
				}
				switch {
				case r.code == 409 && r.errCode() == "LIMIT_EXCEEDED":
					return
				case r.code == 409 && adminDone.Load():
					return // sold out after the last restock
				case r.code == 409:
					time.Sleep(40 * time.Millisecond) // and ask again: a restock may come
				}
			}
		}()
	}
	for _, ch := range []struct {
		sku string
		add int
	}{{"R", 40}, {"R", -5}, {"B", 5}, {"B", 30}, {"B", -3}, {"R", 7}} {
		if ch.add > 0 { // a removal right after an add: units may still be unsold
			time.Sleep(100 * time.Millisecond)
		}
		r := s.admin("POST", path+"/stock", fmt.Sprintf(`{"item":%q,"add":%d}`, ch.sku, ch.add))
		switch {
		case r.code == 200:
			v, _ := added.LoadOrStore(ch.sku, new(atomic.Int64))
			v.(*atomic.Int64).Add(int64(ch.add))
		case r.code == 409 && ch.add < 0: // none unsold at that moment: nothing removed
		default:
			t.Fatalf("restock %+v: %d %v", ch, r.code, r.body)
		}
	}
	adminDone.Store(true)
	wg.Wait()
	net := func(sku string) int {
		v, ok := added.Load(sku)
		if !ok {
			return 0
		}
		return int(v.(*atomic.Int64).Load())
	}
	t.Logf("answers %v; sold %v; added less removed R %+d, B %+d", o.codes, o.units, net("R"), net("B"))
	d := s.admin("GET", path, "")
	for i, want := range map[string]int{"R": 40 + net("R"), "B": 20 + net("B")} {
		if o.units[i] != want {
			t.Errorf("item %s: %d units sold, the sale had %d", i, o.units[i], want)
		}
	}
	if d.body["stock_remaining"] != float64(0) || d.body["total_stock"] != float64(60+net("R")+net("B")) {
		t.Errorf("after the race: %v left of %v", d.body["stock_remaining"], d.body["total_stock"])
	}
	if n := s.count("SELECT COUNT(*) FROM stock_ledger WHERE activity_id = ?", act); n < 4 {
		t.Errorf("%d ledger rows for 4 restocks at least", n)
	}
	s.checkRows(act, o, map[string]int64{"R": 500, "B": 400})
	s.checkInvariants(act, int64(len(o.orders)))

	// Every api refuses the sale locally now (the gate answers before the
	// token: no token, SOLD_OUT); a restock of 3 lets every one sell.
	for _, b := range bases {
		if r := s.callAt(b, "POST", fmt.Sprintf("/v1/activities/%d/orders", act), "", `{"item":"R","quantity":1}`); r.code != 409 || r.errCode() != "SOLD_OUT" {
			t.Fatalf("%s, the sale sold out: %d %v, want the gate's SOLD_OUT", b, r.code, r.body)
		}
	}
	if r := s.admin("POST", path+"/stock", `{"item":"R","add":3}`); r.code != 200 {
		t.Fatalf("restock: %d %v", r.code, r.body)
	}
	for i, b := range bases {
		deadline := time.Now().Add(2 * time.Second)
		for {
			r := s.orderAt(b, int64(1000+i), act, "R", 1, fmt.Sprint("after-", i))
			if r.code == 202 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("api %d two seconds after the restock: %d %v (the sold-out flag lasts a minute)", i, r.code, r.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A pause racing orders through 3 api processes: every order sent after
// the pause's answer is refused PAUSED (with Retry-After), and none is
// accepted after it; paying and cancelling go on while paused; resumed,
// the sale sells again.
func TestItems_pauseRacingOrders_nothingAcceptedAfterThePausesAnswer(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	_, b2 := s.apiProcess(t.Name())
	_, b3 := s.apiProcess(t.Name())
	bases := []string{s.base, b2, b3}
	act := s.itemSale(1000, "R:100000:500", "B:100000:400")
	path := fmt.Sprintf("/admin/v1/activities/%d", act)
	first := s.orderAt(s.base, 1, act, "R", 1, "before")
	if first.code != 202 {
		t.Fatalf("an order before the pause: %d %v", first.code, first.body)
	}
	var pausedAt atomic.Int64 // unix ns the pause's answer came; 0 before
	var late, after atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now().UnixNano()
				r := s.orderAt(bases[(i+n)%3], int64(10+i), act, []string{"R", "B"}[n%2], 1, fmt.Sprint("k", i, "-", n))
				p := pausedAt.Load()
				switch {
				case p != 0 && sent > p && r.code != 409:
					late.Add(1)
					t.Errorf("sent %v after the pause's answer: %d %v", time.Duration(sent-p), r.code, r.body)
				case p != 0 && sent > p && (r.errCode() != "PAUSED" || r.header.Get("Retry-After") == ""):
					t.Errorf("after the pause: %d %v (Retry-After %q)", r.code, r.body, r.header.Get("Retry-After"))
				case p != 0 && sent > p:
					after.Add(1)
				case r.code != 202 && r.errCode() != "PAUSED":
					t.Errorf("before the pause: %d %v", r.code, r.body)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if r := s.admin("POST", path+"/pause", ""); r.code != 200 || r.body["paused"] != true {
		t.Fatalf("pause: %d %v", r.code, r.body)
	}
	pausedAt.Store(time.Now().UnixNano())
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if after.Load() < 30 {
		t.Fatalf("only %d orders sent after the pause's answer", after.Load())
	}
	// None accepted after the answer: every order's creation (Redis's
	// clock, this machine's) is before it.
	p := time.Unix(0, pausedAt.Load()).UTC()
	if n := s.count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND created_at > ?", act, p); n != 0 || late.Load() != 0 {
		t.Fatalf("%d orders recorded as accepted after the pause's answer (%d answered)", n, late.Load())
	}
	// Paused: a cancellation goes on, an order does not; resumed, it does.
	if r := s.call("POST", "/v1/orders/"+first.str("order_no")+"/cancel", s.bearer(1), ""); r.code != 200 {
		t.Fatalf("a cancel while paused: %d %v", r.code, r.body)
	}
	if r := s.orderAt(b3, 5000, act, "B", 1, "paused"); r.code != 409 || r.errCode() != "PAUSED" {
		t.Fatalf("an order while paused: %d %v", r.code, r.body)
	}
	if r := s.admin("POST", path+"/resume", ""); r.code != 200 || r.body["paused"] != false {
		t.Fatalf("resume: %d %v", r.code, r.body)
	}
	for i, b := range bases {
		if r := s.orderAt(b, int64(6000+i), act, "B", 1, "resumed"); r.code != 202 {
			t.Fatalf("api %d once resumed: %d %v", i, r.code, r.body)
		}
	}
	s.checkInvariants(act, -1)
}

// A sale of items on a 3-master Redis Cluster: its items' keys share the
// sale's slot, so the order, the restock's removal and the load are each
// one script there too, and every invariant holds, item by item.
func TestItems_onRedisCluster_ordersRestockAndPause(t *testing.T) {
	s := newClusterStack(t)
	s.worker()
	act := s.itemSale(2, "R:5:500", "B:5:400:1")
	path := fmt.Sprintf("/admin/v1/activities/%d", act)
	o := newSold()
	for u := int64(1); u <= 8; u++ {
		for _, item := range []string{"R", "B"} {
			r := s.orderAt(s.base, u, act, item, 1, fmt.Sprint("k", u, item))
			if !o.note(r, u, item, 1) {
				t.Fatalf("user %d, %s: %d %v", u, item, r.code, r.body)
			}
		}
	}
	if o.units["R"] != 5 || o.units["B"] != 5 {
		t.Fatalf("sold %v of 5 each", o.units)
	}
	for _, ch := range []string{`{"item":"R","add":3}`, `{"item":"R","add":-1}`} {
		if r := s.admin("POST", path+"/stock", ch); r.code != 200 {
			t.Fatalf("restock %s: %d %v", ch, r.code, r.body)
		}
	}
	if r := s.admin("POST", path+"/pause", ""); r.code != 200 {
		t.Fatalf("pause: %d %v", r.code, r.body)
	}
	if r := s.orderAt(s.base, 20, act, "R", 1, "paused"); r.code != 409 || r.errCode() != "PAUSED" {
		t.Fatalf("while paused: %d %v", r.code, r.body)
	}
	if r := s.admin("POST", path+"/resume", ""); r.code != 200 {
		t.Fatalf("resume: %d %v", r.code, r.body)
	}
	for u := int64(20); u <= 23; u++ {
		r := s.orderAt(s.base, u, act, "R", 1, fmt.Sprint("after", u))
		if !o.note(r, u, "R", 1) {
			t.Fatalf("user %d after the restock: %d %v", u, r.code, r.body)
		}
	}
	if o.units["R"] != 7 {
		t.Fatalf("R sold %d, the sale had 7", o.units["R"])
	}
	s.checkRows(act, o, map[string]int64{"R": 500, "B": 400})
	s.checkInvariants(act, int64(len(o.orders)))
}
