package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

// guardedAdmin is the admin API over a real MySQL and Redis behind a
// trusted proxy (X-Forwarded-For is the client), with limit on failed
// attempts at the token.
func guardedAdmin(t *testing.T, limit httpapi.AdminLimit) func(ip, auth string) (int, string, http.Header) {
	t.Helper()
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	svc := admin.New(mysqlstore.NewActivities(db), stock.New(testenv.StartRedis(t).Client(t), stock.Config{}), nil, nil, admin.Config{})
	srv := httptest.NewServer(httpapi.NewRouter(httpapi.Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Admin: svc, AdminToken: token, AdminLimit: limit,
		TrustedProxies: []string{"127.0.0.1"},
	}))
	t.Cleanup(srv.Close)
	client := apitest.Client(t)
	return func(ip, auth string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/admin/v1/activities", nil)
		req.Header.Set("X-Forwarded-For", ip)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&b)
		return resp.StatusCode, b.Error.Code, resp.Header
	}
}

// A network gets Burst failed attempts at the admin token (401), then 429
// RATE_LIMITED with Retry-After until its budget comes back, the right
// token included (else a 429 would tell a guesser which guesses were
// wrong). Another network is still answered 401, and the right token from
// it works however often it is sent; an IPv6 network is its /64, so new
// addresses in it do not buy new attempts.
func TestAdminAuth_failedAttemptsPerNetwork_thenTooManyWithRetryAfter(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	call := guardedAdmin(t, httpapi.AdminLimit{Burst: 3, Every: time.Minute, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	right, wrong := "Bearer "+token, "Bearer "+token[:len(token)-1]+"?"
	expect := func(what, ip, auth string, status int, code, retryAfter string) {
		t.Helper()
		got, gotCode, h := call(ip, auth)
		if got != status || gotCode != code || h.Get("Retry-After") != retryAfter {
			t.Fatalf("%s from %s: %d %s, Retry-After %q; want %d %s, Retry-After %q", what, ip, got, gotCode, h.Get("Retry-After"), status, code, retryAfter)
		}
	}
	const a, b = "203.0.113.5", "198.51.100.7"
	for i := range 3 {
		expect(fmt.Sprintf("failed attempt %d", i+1), a, wrong, 401, "UNAUTHENTICATED", "")
	}
	expect("the 4th failed attempt", a, "", 429, "RATE_LIMITED", "60")
	expect("the right token, out of attempts", a, right, 429, "RATE_LIMITED", "60")
	expect("a failed attempt from another network", b, wrong, 401, "UNAUTHENTICATED", "")
	for range 10 {
		expect("the right token from another network", b, right, 200, "", "")
	}
	expect("after 10 successes, a failed attempt", b, "Bearer nope", 401, "UNAUTHENTICATED", "")
	expect("and another", b, "Basic "+token, 401, "UNAUTHENTICATED", "")

	now.Add(int64(45 * time.Second))
	expect("45 s on", a, wrong, 429, "RATE_LIMITED", "15")
	now.Add(int64(15 * time.Second)) // one attempt back
	expect("a minute on, the right token", a, right, 200, "", "")
	expect("then a failed attempt", a, wrong, 401, "UNAUTHENTICATED", "")
	expect("and one more", a, wrong, 429, "RATE_LIMITED", "60")

	for i, ip := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3"} {
		expect(fmt.Sprintf("failed attempt %d from one /64", i+1), ip, wrong, 401, "UNAUTHENTICATED", "")
	}
	expect("a new address of that /64", "2001:db8:1:2::99", wrong, 429, "RATE_LIMITED", "60")
	expect("the next /64", "2001:db8:1:3::1", wrong, 401, "UNAUTHENTICATED", "")
}

// Concurrent guesses cannot all slip past one check: of 40 sent at once
// from one network, exactly Burst are looked at (401), the rest refused
// (429), and the network's right token is refused too until its budget
// comes back.
func TestAdminAuth_concurrentGuesses_eachTakeAnAttempt(t *testing.T) {
	call := guardedAdmin(t, httpapi.AdminLimit{Burst: 5, Every: time.Hour})
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _ := call("192.0.2.44", fmt.Sprintf("Bearer guess-%d", i))
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[401] != 5 || codes[429] != 35 {
		t.Fatalf("40 concurrent guesses with a burst of 5: %v; want 5 401s and 35 429s", codes)
	}
	if code, _, _ := call("192.0.2.44", "Bearer "+token); code != 429 {
		t.Fatalf("the right token from a network out of attempts: %d, want 429", code)
	}
}
