package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/order"
)

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
	// Item is the SKU of the sale's item ordered; absent for an order
	// made before items (of its sale's one item).
	Item string `json:"item,omitempty"`
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
		GroupID: o.GroupID, Item: o.Item,
	}
}

// quantityBody is the body of joining a group: the member gets the
// group's item.
type quantityBody struct {
	Quantity *int `json:"quantity"`
}

// orderBody is the body of placing an order or opening a group: the item
// (its sku; left out for a sale's one item) and how many.
type orderBody struct {
	Item     string `json:"item"`
	Quantity *int   `json:"quantity"`
}

// quantity reads a join's body, its quantity; its range is the order
// domain's rule (order.ErrBadQuantity, which names the field too).
func quantity(c *gin.Context) (int, error) {
	var req quantityBody
	if err := decodeJSON(c, &req); err != nil {
		return 0, err
	}
	return required(req.Quantity)
}

// required is a body's quantity, which must be there.
func required(qty *int) (int, error) {
	if qty == nil { // missing, or null
		return 0, fieldError("quantity", fmt.Sprintf("is required, a whole number from 1 to %d", order.MaxQuantity))
	}
	return *qty, nil
}

// placeRequest reads the activity id from the path, the item and the
// quantity from the body of an order or a new group, and the
// Idempotency-Key: the routes that read one answer with failKeyed.
func placeRequest(c *gin.Context) (order.PlaceRequest, error) {
	id, err := pathID(c, "id")
	if err != nil {
		return order.PlaceRequest{}, err
	}
	req, err := decodeOrderBody(c)
	if err != nil {
		return order.PlaceRequest{}, err
	}
	qty, err := required(req.Quantity)
	return order.PlaceRequest{ActivityID: id, UserID: c.GetInt64(userKey), Quantity: qty, Item: req.Item,
		IdempotencyKey: c.GetHeader("Idempotency-Key")}, err
}

func (h *shopHandlers) place(c *gin.Context) {
	r, err := placeRequest(c)
	if err != nil {
		failKeyed(c, err)
		return
	}
	o, err := h.s.Orders.Place(c.Request.Context(), r)
	if err != nil {
		failKeyed(c, err)
		return
	}
	renderOrder(c, http.StatusAccepted, orderOut(o))
}

func (h *shopHandlers) get(c *gin.Context) {
	o, err := h.s.Orders.GetAcked(c.Request.Context(), c.Param("order_no"), c.GetInt64(userKey))
	if err != nil {
		fail(c, err)
		return
	}
	renderOrder(c, http.StatusOK, orderOut(o))
}

func (h *shopHandlers) list(c *gin.Context) {
	page, pageSize, err := paging(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, total, err := h.s.Orders.List(c.Request.Context(), c.GetInt64(userKey), page, pageSize)
	if err != nil {
		fail(c, err)
		return
	}
	out := make([]orderJSON, len(items))
	for i, o := range items {
		out[i] = orderOut(o)
	}
	c.JSON(http.StatusOK, gin.H{"items": out, "page": page, "page_size": pageSize, "total": total})
}

func (h *shopHandlers) cancel(c *gin.Context) { h.transition(c, h.s.Orders.Cancel) }

// payJSON is the answer to POST /v1/orders/{no}/pay: the order as it is
// now, and what the shopper's app confirms the payment with.
type payJSON struct {
	orderJSON
	PaymentID     string `json:"payment_id"`
	ClientSecret  string `json:"client_secret"`
	Currency      string `json:"currency"`
	PaymentStatus string `json:"payment_status"`
	Provider      string `json:"provider"`
}

// pay starts the order's payment at the provider (or answers the one
// started before). The order is paid only when the provider confirms it
// (its webhook): status pending_payment until then — paid at once with the
// simulated provider, which confirms before it answers.
func (h *shopHandlers) pay(c *gin.Context) {
	st, err := h.s.Payments.Start(c.Request.Context(), c.Param("order_no"), c.GetInt64(userKey))
	if err != nil {
		fail(c, err)
		return
	}
	p := st.Payment
	c.JSON(http.StatusOK, payJSON{orderJSON: orderOut(st.Order), PaymentID: p.ID, ClientSecret: p.ClientSecret,
		Currency: p.Currency, PaymentStatus: string(p.Status), Provider: p.Provider})
}

func (h *shopHandlers) transition(c *gin.Context, do func(context.Context, string, int64) (order.Order, error)) {
	o, err := do(c.Request.Context(), c.Param("order_no"), c.GetInt64(userKey))
	if err != nil {
		fail(c, err)
		return
	}
	renderOrder(c, http.StatusOK, orderOut(o))
}

func (h *shopHandlers) openGroup(c *gin.Context) {
	r, err := placeRequest(c)
	if err != nil {
		failKeyed(c, err)
		return
	}
	g, o, err := h.s.Orders.OpenGroup(c.Request.Context(), r)
	if err != nil {
		failKeyed(c, err)
		return
	}
	out := gin.H{"group_id": g.ID, "order_no": o.No, "expires_at": g.ExpiresAt, "pay_by": o.PayBy}
	if o.Item != "" {
		out["item"] = o.Item
	}
	c.JSON(http.StatusAccepted, out)
}

func (h *shopHandlers) joinGroup(c *gin.Context) {
	qty, err := quantity(c)
	if err != nil {
		failKeyed(c, err)
		return
	}
	o, err := h.s.Orders.JoinGroup(c.Request.Context(), c.Param("group_id"), order.PlaceRequest{
		UserID: c.GetInt64(userKey), Quantity: qty, IdempotencyKey: c.GetHeader("Idempotency-Key")})
	if err != nil {
		failKeyed(c, err)
		return
	}
	out := gin.H{"order_no": o.No, "group_id": o.GroupID, "pay_by": o.PayBy}
	if o.Item != "" {
		out["item"] = o.Item
	}
	c.JSON(http.StatusAccepted, out)
}

func groupOut(g order.Group) gin.H {
	out := gin.H{"group_id": g.ID, "activity_id": g.ActivityID, "status": g.Status, "size": g.Size,
		"members_count": g.Members, "paid_count": g.Paid, "created_at": g.CreatedAt, "expires_at": g.ExpiresAt}
	if g.Item != "" {
		out["item"] = g.Item
	}
	return out
}

func (h *shopHandlers) group(c *gin.Context) {
	v, err := h.s.Orders.GetGroup(c.Request.Context(), c.Param("group_id"), c.GetInt64(userKey))
	if err != nil {
		fail(c, err)
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
		fail(c, err)
		return
	}
	if st := c.Query("status"); st != "" && st != string(order.Forming) {
		fail(c, paramError("status", "status %q: only forming groups are listed", st))
		return
	}
	groups, err := h.s.Orders.FormingGroups(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	items := make([]gin.H, len(groups))
	for i, g := range groups {
		items[i] = groupOut(g)
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}
