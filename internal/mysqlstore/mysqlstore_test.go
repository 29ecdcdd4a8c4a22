package mysqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// migrated returns a gorm handle on a fresh, fully migrated database.
func migrated(t *testing.T) *gorm.DB {
	t.Helper()
	return migratedAt(t, testenv.MySQL(t))
}

// migratedAt is a gorm handle on the database at dsn, migrated.
func migratedAt(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := connect.MySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	return db
}

// Every model column exists in the migrated schema with a compatible type
// and the same nullability.
func TestModels_agreeWithMigrations(t *testing.T) {
	db := migrated(t)
	for _, model := range mysqlstore.Models() {
		s, err := schema.Parse(model, &sync.Map{}, db.NamingStrategy)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := db.Migrator().ColumnTypes(model)
		if err != nil {
			t.Fatalf("%s: %v", s.Table, err)
		}
		byName := map[string]gorm.ColumnType{}
		for _, c := range cols {
			byName[c.Name()] = c
		}
		for _, f := range s.Fields {
			if f.DBName == "" {
				continue
			}
			c, ok := byName[f.DBName]
			if !ok {
				t.Errorf("%s.%s: model column missing from the schema", s.Table, f.DBName)
				continue
			}
			dbType := strings.ToUpper(c.DatabaseTypeName())
			if !compatible(f.FieldType, dbType) {
				t.Errorf("%s.%s: Go %v vs column %s", s.Table, f.DBName, f.FieldType, dbType)
			}
			nullable, _ := c.Nullable()
			if pointer := f.FieldType.Kind() == reflect.Pointer; pointer != nullable {
				t.Errorf("%s.%s: Go %v (nullable %v) vs column NULL %v", s.Table, f.DBName, f.FieldType, pointer, nullable)
			}
		}
	}
}

func compatible(goType reflect.Type, dbType string) bool {
	if goType.Kind() == reflect.Pointer {
		goType = goType.Elem()
	}
	if goType == reflect.TypeFor[time.Time]() {
		return dbType == "DATETIME" || dbType == "TIMESTAMP"
	}
	switch goType.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return strings.Contains(dbType, "INT")
	case reflect.Uint64, reflect.Uint:
		return strings.Contains(dbType, "INT") // with UNSIGNED in the DDL
	case reflect.String:
		return dbType == "VARCHAR" || dbType == "CHAR" || strings.Contains(dbType, "TEXT") || dbType == "VARBINARY"
	case reflect.Bool:
		return dbType == "TINYINT" || dbType == "BOOL" || dbType == "BOOLEAN"
	}
	return false
}

func sample() activity.Activity {
	start := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	return activity.Activity{
		Type: activity.GroupBuy, Name: "团购 Phone", SKU: "PH-1", PriceCents: 99900, TotalStock: 100, PerUserLimit: 2,
		StartsAt: start, EndsAt: start.Add(time.Hour), PaymentTTL: 15 * time.Minute,
		GroupSize: 5, GroupTTL: 30 * time.Minute, Status: activity.Draft,
	}
}

func TestActivities_createGetListUpdate(t *testing.T) {
	s := mysqlstore.NewActivities(migrated(t))
	ctx := context.Background()
	a := sample()
	if err := s.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, a)
	}
	if _, err := s.Get(ctx, a.ID+1000); !errors.Is(err, activity.ErrNotFound) {
		t.Fatalf("missing id: %v", err)
	}

	for range 3 {
		b := sample()
		b.Type, b.GroupSize, b.GroupTTL = activity.Seckill, 0, 0
		if err := s.Create(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	page, total, err := s.List(ctx, "", 1, 3)
	if err != nil || total != 4 || len(page) != 3 || page[0].ID < page[1].ID {
		t.Fatalf("page 1: %d of %d, %v", len(page), total, err)
	}
	if page[0].Type != activity.Seckill || page[0].GroupSize != 0 {
		t.Fatalf("seckill read back with group fields: %+v", page[0])
	}

	name := "Renamed"
	upd, err := s.Update(ctx, a.ID, func(x *activity.Activity) error { return x.Apply(activity.Patch{Name: &name}) })
	if err != nil || upd.Name != name {
		t.Fatalf("update: %+v, %v", upd, err)
	}
	bad := 0
	_, err = s.Update(ctx, a.ID, func(x *activity.Activity) error { return x.Apply(activity.Patch{TotalStock: &bad}) })
	if !errors.Is(err, activity.ErrInvalid) {
		t.Fatalf("invalid update: %v", err)
	}
	if got, _ := s.Get(ctx, a.ID); got.TotalStock != 100 || got.Name != name {
		t.Fatalf("a failed update changed the row: %+v", got)
	}
}

// The reconciler scans an activity until a day after its orders' last
// possible change: a group buy's refunds come a group time limit after the
// sale ends, a flash sale's last timeouts a payment time after.
func TestActivities_liveIDs_untilADayAfterTheLastChange(t *testing.T) {
	s := mysqlstore.NewActivities(migrated(t))
	ctx := context.Background()
	now := time.Now().UTC()
	want := map[int64]bool{}
	for _, c := range []struct {
		name   string
		status activity.Status
		ended  time.Duration // ago
		group  time.Duration // group time limit; 0 for a flash sale
		live   bool
	}{
		{"running flash sale", activity.Published, -time.Hour, 0, true},
		{"flash sale ended 12 h ago", activity.Published, 12 * time.Hour, 0, true},
		{"flash sale ended 2 days ago", activity.Published, 48 * time.Hour, 0, false},
		{"closed flash sale ended 12 h ago", activity.Closed, 12 * time.Hour, 0, true},
		{"draft", activity.Draft, -time.Hour, 0, false},
		{"group buy ended 2 days ago, groups of 7 days", activity.Published, 48 * time.Hour, 7 * 24 * time.Hour, true},
		{"group buy ended 9 days ago, groups of 7 days", activity.Published, 9 * 24 * time.Hour, 7 * 24 * time.Hour, false},
		{"group buy ended 2 days ago, groups of 30 min", activity.Published, 48 * time.Hour, 30 * time.Minute, false},
	} {
		a := sample()
		a.Status, a.PaymentTTL = c.status, 15*time.Minute
		a.EndsAt = now.Add(-c.ended)
		a.StartsAt = a.EndsAt.Add(-time.Hour)
		a.Type, a.GroupSize, a.GroupTTL = activity.GroupBuy, 5, c.group
		if c.group == 0 {
			a.Type, a.GroupSize = activity.Seckill, 0
		}
		if err := s.Create(ctx, &a); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want[a.ID] = c.live
		t.Logf("%d: %s", a.ID, c.name)
	}
	ids, err := s.LiveIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, id := range ids {
		got[id] = true
	}
	for id, live := range want {
		if got[id] != live {
			t.Errorf("activity %d: live %v, want %v", id, got[id], live)
		}
	}
}

// Group sync tasks may run out of order: the row's status only moves forward
// and its paid count only up, whatever order the pictures arrive in.
func TestOrders_writeGroup_neverGoesBack(t *testing.T) {
	db := migrated(t)
	s := mysqlstore.NewOrders(db)
	t.Cleanup(s.Close)
	ctx := context.Background()
	g := order.Group{ID: "7-06GZZPMPBT54SVAZ", ActivityID: 7, Status: order.Forming, Size: 3, LeaderID: 1,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
	row := func() (status string, paid int) {
		t.Helper()
		if err := db.Raw("SELECT status, paid FROM `groups` WHERE group_id = ?", g.ID).Row().Scan(&status, &paid); err != nil {
			t.Fatal(err)
		}
		return status, paid
	}
	for _, step := range []struct {
		status     order.GroupStatus
		paid       int
		wantStatus string
		wantPaid   int
	}{
		{order.Forming, 2, "forming", 2},
		{order.Forming, 1, "forming", 2},  // an older picture, late
		{order.Failed, 2, "failed", 2},    // settled
		{order.Forming, 3, "failed", 2},   // nothing undoes a settlement
		{order.Succeeded, 3, "failed", 2}, // nor replaces it
	} {
		g.Status, g.Paid = step.status, step.paid
		if err := s.WriteGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		if st, paid := row(); st != step.wantStatus || paid != step.wantPaid {
			t.Fatalf("after writing %s/%d: %s/%d, want %s/%d", step.status, step.paid, st, paid, step.wantStatus, step.wantPaid)
		}
	}
}

// PendingBefore lists one activity's orders still pending payment and older
// than the bound, oldest first, up to the limit; paid and cancelled ones,
// younger ones and other activities' are not its business.
func TestOrders_pendingBefore_oldestPendingOfTheActivity(t *testing.T) {
	db := migrated(t)
	s := mysqlstore.NewOrders(db)
	t.Cleanup(s.Close)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	write := func(activity int64, status order.Status, age time.Duration) string {
		t.Helper()
		o := order.Order{No: order.NewNo(activity), ActivityID: activity, UserID: 1, Quantity: 1, PriceCents: 100, AmountCents: 100,
			Status: status, Fence: 1, CreatedAt: now.Add(-age)}
		if status == order.Cancelled {
			o.CancelledAt = now
		}
		if err := s.Write(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o.No
	}
	oldest := write(5, order.PendingPayment, 3*time.Minute)
	older := write(5, order.PendingPayment, 2*time.Minute)
	write(5, order.PendingPayment, time.Minute) // the third oldest: past the limit of 2
	write(5, order.PendingPayment, time.Second) // younger than the bound
	write(5, order.Paid, 4*time.Minute)
	write(5, order.Cancelled, 4*time.Minute)
	write(6, order.PendingPayment, 4*time.Minute) // another sale's

	got, err := s.PendingBefore(ctx, 5, now.Add(-30*time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != oldest || got[1] != older {
		t.Fatalf("PendingBefore: %v, want [%s %s]", got, oldest, older)
	}
	if got, err := s.PendingBefore(ctx, 5, now.Add(-30*time.Second), 10); err != nil || len(got) != 3 {
		t.Fatalf("with room for 10: %v, %v; want the 3 pending orders older than 30 s", got, err)
	}
}
