package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The recipe rows of the benchmark must be correct for their figures to
// mean anything: goroutines race for 100 units, four buyers per user with
// a limit of 1, under the seed's SETNX lock, our mutex and our fair lock —
// 2,000 buyers under ours, 500 under the seed's. Every buyer, sold out or
// not, passes through the one global lock, and the seed's waiters poll it
// every 10 ms with no order among them: at 2,000 buyers this package's
// tests took 70-93 s under -race on a loaded 2-core CI machine, nearly all
// of it that row, and the row failed once at its 90 s deadline (requests
// starved, the polling timing out Redis's replies). At 500 it takes about
// 3.5 s, the other two rows 0.6 and 1.6 s at 2,000; 500 buyers still
// contend and still ask for five times the stock.
func TestLockedReserver_manyBuyers_sellExactlyTheStock(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	st := stock.New(rdb, stock.Config{})
	reservers := map[string]struct {
		r      *lockedReserver
		buyers int
	}{
		"seed-setnx-sleep":  {newLockedReserver(rdb, seedLock{rdb: rdb, sleep: 10 * time.Millisecond}), 500},
		"global-mutex-lock": {newLockedReserver(rdb, withLocker(lc)), 2000},
		"global-fair-lock":  {newLockedReserver(rdb, withLocker(lc.Fair())), 2000},
	}
	id := int64(0)
	for name, row := range reservers {
		id++
		r, buyers := row.r, row.buyers
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			a := activity.Activity{ID: id, Type: activity.Seckill, Name: "sale", SKU: "S", PriceCents: 100, TotalStock: 100,
				PerUserLimit: 1, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
				PaymentTTL: time.Minute, Status: activity.Published}
			if _, err := st.Load(ctx, a); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			accepted, byUser, some := 0, map[int64]int{}, ""
			for g := range buyers {
				user := int64(g%(buyers/4) + 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := r.Reserve(ctx, id, user, 1, "o"+strconv.Itoa(g))
					switch {
					case err == nil:
						mu.Lock()
						accepted++
						byUser[user]++
						some = "o" + strconv.Itoa(g)
						mu.Unlock()
					case errors.Is(err, activity.ErrSoldOut), errors.Is(err, activity.ErrLimitExceeded):
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if accepted != 100 {
				t.Fatalf("accepted %d, want exactly 100", accepted)
			}
			for u, n := range byUser {
				if n > 1 {
					t.Fatalf("user %d got %d units, limit 1", u, n)
				}
			}
			v, _ := st.Read(ctx, id)
			held := rdb.HGetAll(ctx, fmt.Sprintf("fs:{act:%d}:users", id)).Val()
			if v.Remaining != 0 || v.Accepted != 100 || len(held) != 100 {
				t.Fatalf("Redis: %+v, %d users holding", v, len(held))
			}
			if _, err := r.Reserve(ctx, id, 9999, 1, some); !errors.Is(err, errDuplicate) {
				t.Fatalf("an order number reserved before: %v", err)
			}
		})
	}
}
