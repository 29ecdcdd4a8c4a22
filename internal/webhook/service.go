package webhook

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/flashsale/internal/refusal"
)

// Service is what an admin does with endpoints: create, read, change,
// delete, rotate a secret, read the delivery log, and send an event again.
type Service struct {
	endpoints ServiceStore
	attempts  Attempts
	outbox    Outbox
	log       EventLog
	queue     Queue
	cfg       ServiceConfig
}

// ServiceStore is the record of endpoints as the Service reads it: one at a
// time and a page at a time.
type ServiceStore interface {
	Endpoints
	EndpointPages
}

// ServiceConfig tunes the Service; the zero value gives the defaults in the
// comments.
type ServiceConfig struct {
	// Guard checks endpoints' URLs (WEBHOOK_ALLOW_PRIVATE).
	Guard Guard
	// RotationWindow is how long the secret before a rotation still signs
	// (WEBHOOK_ROTATION_WINDOW). Default 24h.
	RotationWindow time.Duration
	// Retention is how far back a recovery may reach (WEBHOOK_RETENTION:
	// older events may be pruned). Default DefaultRetention.
	Retention time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// NewService returns the Service.
func NewService(endpoints ServiceStore, attempts Attempts, outbox interface {
	Outbox
	EventLog
}, queue Queue, cfg ServiceConfig) *Service {
	if cfg.RotationWindow <= 0 {
		cfg.RotationWindow = 24 * time.Hour
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{endpoints: endpoints, attempts: attempts, outbox: outbox, log: outbox, queue: queue, cfg: cfg}
}

// New is a new endpoint as an admin asks for it.
type New struct {
	URL         string
	Events      []string
	Description string
	// Enabled is whether it receives events from now on; nil: true.
	Enabled *bool
}

// Create records a new endpoint with a new secret and returns it, secret
// included: the only answer but a rotation's that shows it.
func (s *Service) Create(ctx context.Context, n New) (Endpoint, error) {
	events, err := checkEvents(n.Events)
	if err != nil {
		return Endpoint{}, err
	}
	if err := checkDescription(n.Description); err != nil {
		return Endpoint{}, err
	}
	if err := s.cfg.Guard.CheckURL(ctx, n.URL); err != nil {
		return Endpoint{}, err
	}
	e := Endpoint{URL: n.URL, Events: events, Description: n.Description, Enabled: n.Enabled == nil || *n.Enabled,
		Secret: NewSecret()}
	if err := s.endpoints.CreateEndpoint(ctx, &e); err != nil {
		return Endpoint{}, err
	}
	return e, nil
}

// List returns page (from 1) of the endpoints, by id, and how many there
// are.
func (s *Service) List(ctx context.Context, page, pageSize int) ([]Endpoint, int64, error) {
	return s.endpoints.EndpointsPage(ctx, page, pageSize)
}

// Get returns endpoint id.
func (s *Service) Get(ctx context.Context, id int64) (Endpoint, error) {
	return s.endpoints.Endpoint(ctx, id)
}

// Patch is a change of an endpoint: only the fields set change.
type Patch struct {
	URL         *string
	Events      []string // nil: unchanged
	Description *string
	// Enabled turns deliveries on or off; enabling an endpoint the worker
	// disabled clears its reason.
	Enabled *bool
}

// Update applies p to endpoint id.
func (s *Service) Update(ctx context.Context, id int64, p Patch) (Endpoint, error) {
	var events []string
	if p.Events != nil {
		var err error
		if events, err = checkEvents(p.Events); err != nil {
			return Endpoint{}, err
		}
	}
	if p.Description != nil {
		if err := checkDescription(*p.Description); err != nil {
			return Endpoint{}, err
		}
	}
	if p.URL != nil {
		if err := s.cfg.Guard.CheckURL(ctx, *p.URL); err != nil {
			return Endpoint{}, err
		}
	}
	return s.endpoints.UpdateEndpoint(ctx, id, func(e *Endpoint) error {
		if p.URL != nil {
			e.URL = *p.URL
		}
		if events != nil {
			e.Events = events
		}
		if p.Description != nil {
			e.Description = *p.Description
		}
		if p.Enabled != nil {
			e.Enabled, e.DisabledReason = *p.Enabled, ""
		}
		return nil
	})
}

// Delete removes endpoint id; its queued deliveries end when they run.
func (s *Service) Delete(ctx context.Context, id int64) error {
	return s.endpoints.DeleteEndpoint(ctx, id)
}

// RotateSecret gives endpoint id a new secret and returns it, the new
// secret shown this once; the one before signs too for RotationWindow.
// Rotating again within the window ends the older secret's at once: only
// the two newest sign.
func (s *Service) RotateSecret(ctx context.Context, id int64) (Endpoint, error) {
	now := s.cfg.Now()
	return s.endpoints.UpdateEndpoint(ctx, id, func(e *Endpoint) error {
		e.PreviousSecret, e.PreviousUntil = e.Secret, now.Add(s.cfg.RotationWindow)
		e.Secret = NewSecret()
		return nil
	})
}

// Deliveries returns page (from 1) of endpoint id's attempts, newest
// first, of one event when eventID is not "", and how many match.
func (s *Service) Deliveries(ctx context.Context, id int64, eventID string, page, pageSize int) ([]Attempt, int64, error) {
	if _, err := s.endpoints.Endpoint(ctx, id); err != nil {
		return nil, 0, err
	}
	return s.attempts.Attempts(ctx, id, eventID, page, pageSize)
}

// Redeliver sends event eventID to endpoint id again, with the same id and
// body: a delivery of its own, with the whole schedule. The endpoint must
// be enabled.
func (s *Service) Redeliver(ctx context.Context, id int64, eventID string) (Delivery, error) {
	ep, err := s.endpoints.Endpoint(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	e, err := s.outbox.Event(ctx, eventID)
	if errors.Is(err, ErrNotFound) {
		return Delivery{}, refusal.New(ErrNotFound, "no event %s: never appended, or older than the retention "+
			"(WEBHOOK_RETENTION, %v) and pruned", eventID, s.cfg.Retention)
	}
	if err != nil {
		return Delivery{}, err
	}
	if !ep.Enabled {
		return Delivery{}, refusal.New(ErrConflict, "the endpoint is disabled: enable it first (PATCH {\"enabled\": true})")
	}
	d := Delivery{EndpointID: ep.ID, EventID: e.ID, Type: e.Type, Body: e.Body, Since: s.cfg.Now(), Manual: true}
	if err := s.queue.Deliver(ctx, []Delivery{d}); err != nil {
		return Delivery{}, err
	}
	return d, nil
}
