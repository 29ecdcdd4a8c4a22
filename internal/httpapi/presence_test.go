package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/catalog"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

// presenceEnv is POST /v1/presence over a real MySQL (the activities, read
// through the catalog) and a real Redis (the presence sets and the rate
// limit), behind a trusted proxy: X-Forwarded-For is the client's address.
type presenceEnv struct {
	url                 string
	rdb                 *redis.Client
	client              *http.Client
	live, draft, closed int64 // activity ids
}

// newPresenceEnv serves heartbeats with userRPS the per-user limit (a
// device's network's share; 0: off) and ttl the presence ttl.
func newPresenceEnv(t *testing.T, userRPS int, ttl time.Duration) *presenceEnv {
	t.Helper()
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	ctx := context.Background()
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	rdb := testenv.StartRedis(t).Client(t)
	st := stock.New(rdb, stock.Config{})
	acts := mysqlstore.NewActivities(db)
	svc := admin.New(acts, st, nil, nil, admin.Config{})
	create := func(publish, close bool) int64 {
		t.Helper()
		a, err := svc.Create(ctx, activity.Activity{Type: activity.Seckill, Name: "Phone", SKU: "PH-1", PriceCents: 100,
			TotalStock: 10, PerUserLimit: 1, StartsAt: time.Now().Add(time.Hour), EndsAt: time.Now().Add(2 * time.Hour)})
		if err == nil && publish {
			_, err = svc.Publish(ctx, a.ID)
		}
		if err == nil && close {
			_, err = svc.Close(ctx, a.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	e := &presenceEnv{rdb: rdb, client: apitest.Client(t), live: create(true, false), draft: create(false, false), closed: create(true, true)}
	cat := catalog.New(acts, st, catalog.Config{})
	tr := presence.New(rdb, cat, presence.Config{TTL: ttl})
	t.Cleanup(tr.Close)
	limits := redispipe.New(rdb)
	t.Cleanup(limits.Close)
	srv := httptest.NewServer(httpapi.NewRouter(httpapi.Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TrustedProxies: []string{"127.0.0.1"},
		Shop: &httpapi.Shop{Catalog: cat, Presence: tr, Limiter: redisstore.NewLimiter(rdb, limits), UserRPS: userRPS},
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// beat sends an anonymous heartbeat from ip and returns the status and
// the error code, if any.
func (e *presenceEnv) beat(t *testing.T, ip, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/v1/presence", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Error.Code, out.Error.Message
}

func (e *presenceEnv) keys(t *testing.T) []string {
	t.Helper()
	keys, err := e.rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// 1,000 heartbeats from made-up devices naming made-up activities are
// each answered 404 NOT_FOUND naming the activity, and leave Redis as it
// was: not one key (they made 1,001 before). A draft is not found either,
// a closed sale has ENDED; a heartbeat naming the published sale is
// recorded in its watching set.
func TestHeartbeat_madeUpActivities_answer404AndCreateNoKeys(t *testing.T) {
	e := newPresenceEnv(t, 0, 0)
	before := e.keys(t)
	for i := range 1000 {
		act := 5_000_000 + i
		code, errCode, msg := e.beat(t, "203.0.113.7", fmt.Sprintf(`{"device_id":"fake-%d","activity_id":%d}`, i, act))
		if code != 404 || errCode != "NOT_FOUND" || msg != fmt.Sprintf("activity %d not found", act) {
			t.Fatalf("made-up activity %d: %d %s %q; want 404 NOT_FOUND naming it", act, code, errCode, msg)
		}
	}
	if after := e.keys(t); !slices.Equal(before, after) {
		t.Fatalf("1,000 refused heartbeats changed Redis's keys:\nbefore %v\nafter  %v", before, after)
	}
	for act, want := range map[int64]string{e.draft: "NOT_FOUND", e.closed: "ENDED"} {
		if code, errCode, _ := e.beat(t, "203.0.113.7", fmt.Sprintf(`{"device_id":"kiosk-1","activity_id":%d}`, act)); errCode != want {
			t.Errorf("activity %d: %d %s; want %s", act, code, errCode, want)
		}
	}
	if code, errCode, _ := e.beat(t, "203.0.113.7", fmt.Sprintf(`{"device_id":"kiosk-1","activity_id":%d}`, e.live)); code != 200 {
		t.Fatalf("the published sale: %d %s", code, errCode)
	}
	if n := e.rdb.ZCard(context.Background(), rediskeys.For(e.live).Watching).Val(); n != 1 {
		t.Fatalf("the published sale's watching set holds %d, want the one device", n)
	}
}

// Anonymous devices spend their network's share of the per-user limit, so
// one network keeps at most burst + rate × ttl devices online however many
// device ids and addresses it makes up: here 5 + 5 × 1 s, from a flood of
// heartbeats by new devices, each from a new address of one IPv6 /64, for
// 2.5 s. Every accepted heartbeat is one device online, every refused one
// (429) none; another network is not held back by the flood.
func TestHeartbeat_devicesOfOneNetwork_boundedByRateTimesTTL(t *testing.T) {
	const rps, ttl = 5, time.Second
	e := newPresenceEnv(t, rps, ttl)
	var mu sync.Mutex
	accepted, limited, n := 0, 0, 0
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 2500*time.Millisecond {
				mu.Lock()
				n++
				i := n
				mu.Unlock()
				code, errCode, _ := e.beat(t, fmt.Sprintf("2001:db8:7:7::%x", i), fmt.Sprintf(`{"device_id":"made-up-%d","activity_id":%d}`, i, e.live))
				mu.Lock()
				switch {
				case code == 200:
					accepted++
				case code == 429 && errCode == "RATE_LIMITED":
					limited++
				default:
					t.Errorf("heartbeat %d: %d %s", i, code, errCode)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	ctx := context.Background()
	online := e.rdb.ZCard(ctx, rediskeys.PresenceAll).Val()
	watching := e.rdb.ZCard(ctx, rediskeys.For(e.live).Watching).Val()
	t.Logf("%d heartbeats of new devices from one /64 in %v: %d accepted, %d limited; %d devices in the set", n, took.Round(time.Millisecond), accepted, limited, online)
	if max := rps + rps*took.Seconds() + 1; float64(accepted) > max || accepted < rps || limited < n/2 {
		t.Fatalf("%d of %d accepted in %v; want from %d to %.0f (the burst, then %d a second)", accepted, n, took, rps, max, rps)
	}
	if bound := int64(rps + rps*ttl/time.Second + 1); online > bound || watching != online {
		t.Fatalf("%d devices online (%d watching) after the flood; the bound is %d: burst + rate × ttl", online, watching, bound)
	}
	if code, errCode, _ := e.beat(t, "198.51.100.9", `{"device_id":"kiosk-elsewhere"}`); code != 200 {
		t.Fatalf("another network during the flood: %d %s", code, errCode)
	}
}
