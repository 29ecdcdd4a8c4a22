package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/presence"
)

// optionalUser admits a request with no Authorization header as anonymous,
// and one with a header only if its token is valid (then the user id is in
// the context, as authenticate puts it).
func (s *Shop) optionalUser(c *gin.Context) {
	if c.GetHeader("Authorization") == "" {
		c.Next()
		return
	}
	s.authenticate(c)
}

// heartbeatBody is the body of POST /v1/presence.
type heartbeatBody struct {
	DeviceID   string `json:"device_id"`
	ActivityID int64  `json:"activity_id"`
}

// heartbeat records that a signed-in shopper (bearer token) or a device
// (device_id) is here, watching activity_id if given.
func (h *shopHandlers) heartbeat(c *gin.Context) {
	var b heartbeatBody
	if err := decodeJSON(c, &b); err != nil {
		fail(c, err)
		return
	}
	client := presence.Client{UserID: c.GetInt64(userKey), Device: b.DeviceID}
	if client.UserID > 0 && b.DeviceID != "" {
		e := httperr.New(httperr.InvalidArgument, "a signed-in heartbeat names no device_id")
		e.Field = "device_id"
		fail(c, e)
		return
	}
	if err := h.s.Presence.Heartbeat(c.Request.Context(), client, b.ActivityID); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"online": true, "ttl_seconds": int(h.s.Presence.TTL() / time.Second)})
}

// presence answers how many are online, watching an activity, and whether
// one user or device is.
func (h adminHandlers) presence(c *gin.Context) {
	if h.presenceOf == nil {
		fail(c, httperr.New(httperr.NotFound, "presence is not tracked here"))
		return
	}
	q := func(name string) (int64, error) {
		if v := c.Query(name); v != "" {
			return positiveParam(name, v)
		}
		return 0, nil
	}
	act, err := q("activity_id")
	if err != nil {
		fail(c, err)
		return
	}
	user, err := q("user_id")
	if err != nil {
		fail(c, err)
		return
	}
	ctx := c.Request.Context()
	all, watching, err := h.presenceOf.Online(ctx, act)
	if err != nil {
		fail(c, err)
		return
	}
	out := gin.H{"online": all, "ttl_seconds": int(h.presenceOf.TTL() / time.Second)}
	if act > 0 {
		out["activity"] = gin.H{"id": act, "watching": watching}
	}
	if device := c.Query("device_id"); user > 0 || device != "" {
		if user > 0 && device != "" {
			fail(c, httperr.New(httperr.InvalidArgument, "ask for a user_id or a device_id, not both"))
			return
		}
		seen, on, err := h.presenceOf.LastSeen(ctx, presence.Client{UserID: user, Device: strings.TrimSpace(device)})
		if err != nil {
			fail(c, err)
			return
		}
		client := gin.H{"online": on, "last_seen": nil}
		if !seen.IsZero() {
			client["last_seen"] = seen
		}
		out["client"] = client
	}
	c.JSON(http.StatusOK, out)
}
