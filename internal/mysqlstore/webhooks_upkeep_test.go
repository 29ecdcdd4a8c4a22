package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// The retention's prune deletes the dispatched events and the attempts
// older than its time, a bounded statement at a time, and keeps what is
// recent and every event not yet dispatched, however old (the enabled
// endpoints are still owed it).
func TestWebhooks_prune_oldDispatchedGone_recentAndUndispatchedKept(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	now := time.Now()
	// 10 orders' accepted events: 0-5 old (0-3 dispatched, 4-5 not), 6-9 recent (not yet).
	var ids []string
	for i := range 10 {
		es := orderEvents(fmt.Sprintf("42-P%d", i), order.PendingPayment)
		if err := w.Append(ctx, es...); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, es[0].ID)
	}
	if err := db.Exec("UPDATE webhook_events SET created_at = ? WHERE id IN ?", now.Add(-40*24*time.Hour).UTC(), ids[:6]).Error; err != nil {
		t.Fatal(err)
	}
	dispatch := func(n int) {
		t.Helper()
		es, through, err := w.Undispatched(ctx, n)
		if err != nil || len(es) != n {
			t.Fatalf("dispatch %d: %d read, %v", n, len(es), err)
		}
		if err := w.MarkDispatched(ctx, through); err != nil {
			t.Fatal(err)
		}
	}
	dispatch(4)
	for i := range 6 { // attempts: 0-3 old, 4-5 recent
		at := now.Add(-time.Minute)
		if i < 4 {
			at = now.Add(-31 * 24 * time.Hour)
		}
		w.Record(webhook.Attempt{EndpointID: 1, EventID: ids[i], Type: webhook.OrderAccepted, Number: 1, Status: 200,
			Delivered: true, Last: true, At: at})
	}
	waitTrue(t, "the log written", func() bool { _, n, _ := w.Attempts(ctx, 1, "", 1, 100); return n == 6 })

	before := now.Add(-webhook.DefaultRetention)
	// A batch of 3: the first statement looks at the oldest 3 rows only.
	if n, err := w.PruneEvents(ctx, before, 3); err != nil || n != 3 {
		t.Fatalf("first prune of 3: %d, %v; want 3 (bounded by its batch)", n, err)
	}
	r := webhook.NewRetention(w, 0)
	r.Batch, r.Pause = 2, 0
	events, attempts, err := r.Prune(ctx)
	if err != nil || events != 1 || attempts != 4 {
		t.Fatalf("prune: %d events, %d attempts, %v; want 1 and 4", events, attempts, err)
	}
	for i, id := range ids {
		_, err := w.Event(ctx, id)
		gone := errors.Is(err, webhook.ErrNotFound)
		if want := i < 4; gone != want {
			t.Errorf("event %d (old %v, dispatched %v): gone %v, want %v (%v)", i, i < 6, i < 4, gone, want, err)
		}
	}
	as, n, _ := w.Attempts(ctx, 1, "", 1, 100)
	if n != 2 {
		t.Fatalf("attempts left: %d %+v, want the 2 recent", n, as)
	}
	for _, a := range as {
		if a.EventID != ids[4] && a.EventID != ids[5] {
			t.Errorf("an old attempt kept: %+v", a)
		}
	}
	// Once dispatched, the old ones go too, and the recent ones stay.
	dispatch(6)
	if events, _, _ := r.Prune(ctx); events != 2 {
		t.Fatalf("after dispatching the old ones: %d pruned, want 2", events)
	}
	for i, id := range ids[6:] {
		if _, err := w.Event(ctx, id); err != nil {
			t.Errorf("recent event %d: %v", i+6, err)
		}
	}
	// The dispatcher's old passes go too, but the last: it is the cursor.
	if err := db.Exec("UPDATE webhook_dispatches SET dispatched_at = ?", now.Add(-40*24*time.Hour).UTC()).Error; err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	var passes int64
	db.Raw("SELECT COUNT(*) FROM webhook_dispatches").Scan(&passes)
	if es, _, err := w.Undispatched(ctx, 10); passes != 1 || err != nil || len(es) != 0 {
		t.Fatalf("after pruning the passes: %d left, want 1; %d events undispatched (%v), want none", passes, len(es), err)
	}
}

// The recovery reads the events appended since a time, a page at a time
// by a cursor, and none before.
func TestWebhooks_eventsSince_pagesFromTheTime(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		es := orderEvents(fmt.Sprintf("42-S%d", i), order.PendingPayment)
		_ = w.Append(ctx, es...)
		ids = append(ids, es[0].ID)
	}
	since := time.Now().Add(-time.Hour)
	_ = db.Exec("UPDATE webhook_events SET created_at = ? WHERE id IN ?", since.Add(-time.Minute).UTC(), ids[:2]).Error
	var got []string
	var cursor uint64
	for {
		es, next, err := w.EventsSince(ctx, since, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, e.ID)
		}
		if len(es) < 2 {
			break
		}
		cursor = next
	}
	if strings.Join(got, ",") != strings.Join(ids[2:], ",") {
		t.Fatalf("since: %v, want %v", got, ids[2:])
	}
	if es, _, _ := w.EventsSince(ctx, time.Now().Add(time.Hour), 0, 2); len(es) != 0 {
		t.Fatalf("since a time after all: %d events", len(es))
	}
}

// With WEBHOOK_SECRET_KEY the secrets' columns hold no secret: a dump
// without the key cannot sign. A store without the key cannot read them;
// with the key it reads what it wrote, and, during a key rotation, what the
// old key wrote; a secret stored before the key existed is read as it is
// and sealed by ReencryptSecrets (and by any write).
func TestWebhooks_secrets_encryptedAtRest_rotatedKey_plaintextSealed(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	key := func(b byte) []byte { k := make([]byte, 32); k[0], k[31] = b, b; return k }
	open := func(keys mysqlstore.SecretKeys) *mysqlstore.Webhooks {
		t.Helper()
		w, err := mysqlstore.NewWebhooksWithKeys(db, keys)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		return w
	}
	stored := func(id int64) (secret, previous string) {
		t.Helper()
		row := db.Raw("SELECT secret, previous_secret FROM webhook_endpoints WHERE id = ?", id).Row()
		if err := row.Scan(&secret, &previous); err != nil {
			t.Fatal(err)
		}
		return secret, previous
	}
	plain := open(mysqlstore.SecretKeys{})
	k1 := open(mysqlstore.SecretKeys{Current: key(1)})

	// Written under the key: the column is not the secret, nor holds it.
	e := webhook.Endpoint{URL: "http://127.0.0.1:9/", Events: []string{"*"}, Enabled: true, Secret: webhook.NewSecret()}
	if err := k1.CreateEndpoint(ctx, &e); err != nil {
		t.Fatal(err)
	}
	col, _ := stored(e.ID)
	secretB64 := strings.TrimPrefix(e.Secret, "whsec_")
	if !strings.HasPrefix(col, "enc1:") || strings.Contains(col, secretB64) || strings.Contains(col, "whsec_") {
		t.Fatalf("stored secret %q holds the secret %q", col, e.Secret)
	}
	rotated, err := k1.UpdateEndpoint(ctx, e.ID, func(x *webhook.Endpoint) error {
		x.PreviousSecret, x.PreviousUntil, x.Secret = x.Secret, time.Now().Add(time.Hour), webhook.NewSecret()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if col, prev := stored(e.ID); strings.Contains(col+prev, "whsec_") || strings.Contains(prev, secretB64) {
		t.Fatalf("stored after a rotation: %q %q", col, prev)
	}
	if got, err := k1.Endpoint(ctx, e.ID); err != nil || got.Secret != rotated.Secret || got.PreviousSecret != e.Secret {
		t.Fatalf("read back: %+v %v", got, err)
	}
	// Without the key, or with another, nothing opens: no signing.
	for name, w := range map[string]*mysqlstore.Webhooks{"no key": plain, "another key": open(mysqlstore.SecretKeys{Current: key(2)})} {
		if _, err := w.Endpoint(ctx, e.ID); !errors.Is(err, mysqlstore.ErrSecretKey) || !errors.Is(err, webhook.ErrUnavailable) {
			t.Errorf("%s read an encrypted secret: %v", name, err)
		}
	}
	// A key rotation: the new key current, the old one opens; the command
	// seals every row under the new one, and the old key can go.
	k2old := open(mysqlstore.SecretKeys{Current: key(2), Old: key(1)})
	if got, err := k2old.Endpoint(ctx, e.ID); err != nil || got.Secret != rotated.Secret {
		t.Fatalf("during the key rotation: %+v %v", got, err)
	}
	// A secret stored before any key: read as it is, sealed by the command.
	p := webhook.Endpoint{URL: "http://127.0.0.1:9/", Events: []string{"*"}, Enabled: true, Secret: webhook.NewSecret()}
	if err := plain.CreateEndpoint(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if col, _ := stored(p.ID); col != p.Secret {
		t.Fatalf("without a key the secret is stored as it is: %q", col)
	}
	if got, err := k2old.Endpoint(ctx, p.ID); err != nil || got.Secret != p.Secret {
		t.Fatalf("a plaintext secret read with a key: %+v %v", got, err)
	}
	if n, err := k2old.ReencryptSecrets(ctx); err != nil || n != 2 {
		t.Fatalf("reencrypt: %d %v; want both endpoints", n, err)
	}
	if n, _ := k2old.ReencryptSecrets(ctx); n != 0 {
		t.Fatalf("reencrypt again: %d, want none left", n)
	}
	k2 := open(mysqlstore.SecretKeys{Current: key(2)})
	for _, want := range []webhook.Endpoint{rotated, p} {
		got, err := k2.Endpoint(ctx, want.ID)
		col, _ := stored(want.ID)
		if err != nil || got.Secret != want.Secret || !strings.HasPrefix(col, "enc1:") {
			t.Fatalf("endpoint %d under the new key alone: %+v %v (stored %q)", want.ID, got, err, col)
		}
	}
	if _, err := mysqlstore.NewWebhooksWithKeys(db, mysqlstore.SecretKeys{Old: key(1)}); err == nil {
		t.Fatal("an old key without a current one was taken")
	}
}

func waitTrue(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
