package admin

import (
	"context"
	"time"
)

// Sample is a sale's live figures at one instant: what the console's
// charts draw (orders accepted a second, from consecutive samples, and the
// persistence lag).
type Sample struct {
	At       time.Time
	Accepted int64
	Lag      time.Duration
}

// Samples keeps each sale's recent samples (redisstore.Samples): the last
// SampleWindow of them, so a console opened on a running sale draws its
// last minutes at once instead of starting empty.
type Samples interface {
	Add(ctx context.Context, activityID int64, s Sample) error
	Since(ctx context.Context, activityID int64, since time.Time) ([]Sample, error)
}

// SampleWindow is how far back a sale's samples are kept: the console's
// charts' five minutes, and a margin.
const SampleWindow = 10 * time.Minute

// WithSamples has the Service keep samples (Sample) and read them back
// (Recent).
func (s *Service) WithSamples(k Samples) *Service {
	s.samples = k
	return s
}

// Sample reads activity id's live figures (Get) and keeps them as a
// sample; the worker's reconciler does it every pass for each live sale.
// A draft, which has no live figures, keeps none.
func (s *Service) Sample(ctx context.Context, id int64) (Detail, error) {
	d, err := s.Get(ctx, id)
	if err != nil || s.samples == nil || d.OrdersAccepted == nil || d.PersistenceLag == nil {
		return d, err
	}
	return d, s.samples.Add(ctx, id, Sample{At: s.cfg.Now(), Accepted: *d.OrdersAccepted, Lag: *d.PersistenceLag})
}

// Recent returns activity id's samples of the last window (at most
// SampleWindow), oldest first; none when none are kept.
func (s *Service) Recent(ctx context.Context, id int64, window time.Duration) ([]Sample, error) {
	if s.samples == nil {
		return nil, nil
	}
	if _, err := s.repo.Get(ctx, id); err != nil {
		return nil, err // an unknown activity is a 404, not an empty series
	}
	return s.samples.Since(ctx, id, s.cfg.Now().Add(-min(window, SampleWindow)))
}
