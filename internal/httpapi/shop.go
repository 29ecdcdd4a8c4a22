package httpapi

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/catalog"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// Shop is what the client API, /v1, needs.
type Shop struct {
	Orders   *order.Service
	Payments *payment.Service
	Catalog  *catalog.Catalog
	Presence *presence.Tracker // nil: no POST /v1/presence
	Tokens   *auth.Tokens
	// Queue serves the waiting rooms (/v1/activities/{id}/queue) and
	// checks the admissions of the sales that have one; nil: no waiting
	// rooms.
	Queue *waitingroom.Service
	// Limiter backs the rate limits; nil or a zero rate turns a limit off.
	Limiter RateLimiter
	UserRPS int // requests per second per user
	IPRPS   int // requests per second per client IP
	// OrderStreams serves GET /v1/orders/{order_no}/events, the order's
	// Server-Sent Events (docs/streams.md); nil leaves the route out.
	OrderStreams *stream.Orders
	// QueueStreams serves GET /v1/activities/{id}/queue/events, a shopper's
	// place in a waiting room as Server-Sent Events; nil (or Queue nil)
	// leaves the route out.
	QueueStreams *stream.Queue
	// Heartbeat is how often an idle stream sends a comment line, so that
	// proxies keep it open. Default 15 s.
	Heartbeat time.Duration
	// OpenTimeout bounds a stream's opening (the order's read, the
	// outbox's); the stream itself has no deadline. Default
	// DefaultRequestTimeout.
	OpenTimeout time.Duration
}

// RateLimiter charges a request of client who in scope ("ip", "user")
// against perSecond: a burst of perSecond, then perSecond a second
// (redisstore.Limiter). Over it, nothing is charged and retryAfter says
// when the next request would pass.
type RateLimiter interface {
	Allow(ctx context.Context, scope, who string, perSecond int) (allowed bool, retryAfter time.Duration, err error)
}

func registerShop(r *gin.Engine, deadline gin.HandlerFunc, s *Shop) {
	h := &shopHandlers{s: s}
	ipLimit := s.limit("ip", s.IPRPS, func(c *gin.Context) string { return ipKey(c.ClientIP()) })
	v1 := r.Group("/v1", deadline, ipLimit)
	v1.GET("/activities/:id", h.activity)
	v1.GET("/activities/:id/groups", h.formingGroups)
	if s.Presence != nil {
		v1.POST("/presence", s.optionalUser, s.limit("user", s.UserRPS, func(c *gin.Context) string {
			if u := c.GetInt64(userKey); u > 0 {
				return strconv.FormatInt(u, 10)
			}
			return "ip:" + ipKey(c.ClientIP()) // a device: its network's share
		}), h.heartbeat)
	}
	userLimit := s.limit("user", s.UserRPS, func(c *gin.Context) string {
		return strconv.FormatInt(c.GetInt64(userKey), 10)
	})
	user := v1.Group("", s.authenticate, userLimit)
	user.GET("/orders", h.list)
	user.GET("/orders/:order_no", h.get)
	user.POST("/orders/:order_no/pay", h.pay)
	user.POST("/orders/:order_no/cancel", h.cancel)
	user.GET("/groups/:group_id", h.group)
	if s.Queue != nil {
		user.POST("/activities/:id/queue", h.joinQueue)
		user.POST("/activities/:id/queue/challenge", h.challenge)
		// A poll is not charged to the per-user limit (a Redis round trip
		// each): a waiting shopper seen once is answered from the api's
		// memory (waitingroom's memory path), and the Redis a crowd's polls
		// cost is bounded per sale and api, not per poll. The IP limit
		// still applies (v1's).
		v1.GET("/activities/:id/queue", s.authenticate, h.readQueue)
	}
	if s.OrderStreams != nil {
		// Not under v1's deadline: a stream lasts; its opening has its own
		// (OpenTimeout).
		r.GET("/v1/orders/:order_no/events", ipLimit, s.authenticate, userLimit, h.orderEvents)
	}
	if s.Queue != nil && s.QueueStreams != nil {
		r.GET("/v1/activities/:id/queue/events", ipLimit, s.authenticate, userLimit, h.queueEvents)
	}
	// Placing an order, opening and joining a group: the order service
	// charges the per-user limit itself, from the same budget
	// (order.Config.UserRPS; an order's in the one script of its accept),
	// so these routes do not charge it again.
	buyer := v1.Group("", s.authenticate)
	buyer.POST("/activities/:id/groups", s.admitSale, h.openGroup)
	buyer.POST("/groups/:group_id/join", s.admitGroup, h.joinGroup)
	// An order's route starts with the sold-out gate: it does no I/O, so
	// the crowd refused after a sale pays for neither the deadline's timer
	// nor the rate limits nor the token check.
	r.POST("/v1/activities/:id/orders", h.soldOutGate, deadline, ipLimit, s.authenticate, s.admitSale, h.place)
}

const userKey = "user"

// soldOut is the sold-out refusal, encoded once: what fail answers for
// activity.ErrSoldOut, byte for byte (tested).
var soldOut = httperr.Can(apiError(activity.ErrSoldOut).(*httperr.Error))

// soldOutGate refuses an order for a sale this process knows is sold out
// (order.Service.RefusedHere) before anything else runs — the rate limits
// (a Redis round trip each) and the token check — so the crowd that keeps
// clicking after a sale costs next to nothing. Whether a sale is sold out
// is public (GET /v1/activities/{id}), so telling an unauthenticated
// caller gives nothing away. A request with an Idempotency-Key goes on:
// the order service answers it, with the order the key made if it made
// one (a retry of an order accepted before the sale sold out).
func (h *shopHandlers) soldOutGate(c *gin.Context) {
	if id, err := strconv.ParseInt(c.Param("id"), 10, 64); err == nil && h.s.Orders.RefusedHere(id, c.GetHeader("Idempotency-Key")) {
		soldOut.Write(c)
		return
	}
	c.Next()
}

// authenticate admits a valid "Authorization: Bearer <JWT>" (the scheme in
// any case) and puts its user id in the context.
func (s *Shop) authenticate(c *gin.Context) {
	tok, ok := bearerToken(c.GetHeader("Authorization"))
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
func (s *Shop) limit(scope string, rps int, key func(*gin.Context) string) gin.HandlerFunc {
	if s.Limiter == nil || rps <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), limiterWait)
		allowed, retryAfter, err := s.Limiter.Allow(ctx, scope, key(c), rps)
		cancel()
		if err == nil && !allowed {
			tooMany(c, rps, scope, retryAfter)
			return
		}
		c.Next()
	}
}

// ipKey is the per-IP limit's key of a client address: an IPv4 address as
// it is, an IPv6 address by its /64, the block one subscriber gets (a
// phone, a home): counting each /128 would let anyone rotate through 2^64
// addresses and never be limited.
func ipKey(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if addr.Is4In6() {
		addr = addr.Unmap()
	}
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(64)
	return p.String()
}

type shopHandlers struct{ s *Shop }

func (h *shopHandlers) activity(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	v, err := h.s.Catalog.Get(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	items := make([]gin.H, len(v.Items))
	for i, it := range v.Items {
		items[i] = gin.H{"sku": it.SKU, "label": it.Label, "price_cents": it.PriceCents, "stock_remaining": it.StockRemaining}
		if it.PerUserLimit > 0 {
			items[i]["per_user_limit"] = it.PerUserLimit
		}
	}
	out := gin.H{
		"id": v.ID, "type": v.Type, "name": v.Name, "price_cents": v.PriceCents, "per_user_limit": v.PerUserLimit,
		"starts_at": v.StartsAt.UTC(), "ends_at": v.EndsAt.UTC(), "status": v.Status, "stock_remaining": v.StockRemaining,
		"paused": v.Paused, "waiting_room": v.WaitingRoom, "items": items,
	}
	if v.Type == activity.GroupBuy {
		out["group_size"], out["group_ttl_seconds"] = v.GroupSize, int(v.GroupTTL/time.Second)
	}
	c.JSON(http.StatusOK, out)
}

// paging reads page (1-maxPage) and page_size (1-maxPageSize) from the
// query. page is bounded so that the offset it makes stays small: a deep
// page costs MySQL a scan of every row before it, and a huge one overflowed.
func paging(c *gin.Context) (page, pageSize int, err error) {
	page, pageSize = 1, 20
	for _, p := range []struct {
		name string
		dst  *int
		max  int
	}{{"page", &page, maxPage}, {"page_size", &pageSize, maxPageSize}} {
		if v := c.Query(p.name); v != "" {
			n, err := intParam(p.name, v, 1, int64(p.max))
			if err != nil {
				return 0, 0, err
			}
			*p.dst = int(n)
		}
	}
	return page, pageSize, nil
}

// The bounds of paging.
const (
	maxPage     = 10_000
	maxPageSize = 100
)
