package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// roomJSON is an activity's waiting room on the wire (admin API).
type roomJSON struct {
	WaitingRoom         bool `json:"waiting_room"`
	AdmitPerSecond      int  `json:"admit_per_second"`
	AdmissionTTLSeconds int  `json:"admission_ttl_seconds"`
	JoinPowBits         int  `json:"join_pow_bits"`
}

func roomOut(a activity.Activity) roomJSON {
	return roomJSON{WaitingRoom: a.WaitingRoom, AdmitPerSecond: a.AdmitPerSecond,
		AdmissionTTLSeconds: int(a.AdmissionTTLOrDefault() / time.Second), JoinPowBits: a.JoinPowBits}
}

// placeJSON is a shopper's place in a waiting room (GET and POST
// /v1/activities/{id}/queue). position and estimated_wait_seconds are null
// before the start, while the early joiners' shuffle is not final.
type placeJSON struct {
	Status               waitingroom.Status `json:"status"`
	Position             *int64             `json:"position"`
	EstimatedWaitSeconds *int64             `json:"estimated_wait_seconds"`
	PollAfterSeconds     int64              `json:"poll_after_seconds"`
	AdmissionToken       string             `json:"admission_token,omitempty"`
	AdmittedUntil        *time.Time         `json:"admitted_until,omitempty"`
}

func placeOut(p waitingroom.Place) placeJSON {
	out := placeJSON{Status: p.Status, PollAfterSeconds: int64(p.PollAfter / time.Second)}
	if p.Position >= 0 {
		pos := p.Position
		out.Position = &pos
	}
	if p.EstimatedWait >= 0 {
		w := int64((p.EstimatedWait + time.Second - 1) / time.Second)
		out.EstimatedWaitSeconds = &w
	}
	if p.Status == waitingroom.Admitted {
		out.AdmissionToken = p.Admission
		u := p.AdmittedUntil
		out.AdmittedUntil = &u
	}
	return out
}

// joinBody is the optional body of joining: the proof of work of a sale
// with join_pow_bits.
type joinBody struct {
	Challenge string `json:"challenge"`
	Nonce     string `json:"nonce"`
}

func (h *shopHandlers) joinQueue(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	var body joinBody
	if err := decodeOptionalJSON(c, &body); err != nil {
		fail(c, err)
		return
	}
	p, err := h.s.Queue.Join(c.Request.Context(), id, c.GetInt64(userKey), waitingroom.Proof{Challenge: body.Challenge, Nonce: body.Nonce})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, placeOut(p))
}

// decodeOptionalJSON is decodeJSON of a body that may be left out: an
// empty one leaves dst as it is.
func decodeOptionalJSON(c *gin.Context, dst any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		return httperr.New(httperr.InvalidArgument, "request body is larger than %d bytes or unreadable", maxBody)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(raw))
	return decodeJSON(c, dst)
}

func (h *shopHandlers) readQueue(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	p, err := h.s.Queue.Read(c.Request.Context(), id, c.GetInt64(userKey))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, placeOut(p))
}

func (h *shopHandlers) challenge(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	ch, err := h.s.Queue.NewChallenge(c.Request.Context(), id, c.GetInt64(userKey))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"challenge": ch.Challenge, "bits": ch.Bits, "expires_at": ch.ExpiresAt})
}

// admitSale lets an order or a new group of sale (the path's id) through
// only with an admission to it when it has a waiting room
// (waitingroom.Service.Admit: the token checked here, no Redis).
func (s *Shop) admitSale(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		c.Next() // the handler refuses the path
		return
	}
	s.admit(c, id)
}

// admitGroup is admitSale for joining a group: the sale is the group's.
func (s *Shop) admitGroup(c *gin.Context) {
	id, err := order.ParseNo(c.Param("group_id"))
	if err != nil {
		c.Next()
		return
	}
	s.admit(c, id)
}

func (s *Shop) admit(c *gin.Context, sale int64) {
	if s.Queue == nil {
		c.Next()
		return
	}
	if err := s.Queue.Admit(c.Request.Context(), sale, c.GetInt64(userKey), c.GetHeader("Admission-Token")); err != nil {
		failKeyed(c, err) // every route here takes an Idempotency-Key
		return
	}
	c.Next()
}
