package app_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// 5,000 concurrent order requests from 2,000 users for 300 units with a
// limit of 2: exactly 300 units sold, nobody over 2, every accepted order in
// MySQL exactly once, Redis stock 0, Redis and MySQL agree.
func TestOrders_fiveThousandRequests_sellExactlyTheStock(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	act := s.sale(300, 2, 600)

	var mu sync.Mutex
	accepted := map[string]int64{} // order no -> user
	units := map[int64]int{}
	codes := map[int]int{}
	unavailable := map[string]int{} // 503s (each sent again) by message
	var wg sync.WaitGroup
	for i := range 5000 {
		user := int64(i%2000 + 1)
		qty := 1 + i%2
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As a shopper's app does: an Idempotency-Key per order, and a
			// 503 (not known to be done: the request's deadline passed,
			// 5,000 goroutines under -race on two cores, perhaps beside
			// another package's tests) sent again with it until the answer
			// is final. A 503 may have sold: its retry returns that order.
			key := fmt.Sprintf("o%d", i)
			r := s.order(user, act, qty, "Idempotency-Key", key)
			for try := 0; r.code == 503 && r.errCode() == "UNAVAILABLE" && try < 5; try++ {
				mu.Lock()
				codes[r.code]++
				unavailable[fmt.Sprint(r.body["message"])]++
				mu.Unlock()
				r = s.order(user, act, qty, "Idempotency-Key", key)
			}
			mu.Lock()
			defer mu.Unlock()
			codes[r.code]++
			switch {
			case r.code == 202:
				accepted[r.str("order_no")] = user
				units[user] += qty
			case r.code == 409 && (r.errCode() == "SOLD_OUT" || r.errCode() == "LIMIT_EXCEEDED"):
			default:
				t.Errorf("unexpected answer %d %v", r.code, r.body)
			}
		}()
	}
	wg.Wait()
	t.Logf("answers by status: %v (503s sent again: %v); %d orders accepted", codes, unavailable, len(accepted))
	if codes[503] > 500 {
		t.Errorf("%d of 5000 requests answered 503", codes[503])
	}

	sold := 0
	for user, u := range units {
		if u > 2 {
			t.Errorf("user %d got %d units, limit 2", user, u)
		}
		sold += u
	}
	if sold != 300 {
		t.Fatalf("sold %d units, want exactly 300", sold)
	}
	s.waitPersisted(act, int64(len(accepted)), 60*time.Second)
	if n := s.count("SELECT COUNT(DISTINCT order_no) FROM orders WHERE activity_id = ?", act); n != int64(len(accepted)) {
		t.Fatalf("%d distinct orders in MySQL, %d accepted", n, len(accepted))
	}
	if n := s.count("SELECT SUM(quantity) FROM orders WHERE activity_id = ?", act); n != 300 {
		t.Fatalf("MySQL has %d units, want 300", n)
	}
	if n := s.count("SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE activity_id = ? GROUP BY user_id HAVING SUM(quantity) > 2) x", act); n != 0 {
		t.Fatalf("%d users over the limit in MySQL", n)
	}
	rows, _ := s.db.Query("SELECT order_no, user_id FROM orders WHERE activity_id = ?", act)
	for rows.Next() {
		var no string
		var user int64
		rows.Scan(&no, &user)
		if accepted[no] != user {
			t.Fatalf("MySQL order %s of user %d was never accepted for that user", no, user)
		}
	}
	rows.Close()
	if left := s.stockLeft(act); left != 0 {
		t.Fatalf("Redis stock %d, want 0", left)
	}
	r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d", act), "")
	if rec := r.body["reconciliation"].(map[string]any); rec["in_sync"] != true {
		t.Fatalf("Redis and MySQL disagree: %v", rec)
	}
	s.checkInvariants(act, int64(len(accepted)))
}

// The same Idempotency-Key sent 10 times at once makes one order.
func TestOrders_sameIdempotencyKeyTenTimesAtOnce_oneOrder(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	act := s.sale(100, 5, 600)
	var wg sync.WaitGroup
	nos := make([]string, 10)
	for i := range nos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.order(7, act, 1, "Idempotency-Key", "tap-42")
			if r.code != 202 {
				t.Errorf("try %d: %d %v", i, r.code, r.body)
			}
			nos[i] = r.str("order_no")
		}()
	}
	wg.Wait()
	for _, no := range nos {
		if no != nos[0] || no == "" {
			t.Fatalf("order numbers %v: want one", nos)
		}
	}
	s.waitPersisted(act, 1, 30*time.Second)
	if left := s.stockLeft(act); left != 99 {
		t.Fatalf("stock %d after one order of 1, want 99", left)
	}
	// Another key is another order.
	if r := s.order(7, act, 1, "Idempotency-Key", "tap-43"); r.code != 202 || r.str("order_no") == nos[0] {
		t.Fatalf("a new key: %d %v", r.code, r.body)
	}
}

func TestOrders_getPayCancel_ownerOnly_cancelReturnsStock(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	act := s.sale(10, 3, 600)
	a := s.order(1, act, 2)
	b := s.order(1, act, 1)
	if a.code != 202 || b.code != 202 {
		t.Fatalf("orders: %v %v", a.body, b.body)
	}
	noA, noB := a.str("order_no"), b.str("order_no")
	if r := s.call("GET", "/v1/orders/"+noA, s.bearer(2), ""); r.code != 404 || r.errCode() != "NOT_FOUND" {
		t.Fatalf("another user's order: %d %v", r.code, r.body)
	}
	if r := s.call("POST", "/v1/orders/"+noA+"/pay", s.bearer(2), ""); r.code != 404 {
		t.Fatalf("another user paying: %d %v", r.code, r.body)
	}
	if r := s.call("POST", "/v1/orders/"+noA+"/pay", s.bearer(1), ""); r.code != 200 || r.str("status") != "paid" {
		t.Fatalf("pay: %d %v", r.code, r.body)
	}
	if r := s.call("POST", "/v1/orders/"+noA+"/cancel", s.bearer(1), ""); r.code != 409 || r.errCode() != "CONFLICT" {
		t.Fatalf("cancel a paid order: %d %v", r.code, r.body)
	}
	if r := s.call("POST", "/v1/orders/"+noB+"/cancel", s.bearer(1), ""); r.code != 200 || r.str("status") != "cancelled" {
		t.Fatalf("cancel: %d %v", r.code, r.body)
	}
	if r := s.call("POST", "/v1/orders/"+noB+"/pay", s.bearer(1), ""); r.code != 409 {
		t.Fatalf("pay a cancelled order: %d %v", r.code, r.body)
	}
	if left := s.stockLeft(act); left != 8 {
		t.Fatalf("stock %d, want 10 - 2 paid = 8", left)
	}
	s.waitPersisted(act, 2, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for s.count("SELECT COUNT(*) FROM orders WHERE order_no IN (?, ?) AND status IN ('paid', 'cancelled')", noA, noB) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("status changes never reached MySQL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The worker writes MySQL, then takes the order off its outbox
	// (persisted): a moment apart.
	for r := s.call("GET", "/v1/orders/"+noA, s.bearer(1), ""); r.code != 200 || r.body["persisted"] != true; r = s.call("GET", "/v1/orders/"+noA, s.bearer(1), "") {
		if time.Now().After(deadline) {
			t.Fatalf("get: %d %v", r.code, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.call("GET", "/v1/orders?page_size=1", s.bearer(1), ""); r.code != 200 || r.body["total"] != float64(2) {
		t.Fatalf("list: %d %v", r.code, r.body)
	}
}

// Bad tokens and bad bodies get their error code and change nothing.
func TestOrders_badInput_getsItsCodeAndChangesNothing(t *testing.T) {
	s := newStack(t, "")
	act := s.sale(10, 5, 600)
	path := fmt.Sprintf("/v1/activities/%d/orders", act)
	expired, _ := s.tokens.Issue(1, -time.Minute)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "1",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}).SignedString([]byte("not-the-secret-0123456789abcdef012"))
	good := strings.TrimPrefix(s.bearer(1), "Bearer ")
	payload := strings.Split(good, ".")[1]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + payload + "."

	for name, auth := range map[string]string{
		"missing": "", "not bearer": "Token " + good, "garbage": "Bearer x.y.z",
		"expired": "Bearer " + expired, "forged": "Bearer " + forged, "alg none": "Bearer " + none,
	} {
		if r := s.call("POST", path, auth, `{"quantity":1}`); r.code != 401 || r.errCode() != "UNAUTHENTICATED" {
			t.Errorf("token %s: %d %v", name, r.code, r.body)
		}
	}
	for name, body := range map[string]string{
		"quantity 0": `{"quantity":0}`, "negative": `{"quantity":-1}`, "huge": `{"quantity":1000000}`,
		"beyond int": `{"quantity":99999999999999999999}`, "a string": `{"quantity":"1"}`,
		"missing quantity": `{}`, "unknown field": `{"quantity":1,"coupon":"x"}`, "malformed": `{"quantity":`,
		"huge body": `{"quantity":1,"x":"` + strings.Repeat("y", 70<<10) + `"}`,
	} {
		if r := s.call("POST", path, s.bearer(1), body); r.code != 400 || r.errCode() != "INVALID_ARGUMENT" {
			t.Errorf("body %s: %d %v", name, r.code, r.body)
		}
	}
	for name, p := range map[string]string{"unknown activity": "/v1/activities/999999/orders", "bad id": "/v1/activities/x/orders"} {
		if r := s.call("POST", p, s.bearer(1), `{"quantity":1}`); r.code != 404 && r.code != 400 {
			t.Errorf("%s: %d %v", name, r.code, r.body)
		}
	}
	if r := s.order(1, act, 1, "Idempotency-Key", strings.Repeat("k", 65)); r.code != 400 {
		t.Errorf("overlong Idempotency-Key: %d %v", r.code, r.body)
	}
	if r := s.call("GET", "/v1/orders/not-an-order", s.bearer(1), ""); r.code != 400 && r.code != 404 {
		t.Errorf("malformed order number: %d %v", r.code, r.body)
	}
	if left := s.stockLeft(act); left != 10 {
		t.Fatalf("bad requests took stock: %d left of 10", left)
	}
	if n := s.redis.Client(t).Exists(t.Context(), "fs:{act:999999}:meta").Val(); n != 0 {
		t.Fatal("a refused order created keys")
	}
}

// Orders over the per-user limit get 429 with Retry-After, and they spend
// the same budget as the user's other requests: with the user lock on, the
// order service charges it in the lock's obtain (order.Config.UserRPS,
// rate_limit.lua as the lock's guard), with it off the HTTP middleware
// does (redisstore.Limiter, the same script); either way a listing right
// after is limited too.
func TestShop_rateLimits_answer429WithRetryAfter_andThePublicView(t *testing.T) {
	for _, userLock := range []string{"false", "true", "hold"} {
		t.Run("ORDER_USER_LOCK="+userLock, func(t *testing.T) {
			env := map[string]string{"RATE_LIMIT_USER_RPS": "3", "RATE_LIMIT_IP_RPS": "0", "ORDER_USER_LOCK": userLock}
			if userLock == "hold" { // taken for every order, not elided
				env["ORDER_USER_LOCK"], env["ORDER_USER_LOCK_HOLD"] = "true", "true"
			}
			s := newStackWith(t, "", env)
			act := s.sale(100, 50, 600)
			limited, accepted := 0, 0
			for range 10 {
				r := s.order(1, act, 1)
				switch r.code {
				case 429:
					limited++
					if r.errCode() != "RATE_LIMITED" {
						t.Fatalf("429 with %v", r.body)
					}
				case 202:
					accepted++
				}
			}
			if limited < 5 || accepted < 3 {
				t.Fatalf("%d of 10 quick orders limited and %d accepted at 3 per second", limited, accepted)
			}
			if left := s.stockLeft(act); left != int64(100-accepted) {
				t.Fatalf("%d of 100 units left after %d accepted orders: a refused order took stock", left, accepted)
			}
			for _, path := range []string{fmt.Sprintf("/v1/activities/%d/orders", act), "/v1/orders"} {
				method, body := "POST", `{"quantity":1}`
				if path == "/v1/orders" {
					method, body = "GET", ""
				}
				req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
				req.Header.Set("Authorization", s.bearer(1))
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("%s %s over the limit: %d, Retry-After %q", method, path, resp.StatusCode, resp.Header.Get("Retry-After"))
				}
			}
			if r := s.order(2, act, 1); r.code != 202 {
				t.Fatalf("another user is not limited by the first: %d %v", r.code, r.body)
			}
		})
	}
	s := newStack(t, "")
	act := s.sale(100, 50, 600)

	// The public view needs no token and hides drafts.
	r := s.call("GET", fmt.Sprintf("/v1/activities/%d", act), "", "")
	if r.code != 200 || r.body["name"] != "e2e" || r.body["price_cents"] != float64(500) || r.body["stock_remaining"] == nil {
		t.Fatalf("public view: %d %v", r.code, r.body)
	}
	draft := s.admin("POST", "/admin/v1/activities", `{"type":"seckill","name":"secret","sku":"X","price_cents":1,
		"total_stock":1,"per_user_limit":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`)
	if r := s.call("GET", fmt.Sprintf("/v1/activities/%v", draft.body["id"]), "", ""); r.code != 404 {
		t.Fatalf("a draft in the public view: %d %v", r.code, r.body)
	}
}

// A stalled Redis does not hold requests at the rate limiter: past its
// short wait the request goes on (unlimited), here to a listing that reads
// MySQL only. Before the wait existed, the request sat for the Redis
// client's read timeout (go-redis v9: 5 s).
func TestShop_rateLimiter_stalledRedis_letsRequestsThroughQuickly(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"RATE_LIMIT_USER_RPS": "100", "RATE_LIMIT_IP_RPS": "100"})
	list := func() (int, time.Duration) {
		req, _ := http.NewRequest("GET", s.base+"/v1/orders", nil)
		req.Header.Set("Authorization", s.bearer(1))
		start := time.Now()
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	if code, _ := list(); code != 200 {
		t.Fatalf("listing with Redis up: %d", code)
	}
	s.redis.Pause()
	defer s.redis.Resume()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, took := list(); code != 200 || took > 2500*time.Millisecond {
				t.Errorf("listing with Redis paused: %d after %v, want 200 within 2.5 s (two limiters, 500 ms each at most)", code, took)
			}
		}()
	}
	wg.Wait()
}

// The per-IP limit counts the connection's address: X-Forwarded-For is
// believed only from a trusted proxy (TRUSTED_PROXIES), so a client cannot
// dodge the limit by making up the header.
func TestShop_ipLimit_xForwardedForOnlyFromTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		trusted     string
		wantLimited bool
	}{{"", true}, {"127.0.0.1", false}} {
		s := newStackWith(t, "", map[string]string{"RATE_LIMIT_USER_RPS": "0", "RATE_LIMIT_IP_RPS": "3", "TRUSTED_PROXIES": tc.trusted})
		act := s.sale(100, 1, 600)
		limited := 0
		for i := range 10 {
			r := s.call("GET", fmt.Sprintf("/v1/activities/%d", act), "", "", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
			if r.code == 429 {
				limited++
			}
		}
		if got := limited >= 5; got != tc.wantLimited {
			t.Fatalf("TRUSTED_PROXIES=%q: %d of 10 requests with made-up X-Forwarded-For limited at 3/s", tc.trusted, limited)
		}
	}
}

// Once this api saw a sale sell out, an order for it is refused before the
// rate limits and the token check: 409 SOLD_OUT even without a token. A
// request with an Idempotency-Key still goes through them (it may be the
// retry of an accepted order).
func TestShop_soldOutGate_refusesBeforeAuth(t *testing.T) {
	s := newStack(t, "")
	act := s.sale(1, 1, 600)
	if r := s.order(1, act, 1); r.code != 202 {
		t.Fatalf("the one unit: %d %v", r.code, r.body)
	}
	path := fmt.Sprintf("/v1/activities/%d/orders", act)
	// The flag lives a second; a loaded machine may need a second try.
	for attempt := 0; ; attempt++ {
		if r := s.order(2, act, 1); r.code != 409 || r.errCode() != "SOLD_OUT" {
			t.Fatalf("after the sale: %d %v", r.code, r.body)
		}
		r := s.call("POST", path, "", `{"quantity":1}`)
		if r.code == 409 && r.errCode() == "SOLD_OUT" {
			break
		}
		if attempt == 4 {
			t.Fatalf("no token on a sold-out sale: %d %v, want 409 SOLD_OUT", r.code, r.body)
		}
	}
	if r := s.call("POST", path, "", `{"quantity":1}`, "Idempotency-Key", "k1"); r.code != 401 {
		t.Fatalf("with an Idempotency-Key and no token: %d %v, want 401", r.code, r.body)
	}
	if r := s.call("POST", fmt.Sprintf("/v1/activities/%d/orders", act+1), "", `{"quantity":1}`); r.code != 401 {
		t.Fatalf("no token on another sale: %d %v, want 401", r.code, r.body)
	}
}

// /metrics counts the token cache's hits and misses: a user's first request
// verifies the token in full, the next ones are answered from the cache.
func TestAPI_metrics_tokenCacheHitsAndMisses(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"RATE_LIMIT_USER_RPS": "0", "RATE_LIMIT_IP_RPS": "0"})
	act := s.sale(100, 5, 600)
	tok := s.bearer(7) // one token: a new one each call would differ from second to second
	for range 3 {
		if r := s.call("POST", fmt.Sprintf("/v1/activities/%d/orders", act), tok, `{"quantity":1}`); r.code != 202 {
			t.Fatalf("order: %d %v", r.code, r.body)
		}
	}
	resp, err := s.client.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"flashsale_auth_token_cache_hits_total 2", "flashsale_auth_token_cache_misses_total 1"} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
