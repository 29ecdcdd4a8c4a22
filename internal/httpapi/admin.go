package httpapi

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/presence"
)

// registerAdmin serves /admin/v1 to requests with the token (adminauth.go:
// with no token configured every request is refused), and returns its
// group for the routes of other services.
func registerAdmin(r *gin.Engine, deadline gin.HandlerFunc, svc *admin.Service, token string, limit AdminLimit, gate *Gate, p *presence.Tracker, locks lock.Inspector, pay *payment.Service) *gin.RouterGroup {
	h := adminHandlers{svc: svc, presenceOf: p, locks: locks, pay: pay}
	g := r.Group("/admin/v1", deadline, newAdminGuard(token, limit).middleware, gate.middleware())
	g.POST("/activities", h.create)
	g.GET("/activities", h.list)
	g.GET("/activities/:id", h.get)
	g.PATCH("/activities/:id", h.update)
	g.POST("/activities/:id/publish", h.publish)
	g.POST("/activities/:id/close", h.close)
	g.POST("/activities/:id/pause", h.pause)
	g.POST("/activities/:id/resume", h.resume)
	g.POST("/activities/:id/stock", h.restock)
	g.GET("/activities/:id/series", h.series)
	g.GET("/presence", h.presence)
	g.GET("/locks/:name", h.lockHolder)
	if pay != nil {
		g.GET("/orders/:order_no", h.order)
		g.GET("/activities/:id/payments", h.reconcilePayments)
	}
	return g
}

type adminHandlers struct {
	svc        *admin.Service
	presenceOf *presence.Tracker // nil: presence is not tracked
	locks      lock.Inspector    // nil: locks are not inspected
	pay        *payment.Service  // nil: no payment views
}

// activityJSON is an activity on the wire.
type activityJSON struct {
	ID                int64      `json:"id"`
	Type              string     `json:"type"`
	Name              string     `json:"name"`
	SKU               string     `json:"sku"`
	PriceCents        int64      `json:"price_cents"`
	TotalStock        int        `json:"total_stock"`
	PerUserLimit      int        `json:"per_user_limit"`
	StartsAt          time.Time  `json:"starts_at"`
	EndsAt            time.Time  `json:"ends_at"`
	PaymentTTLSeconds int        `json:"payment_ttl_seconds"`
	GroupSize         *int       `json:"group_size,omitempty"`
	GroupTTLSeconds   *int       `json:"group_ttl_seconds,omitempty"`
	Shards            int        `json:"shards"`
	Items             []itemJSON `json:"items"`
	Status            string     `json:"status"`
	Paused            bool       `json:"paused"`
	roomJSON
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// itemJSON is one of an activity's items on the wire; in a request, its
// per_user_limit may be left out (the sale's limit alone).
type itemJSON struct {
	SKU          string `json:"sku"`
	Label        string `json:"label"`
	PriceCents   int64  `json:"price_cents"`
	Stock        int    `json:"stock"`
	PerUserLimit int    `json:"per_user_limit,omitempty"`
}

func itemsJSON(items []activity.Item) []itemJSON {
	out := make([]itemJSON, len(items))
	for i, it := range items {
		out[i] = itemJSON{SKU: it.SKU, Label: it.Label, PriceCents: it.PriceCents, Stock: it.Stock, PerUserLimit: it.PerUserLimit}
	}
	return out
}

// items is the request's items (nil when it sent none: the flat form).
func itemsOf(in []itemJSON) []activity.Item {
	if in == nil {
		return nil
	}
	out := make([]activity.Item, len(in))
	for i, it := range in {
		out[i] = activity.Item{SKU: it.SKU, Label: it.Label, PriceCents: it.PriceCents, Stock: it.Stock, PerUserLimit: it.PerUserLimit}
	}
	return out
}

func toJSON(a activity.Activity) activityJSON {
	j := activityJSON{
		ID: a.ID, Type: string(a.Type), Name: a.Name, SKU: a.SKU, PriceCents: a.PriceCents,
		TotalStock: a.TotalStock, PerUserLimit: a.PerUserLimit, StartsAt: a.StartsAt.UTC(), EndsAt: a.EndsAt.UTC(),
		PaymentTTLSeconds: int(a.PaymentTTL / time.Second), Status: string(a.Status), Shards: a.ShardCount(),
		Items: itemsJSON(a.ItemList()), Paused: a.Paused, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(),
		roomJSON: roomOut(a),
	}
	if a.Type == activity.GroupBuy {
		size, ttl := a.GroupSize, int(a.GroupTTL/time.Second)
		j.GroupSize, j.GroupTTLSeconds = &size, &ttl
	}
	return j
}

// createRequest is the body of POST /admin/v1/activities.
type createRequest struct {
	Type              string    `json:"type"`
	Name              string    `json:"name"`
	SKU               string    `json:"sku"`
	PriceCents        int64     `json:"price_cents"`
	TotalStock        int       `json:"total_stock"`
	PerUserLimit      int       `json:"per_user_limit"`
	StartsAt          time.Time `json:"starts_at"`
	EndsAt            time.Time `json:"ends_at"`
	PaymentTTLSeconds int       `json:"payment_ttl_seconds"`
	GroupSize         int       `json:"group_size"`
	GroupTTLSeconds   int       `json:"group_ttl_seconds"`
	Shards            int       `json:"shards"`
	// Items, when sent, are the sale's items; sku, price_cents and
	// total_stock are then left out (or agree: the first item's, the sum).
	Items []itemJSON `json:"items"`
	// The waiting room's (docs/waiting-room.md); admission_ttl_seconds 0
	// or absent: activity.DefaultAdmissionTTL.
	WaitingRoom         bool `json:"waiting_room"`
	AdmitPerSecond      int  `json:"admit_per_second"`
	AdmissionTTLSeconds int  `json:"admission_ttl_seconds"`
	JoinPowBits         int  `json:"join_pow_bits"`
}

// activity is the activity the request describes.
func (req createRequest) activity() activity.Activity {
	return activity.Activity{
		Type: activity.Type(req.Type), Name: req.Name, SKU: req.SKU, PriceCents: req.PriceCents,
		TotalStock: req.TotalStock, PerUserLimit: req.PerUserLimit, StartsAt: req.StartsAt, EndsAt: req.EndsAt,
		PaymentTTL: seconds(req.PaymentTTLSeconds), GroupSize: req.GroupSize, GroupTTL: seconds(req.GroupTTLSeconds),
		Shards: req.Shards, Items: itemsOf(req.Items),
		WaitingRoom: req.WaitingRoom, AdmitPerSecond: req.AdmitPerSecond, AdmissionTTL: seconds(req.AdmissionTTLSeconds),
		JoinPowBits: req.JoinPowBits,
	}
}

// seconds converts a count of seconds from a request, saturating instead
// of overflowing (validation refuses what is out of range either way).
func seconds(n int) time.Duration {
	if n > math.MaxInt64/int(time.Second) || n < math.MinInt64/int(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * time.Second
}

func (h adminHandlers) create(c *gin.Context) {
	var req createRequest
	if err := decodeJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	a, err := h.svc.Create(c.Request.Context(), req.activity())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toJSON(a))
}

// patchRequest is the body of PATCH /admin/v1/activities/{id}: only the
// fields present change.
type patchRequest struct {
	Name              *string    `json:"name"`
	SKU               *string    `json:"sku"`
	PriceCents        *int64     `json:"price_cents"`
	TotalStock        *int       `json:"total_stock"`
	PerUserLimit      *int       `json:"per_user_limit"`
	StartsAt          *time.Time `json:"starts_at"`
	EndsAt            *time.Time `json:"ends_at"`
	PaymentTTLSeconds *int       `json:"payment_ttl_seconds"`
	GroupSize         *int       `json:"group_size"`
	GroupTTLSeconds   *int       `json:"group_ttl_seconds"`
	Shards            *int       `json:"shards"`
	Items             []itemJSON `json:"items"` // a draft's, replaced whole
	// The waiting room's: admit_per_second changes a published sale too.
	WaitingRoom         *bool `json:"waiting_room"`
	AdmitPerSecond      *int  `json:"admit_per_second"`
	AdmissionTTLSeconds *int  `json:"admission_ttl_seconds"`
	JoinPowBits         *int  `json:"join_pow_bits"`
}

func optSeconds(s *int) *time.Duration {
	if s == nil {
		return nil
	}
	d := seconds(*s)
	return &d
}

// patch is the change the request asks for.
func (req patchRequest) patch() activity.Patch {
	return activity.Patch{
		Name: req.Name, SKU: req.SKU, PriceCents: req.PriceCents, TotalStock: req.TotalStock,
		PerUserLimit: req.PerUserLimit, StartsAt: req.StartsAt, EndsAt: req.EndsAt,
		PaymentTTL: optSeconds(req.PaymentTTLSeconds), GroupSize: req.GroupSize, GroupTTL: optSeconds(req.GroupTTLSeconds),
		Shards: req.Shards, Items: optItems(req.Items),
		WaitingRoom: req.WaitingRoom, AdmitPerSecond: req.AdmitPerSecond, AdmissionTTL: optSeconds(req.AdmissionTTLSeconds),
		JoinPowBits: req.JoinPowBits,
	}
}

func optItems(in []itemJSON) *[]activity.Item {
	if in == nil {
		return nil
	}
	items := itemsOf(in)
	return &items
}

func (h adminHandlers) update(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	var req patchRequest
	if err := decodeJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	a, err := h.svc.Update(c.Request.Context(), id, req.patch())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toJSON(a))
}

// summaryJSON is an activity as listed: with the units it has left (null
// for a draft).
type summaryJSON struct {
	activityJSON
	StockRemaining *int64 `json:"stock_remaining"`
}

// detailJSON is an activity with its live figures.
type detailJSON struct {
	activityJSON
	StockRemaining  *int64           `json:"stock_remaining"`
	OrdersAccepted  *int64           `json:"orders_accepted"`
	OrdersPersisted *int64           `json:"orders_persisted"`
	Reconciliation  activity.Report  `json:"reconciliation"`
	Groups          map[string]int64 `json:"groups,omitempty"`
	// PersistenceLagMS is how long the order waiting longest for MySQL has
	// waited, in ms; null for a draft.
	PersistenceLagMS *int64 `json:"persistence_lag_ms"`
	// StockByShard is a sharded sale's stock shard by shard; absent for a
	// sale of one shard.
	StockByShard []shardJSON `json:"stock_by_shard,omitempty"`
	// Items are the sale's items with their live figures (they hide the
	// activity's items, which they extend).
	Items []itemLiveJSON `json:"items"`
	// Queue is the waiting room's figures; absent for a sale without one,
	// and for a draft.
	Queue *queueJSON `json:"queue,omitempty"`
}

// queueJSON is a waiting room's figures (docs/waiting-room.md).
type queueJSON struct {
	Status            string  `json:"status"`
	Joined            int64   `json:"joined"`
	Admitted          int64   `json:"admitted"`
	Waiting           int64   `json:"waiting"`
	AdmittedPerSecond float64 `json:"admitted_per_second"`
	// EstimatedWaitSeconds is the last in line's wait; -1 unknown.
	EstimatedWaitSeconds int64 `json:"estimated_wait_seconds"`
}

func queueFiguresJSON(q *admin.QueueFigures) *queueJSON {
	if q == nil {
		return nil
	}
	wait := int64(-1)
	if q.EstimatedWait >= 0 {
		wait = int64(math.Ceil(q.EstimatedWait.Seconds()))
	}
	return &queueJSON{Status: q.Status, Joined: q.Joined, Admitted: q.Serving, Waiting: q.Waiting,
		AdmittedPerSecond: math.Round(q.AdmittedPerSecond*10) / 10, EstimatedWaitSeconds: wait}
}

// itemLiveJSON is an item with its live figures: units left and sold
// (null for a draft).
type itemLiveJSON struct {
	itemJSON
	StockRemaining *int64 `json:"stock_remaining"`
	Sold           *int64 `json:"sold"`
}

func itemsLiveJSON(items []admin.ItemFigures) []itemLiveJSON {
	out := make([]itemLiveJSON, len(items))
	for i, it := range items {
		out[i] = itemLiveJSON{itemJSON: itemsJSON([]activity.Item{it.Item})[0], StockRemaining: it.Remaining, Sold: it.Sold}
	}
	return out
}

// shardJSON is one shard's figures of a sharded sale.
type shardJSON struct {
	Shard     int   `json:"shard"`
	Allotted  int64 `json:"allotted"`
	Remaining int64 `json:"remaining"`
	Accepted  int64 `json:"orders_accepted"`
}

func (h adminHandlers) get(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	d, err := h.svc.Get(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, detailJSON{
		activityJSON: toJSON(d.Activity), StockRemaining: d.StockRemaining,
		OrdersAccepted: d.OrdersAccepted, OrdersPersisted: d.OrdersPersisted, Reconciliation: d.Reconciliation,
		Groups: d.Groups, PersistenceLagMS: millis(d.PersistenceLag), StockByShard: shardsJSON(d.Shards),
		Items: itemsLiveJSON(d.Items), Queue: queueFiguresJSON(d.Queue),
	})
}

func shardsJSON(shards []activity.ShardLive) []shardJSON {
	var out []shardJSON
	for _, s := range shards {
		out = append(out, shardJSON{Shard: s.Shard, Allotted: s.Total, Remaining: s.Remaining, Accepted: s.Accepted})
	}
	return out
}

func (h adminHandlers) list(c *gin.Context) {
	page, pageSize, err := paging(c)
	if err != nil {
		fail(c, err)
		return
	}
	status := activity.Status(c.Query("status"))
	switch status {
	case "", activity.Draft, activity.Published, activity.Closed:
	default:
		fail(c, paramError("status", "status %q: want draft, published or closed", status))
		return
	}
	items, total, err := h.svc.List(c.Request.Context(), status, page, pageSize)
	if err != nil {
		fail(c, err)
		return
	}
	out := make([]summaryJSON, len(items))
	for i, a := range items {
		out[i] = summaryJSON{activityJSON: toJSON(a.Activity), StockRemaining: a.StockRemaining}
	}
	c.JSON(http.StatusOK, gin.H{"items": out, "page": page, "page_size": pageSize, "total": total})
}

func (h adminHandlers) publish(c *gin.Context) { h.transition(c, h.svc.Publish) }
func (h adminHandlers) close(c *gin.Context)   { h.transition(c, h.svc.Close) }
func (h adminHandlers) pause(c *gin.Context)   { h.transition(c, h.svc.Pause) }
func (h adminHandlers) resume(c *gin.Context)  { h.transition(c, h.svc.Resume) }

// restockRequest is the body of POST /admin/v1/activities/{id}/stock.
type restockRequest struct {
	Item string `json:"item"`
	Add  *int   `json:"add"`
}

// restockJSON is its answer: the activity as the change left it, and the
// change as the stock ledger records it.
type restockJSON struct {
	activityJSON
	Change changeJSON `json:"change"`
}

type changeJSON struct {
	Item       string    `json:"item"`
	Add        int       `json:"add"`
	StockAfter int       `json:"stock_after"`
	Version    int64     `json:"version"`
	At         time.Time `json:"at"`
}

// restock adds units to an item of a published sale, or (add < 0)
// removes unsold ones (admin.Service.Restock).
func (h adminHandlers) restock(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	var req restockRequest
	if err := decodeJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Add == nil {
		fail(c, fieldError("add", "is required: the units to add (negative: unsold units to remove)"))
		return
	}
	a, ch, err := h.svc.Restock(c.Request.Context(), id, req.Item, *req.Add)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, restockJSON{activityJSON: toJSON(a), Change: changeJSON{Item: ch.SKU, Add: ch.Delta,
		StockAfter: ch.StockAfter, Version: ch.Version, At: ch.At.UTC()}})
}

func (h adminHandlers) transition(c *gin.Context, do func(context.Context, int64) (activity.Activity, error)) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	a, err := do(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toJSON(a))
}

func millis(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// lockHolder answers who holds the mutex named in the path ("order:<no>",
// "worker:reconciler"; with ?table=, the per-user lock "<user>" kept in
// that table: order-user:<activity> for a sale of one shard on one Redis
// server, else the shard's tag, act:<activity>[:<shard>:<k>]
// (rediskeys.ShardLockTable)): the holder's short owner id (not enough to
// release it), fence, host, pid, label, when it was taken and the ttl
// left; 404 when nobody holds it.
func (h adminHandlers) lockHolder(c *gin.Context) {
	if h.locks == nil {
		fail(c, httperr.New(httperr.NotFound, "locks are not inspected here"))
		return
	}
	name := c.Param("name")
	var hd lock.Holder
	var err error
	if table := c.Query("table"); table != "" {
		ti, ok := h.locks.(lock.TableInspector)
		if !ok {
			fail(c, httperr.New(httperr.InvalidArgument, "locks in tables are not inspected here"))
			return
		}
		hd, err = ti.HolderIn(c.Request.Context(), table, name)
	} else {
		hd, err = h.locks.Holder(c.Request.Context(), name)
	}
	if err != nil {
		fail(c, err) // lock.ErrNotHeld: 404, ErrInvalid: 400, ErrUnavailable: 503 (errors.go)
		return
	}
	c.JSON(http.StatusOK, gin.H{"name": name, "owner": hd.Owner, "fence": hd.Fence, "host": hd.Host, "pid": hd.PID,
		"label": hd.Label, "acquired_at": hd.AcquiredAt.UTC(), "ttl_ms": hd.TTL.Milliseconds()})
}

// sampleJSON is one of a sale's recent samples on the wire.
type sampleJSON struct {
	T                time.Time `json:"t"`
	OrdersAccepted   int64     `json:"orders_accepted"`
	PersistenceLagMS int64     `json:"persistence_lag_ms"`
}

// series answers a sale's live figures of the last minutes (?minutes=,
// 1–10, default 5), oldest first, as the worker's reconciler kept them
// (admin.Service.Sample): the console draws its charts from them when it
// opens, then from its own polls.
func (h adminHandlers) series(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	minutes := 5
	if v := c.Query("minutes"); v != "" {
		n, err := intParam("minutes", v, 1, int64(admin.SampleWindow/time.Minute))
		if err != nil {
			fail(c, err)
			return
		}
		minutes = int(n)
	}
	samples, err := h.svc.Recent(c.Request.Context(), id, time.Duration(minutes)*time.Minute)
	if err != nil {
		fail(c, err)
		return
	}
	out := make([]sampleJSON, len(samples))
	for i, s := range samples {
		out[i] = sampleJSON{T: s.At.UTC(), OrdersAccepted: s.Accepted, PersistenceLagMS: s.Lag.Milliseconds()}
	}
	c.JSON(http.StatusOK, gin.H{"samples": out})
}
