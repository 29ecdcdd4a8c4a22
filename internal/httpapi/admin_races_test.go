package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// A close racing a publish and two edits of the same sale, through the
// admin API: afterwards the API says closed and an order is refused, in
// every round. (Before versions were carried into Redis, a publish or an
// edit that read the sale before the close and loaded it after put it back
// on sale: 60 rounds of 60 from outside.)
func TestAdmin_closeRacingPublishAndEdits_leavesTheSaleClosed(t *testing.T) {
	e := newAdminEnv(t, token)
	ctx := context.Background()
	const rounds = 40
	for round := range rounds {
		code, created := e.admin(t, "POST", "/admin/v1/activities", validBody())
		if code != 201 {
			t.Fatalf("create: %d %v", code, created)
		}
		path := "/admin/v1/activities/" + jsonNum(int64(created["id"].(float64)))
		if code, p := e.admin(t, "POST", path+"/publish", ""); code != 200 {
			t.Fatalf("publish: %d %v", code, p)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, req := range [][3]string{
			{"POST", path + "/close", ""},
			{"POST", path + "/publish", ""},
			{"PATCH", path, `{"name": "A"}`},
			{"PATCH", path, `{"name": "B"}`},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				e.admin(t, req[0], req[1], req[2]) // 200 or 409, whichever order they land in
			}()
		}
		close(start)
		wg.Wait()
		if _, d := e.admin(t, "GET", path, ""); d["status"] != "closed" {
			t.Fatalf("round %d: the API says %v after the close", round, d["status"])
		}
		id := int64(created["id"].(float64))
		if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: int64(round + 1), Quantity: 1}); !errors.Is(err, activity.ErrEnded) {
			t.Fatalf("round %d: an order on the closed sale: %v, want ENDED", round, err)
		}
	}
}

// Closing again always loads Redis as closed, so a sale that Redis still
// sells although MySQL says closed (a close whose load failed) is mended
// by repeating the close; and no load reopens a closed sale.
func TestAdmin_closeAgain_repairsRedis_andNothingReopensIt(t *testing.T) {
	e := newAdminEnv(t, token)
	ctx := context.Background()
	_, created := e.admin(t, "POST", "/admin/v1/activities", validBody())
	id := int64(created["id"].(float64))
	path := "/admin/v1/activities/" + jsonNum(id)
	e.admin(t, "POST", path+"/publish", "")
	if code, c := e.admin(t, "POST", path+"/close", ""); code != 200 || c["status"] != "closed" {
		t.Fatalf("close: %d %v", code, c)
	}
	meta := rediskeys.For(id).Meta
	e.rdb.HSet(ctx, meta, "status", "published") // as if the close's load had not landed
	if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 1, Quantity: 1}); err != nil {
		t.Fatalf("the broken state sells: %v (the test's premise)", err)
	}
	if code, c := e.admin(t, "POST", path+"/close", ""); code != 200 || c["status"] != "closed" {
		t.Fatalf("closing again: %d %v", code, c)
	}
	if st := e.rdb.HGet(ctx, meta, "status").Val(); st != "closed" {
		t.Fatalf("Redis says %s after closing again", st)
	}
	if code, resp := e.admin(t, "POST", path+"/publish", ""); code != 409 || errCode(resp) != "CONFLICT" {
		t.Fatalf("publishing a closed sale: %d %v", code, resp)
	}
	if code, resp := e.admin(t, "POST", "/admin/v1/activities/"+jsonNum(draft(t, e))+"/close", ""); code != 409 || errCode(resp) != "CONFLICT" {
		t.Fatalf("closing a draft: %d %v", code, resp)
	}
}

func draft(t *testing.T, e *adminEnv) int64 {
	t.Helper()
	_, created := e.admin(t, "POST", "/admin/v1/activities", validBody())
	return int64(created["id"].(float64))
}

// A sale whose live records in Redis have expired (retention after its last
// possible change) cannot be edited or published again: reloading it would
// bring its whole stock back with nobody's purchases counted.
func TestAdmin_longFinishedSale_cannotChange(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	e := newAdminEnv(t, token, admin.Config{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	ctx := context.Background()
	_, created := e.admin(t, "POST", "/admin/v1/activities", validBody())
	id := int64(created["id"].(float64))
	path := "/admin/v1/activities/" + jsonNum(id)
	e.admin(t, "POST", path+"/publish", "")
	if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 1, Quantity: 2}); err != nil {
		t.Fatal(err)
	}
	// Two weeks on, the sale's keys have expired.
	now.Add(int64(15 * 24 * time.Hour))
	e.rdb.FlushAll(ctx)
	later := time.Unix(0, now.Load()).Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for _, req := range [][3]string{
		{"PATCH", path, fmt.Sprintf(`{"ends_at": %q}`, later)},
		{"PATCH", path, `{"name": "again"}`},
		{"POST", path + "/publish", ""},
	} {
		code, resp := e.admin(t, req[0], req[1], req[2])
		msg, _ := resp["error"].(map[string]any)["message"].(string)
		if code != 409 || errCode(resp) != "CONFLICT" || msg == "" {
			t.Fatalf("%s %s on a long-finished sale: %d %v", req[0], req[1], code, resp)
		}
	}
	if n := e.rdb.Exists(ctx, rediskeys.For(id).Meta, rediskeys.For(id).Stock).Val(); n != 0 {
		t.Fatalf("a refused change put %d of the sale's keys back", n)
	}
}
