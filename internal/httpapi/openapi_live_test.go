package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The tests in this file drive the api as it runs — app.API, its
// configuration, wiring and HTTP server — from outside, over TCP, on a
// throwaway redis-server and MariaDB database, through a validator we did
// not write: kin-openapi's openapi3filter, by way of apitest.Contract. Every
// answer, its headers included, and every request the api accepted must
// match openapi.yaml, or the test fails; and each test asserts the outcome
// it is about besides.

const liveSecret = "live-contract-secret-0123456789abcdef"

// liveAPI is a running api and what a client needs to talk to it.
type liveAPI struct {
	base   string
	redis  *testenv.RedisServer
	tokens *auth.Tokens
	next   http.RoundTripper // the transport under the contract
}

func startLiveAPI(t *testing.T) *liveAPI { return startLiveAPIWith(t, nil) }

// startLiveAPIWith is startLiveAPI with env over its configuration: a
// MYSQL_DSN of a server of the test's own, a REQUEST_TIMEOUT.
func startLiveAPIWith(t *testing.T, env map[string]string) *liveAPI {
	t.Helper()
	redis := testenv.StartRedis(t)
	vars := map[string]string{
		"REDIS_URL": redis.URL(), "JWT_SECRET": liveSecret, "ADMIN_TOKEN": token,
		"PAYMENT_PROVIDER": "simulated",
		"HTTP_ADDR":        "127.0.0.1:0", "WORKER_HTTP_ADDR": "127.0.0.1:0", "RATE_LIMIT_USER_RPS": "0",
		"RATE_LIMIT_IP_RPS": "0", "LOG_LEVEL": "error", "SHUTDOWN_TIMEOUT": "5s",
	}
	maps.Copy(vars, env)
	if vars["MYSQL_DSN"] == "" {
		vars["MYSQL_DSN"] = testenv.MySQL(t)
	}
	cfg, err := config.FromMap(vars)
	if err != nil {
		t.Fatal(err)
	}
	api := &app.API{LogOutput: io.Discard}
	if err := api.RunWith(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	l := &liveAPI{base: "http://" + api.Addr, redis: redis, next: &http.Transport{}}
	l.tokens, _ = auth.New(liveSecret)
	testenv.WaitReady(t, l.base+"/readyz", 60*time.Second) // the schema migrated
	return l
}

// answer is what the api answered.
type answer struct {
	code   int
	header http.Header
	body   map[string]any
}

// errorOf is the error answer's member name ("code", "message", "field").
func (a answer) errorOf(name string) string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e[name].(string)
	return s
}

func (a answer) errCode() string { return a.errorOf("code") }

func (a answer) str(k string) string {
	s, _ := a.body[k].(string)
	return s
}

// do sends a request through the contract; headers are name, value pairs.
// A body goes as application/json unless the headers give a Content-Type.
func (l *liveAPI) do(t *testing.T, method, path, body string, headers ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, l.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := (&http.Client{Transport: apitest.Contract{T: t, Next: l.next}, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Fatalf("%s %s: %d, body %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return a
}

// want fails the test unless a has status code (and error code, if given).
func want(t *testing.T, what string, a answer, code int, errCode ...string) {
	t.Helper()
	if a.code != code || (len(errCode) > 0 && a.errCode() != errCode[0]) {
		t.Fatalf("%s: %d %v, want %d %v", what, a.code, a.body, code, errCode)
	}
}

func (l *liveAPI) bearer(t *testing.T, user int64) string {
	t.Helper()
	tok, err := l.tokens.Issue(user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// sale creates and publishes an activity on sale for an hour through the
// admin API; group > 0 makes it a group buy of groups of that size.
func (l *liveAPI) sale(t *testing.T, stock, group int) int64 {
	t.Helper()
	typ, extra := "seckill", ""
	if group > 0 {
		typ, extra = "groupbuy", fmt.Sprintf(`,"group_size":%d,"group_ttl_seconds":600`, group)
	}
	a := l.do(t, "POST", "/admin/v1/activities", fmt.Sprintf(`{"type":%q,"name":"Phone","sku":"P1","price_cents":500,
		"total_stock":%d,"per_user_limit":1,"starts_at":%q,"ends_at":%q%s}`, typ, stock,
		time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339), extra),
		"Authorization", "Bearer "+token)
	want(t, "create", a, 201)
	id := int64(a.body["id"].(float64))
	want(t, "publish", l.do(t, "POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), "", "Authorization", "Bearer "+token), 200)
	return id
}

// Every operation's happy path, from the ops endpoints through the admin
// API's life of an activity to a shopper's order, payment, cancellation,
// group and heartbeat, answers as the document says.
func TestContract_liveAPI_happyPaths_matchTheDocument(t *testing.T) {
	l := startLiveAPI(t)
	adm := []string{"Authorization", "Bearer " + token}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/metrics"} {
		want(t, path, l.do(t, "GET", path, ""), 200)
	}

	sale := l.sale(t, 10, 0)
	path := fmt.Sprintf("/admin/v1/activities/%d", sale)
	want(t, "admin list", l.do(t, "GET", "/admin/v1/activities?page=1&page_size=5&status=published", "", adm...), 200)
	want(t, "admin get", l.do(t, "GET", path, "", adm...), 200)
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	if a := l.do(t, "PATCH", path, `{"name":"Phone X","ends_at":"`+later+`"}`, adm...); a.code != 200 || a.str("name") != "Phone X" {
		t.Fatalf("admin patch: %d %v", a.code, a.body)
	}
	want(t, "admin, a lowercase bearer", l.do(t, "GET", path, "", "Authorization", "bearer "+token), 200)

	u1, u2 := l.bearer(t, 1), l.bearer(t, 2)
	want(t, "public view", l.do(t, "GET", fmt.Sprintf("/v1/activities/%d", sale), ""), 200)
	placed := l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/orders", sale), `{"quantity":1}`, "Authorization", u1, "Idempotency-Key", "tap-1")
	want(t, "place", placed, 202)
	no := placed.str("order_no")
	if a := l.do(t, "GET", "/v1/orders/"+no, "", "Authorization", u1); a.code != 200 || a.str("status") != "pending_payment" {
		t.Fatalf("get: %d %v", a.code, a.body)
	}
	want(t, "my orders", l.do(t, "GET", "/v1/orders?page=1&page_size=20", "", "Authorization", u1), 200)
	if a := l.do(t, "POST", "/v1/orders/"+no+"/pay", "", "Authorization", u1); a.code != 200 || a.str("status") != "paid" {
		t.Fatalf("pay: %d %v", a.code, a.body)
	}
	other := l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/orders", sale), `{"quantity":1}`, "Authorization", u2)
	want(t, "place another", other, 202)
	// A body sent to pay or cancel is ignored, whatever its type: the pay's
	// amount is the order's, and a member no request has is no 400.
	u3 := l.bearer(t, 3)
	third := l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/orders", sale), `{"quantity":1}`, "Authorization", u3)
	want(t, "place a third", third, 202)
	if a := l.do(t, "POST", "/v1/orders/"+third.str("order_no")+"/pay", `{"amount_cents":1,"currency":"xxx"}`,
		"Authorization", u3); a.code != 200 || a.str("status") != "paid" || a.body["amount_cents"] != float64(500) {
		t.Fatalf("pay with a JSON body: %d %v, want paid, amount_cents 500", a.code, a.body)
	}
	if a := l.do(t, "POST", "/v1/orders/"+other.str("order_no")+"/cancel", "ignored", "Authorization", u2,
		"Content-Type", "text/plain"); a.code != 200 || a.str("status") != "cancelled" {
		t.Fatalf("cancel: %d %v", a.code, a.body)
	}

	gb := l.sale(t, 30, 3)
	opened := l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/groups", gb), `{"quantity":1}`, "Authorization", u1)
	want(t, "open a group", opened, 202)
	group := opened.str("group_id")
	want(t, "join", l.do(t, "POST", "/v1/groups/"+group+"/join", `{"quantity":1}`, "Authorization", u2, "Idempotency-Key", "j-1"), 202)
	if a := l.do(t, "GET", "/v1/groups/"+group, "", "Authorization", u1); a.code != 200 || a.body["members_count"] != float64(2) {
		t.Fatalf("group: %d %v", a.code, a.body)
	}
	want(t, "forming groups", l.do(t, "GET", fmt.Sprintf("/v1/activities/%d/groups?status=forming", gb), ""), 200)

	want(t, "a shopper's heartbeat", l.do(t, "POST", "/v1/presence", fmt.Sprintf(`{"activity_id":%d}`, sale), "Authorization", u1), 200)
	want(t, "a device's heartbeat", l.do(t, "POST", "/v1/presence", `{"device_id":"kiosk-7"}`), 200)
	want(t, "who is online", l.do(t, "GET", fmt.Sprintf("/admin/v1/presence?activity_id=%d&device_id=kiosk-7", sale), "", adm...), 200)
	want(t, "a lock nobody holds", l.do(t, "GET", "/admin/v1/locks/worker:reconciler", "", adm...), 404, "NOT_FOUND")
	if a := l.do(t, "POST", path+"/close", "", adm...); a.code != 200 || a.str("status") != "closed" {
		t.Fatalf("close: %d %v", a.code, a.body)
	}
}

// The reviewer's findings, each driven from outside through the contract
// on one running api.
func TestContract_liveAPI_reviewFindings_answerAsDocumented(t *testing.T) {
	l := startLiveAPI(t)
	sale := l.sale(t, 100, 0)
	orders := fmt.Sprintf("/v1/activities/%d/orders", sale)
	u1 := l.bearer(t, 1)
	placed := l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", u1)
	want(t, "place", placed, 202)

	t.Run("a wrong method on a known path is 405 with Allow", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{"DELETE", "/v1/orders/" + placed.str("order_no"), "GET"},
			{"PUT", fmt.Sprintf("/v1/activities/%d", sale), "GET"},
			{"HEAD", "/healthz", "GET"},
			{"POST", "/readyz", "GET"},
			{"DELETE", fmt.Sprintf("/admin/v1/activities/%d/publish", sale), "POST"},
		} {
			// The contract checks Allow against the document's methods of
			// the path, and the body against the error shape.
			a := l.do(t, tc.method, tc.path, "", "Authorization", u1)
			if a.code != 405 || a.header.Get("Allow") != tc.allow || (tc.method != "HEAD" && a.errCode() != "METHOD_NOT_ALLOWED") {
				t.Errorf("%s %s: %d Allow %q %v", tc.method, tc.path, a.code, a.header.Get("Allow"), a.body)
			}
		}
	})

	t.Run("a body not sent as JSON is 415, JSON in any charset or untyped is read", func(t *testing.T) {
		u2 := l.bearer(t, 2)
		for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", "text/plain; charset=utf-8"} {
			want(t, ct, l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", u2, "Content-Type", ct), 415, "UNSUPPORTED_MEDIA_TYPE")
			want(t, "admin, "+ct, l.do(t, "POST", "/admin/v1/activities", `{}`, "Authorization", "Bearer "+token,
				"Content-Type", ct), 415, "UNSUPPORTED_MEDIA_TYPE")
		}
		want(t, "with a charset", l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", u2,
			"Content-Type", "application/json; charset=UTF-8"), 202)
		// No Content-Type: read as JSON (and validated as such).
		want(t, "untyped", l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", l.bearer(t, 3), "Content-Type", ""), 202)
	})

	t.Run("a 400 names the field at fault", func(t *testing.T) {
		u4 := l.bearer(t, 4)
		admin := []string{"Authorization", "Bearer " + token}
		patch := fmt.Sprintf("/admin/v1/activities/%d", sale)
		groups := fmt.Sprintf("/v1/activities/%d/groups", sale)
		for _, tc := range []struct {
			name, path, body string // path: "METHOD /path", or a POST's path
			headers          []string
			field            string
		}{
			{"quantity 0", orders, `{"quantity":0}`, []string{"Authorization", u4}, "quantity"},
			{"quantity -1", orders, `{"quantity":-1}`, []string{"Authorization", u4}, "quantity"},
			{"quantity 1001", orders, `{"quantity":1001}`, []string{"Authorization", u4}, "quantity"},
			{"quantity missing", orders, `{}`, []string{"Authorization", u4}, "quantity"},
			{"quantity null", orders, `{"quantity":null}`, []string{"Authorization", u4}, "quantity"},
			{"quantity a string", orders, `{"quantity":"lots"}`, []string{"Authorization", u4}, "quantity"},
			{"an unknown member", orders, `{"quantity":1,"coupon":"x"}`, []string{"Authorization", u4}, "coupon"},
			{"a bad device_id", "/v1/presence", `{"device_id":"a b"}`, nil, "device_id"},
			{"a device_id too long", "/v1/presence", `{"device_id":"` + strings.Repeat("d", 65) + `"}`, nil, "device_id"},
			{"no token, no device_id", "/v1/presence", `{}`, nil, "device_id"},
			{"a token and a device_id", "/v1/presence", `{"device_id":"kiosk-1"}`, []string{"Authorization", u4}, "device_id"},
			{"activity_id a string", "/v1/presence", `{"activity_id":"7"}`, []string{"Authorization", u4}, "activity_id"},
			{"starts_at tomorrow", "/admin/v1/activities", `{"type":"seckill","starts_at":"tomorrow"}`, admin, "starts_at"},
			{"ends_at not a time", "PATCH " + patch, `{"ends_at":"soon"}`, admin, "ends_at"},
			{"total_stock a string", "/admin/v1/activities", `{"total_stock":"10"}`, admin, "total_stock"},
			// Query and path parameters, named as they are in the request.
			{"page 0", "GET /v1/orders?page=0", "", []string{"Authorization", u4}, "page"},
			{"page past the bound", "GET /v1/orders?page=10001", "", []string{"Authorization", u4}, "page"},
			{"page_size 101", "GET /v1/orders?page_size=101", "", []string{"Authorization", u4}, "page_size"},
			{"admin page_size not a number", "GET /admin/v1/activities?page_size=ten", "", admin, "page_size"},
			{"admin status unknown", "GET /admin/v1/activities?status=open", "", admin, "status"},
			{"groups status not forming", "GET " + groups + "?status=succeeded", "", nil, "status"},
			{"admin presence activity_id 0", "GET /admin/v1/presence?activity_id=0", "", admin, "activity_id"},
			{"admin presence user_id -3", "GET /admin/v1/presence?user_id=-3", "", admin, "user_id"},
			{"admin series minutes 11", "GET " + patch + "/series?minutes=11", "", admin, "minutes"},
			{"admin payments since yesterday", "GET " + patch + "/payments?since=yesterday", "", admin, "since"},
			{"path id a word", "GET /v1/activities/abc", "", nil, "id"},
			{"path id 0, an order", "POST /v1/activities/0/orders", `{"quantity":1}`, []string{"Authorization", u4}, "id"},
			{"admin path id with a leading zero", "GET /admin/v1/activities/007", "", admin, "id"},
			{"malformed JSON", orders, `{"quantity":`, []string{"Authorization", u4}, ""},
		} {
			method, path, found := strings.Cut(tc.path, " ")
			if !found {
				method, path = "POST", tc.path
			}
			a := l.do(t, method, path, tc.body, tc.headers...)
			// A message a person reads names the field too, in words of
			// the request, not Go's.
			msg := a.errorOf("message")
			if a.code != 400 || a.errCode() != "INVALID_ARGUMENT" || a.errorOf("field") != tc.field ||
				msg == "" || !strings.Contains(msg, tc.field) || strings.Contains(msg, "parsing time") {
				t.Errorf("%s: %d %v, want 400 naming field %q", tc.name, a.code, a.body, tc.field)
			}
		}
	})
}

// While a sale is sold out, an order is refused 409 SOLD_OUT before the
// token and the body are looked at (the contract says so); while it is on,
// a bad token is 401, so a client can tell the two apart. A lowercase
// "bearer" is a bearer token.
func TestContract_liveAPI_soldOutBeforeTheToken_onSaleABadTokenIs401(t *testing.T) {
	l := startLiveAPI(t)
	sale := l.sale(t, 1, 0)
	orders := fmt.Sprintf("/v1/activities/%d/orders", sale)
	expired, _ := l.tokens.Issue(9, -time.Hour)
	unauthenticated := []struct {
		name    string
		headers []string
		body    string
	}{
		{"no token", nil, `{"quantity":1}`},
		{"a garbage token", []string{"Authorization", "Bearer garbage"}, `{"quantity":1}`},
		{"an expired token", []string{"Authorization", "Bearer " + expired}, `{"quantity":1}`},
		{"another scheme", []string{"Authorization", "Basic dTpw"}, `{"quantity":1}`},
		{"no token and not an order", nil, `{"quantity":"lots"}`},
	}
	for _, tc := range unauthenticated {
		want(t, "on sale, "+tc.name, l.do(t, "POST", orders, tc.body, tc.headers...), 401, "UNAUTHENTICATED")
	}
	tok, _ := l.tokens.Issue(1, time.Hour)
	want(t, `"bearer", lowercase`, l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", "bearer "+tok), 202)

	for i, tc := range unauthenticated {
		// The api keeps what it learnt of a sold-out sale for a second: a
		// retry (an Idempotency-Key, which the early answer lets through)
		// asks Redis, which says sold out and renews it. A loaded machine
		// may take longer than that between the two: try again then.
		for attempt := 0; ; attempt++ {
			want(t, "sold out, a valid token", l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", l.bearer(t, 2),
				"Idempotency-Key", fmt.Sprint("k-", i, "-", attempt)), 409, "SOLD_OUT")
			a := l.do(t, "POST", orders, tc.body, tc.headers...)
			if a.code == 409 && a.errCode() == "SOLD_OUT" {
				break
			}
			if a.code != 401 || attempt == 4 {
				t.Fatalf("sold out, %s: %d %v, want 409 SOLD_OUT", tc.name, a.code, a.body)
			}
		}
	}
	want(t, "sold out, no token, a retry", l.do(t, "POST", orders, `{"quantity":1}`, "Idempotency-Key", "k-x"), 401, "UNAUTHENTICATED")
}

// Not ready is 503 with Retry-After (which the contract requires of every
// 503), naming what failed; so is an order the api cannot take.
func TestContract_liveAPI_redisDown_readyzAndOrdersAre503WithRetryAfter(t *testing.T) {
	l := startLiveAPI(t)
	sale := l.sale(t, 10, 0)
	l.redis.Stop()
	a := l.do(t, "GET", "/readyz", "")
	if checks, _ := a.body["checks"].(map[string]any); a.code != 503 || a.header.Get("Retry-After") == "" ||
		a.errCode() != "UNAVAILABLE" || checks["redis"] != "unavailable" {
		t.Fatalf("readyz, Redis down: %d Retry-After %q %v", a.code, a.header.Get("Retry-After"), a.body)
	}
	a = l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/orders", sale), `{"quantity":1}`, "Authorization", l.bearer(t, 1))
	if a.code != 503 || a.header.Get("Retry-After") == "" || a.errCode() != "UNAVAILABLE" {
		t.Fatalf("an order, Redis down: %d Retry-After %q %v", a.code, a.header.Get("Retry-After"), a.body)
	}
}
