package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/payment"
)

// paymentJSON is a payment on the admin API.
type paymentJSON struct {
	ID          string    `json:"id"`
	Provider    string    `json:"provider"`
	OrderNo     string    `json:"order_no"`
	AmountCents int64     `json:"amount_cents"`
	Currency    string    `json:"currency"`
	Status      string    `json:"status"`
	Flag        string    `json:"flag,omitempty"`
	RefundID    string    `json:"refund_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func paymentOut(p payment.Payment) paymentJSON {
	return paymentJSON{
		ID: p.ID, Provider: p.Provider, OrderNo: p.OrderNo, AmountCents: p.AmountCents, Currency: p.Currency,
		Status: string(p.Status), Flag: string(p.Flag), RefundID: p.RefundID, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

func paymentsOut(ps []payment.Payment) []paymentJSON {
	out := make([]paymentJSON, len(ps))
	for i, p := range ps {
		out[i] = paymentOut(p)
	}
	return out
}

// order is GET /admin/v1/orders/{no}: any shopper's order, with its
// payment as Redis holds it live and the payments MySQL recorded.
func (h *adminHandlers) order(c *gin.Context) {
	v, err := h.pay.OfOrder(c.Request.Context(), c.Param("order_no"))
	if err != nil {
		fail(c, err)
		return
	}
	out := gin.H{"order": orderOut(v.Order), "user_id": v.Order.UserID, "payment_id": v.Order.PaymentID,
		"payments": paymentsOut(v.Recorded)}
	if v.Live != nil {
		out["live_payment"] = paymentOut(*v.Live)
	}
	c.JSON(http.StatusOK, out)
}

// defaultSince is how far back a reconciliation looks at the provider
// unless told (?since=).
const defaultSince = 30 * 24 * time.Hour

// reconcilePayments is GET /admin/v1/activities/{id}/payments: the sale's payments
// at the provider against the record.
func (h *adminHandlers) reconcilePayments(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	since := time.Now().Add(-defaultSince)
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			fail(c, paramError("since", "since: must be a time in RFC 3339 form, e.g. 2026-12-01T10:00:00Z"))
			return
		}
		since = t
	}
	r, err := h.pay.Reconcile(c.Request.Context(), id, since)
	if err != nil {
		fail(c, err)
		return
	}
	missing := make([]gin.H, len(r.Missing))
	for i, in := range r.Missing {
		missing[i] = gin.H{"id": in.ID, "order_no": in.OrderNo, "amount_cents": in.AmountCents, "currency": in.Currency, "status": in.Status}
	}
	differs := make([]gin.H, len(r.AmountDiffers))
	for i, in := range r.AmountDiffers {
		differs[i] = gin.H{"id": in.ID, "order_no": in.OrderNo, "amount_cents": in.AmountCents, "currency": in.Currency}
	}
	c.JSON(http.StatusOK, gin.H{
		"activity_id": r.ActivityID, "provider": r.Provider, "in_sync": r.InSync(),
		"at_provider": r.AtProvider, "recorded": r.Recorded, "missing": missing, "amount_differs": differs,
		"refunds_pending": paymentsOut(r.RefundsPending), "flagged": paymentsOut(r.Flagged),
	})
}
