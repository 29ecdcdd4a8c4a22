package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// A 503 says which dependency did not answer — within REQUEST_TIMEOUT
// when it stalled (SIGSTOP: connections open, nothing answers), or that it
// is unavailable when it stopped — and names the Idempotency-Key only on a
// route that takes one (placing an order, opening a group), never on the
// public view of a sale, an admin read or a publish. The code stays
// UNAVAILABLE, with Retry-After, whichever it is.
func TestContract_liveAPI_dependencyStalledOrStopped_503NamesIt_andTheKeyOnlyWhereTheRouteTakesOne(t *testing.T) {
	mdb, dsn := testenv.StartMariaDB(t)
	l := startLiveAPIWith(t, map[string]string{"MYSQL_DSN": dsn, "REQUEST_TIMEOUT": "1s"})
	sale, gb := l.sale(t, 100, 0), l.sale(t, 30, 3)
	adm := []string{"Authorization", "Bearer " + token}
	draft := func() int64 {
		a := l.do(t, "POST", "/admin/v1/activities", fmt.Sprintf(`{"type":"seckill","name":"Phone","sku":"P1",
			"price_cents":500,"total_stock":10,"per_user_limit":1,"starts_at":%q,"ends_at":%q}`,
			time.Now().UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), adm...)
		want(t, "a draft", a, 201)
		return int64(a.body["id"].(float64))
	}
	drafts := []int64{draft(), draft()}

	const (
		keyed = "; try again with the same Idempotency-Key: an order this attempt made is returned, not made twice"
		plain = "; try again"
	)
	type req struct {
		what, method, path, body string
		headers                  []string
		advice                   string // keyed or plain
	}
	shopper := func(user int64, key string) []string {
		return []string{"Authorization", l.bearer(t, user), "Idempotency-Key", key}
	}
	// check sends reqs; each must be answered 503 UNAVAILABLE with one of
	// the messages says, followed by its route's advice.
	check := func(when string, says []string, reqs []req) {
		t.Helper()
		for _, r := range reqs {
			a := l.do(t, r.method, r.path, r.body, r.headers...)
			msg := a.errorOf("message")
			if a.code != 503 || a.errCode() != "UNAVAILABLE" || a.header.Get("Retry-After") == "" ||
				!slices.ContainsFunc(says, func(s string) bool { return msg == s+r.advice }) {
				t.Errorf("%s, %s: %d %v (Retry-After %q), want 503 UNAVAILABLE, one of %q followed by %q", when, r.what,
					a.code, a.body, a.header.Get("Retry-After"), says, r.advice)
			}
			if r.advice == plain && strings.Contains(msg, "Idempotency-Key") {
				t.Errorf("%s, %s takes no Idempotency-Key, but its 503 names one: %q", when, r.what, msg)
			}
		}
	}
	onRedis := func(n int) []req {
		return []req{
			{"an order", "POST", fmt.Sprintf("/v1/activities/%d/orders", sale), `{"quantity":1}`,
				shopper(int64(10+n), fmt.Sprint("tap-", n)), keyed},
			{"a group opened", "POST", fmt.Sprintf("/v1/activities/%d/groups", gb), `{"quantity":1}`,
				shopper(int64(20+n), fmt.Sprint("open-", n)), keyed},
			{"the public view", "GET", fmt.Sprintf("/v1/activities/%d", sale), "", nil, plain},
			{"an admin view", "GET", fmt.Sprintf("/admin/v1/activities/%d", sale), "", adm, plain},
			{"a publish", "POST", fmt.Sprintf("/admin/v1/activities/%d/publish", drafts[n]), "", adm, plain},
		}
	}

	// A dependency stopped refuses connections: its clients try again
	// until they give up, or the request's deadline comes first.
	stopped := func(dep string) []string {
		return []string{dep + " is unavailable", dep + " did not answer within REQUEST_TIMEOUT (1s)"}
	}
	l.redis.Pause()
	check("Redis frozen", []string{"Redis did not answer within REQUEST_TIMEOUT (1s)"}, onRedis(0))
	l.redis.Resume()
	l.redis.Stop()
	check("Redis stopped", stopped("Redis"), onRedis(1))
	l.redis.Restart()

	// MySQL: the admin's reads, and the public view once its record is
	// past the catalog's cache (a second).
	onMySQL := []req{
		{"an admin view", "GET", fmt.Sprintf("/admin/v1/activities/%d", sale), "", adm, plain},
		{"the admin's list", "GET", "/admin/v1/activities", "", adm, plain},
		{"the public view", "GET", fmt.Sprintf("/v1/activities/%d", gb), "", nil, plain},
	}
	time.Sleep(1100 * time.Millisecond)
	mdb.Pause()
	check("MySQL frozen", []string{"MySQL did not answer within REQUEST_TIMEOUT (1s)"}, onMySQL)
	mdb.Resume()
	mdb.Stop()
	check("MySQL stopped", stopped("MySQL"), onMySQL)
}
