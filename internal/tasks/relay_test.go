package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/testenv"
)

// queued reads every task of type typ in the orders queue (pending and
// scheduled): the orders they name, and the latest ProcessAt.
func queued(t *testing.T, insp *asynq.Inspector, typ string) (tasks int, orders []string, last time.Time) {
	tasks, orders, last, _ = queuedDue(t, insp, typ)
	return tasks, orders, last
}

// queuedDue is queued with when each order's task is due.
func queuedDue(t *testing.T, insp *asynq.Inspector, typ string) (tasks int, orders []string, last time.Time, due map[string]time.Time) {
	due = map[string]time.Time{}
	t.Helper()
	var infos []*asynq.TaskInfo
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListScheduledTasks} {
		for page := 1; ; page++ {
			got, err := list(QueueName, asynq.Page(page), asynq.PageSize(100))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				break // nothing sent yet
			}
			if err != nil {
				t.Fatal(err)
			}
			infos = append(infos, got...)
			if len(got) < 100 {
				break
			}
		}
	}
	for _, ti := range infos {
		if ti.Type != typ {
			continue
		}
		tasks++
		var p batchPayload
		if err := json.Unmarshal(ti.Payload, &p); err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Orders {
			orders = append(orders, o.No)
			due[o.No] = ti.NextProcessAt
		}
		if ti.NextProcessAt.After(last) {
			last = ti.NextProcessAt
		}
	}
	sort.Strings(orders)
	return tasks, orders, last, due
}

// distinct counts different order numbers: after an outage a send that
// timed out may have landed anyway and been sent again (at least once;
// the tasks are idempotent).
func distinct(orders []string) int {
	seen := map[string]bool{}
	for _, o := range orders {
		seen[o] = true
	}
	return len(seen)
}

// The relay sends many orders' tasks as few batch tasks, every order once,
// each expiry due at its own pay-by (batches mix sales with different
// payment times); while Redis does not answer
// it keeps them and sends them when it is back (at least once: a send that
// timed out may have landed too); Close sends what is left.
func TestRelay_batchesKeepsThroughAnOutageAndFlushesOnClose(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	r := NewRelay(NewQueue(client), testLog(t))
	ctx := context.Background()

	var want []string
	payBy := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := range 2500 {
		no := fmt.Sprintf("1-%016d", i)
		want = append(want, no)
		_ = r.ExpireThenSync(ctx, no, payBy.Add(time.Duration(i%3)*time.Hour))
	}
	sort.Strings(want)
	waitFor(t, func() bool { _, got, _ := queued(t, insp, TypeSyncBatch); return len(got) == len(want) })
	tasks, got, _ := queued(t, insp, TypeSyncBatch)
	if fmt.Sprint(got) != fmt.Sprint(want) || tasks < 3 || tasks > 100 {
		t.Fatalf("%d sync tasks naming %d orders, want 3 to 100 naming each of %d once", tasks, len(got), len(want))
	}
	tasks, got, last, due := queuedDue(t, insp, TypeExpireBatch)
	if fmt.Sprint(got) != fmt.Sprint(want) || tasks < 3 {
		t.Fatalf("%d expiry tasks naming %d orders", tasks, len(got))
	}
	if !last.Equal(payBy.Add(2 * time.Hour)) {
		t.Fatalf("the last expiry batch is due %v, want the latest pay-by %v", last, payBy.Add(2*time.Hour))
	}
	for i, no := range want {
		if at := due[no]; !at.Equal(payBy.Add(time.Duration(i%3) * time.Hour)) {
			t.Fatalf("order %s's expiry is due %v, want its own pay-by %v", no, at, payBy.Add(time.Duration(i%3)*time.Hour))
		}
	}

	// Redis frozen: the relay keeps what it is given and sends it after.
	srv.Pause()
	_ = r.ExpireThenSync(ctx, "1-9999999999999999", payBy)
	time.Sleep(3 * time.Second) // a send or two time out meanwhile
	srv.Resume()
	waitFor(t, func() bool { _, got, _ := queued(t, insp, TypeSyncBatch); return distinct(got) == len(want)+1 })
	if _, got, _ := queued(t, insp, TypeExpireBatch); distinct(got) != len(want)+1 {
		t.Fatalf("after the outage %d orders have expiries queued, want %d", len(got), len(want)+1)
	}

	// Close sends what is waiting.
	_ = r.Sync(ctx, "1-8888888888888888", 3)
	r.Close()
	if _, got, _ := queued(t, insp, TypeSyncBatch); distinct(got) != len(want)+2 {
		t.Fatalf("after Close %d orders have syncs queued, want %d", len(got), len(want)+2)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("not done after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
