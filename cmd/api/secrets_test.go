package main

import (
	"context"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
	"github.com/flashsale/flashsale/migrations"
)

// `api encrypt-webhook-secrets` seals a secret stored before
// WEBHOOK_SECRET_KEY was set: the column no longer holds it, and the key
// reads it back; without the key the command refuses to run.
func TestAPI_encryptWebhookSecretsCommand_sealsPlaintextSecrets(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	dsn := testenv.MySQL(t)
	db, err := connect.MySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	ctx := context.Background()
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	plain := mysqlstore.NewWebhooks(db)
	t.Cleanup(plain.Close)
	e := webhook.Endpoint{URL: "http://127.0.0.1:9/", Events: []string{"*"}, Enabled: true, Secret: webhook.NewSecret()}
	if err := plain.CreateEndpoint(ctx, &e); err != nil {
		t.Fatal(err)
	}
	const key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // 32 bytes
	run := func(env ...string) (string, error) {
		child := testenv.StartChild(t, "TestAPI_encryptWebhookSecretsCommand_sealsPlaintextSecrets", "api",
			append([]string{"MYSQL_DSN=" + dsn, "API_ARGS=encrypt-webhook-secrets"}, env...)...)
		err := child.Wait()
		return child.Output(), err
	}
	if out, err := run(); err == nil {
		t.Fatalf("without WEBHOOK_SECRET_KEY it ran:\n%s", out)
	}
	out, err := run("WEBHOOK_SECRET_KEY=" + key)
	if err != nil || !strings.Contains(out, "sealed 1 endpoints") {
		t.Fatalf("encrypt-webhook-secrets: %v\n%s", err, out)
	}
	var col string
	if err := db.Raw("SELECT secret FROM webhook_endpoints WHERE id = ?", e.ID).Row().Scan(&col); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(col, "enc1:") || strings.Contains(col, strings.TrimPrefix(e.Secret, "whsec_")) {
		t.Fatalf("stored %q after the command", col)
	}
	k, _ := mysqlstore.ParseSecretKey(key)
	keyed, _ := mysqlstore.NewWebhooksWithKeys(db, mysqlstore.SecretKeys{Current: k})
	t.Cleanup(keyed.Close)
	if got, err := keyed.Endpoint(ctx, e.ID); err != nil || got.Secret != e.Secret {
		t.Fatalf("read with the key: %+v %v", got, err)
	}
}
