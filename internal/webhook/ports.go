package webhook

import (
	"context"
	"time"
)

// Delivery is one event to one endpoint: what a delivery task carries.
// The body is the event's, so an attempt reads nothing but its endpoint.
type Delivery struct {
	EndpointID int64
	EventID    string
	Type       Type
	Body       []byte
	// Since is when the delivery began (its dispatch, or the admin's
	// redeliver): the endpoint is disabled when its last attempt fails and
	// the endpoint answered no 2xx since.
	Since time.Time
	// Manual marks an admin's redelivery: a delivery of its own, with the
	// whole schedule, beside any earlier one of the same event.
	Manual bool
	// Recovery marks a delivery queued by an endpoint's recovery
	// (Service.Recover): with the whole schedule, queued once per page of
	// the outbox while it waits.
	Recovery bool
	// Repair marks a delivery queued again by a repair (Repairer): its
	// task was lost with Redis's last writes.
	Repair bool
	// Attempt is the number of the attempt to make next (1, or 0, the
	// first).
	Attempt int
}

// Attempt is one try of a delivery, as the delivery log keeps it.
type Attempt struct {
	ID         int64
	EndpointID int64
	EventID    string
	Type       Type
	Number     int           // 1 the first
	Status     int           // the HTTP status; 0 when none came
	Latency    time.Duration // from sending to the answer's status line
	Error      string        // why it failed; "" when delivered
	At         time.Time
	Delivered  bool // a 2xx came
	// Last says no attempt follows: delivered, the schedule ran out, or
	// the endpoint is disabled.
	Last   bool
	Manual bool
}

// Outbox is the events waiting to be turned into deliveries, in MySQL
// (mysqlstore.Webhooks): appended by the producers in their transactions
// (AppendTx) in commit order, read by the dispatcher after its cursor,
// which it moves past what it queued.
type Outbox interface {
	// Undispatched returns up to limit events not yet dispatched, in the
	// order they were committed, and the outbox's position after the last
	// of them (0 when there are none).
	Undispatched(ctx context.Context, limit int) ([]Event, Position, error)
	// MarkDispatched records that every event up to through is
	// dispatched: the dispatcher's cursor moves there.
	MarkDispatched(ctx context.Context, through Position) error
	// Skip moves the cursor past up to limit events without reading them
	// (no endpoint is owed them) and says how many it passed.
	Skip(ctx context.Context, limit int) (int, error)
	// Event returns the event of id, or an error wrapping ErrNotFound.
	Event(ctx context.Context, id string) (Event, error)
}

// Position is a place in the outbox's commit order (mysqlstore: an
// event's seq). Every event committed before one at a position is below it.
type Position uint64

// Endpoints is the record of endpoints (mysqlstore.Webhooks).
type Endpoints interface {
	// CreateEndpoint inserts e, setting its ID and times.
	CreateEndpoint(ctx context.Context, e *Endpoint) error
	// Endpoints returns every endpoint, by id.
	Endpoints(ctx context.Context) ([]Endpoint, error)
	// Endpoint returns endpoint id, or an error wrapping ErrNotFound.
	Endpoint(ctx context.Context, id int64) (Endpoint, error)
	// UpdateEndpoint reads endpoint id under a lock, lets fn change it and
	// writes it back; fn's error aborts and is returned as is.
	UpdateEndpoint(ctx context.Context, id int64, fn func(*Endpoint) error) (Endpoint, error)
	// DeleteEndpoint removes endpoint id (ErrNotFound when there is none).
	DeleteEndpoint(ctx context.Context, id int64) error
	// DisableFailing disables endpoint id with DisabledFailing if it is
	// enabled, and says whether it did.
	DisableFailing(ctx context.Context, id int64) (bool, error)
}

// EndpointPages is the record of endpoints read a page at a time
// (mysqlstore.Webhooks): the admin's list.
type EndpointPages interface {
	// EndpointsPage returns page (from 1) of the endpoints, by id, and
	// how many there are.
	EndpointsPage(ctx context.Context, page, pageSize int) ([]Endpoint, int64, error)
}

// Attempts is the delivery log (mysqlstore.Webhooks).
type Attempts interface {
	// Record keeps a, written in the background with others: an attempt
	// whose row a crash loses was made all the same.
	Record(a Attempt)
	// Attempts returns page (from 1) of endpoint id's attempts, newest
	// first, of event eventID only if it is not "", and how many match.
	Attempts(ctx context.Context, endpointID int64, eventID string, page, pageSize int) ([]Attempt, int64, error)
	// DeliveredSince reports whether the endpoint answered a 2xx to any
	// attempt at or after since.
	DeliveredSince(ctx context.Context, endpointID int64, since time.Time) (bool, error)
}

// Queue queues deliveries as tasks (tasks.WebhookQueue): durably when it
// returns nil; a delivery of an endpoint and event queued already (and not
// Manual) is not queued twice while its task is kept.
type Queue interface {
	Deliver(ctx context.Context, ds []Delivery) error
}
