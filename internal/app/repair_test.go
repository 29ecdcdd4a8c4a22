package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A close recorded in MySQL whose load into Redis failed (the admin API
// answered 503, "Redis is unavailable; try again", and the admin did not)
// is loaded by the worker's reconciler within a pass or two: orders are
// refused as ended from then on, and the worker counts the repair.
func TestReconciler_closeRecordedButNotLoaded_stopsTheSale(t *testing.T) {
	s := newStack(t, "")
	w := s.worker()
	act := s.sale(1000, 1, 60)
	if r := s.order(1, act, 1); r.code != 202 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	// What a close whose Redis load failed leaves: MySQL closed, at the
	// next version; Redis as it was.
	if _, err := s.db.Exec("UPDATE activities SET status = 'closed', version = version + 1 WHERE id = ?", act); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for user := int64(2); ; user++ {
		r := s.order(user, act, 1)
		if r.code == 409 && r.errCode() == "ENDED" {
			break
		}
		if r.code != 202 && r.code != 503 { // 503: try again (a loaded machine)
			t.Fatalf("order while Redis still sells: %d %v", r.code, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis still sells 15s after the close was recorded")
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := fmt.Sprintf(`flashsale_activity_rules_reloaded_total{activity="%d"} 1`, act)
	if m := scrape(t, "http://"+w.Addr+"/metrics"); !strings.Contains(m, want) {
		t.Fatalf("the worker's /metrics has no %s", want)
	}
}
