package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
)

// countingRecords is an in-memory record store that counts its reads: the
// point of the test is how often MySQL would be asked.
type countingRecords struct {
	m     map[int64]activity.Activity
	reads int
}

func (r *countingRecords) Get(_ context.Context, id int64) (activity.Activity, error) {
	r.reads++
	a, ok := r.m[id]
	if !ok {
		return activity.Activity{}, activity.ErrNotFound
	}
	return a, nil
}

type fixedStock int64

// ItemsLeft says f units left of the sale and of each of its items.
func (f fixedStock) ItemsLeft(_ context.Context, a activity.Activity) (int64, map[string]int64, error) {
	items := map[string]int64{}
	for _, it := range a.ItemList() {
		items[it.SKU] = int64(f)
	}
	return int64(f), items, nil
}

// Within the cache ttl an activity, a draft or an unknown id costs one
// record read however often it is asked for; drafts are not shown.
func TestCatalog_cachesRecordsAndUnknownIDs_hidesDrafts(t *testing.T) {
	recs := &countingRecords{m: map[int64]activity.Activity{
		1: {ID: 1, Status: activity.Published, Name: "phone"},
		2: {ID: 2, Status: activity.Draft},
	}}
	c := New(recs, fixedStock(7), Config{CacheTTL: time.Hour})
	ctx := context.Background()
	for range 5 {
		if v, err := c.Get(ctx, 1); err != nil || v.Name != "phone" || v.StockRemaining != 7 {
			t.Fatalf("published: %+v, %v", v, err)
		}
		if _, err := c.Get(ctx, 2); !errors.Is(err, activity.ErrNotFound) {
			t.Fatalf("draft: %v, want not found", err)
		}
		if _, err := c.Get(ctx, 999); !errors.Is(err, activity.ErrNotFound) {
			t.Fatalf("unknown: %v, want not found", err)
		}
	}
	if recs.reads != 3 {
		t.Fatalf("%d record reads for 3 ids asked 5 times each, want 3", recs.reads)
	}
	c.cfg.CacheTTL = time.Nanosecond // expired: read again
	time.Sleep(time.Millisecond)
	recs.m[999] = activity.Activity{ID: 999, Status: activity.Published}
	if _, err := c.Get(ctx, 999); err != nil || recs.reads != 4 {
		t.Fatalf("after the ttl a new activity is found: %v, %d reads", err, recs.reads)
	}
}

// A flood of made-up ids (anyone can ask for /v1/activities/123456789)
// costs one record read each and is remembered within bounds, but never
// pushes out the real activities: the crowd refreshing a sale keeps being
// answered from memory.
func TestCatalog_floodOfUnknownIDs_keepsRealActivitiesCached(t *testing.T) {
	recs := &countingRecords{m: map[int64]activity.Activity{1: {ID: 1, Status: activity.Published, Name: "phone"}}}
	c := New(recs, fixedStock(7), Config{CacheTTL: time.Hour})
	ctx := context.Background()
	if _, err := c.Get(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const flood = 25_000 // 2.5 times the default bound of either set
	for id := int64(1_000_000); id < 1_000_000+flood; id++ {
		if _, err := c.Get(ctx, id); !errors.Is(err, activity.ErrNotFound) {
			t.Fatalf("made-up id %d: %v, want not found", id, err)
		}
	}
	reads := recs.reads
	if v, err := c.Get(ctx, 1); err != nil || v.Name != "phone" || recs.reads != reads {
		t.Fatalf("after %d made-up ids: %+v, %v, %d more reads; want the activity from memory", flood, v, err, recs.reads-reads)
	}
	// Bounded: the latest made-up id is remembered, the first long gone.
	if _, _ = c.Get(ctx, 1_000_000+flood-1); recs.reads != reads {
		t.Fatalf("the latest made-up id read again")
	}
	if _, _ = c.Get(ctx, 1_000_000); recs.reads != reads+1 {
		t.Fatalf("the first of %d made-up ids still remembered: the set of unknown ids is not bounded", flood)
	}
}

// failingStock is a stock reader that must not be asked.
type failingStock struct{ t *testing.T }

func (f failingStock) ItemsLeft(context.Context, activity.Activity) (int64, map[string]int64, error) {
	f.t.Error("Activity read the live stock (Redis)")
	return 0, nil, errors.New("stock asked")
}

// Activity answers from the record alone (presence asks it for every
// heartbeat naming an activity, and Redis is not needed to know one):
// published and closed activities as they are, drafts and unknown ids not
// found, each record read once within the cache ttl.
func TestCatalog_Activity_readsNoStock_hidesDrafts(t *testing.T) {
	recs := &countingRecords{m: map[int64]activity.Activity{
		1: {ID: 1, Status: activity.Published, Name: "phone"},
		2: {ID: 2, Status: activity.Draft},
		3: {ID: 3, Status: activity.Closed},
	}}
	c := New(recs, failingStock{t}, Config{CacheTTL: time.Hour})
	ctx := context.Background()
	for range 3 {
		if a, err := c.Activity(ctx, 1); err != nil || a.Name != "phone" {
			t.Fatalf("published: %+v, %v", a, err)
		}
		if a, err := c.Activity(ctx, 3); err != nil || a.Status != activity.Closed {
			t.Fatalf("closed: %+v, %v", a, err)
		}
		for _, id := range []int64{2, 999} {
			if _, err := c.Activity(ctx, id); !errors.Is(err, activity.ErrNotFound) {
				t.Fatalf("id %d: %v, want not found", id, err)
			}
		}
	}
	if recs.reads != 4 {
		t.Fatalf("%d record reads for 4 ids asked 3 times each, want 4", recs.reads)
	}
}
