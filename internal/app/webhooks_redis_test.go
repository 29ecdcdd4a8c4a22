package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// With WEBHOOK_REDIS_URL the deliveries' tasks live on a Redis of their
// own: every order's event reaches the endpoint, the sales' Redis holds no
// key of the deliveries' queue, and /readyz names the second Redis among
// the dependencies.
func TestWebhooks_redisOfTheirOwn_deliveriesOffTheSalesRedis(t *testing.T) {
	hooksRedis := testenv.StartRedis(t)
	s := newStackWith(t, "", map[string]string{
		"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_REDIS_URL": hooksRedis.URL(), "WEBHOOK_DISPATCH_INTERVAL": "50ms",
	})
	s.worker()
	var mu sync.Mutex
	got := map[string]bool{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("webhook-id")] = true
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	if ep := s.admin("POST", "/admin/v1/webhook-endpoints", `{"url":"`+rcv.URL+`/hooks","events":["order.accepted"]}`); ep.code != 201 {
		t.Fatalf("create the endpoint: %d %v", ep.code, ep.body)
	}
	sale := s.sale(50, 1, 900)
	for u := int64(1); u <= 20; u++ {
		if r := s.order(u, sale, 1); r.code != 202 {
			t.Fatalf("order: %d %v", r.code, r.body)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint has %d of 20 orders' events after 30 s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	if keys, err := s.rdb().Keys(ctx, "asynq:{webhooks}*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("the sales' Redis holds the deliveries' keys %v (%v)", keys, err)
	}
	if keys, err := hooksRedis.Client(t).Keys(ctx, "asynq:{webhooks}*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("the deliveries' Redis holds none of their keys (%v)", err)
	}
	resp, err := http.Get(s.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(body), "redis_webhooks") {
		t.Errorf("/readyz does not name the deliveries' Redis: %s (%v)", body, err)
	}
}
