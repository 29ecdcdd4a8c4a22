package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/webhook"
)

// registerAdminWebhooks serves the shop's webhook endpoints on the admin
// API's group g (docs/webhooks.md).
func registerAdminWebhooks(g *gin.RouterGroup, svc *webhook.Service) {
	h := webhookHandlers{svc: svc}
	g.POST("/webhook-endpoints", h.create)
	g.GET("/webhook-endpoints", h.list)
	g.GET("/webhook-endpoints/:id", h.get)
	g.PATCH("/webhook-endpoints/:id", h.update)
	g.DELETE("/webhook-endpoints/:id", h.delete)
	g.POST("/webhook-endpoints/:id/rotate-secret", h.rotate)
	g.GET("/webhook-endpoints/:id/deliveries", h.deliveries)
	g.POST("/webhook-endpoints/:id/events/:event_id/redeliver", h.redeliver)
	g.POST("/webhook-endpoints/:id/recover", h.recover)
}

type webhookHandlers struct{ svc *webhook.Service }

// endpointJSON is an endpoint on the wire. Secret is set only in the
// answers that make one (create, rotate): it is shown once.
type endpointJSON struct {
	ID             int64    `json:"id"`
	URL            string   `json:"url"`
	Description    string   `json:"description"`
	Events         []string `json:"events"`
	Enabled        bool     `json:"enabled"`
	DisabledReason string   `json:"disabled_reason,omitempty"`
	Secret         string   `json:"secret,omitempty"`
	// PreviousSecretExpiresAt is the end of a rotation's window, while the
	// secret before the rotation still signs.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

func endpointOut(e webhook.Endpoint, withSecret bool) endpointJSON {
	j := endpointJSON{ID: e.ID, URL: e.URL, Description: e.Description, Events: e.Events, Enabled: e.Enabled,
		DisabledReason: e.DisabledReason, CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC()}
	if withSecret {
		j.Secret = e.Secret
	}
	if e.PreviousSecret != "" && time.Now().Before(e.PreviousUntil) {
		until := e.PreviousUntil.UTC()
		j.PreviousSecretExpiresAt = &until
	}
	return j
}

// endpointRequest is the body of POST /admin/v1/webhook-endpoints.
type endpointRequest struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Enabled     *bool    `json:"enabled"`
}

func (h webhookHandlers) create(c *gin.Context) {
	var req endpointRequest
	if err := decodeJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	e, err := h.svc.Create(c.Request.Context(), webhook.New{URL: req.URL, Events: req.Events, Description: req.Description,
		Enabled: req.Enabled})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, endpointOut(e, true))
}

func (h webhookHandlers) list(c *gin.Context) {
	page, pageSize, err := paging(c)
	if err != nil {
		fail(c, err)
		return
	}
	eps, total, err := h.svc.List(c.Request.Context(), page, pageSize)
	if err != nil {
		fail(c, err)
		return
	}
	out := make([]endpointJSON, len(eps))
	for i, e := range eps {
		out[i] = endpointOut(e, false)
	}
	c.JSON(http.StatusOK, gin.H{"items": out, "page": page, "page_size": pageSize, "total": total})
}

func (h webhookHandlers) get(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	e, err := h.svc.Get(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, endpointOut(e, false))
}

// endpointPatch is the body of PATCH /admin/v1/webhook-endpoints/{id}:
// only the fields present change.
type endpointPatch struct {
	URL         *string   `json:"url"`
	Events      *[]string `json:"events"`
	Description *string   `json:"description"`
	Enabled     *bool     `json:"enabled"`
}

func (h webhookHandlers) update(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	var req endpointPatch
	if err := decodeJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	p := webhook.Patch{URL: req.URL, Description: req.Description, Enabled: req.Enabled}
	if req.Events != nil {
		p.Events = *req.Events
		if p.Events == nil {
			p.Events = []string{} // "events": [] is a list of none: refused as such ("events": null leaves them)
		}
	}
	e, err := h.svc.Update(c.Request.Context(), id, p)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, endpointOut(e, false))
}

func (h webhookHandlers) delete(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	if err := h.svc.Delete(c.Request.Context(), id); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "deleted": true})
}

func (h webhookHandlers) rotate(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	e, err := h.svc.RotateSecret(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, endpointOut(e, true))
}

// attemptJSON is one delivery attempt on the wire.
type attemptJSON struct {
	ID          int64     `json:"id"`
	EventID     string    `json:"event_id"`
	Type        string    `json:"type"`
	Attempt     int       `json:"attempt"`
	HTTPStatus  int       `json:"http_status"`
	LatencyMS   float64   `json:"latency_ms"`
	Error       string    `json:"error"`
	Delivered   bool      `json:"delivered"`
	Last        bool      `json:"last"`
	Manual      bool      `json:"manual"`
	AttemptedAt time.Time `json:"attempted_at"`
}

func (h webhookHandlers) deliveries(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	page, pageSize, err := paging(c)
	if err != nil {
		fail(c, err)
		return
	}
	eventID := c.Query("event_id")
	if len(eventID) > 40 {
		fail(c, paramError("event_id", "event_id: not an event id"))
		return
	}
	as, total, err := h.svc.Deliveries(c.Request.Context(), id, eventID, page, pageSize)
	if err != nil {
		fail(c, err)
		return
	}
	out := make([]attemptJSON, len(as))
	for i, a := range as {
		out[i] = attemptJSON{ID: a.ID, EventID: a.EventID, Type: string(a.Type), Attempt: a.Number, HTTPStatus: a.Status,
			LatencyMS: float64(a.Latency.Microseconds()) / 1000, Error: a.Error, Delivered: a.Delivered, Last: a.Last,
			Manual: a.Manual, AttemptedAt: a.At.UTC()}
	}
	c.JSON(http.StatusOK, gin.H{"items": out, "page": page, "page_size": pageSize, "total": total})
}

func (h webhookHandlers) redeliver(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	d, err := h.svc.Redeliver(c.Request.Context(), id, c.Param("event_id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"endpoint_id": d.EndpointID, "event_id": d.EventID, "type": d.Type,
		"queued_at": d.Since.UTC()})
}

// recoverRequest is the body of POST /admin/v1/webhook-endpoints/{id}/recover.
type recoverRequest struct {
	Since *string `json:"since"`
}

func (h webhookHandlers) recover(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	var req recoverRequest
	if err := decodeJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Since == nil {
		fail(c, paramError("since", "since: required, an RFC 3339 time"))
		return
	}
	since, err := time.Parse(time.RFC3339Nano, *req.Since)
	if err != nil {
		fail(c, paramError("since", "since: not an RFC 3339 time (2026-12-01T10:00:00Z)"))
		return
	}
	r, err := h.svc.Recover(c.Request.Context(), id, since)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"endpoint_id": r.EndpointID, "since": r.Since.UTC(), "events": r.Events})
}
