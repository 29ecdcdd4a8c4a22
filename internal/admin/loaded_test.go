package admin_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/stock"
)

// Every admin change that reaches Redis tells Config.Loaded the activity as
// loaded — the api nudges a waiting room's watchers with it — and a change
// whose load failed tells nothing.
func TestLoaded_toldOfEveryChangeLoaded_notOfOneThatFailed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var told []string
	hook := func(_ context.Context, a activity.Activity) {
		mu.Lock()
		defer mu.Unlock()
		state := string(a.Status)
		if a.Paused {
			state = "paused"
		}
		told = append(told, state)
	}
	adm := admin.New(e.acts, e.shop.Stock, e.mysql, e.shop.Store, admin.Config{Loaded: hook})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	down := admin.New(e.acts, stock.New(rdb, stock.Config{}), nil, nil, admin.Config{Loaded: hook})
	name := "renamed"
	steps := []func() error{
		func() error { _, err := adm.Update(ctx, e.sale, activity.Patch{Name: &name}); return err },
		func() error { _, err := adm.Pause(ctx, e.sale); return err },
		func() error { _, err := adm.Resume(ctx, e.sale); return err },
		func() error { _, _, err := adm.Restock(ctx, e.sale, "S", 5); return err },
		func() error { _, _ = down.Pause(ctx, e.sale); return nil }, // recorded, not loaded: untold
		func() error { _, err := adm.Close(ctx, e.sale); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []string{"published", "paused", "published", "published", "closed"} // the failed pause untold
	mu.Lock()
	defer mu.Unlock()
	if len(told) != len(want) {
		t.Fatalf("told %v, want %v", told, want)
	}
	for i := range want {
		if told[i] != want[i] {
			t.Fatalf("told %v, want %v", told, want)
		}
	}
}
