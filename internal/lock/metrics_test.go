package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flashsale/flashsale/internal/lock"
)

// metric returns a counter's value, or a histogram's sample count, for the
// series with exactly these label values.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return value(m)
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	if h := m.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return m.GetCounter().GetValue()
}

func TestMetrics_moveAsLocksAreUsed(t *testing.T) {
	_, rdb, _ := setup(t)
	reg := prometheus.NewRegistry()
	// A long handoff window: a hold hands over to the local waiters
	// however slow the machine (the default 5 ms from a hold's start was
	// over before a loaded CI machine's release: 0 handoffs, twice).
	c := newClient(t, rdb, lock.Config{Metrics: lock.NewMetrics(reg), HandoffWindow: time.Minute})
	ctx := context.Background()
	fam := lock.WithFamily("orders")
	series := map[string]string{"kind": "mutex", "family": "orders"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range series {
			m[a] = b
		}
		return m
	}

	l, err := c.Obtain(ctx, "k", 300*time.Millisecond, fam)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryObtain(ctx, "k", time.Second, fam); err == nil {
		t.Fatal("obtained a held lock")
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	c.Obtain(cctx, "k", time.Second, fam)
	cancel()
	time.Sleep(250 * time.Millisecond) // two renewals at ttl/3
	l.Release(ctx)

	checks := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"flashsale_lock_wait_seconds", with("outcome", "obtained"), 1},
		{"flashsale_lock_wait_seconds", with("outcome", "not_obtained"), 1},
		{"flashsale_lock_wait_seconds", with("outcome", "canceled"), 1},
		// Only TryObtain found it held in Redis: the canceled Obtain waited in
		// this process's queue behind the holder and never asked Redis.
		{"flashsale_lock_contended_total", series, 1},
		{"flashsale_lock_renewals_total", series, 1},
		{"flashsale_lock_hold_seconds", series, 1},
	}
	for _, ch := range checks {
		if got := metric(t, reg, ch.name, ch.labels); got < ch.min {
			t.Errorf("%s%v = %v, want at least %v", ch.name, ch.labels, got, ch.min)
		}
	}
	if got := metric(t, reg, "flashsale_lock_contended_total", series); got != 1 {
		t.Errorf("contended %v, want exactly 1", got)
	}

	// Lost: the key vanishes; the next renewal fails and the lock is lost.
	l2, err := c.TryObtain(ctx, "k2", 300*time.Millisecond, fam)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "fs:lock:{k2}")
	<-l2.Lost()
	if metric(t, reg, "flashsale_lock_lost_total", series) != 1 ||
		metric(t, reg, "flashsale_lock_renewal_failures_total", series) != 1 {
		t.Errorf("lost %v, renewal failures %v; want 1 and 1",
			metric(t, reg, "flashsale_lock_lost_total", series), metric(t, reg, "flashsale_lock_renewal_failures_total", series))
	}

	// Local handoff: one holder, two queued waiters of the same client.
	h, _ := c.Obtain(ctx, "k3", time.Second, fam)
	w1 := obtainAsync(t, c, "k3", time.Second, fam)
	w2 := obtainAsync(t, c, "k3", time.Second, fam)
	// Both must be queued behind h before it lets go: on a loaded machine
	// obtainAsync's sleep is not always enough (CI saw 0 handoffs once).
	for deadline := time.Now().Add(5 * time.Second); lock.LocalQueued(c) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters queued, want 2", lock.LocalQueued(c))
		}
	}
	h.Release(ctx)
	recv(t, w1).Release(ctx)
	recv(t, w2).Release(ctx)
	if got := metric(t, reg, "flashsale_lock_local_handoffs_total", series); got < 1 {
		t.Errorf("local handoffs %v, want at least 1", got)
	}
	if got := metric(t, reg, "flashsale_lock_wait_seconds", map[string]string{"family": "default"}); got != 0 {
		t.Errorf("a default-family series appeared: %v", got)
	}
}
