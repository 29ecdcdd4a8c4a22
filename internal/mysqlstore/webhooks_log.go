package mysqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/webhook"
)

// AttemptRow is a row of webhook_attempts, the delivery log.
type AttemptRow struct {
	ID          uint64    `gorm:"column:id;primaryKey;autoIncrement"`
	EndpointID  uint64    `gorm:"column:endpoint_id"`
	EventID     string    `gorm:"column:event_id"`
	Type        string    `gorm:"column:type"`
	Attempt     int       `gorm:"column:attempt"`
	HTTPStatus  int       `gorm:"column:http_status"`
	LatencyUS   int64     `gorm:"column:latency_us"`
	Reason      string    `gorm:"column:reason"`
	Delivered   bool      `gorm:"column:delivered"`
	IsLast      bool      `gorm:"column:is_last"`
	Manual      bool      `gorm:"column:manual"`
	AttemptedAt time.Time `gorm:"column:attempted_at"`
}

// TableName is the table's name.
func (AttemptRow) TableName() string { return "webhook_attempts" }

func (r AttemptRow) attempt() webhook.Attempt {
	return webhook.Attempt{ID: int64(r.ID), EndpointID: int64(r.EndpointID), EventID: r.EventID, Type: webhook.Type(r.Type),
		Number: r.Attempt, Status: r.HTTPStatus, Latency: time.Duration(r.LatencyUS) * time.Microsecond, Error: r.Reason,
		At: r.AttemptedAt.UTC(), Delivered: r.Delivered, Last: r.IsLast, Manual: r.Manual}
}

// Record keeps a in the delivery log, written with others in one insert
// in the background (the one batching loop, internal/batch): a delivery
// does not wait for its log row. A crash loses the rows not yet written,
// not the attempts.
func (w *Webhooks) Record(a webhook.Attempt) { w.log.Add(a) }

// writeAttempts is the log's batch send: one multi-row insert.
func (w *Webhooks) writeAttempts(ctx context.Context, as []webhook.Attempt) ([]webhook.Attempt, error) {
	var q strings.Builder
	q.WriteString("INSERT INTO webhook_attempts (endpoint_id, event_id, type, attempt, http_status, latency_us, reason, " +
		"delivered, is_last, manual, attempted_at) VALUES ")
	args := make([]any, 0, 11*len(as))
	for i, a := range as {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, a.EndpointID, a.EventID, string(a.Type), a.Number, a.Status, a.Latency.Microseconds(),
			a.Error, a.Delivered, a.Last, a.Manual, a.At.UTC())
	}
	if err := w.db.WithContext(ctx).Exec(q.String(), args...).Error; err != nil {
		return as, webhooksUnavailable("write delivery log", err)
	}
	return nil, nil
}

// Attempts returns page (from 1) of endpoint id's attempts, newest first,
// of event eventID only when it is not "", and how many match.
func (w *Webhooks) Attempts(ctx context.Context, endpointID int64, eventID string, page, pageSize int) ([]webhook.Attempt, int64, error) {
	tx := w.db.WithContext(ctx).Model(&AttemptRow{}).Where("endpoint_id = ?", endpointID)
	if eventID != "" {
		tx = tx.Where("event_id = ?", eventID)
	}
	var total int64
	if err := tx.Count(&total).Error; err != nil {
		return nil, 0, webhooksUnavailable("count attempts", err)
	}
	var rows []AttemptRow
	if err := tx.Order("id DESC").Limit(pageSize).Offset((page - 1) * pageSize).Find(&rows).Error; err != nil {
		return nil, 0, webhooksUnavailable("attempts", err)
	}
	out := make([]webhook.Attempt, len(rows))
	for i, r := range rows {
		out[i] = r.attempt()
	}
	return out, total, nil
}

// DeliveredSince reports whether endpoint id answered a 2xx to any attempt
// at or after since (as far as the log has been written).
func (w *Webhooks) DeliveredSince(ctx context.Context, endpointID int64, since time.Time) (bool, error) {
	var n int64
	err := w.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM (SELECT 1 FROM webhook_attempts "+
		"WHERE endpoint_id = ? AND delivered = 1 AND attempted_at >= ? LIMIT 1) d", endpointID, since.UTC()).Scan(&n).Error
	if err != nil {
		return false, webhooksUnavailable(fmt.Sprintf("deliveries of endpoint %d", endpointID), err)
	}
	return n > 0, nil
}
