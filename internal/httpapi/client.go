package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/stock"
)

// Shop is what the client API needs.
type Shop struct {
	Orders     *order.Service
	Records    OrderRecords   // orders in MySQL (listing, and records gone from Redis)
	Activities ActivityReader // the activity record
	Stock      StockReader    // live stock; also the local sold-out flag
	Tokens     *auth.Tokens
	// Limiter backs the rate limits; nil or a zero rate turns a limit off.
	Limiter *redis_rate.Limiter
	UserRPS int // requests per second per user
	IPRPS   int // requests per second per client IP
}

// OrderRecords reads orders recorded in MySQL.
type OrderRecords interface {
	Get(ctx context.Context, no string) (order.Order, error)
	ListByUser(ctx context.Context, userID int64, page, pageSize int) ([]order.Order, int64, error)
}

// ActivityReader reads activities.
type ActivityReader interface {
	Get(ctx context.Context, id int64) (activity.Activity, error)
}

// StockReader reads live stock.
type StockReader interface {
	Read(ctx context.Context, id int64) (stock.View, error)
	// SoldOut tells, without Redis, whether this process saw the sale sell
	// out in the last second (stock.Store).
	SoldOut(id int64) bool
}

func registerShop(r *gin.Engine, s *Shop) {
	h := &shopHandlers{s: s, cache: newActivityCache(s.Activities, time.Second)}
	v1 := r.Group("/v1", s.soldOutGate, s.limit("ip", s.IPRPS, func(c *gin.Context) string { return c.ClientIP() }))
	v1.GET("/activities/:id", h.activity)
	user := v1.Group("", s.authenticate, s.limit("user", s.UserRPS, func(c *gin.Context) string {
		return strconv.FormatInt(c.GetInt64(userKey), 10)
	}))
	user.POST("/activities/:id/orders", h.place)
	user.GET("/orders", h.list)
	user.GET("/orders/:no", h.get)
	user.POST("/orders/:no/pay", h.pay)
	user.POST("/orders/:no/cancel", h.cancel)
	user.POST("/activities/:id/groups", h.openGroup)
	user.POST("/groups/:gid/join", h.joinGroup)
	user.GET("/groups/:gid", h.group)
	v1.GET("/activities/:id/groups", h.formingGroups)
}

const userKey = "user"

// soldOutGate refuses an order for a sale this process knows is sold out
// before anything else runs — the rate limits (a Redis round trip each) and
// the token check — so the crowd that keeps clicking after a sale costs next
// to nothing. Whether a sale is sold out is public (GET /v1/activities/{id}),
// so telling an unauthenticated caller gives nothing away. A request with an
// Idempotency-Key goes on: it may be the retry of an order that was accepted.
func (s *Shop) soldOutGate(c *gin.Context) {
	if s.Stock != nil && c.Request.Method == http.MethodPost && c.FullPath() == "/v1/activities/:id/orders" &&
		c.GetHeader("Idempotency-Key") == "" {
		if id, err := strconv.ParseInt(c.Param("id"), 10, 64); err == nil && s.Stock.SoldOut(id) {
			httperr.Write(c, orderError(activity.ErrSoldOut))
			return
		}
	}
	c.Next()
}

// authenticate admits a valid "Authorization: Bearer <JWT>" and puts its
// user id in the context.
func (s *Shop) authenticate(c *gin.Context) {
	tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok {
		httperr.Write(c, httperr.New(httperr.Unauthenticated, "a bearer token is required"))
		return
	}
	id, err := s.Tokens.Verify(tok)
	if err != nil {
		httperr.Write(c, httperr.New(httperr.Unauthenticated, "the token is invalid or expired"))
		return
	}
	c.Set(userKey, id)
	c.Next()
}

// limiterWait bounds how long a request waits for the rate limiter's
// answer; past it the request goes on unlimited. Without it a stalled Redis
// held every /v1 request for the client's read timeout (the limiter's
// scripts are batched, one pipeline at a time), reads that need no Redis
// included. Generous, so that a loaded machine (CI with -race) still limits.
const limiterWait = 500 * time.Millisecond

// limit allows rps requests a second (bursts of rps) per key; over it, 429
// RATE_LIMITED with Retry-After. A limiter error or a late answer lets the
// request through: the limit protects the service, it must not take it down
// with Redis.
func (s *Shop) limit(name string, rps int, key func(*gin.Context) string) gin.HandlerFunc {
	if s.Limiter == nil || rps <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	limit := redis_rate.PerSecond(rps)
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), limiterWait)
		res, err := s.Limiter.Allow(ctx, "fs:rl:"+name+":"+key(c), limit)
		cancel()
		if err == nil && res.Allowed == 0 {
			c.Header("Retry-After", strconv.Itoa(int(math.Ceil(res.RetryAfter.Seconds()))))
			httperr.Write(c, httperr.New(httperr.RateLimited, "more than %d requests a second per %s", rps, name))
			return
		}
		c.Next()
	}
}

type shopHandlers struct {
	s     *Shop
	cache *activityCache
}

// activityCache keeps activity records for a moment: the public view is
// what a crowd refreshes before a sale, and MySQL need not answer each time.
type activityCache struct {
	src ActivityReader
	ttl time.Duration
	mu  sync.Mutex
	m   map[int64]cachedActivity
}

type cachedActivity struct {
	a  activity.Activity
	at time.Time
}

func newActivityCache(src ActivityReader, ttl time.Duration) *activityCache {
	return &activityCache{src: src, ttl: ttl, m: map[int64]cachedActivity{}}
}

func (c *activityCache) get(ctx context.Context, id int64) (activity.Activity, error) {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.ttl {
		return e.a, nil
	}
	a, err := c.src.Get(ctx, id)
	if err != nil {
		return activity.Activity{}, err
	}
	c.mu.Lock()
	if len(c.m) > 10_000 {
		clear(c.m)
	}
	c.m[id] = cachedActivity{a: a, at: time.Now()}
	c.mu.Unlock()
	return a, nil
}

func (h *shopHandlers) activity(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		httperr.Write(c, err)
		return
	}
	a, err := h.cache.get(c.Request.Context(), id)
	if err == nil && a.Status == activity.Draft {
		err = activity.ErrNotFound // drafts are not public
	}
	if err != nil {
		httperr.Write(c, apiError(err))
		return
	}
	v, err := h.s.Stock.Read(c.Request.Context(), id)
	if err != nil {
		httperr.Write(c, apiError(err))
		return
	}
	out := gin.H{
		"id": a.ID, "type": a.Type, "name": a.Name, "price_cents": a.PriceCents, "per_user_limit": a.PerUserLimit,
		"starts_at": a.StartsAt.UTC(), "ends_at": a.EndsAt.UTC(), "status": a.Status, "stock_remaining": v.Remaining,
	}
	if a.Type == activity.GroupBuy {
		out["group_size"], out["group_ttl_seconds"] = a.GroupSize, int(a.GroupTTL/time.Second)
	}
	c.JSON(http.StatusOK, out)
}

// orderJSON is an order on the wire.
type orderJSON struct {
	OrderNo     string     `json:"order_no"`
	ActivityID  int64      `json:"activity_id"`
	Quantity    int        `json:"quantity"`
	PriceCents  int64      `json:"price_cents"`
	AmountCents int64      `json:"amount_cents"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	PayBy       *time.Time `json:"pay_by,omitempty"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
	Persisted   bool       `json:"persisted"`
	GroupID     string     `json:"group_id,omitempty"`
}

func orderOut(o order.Order) orderJSON {
	t := func(x time.Time) *time.Time {
		if x.IsZero() {
			return nil
		}
		u := x.UTC()
		return &u
	}
	return orderJSON{
		OrderNo: o.No, ActivityID: o.ActivityID, Quantity: o.Quantity, PriceCents: o.PriceCents,
		AmountCents: o.AmountCents, Status: string(o.Status), CreatedAt: o.CreatedAt.UTC(),
		PayBy: t(o.PayBy), PaidAt: t(o.PaidAt), CancelledAt: t(o.CancelledAt), Persisted: o.Persisted,
		GroupID: o.GroupID,
	}
}

type placeRequest struct {
	Quantity *int `json:"quantity"`
}

// orderRequest reads the activity id from the path and the quantity from
// the body of an order or a new group; on bad input it has answered.
func (h *shopHandlers) orderRequest(c *gin.Context) (order.PlaceRequest, bool) {
	id, err := pathID(c, "id")
	if err != nil {
		httperr.Write(c, err)
		return order.PlaceRequest{}, false
	}
	qty, ok := h.quantity(c)
	return order.PlaceRequest{ActivityID: id, UserID: c.GetInt64(userKey), Quantity: qty}, ok
}

func (h *shopHandlers) place(c *gin.Context) {
	r, ok := h.orderRequest(c)
	if !ok {
		return
	}
	r.IdempotencyKey = c.GetHeader("Idempotency-Key")
	o, err := h.s.Orders.Place(c.Request.Context(), r)
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	c.JSON(http.StatusAccepted, orderOut(o))
}

func (h *shopHandlers) get(c *gin.Context) {
	no, user := c.Param("no"), c.GetInt64(userKey)
	o, err := h.s.Orders.Get(c.Request.Context(), no, user)
	if errors.Is(err, order.ErrNotFound) {
		// Past its retention in Redis, an order is still in MySQL.
		if rec, rerr := h.s.Records.Get(c.Request.Context(), no); rerr == nil && rec.UserID == user {
			o, err = rec, nil
		}
	}
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	c.JSON(http.StatusOK, orderOut(o))
}

func (h *shopHandlers) list(c *gin.Context) {
	page, pageSize, err := paging(c)
	if err != nil {
		httperr.Write(c, err)
		return
	}
	items, total, err := h.s.Records.ListByUser(c.Request.Context(), c.GetInt64(userKey), page, pageSize)
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	out := make([]orderJSON, len(items))
	for i, o := range items {
		out[i] = orderOut(o)
	}
	c.JSON(http.StatusOK, gin.H{"items": out, "page": page, "page_size": pageSize, "total": total})
}

func (h *shopHandlers) pay(c *gin.Context)    { h.transition(c, h.s.Orders.Pay) }
func (h *shopHandlers) cancel(c *gin.Context) { h.transition(c, h.s.Orders.Cancel) }

func (h *shopHandlers) transition(c *gin.Context, do func(context.Context, string, int64) (order.Order, error)) {
	o, err := do(c.Request.Context(), c.Param("no"), c.GetInt64(userKey))
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	c.JSON(http.StatusOK, orderOut(o))
}

// orderError translates the order path's errors.
func orderError(err error) error {
	switch {
	case errors.Is(err, order.ErrGroupFull):
		return httperr.New(httperr.GroupFull, "the group is full")
	case errors.Is(err, order.ErrGroupClosed):
		return httperr.New(httperr.GroupClosed, "the group is closed: it succeeded, failed, or its deadline passed")
	case errors.Is(err, order.ErrAlreadyMember):
		return httperr.New(httperr.AlreadyMember, "you are in this group already")
	case errors.Is(err, order.ErrGroupNotFound):
		return httperr.New(httperr.NotFound, "no such group")
	case errors.Is(err, order.ErrWrongType):
		return httperr.New(httperr.Conflict, "%s", strings.TrimPrefix(err.Error(), "order: not this kind of activity: "))
	case errors.Is(err, order.ErrNotFound), errors.Is(err, activity.ErrNotOnSale):
		return httperr.New(httperr.NotFound, "not found")
	case errors.Is(err, order.ErrInvalid):
		return httperr.New(httperr.InvalidArgument, "%s", strings.TrimPrefix(err.Error(), "order: invalid request: "))
	case errors.Is(err, order.ErrConflict):
		return httperr.New(httperr.Conflict, "%s", strings.TrimPrefix(err.Error(), "order: conflict: "))
	case errors.Is(err, order.ErrBusy):
		return httperr.New(httperr.Conflict, "another request for this order is in progress; try again")
	case errors.Is(err, order.ErrUnavailable):
		return &httperr.Error{Code: httperr.Unavailable, Message: "orders are unavailable, try again", Cause: err}
	}
	return apiError(err)
}

// paging reads page and page_size (1-100) from the query.
func paging(c *gin.Context) (page, pageSize int, err error) {
	page, pageSize = 1, 20
	for name, dst := range map[string]*int{"page": &page, "page_size": &pageSize} {
		if v := c.Query(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || (name == "page_size" && n > maxPageSize) {
				return 0, 0, httperr.New(httperr.InvalidArgument, "%s %q: want an integer from 1%s", name, v,
					map[bool]string{true: " to 100", false: ""}[name == "page_size"])
			}
			*dst = n
		}
	}
	return page, pageSize, nil
}

func (h *shopHandlers) quantity(c *gin.Context) (int, bool) {
	var req placeRequest
	if err := decodeJSON(c, &req); err != nil {
		httperr.Write(c, err)
		return 0, false
	}
	if req.Quantity == nil {
		httperr.Write(c, httperr.New(httperr.InvalidArgument, "quantity is required"))
		return 0, false
	}
	return *req.Quantity, true
}

func (h *shopHandlers) openGroup(c *gin.Context) {
	r, ok := h.orderRequest(c)
	if !ok {
		return
	}
	g, o, err := h.s.Orders.OpenGroup(c.Request.Context(), r)
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"group_id": g.ID, "order_no": o.No, "expires_at": g.ExpiresAt, "pay_by": o.PayBy})
}

func (h *shopHandlers) joinGroup(c *gin.Context) {
	qty, ok := h.quantity(c)
	if !ok {
		return
	}
	o, err := h.s.Orders.JoinGroup(c.Request.Context(), c.Param("gid"), c.GetInt64(userKey), qty)
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"order_no": o.No, "group_id": o.GroupID, "pay_by": o.PayBy})
}

func groupOut(g order.Group) gin.H {
	return gin.H{"group_id": g.ID, "activity_id": g.ActivityID, "status": g.Status, "size": g.Size,
		"members_count": g.Members, "paid_count": g.Paid, "created_at": g.CreatedAt, "expires_at": g.ExpiresAt}
}

func (h *shopHandlers) group(c *gin.Context) {
	v, err := h.s.Orders.GetGroup(c.Request.Context(), c.Param("gid"), c.GetInt64(userKey))
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	members := make([]gin.H, len(v.List))
	for i, m := range v.List {
		members[i] = gin.H{"paid": m.Paid, "you": m.You}
	}
	out := groupOut(v.Group)
	out["members"] = members
	c.JSON(http.StatusOK, out)
}

func (h *shopHandlers) formingGroups(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		httperr.Write(c, err)
		return
	}
	if st := c.Query("status"); st != "" && st != string(order.Forming) {
		httperr.Write(c, httperr.New(httperr.InvalidArgument, "status %q: only forming groups are listed", st))
		return
	}
	groups, err := h.s.Orders.FormingGroups(c.Request.Context(), id, 50)
	if err != nil {
		httperr.Write(c, orderError(err))
		return
	}
	items := make([]gin.H, len(groups))
	for i, g := range groups {
		items[i] = groupOut(g)
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}
