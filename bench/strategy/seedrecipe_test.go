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
// mean anything: 2,000 goroutines race for 100 units across 500 users with
// a limit of 1, under the seed's SETNX lock, our mutex and our fair lock.
func TestLockedReserver_twoThousandBuyers_sellExactlyTheStock(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	st := stock.New(rdb, stock.Config{})
	reservers := map[string]*lockedReserver{
		"seed-setnx-sleep":  newLockedReserver(rdb, seedLock{rdb: rdb, sleep: 10 * time.Millisecond}),
		"global-mutex-lock": newLockedReserver(rdb, withLocker(lc)),
		"global-fair-lock":  newLockedReserver(rdb, withLocker(lc.Fair())),
	}
	id := int64(0)
	for name, r := range reservers {
		id++
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
			for g := range 2000 {
				user := int64(g%500 + 1)
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
