// Package mysqlstore keeps the domain's records in MySQL through gorm. Its
// row types mirror the migrations in migrations/; a test proves they agree.
package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/webhook"
)

// ActivityRow is a row of the activities table (migrations/00002).
type ActivityRow struct {
	ID                uint64    `gorm:"column:id;primaryKey;autoIncrement"`
	Type              string    `gorm:"column:type"`
	Name              string    `gorm:"column:name"`
	SKU               string    `gorm:"column:sku"`
	PriceCents        int64     `gorm:"column:price_cents"`
	TotalStock        int       `gorm:"column:total_stock"`
	PerUserLimit      int       `gorm:"column:per_user_limit"`
	StartsAt          time.Time `gorm:"column:starts_at"`
	EndsAt            time.Time `gorm:"column:ends_at"`
	PaymentTTLSeconds int       `gorm:"column:payment_ttl_seconds"`
	GroupSize         *int      `gorm:"column:group_size"`
	GroupTTLSeconds   *int      `gorm:"column:group_ttl_seconds"`
	Shards            int       `gorm:"column:shards"`
	Status            string    `gorm:"column:status"`
	Paused            bool      `gorm:"column:paused"` // migrations/00011
	// The waiting room's (migrations/00014).
	WaitingRoom         bool      `gorm:"column:waiting_room"`
	AdmitPerSecond      int       `gorm:"column:admit_per_second"`
	AdmissionTTLSeconds int       `gorm:"column:admission_ttl_seconds"`
	JoinPowBits         int       `gorm:"column:join_pow_bits"`
	Version             int64     `gorm:"column:version"`
	CreatedAt           time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt           time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName is the table's name.
func (ActivityRow) TableName() string { return "activities" }

func toRow(a *activity.Activity) ActivityRow {
	r := ActivityRow{
		ID: uint64(a.ID), Type: string(a.Type), Name: a.Name, SKU: a.SKU, PriceCents: a.PriceCents,
		TotalStock: a.TotalStock, PerUserLimit: a.PerUserLimit, StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(),
		PaymentTTLSeconds: int(a.PaymentTTL / time.Second), Status: string(a.Status), Version: a.Version, Shards: a.ShardCount(),
		Paused: a.Paused, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(),
		WaitingRoom: a.WaitingRoom, AdmitPerSecond: a.AdmitPerSecond,
		AdmissionTTLSeconds: int(a.AdmissionTTLOrDefault() / time.Second), JoinPowBits: a.JoinPowBits,
	}
	if a.Type == activity.GroupBuy {
		size, ttl := a.GroupSize, int(a.GroupTTL/time.Second)
		r.GroupSize, r.GroupTTLSeconds = &size, &ttl
	}
	return r
}

func (r ActivityRow) toActivity() activity.Activity {
	a := activity.Activity{
		ID: int64(r.ID), Type: activity.Type(r.Type), Name: r.Name, SKU: r.SKU, PriceCents: r.PriceCents,
		TotalStock: r.TotalStock, PerUserLimit: r.PerUserLimit, StartsAt: r.StartsAt.UTC(), EndsAt: r.EndsAt.UTC(),
		PaymentTTL: time.Duration(r.PaymentTTLSeconds) * time.Second, Status: activity.Status(r.Status),
		Version: r.Version, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Shards: r.Shards, Paused: r.Paused,
		WaitingRoom: r.WaitingRoom, AdmitPerSecond: r.AdmitPerSecond, JoinPowBits: r.JoinPowBits,
	}
	if r.WaitingRoom {
		a.AdmissionTTL = time.Duration(r.AdmissionTTLSeconds) * time.Second
	}
	if r.GroupSize != nil {
		a.GroupSize = *r.GroupSize
	}
	if r.GroupTTLSeconds != nil {
		a.GroupTTL = time.Duration(*r.GroupTTLSeconds) * time.Second
	}
	return a
}

// ErrUnavailable wraps a failure of MySQL (unreachable, a timeout, a server
// error): the caller may try again.
var ErrUnavailable = errors.New("mysqlstore: unavailable")

// Activities is the activities repository.
type Activities struct{ db *gorm.DB }

// NewActivities returns the repository over db.
func NewActivities(db *gorm.DB) *Activities { return &Activities{db: db} }

// now is the timestamp the store writes: UTC, to the microsecond the column keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Create inserts a, setting its ID and timestamps.
func (s *Activities) Create(ctx context.Context, a *activity.Activity) error {
	t := now()
	a.CreatedAt, a.UpdatedAt, a.Shards = t, t, a.ShardCount()
	a.StartsAt, a.EndsAt = a.StartsAt.UTC().Truncate(time.Microsecond), a.EndsAt.UTC().Truncate(time.Microsecond)
	a.Normalize()
	a.Items = a.ItemList() // read back, an activity has its items, the flat form's one too
	row := toRow(a)
	row.ID = 0
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		a.ID = int64(row.ID)
		items := itemRows(a)
		return tx.Create(&items).Error
	})
	if err != nil {
		a.ID = 0
		return fmt.Errorf("%w: create activity: %w", ErrUnavailable, err)
	}
	return nil
}

// Get returns activity id, or an error wrapping activity.ErrNotFound.
func (s *Activities) Get(ctx context.Context, id int64) (activity.Activity, error) {
	var row ActivityRow
	err := s.db.WithContext(ctx).Take(&row, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return activity.Activity{}, fmt.Errorf("%w: %d", activity.ErrNotFound, id)
	}
	if err != nil {
		return activity.Activity{}, fmt.Errorf("%w: get activity %d: %w", ErrUnavailable, id, err)
	}
	as := []activity.Activity{row.toActivity()}
	if err := withItems(s.db.WithContext(ctx), as); err != nil {
		return activity.Activity{}, fmt.Errorf("%w: get activity %d's items: %w", ErrUnavailable, id, err)
	}
	return as[0], nil
}

// List returns page (from 1) of pageSize activities with status ("" for
// all), newest first, and how many match in all.
func (s *Activities) List(ctx context.Context, status activity.Status, page, pageSize int) ([]activity.Activity, int64, error) {
	tx := s.db.WithContext(ctx).Model(&ActivityRow{})
	if status != "" {
		tx = tx.Where("status = ?", string(status))
	}
	var total int64
	if err := tx.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("%w: count activities: %w", ErrUnavailable, err)
	}
	var rows []ActivityRow
	err := tx.Order("id DESC").Limit(pageSize).Offset((page - 1) * pageSize).Find(&rows).Error
	if err != nil {
		return nil, 0, fmt.Errorf("%w: list activities: %w", ErrUnavailable, err)
	}
	out := make([]activity.Activity, len(rows))
	for i, r := range rows {
		out[i] = r.toActivity()
	}
	if err := withItems(s.db.WithContext(ctx), out); err != nil {
		return nil, 0, fmt.Errorf("%w: list activities' items: %w", ErrUnavailable, err)
	}
	return out, total, nil
}

// liveMargin keeps an activity live for a day past its last possible
// change, for a worker fleet that was down when the change happened.
const liveMargin = 24 * time.Hour

// LiveIDs returns the activities whose orders may still be accepted or
// change, so that the reconciler scans their outboxes and groups: published
// or closed, and at most liveMargin past their activity.LastChange. (A pay
// or a group's refund can come days after the sale ends; an outbox entry
// of such a change must still be found.)
func (s *Activities) LiveIDs(ctx context.Context) ([]int64, error) {
	now := time.Now().UTC()
	var rows []ActivityRow
	err := s.db.WithContext(ctx).Model(&ActivityRow{}).
		Select("id", "ends_at", "payment_ttl_seconds", "group_ttl_seconds").
		Where("status IN ? AND ends_at > ?", []string{string(activity.Published), string(activity.Closed)},
			now.Add(-(activity.MaxGroupTTL + activity.MaxPaymentTTL + liveMargin))).
		Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("%w: live activities: %w", ErrUnavailable, err)
	}
	var ids []int64
	for _, r := range rows {
		if a := r.toActivity(); a.LastChange().Add(liveMargin).After(now) {
			ids = append(ids, int64(r.ID))
		}
	}
	return ids, nil
}

// Update reads activity id under a row lock, lets fn change it, and writes
// it back with the next version, all in one transaction: a decision fn
// makes from what it read still holds when it is written, and concurrent
// updates get increasing versions in the order they committed. fn's error
// aborts and is returned as is.
func (s *Activities) Update(ctx context.Context, id int64, fn func(*activity.Activity) error) (activity.Activity, error) {
	var out activity.Activity
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		a, err := lockActivity(tx, id)
		if err != nil {
			return err
		}
		prev, before := a, a.Items
		if err := fn(&a); err != nil {
			return err
		}
		a.Normalize()
		a.UpdatedAt = now()
		a.Version++ // under the row lock: each change its own version
		a.EndsAt = a.EndsAt.UTC().Truncate(time.Microsecond)
		a.StartsAt = a.StartsAt.UTC().Truncate(time.Microsecond)
		next := toRow(&a)
		if err := tx.Select("*").Save(&next).Error; err != nil {
			return err
		}
		if len(before) == 0 || !sameItems(before, a.ItemList()) {
			if err := replaceItems(tx, &a); err != nil {
				return err
			}
		}
		if err := activityEvents(tx, prev, a); err != nil {
			return err
		}
		out = a
		return nil
	})
	if err != nil {
		if isDomain(err) {
			return activity.Activity{}, err
		}
		return activity.Activity{}, fmt.Errorf("%w: update activity %d: %w", ErrUnavailable, id, err)
	}
	return out, nil
}

// activityEvents appends the events of an activity's change from before to
// after to the outbox, in the transaction that records the change: the
// close's activity.closed, a pause's activity.paused and a resume's
// activity.resumed (a pause or resume that changes nothing has none), each
// sequenced by the version the change got under the row lock.
func activityEvents(tx *gorm.DB, before, after activity.Activity) error {
	var t webhook.Type
	switch {
	case before.Status != activity.Closed && after.Status == activity.Closed:
		t = webhook.ActivityClosed
	case !before.Paused && after.Paused:
		t = webhook.ActivityPaused
	case before.Paused && !after.Paused:
		t = webhook.ActivityResumed
	default:
		return nil
	}
	return AppendTx(tx, webhook.ActivityEvent(t, after, after.UpdatedAt))
}

// Models lists every row type, for the model-versus-migration test.
func Models() []any {
	return []any{&ActivityRow{}, &OrderRow{}, &GroupRow{}, &ItemRow{}, &LedgerRow{}, &EventRow{}, &EndpointRow{}, &AttemptRow{}}
}
