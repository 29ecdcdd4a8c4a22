package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"
)

// Recorder writes orders and groups into MySQL (mysqlstore.Orders).
type Recorder interface {
	Write(ctx context.Context, o Order) error
	WriteGroup(ctx context.Context, g Group) error
}

// Worker runs the order tasks.
type Worker struct {
	svc   *Service
	store *Redis
	rec   Recorder
	log   *slog.Logger
}

// NewWorker returns the task handlers.
func NewWorker(svc *Service, store *Redis, rec Recorder, log *slog.Logger) *Worker {
	return &Worker{svc: svc, store: store, rec: rec, log: log}
}

// Register adds the handlers to mux.
func (w *Worker) Register(mux *asynq.ServeMux) {
	mux.HandleFunc(TypeSync, w.HandleSync)
	mux.HandleFunc(TypeExpire, w.HandleExpire)
	mux.HandleFunc(TypeSettle, w.HandleSettle)
	mux.HandleFunc(TypeSyncGroup, w.HandleSyncGroup)
}

func payload(t *asynq.Task) (syncPayload, error) {
	var p syncPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.No == "" {
		return p, fmt.Errorf("bad payload %q: %v: %w", t.Payload(), err, asynq.SkipRetry)
	}
	if _, err := ParseNo(p.No); err != nil {
		return p, fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	return p, nil
}

// HandleSync records the order's current state (read from Redis now, so a
// late or repeated task writes the latest) and takes it off the outbox.
func (w *Worker) HandleSync(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	o, err := w.store.Get(ctx, p.No)
	if errors.Is(err, ErrNotFound) {
		// The record expired before it was written: nothing left to write.
		w.log.Error("order record gone before it reached MySQL", "order", p.No)
		return fmt.Errorf("order %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if err := w.rec.Write(ctx, o); err != nil {
		return err // MySQL down, say: retried with backoff
	}
	return w.store.MarkPersisted(ctx, p.No)
}

// HandleExpire cancels the order if it is still unpaid at its deadline.
func (w *Worker) HandleExpire(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	_, err = w.svc.Expire(ctx, p.No)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("order %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	return err // ErrNotDue (the task ran early) and outages are retried
}

// HandleSettle settles the group at its deadline (see Service.Settle).
func (w *Worker) HandleSettle(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	err = w.svc.Settle(ctx, p.No)
	if errors.Is(err, ErrGroupNotFound) {
		return fmt.Errorf("group %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	return err // ErrNotDue (early) and outages are retried
}

// HandleSyncGroup records the group's current state.
func (w *Worker) HandleSyncGroup(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	g, err := w.store.GetGroup(ctx, p.No)
	if errors.Is(err, ErrGroupNotFound) {
		return fmt.Errorf("group %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	return w.rec.WriteGroup(ctx, g)
}
