package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/stream"
)

// streamWriteWait bounds one write to a stream's client: a client that
// reads nothing for that long (gone without a FIN, or stalled) is cut off,
// rather than holding its handler forever.
const streamWriteWait = 10 * time.Second

// orderEvents serves an order's Server-Sent Events (docs/streams.md): its
// events so far after Last-Event-ID, then the live ones, heartbeats while
// idle, until the order is final, the client goes away, the hub drops a
// slow client, or the server shuts down.
func (h *shopHandlers) orderEvents(c *gin.Context) {
	from, err := stream.ParseCursor(c.GetHeader("Last-Event-ID"))
	if err != nil {
		fail(c, err)
		return
	}
	ctx, cancel := h.openContext(c)
	st, err := h.s.OrderStreams.Open(ctx, c.Param("order_no"), c.GetInt64(userKey), from)
	cancel()
	if err != nil {
		fail(c, err)
		return
	}
	defer st.Close()
	// An error ends the response: final (ErrEnded), the client gone,
	// dropped as too slow (ErrDropped: it reconnects with Last-Event-ID),
	// the server shutting down (ErrClosed), or the outbox unreadable on a
	// catch-up; a client that wants more connects again from its last id.
	h.serveSSE(c, func(ctx context.Context, beat <-chan time.Time) (sseFrame, bool, error) {
		it, ok, err := st.Next(ctx, beat)
		return sseFrame{id: st.Cursor().String(), event: it.Name, data: it.Data}, ok, err
	})
}

// openContext bounds a stream's opening (its reads before the first event)
// by OpenTimeout: the stream itself lasts.
func (h *shopHandlers) openContext(c *gin.Context) (context.Context, context.CancelFunc) {
	open := h.s.OpenTimeout
	if open <= 0 {
		open = DefaultRequestTimeout
	}
	return context.WithTimeoutCause(c.Request.Context(), open, requestTimeout(open))
}

// sseFrame is one event of a stream: its id (none if empty), name and data.
type sseFrame struct {
	id, event string
	data      []byte
}

// serveSSE answers a stream: each frame next gives, a heartbeat comment
// when next reports none (its beat ticked), until next fails (the stream
// ended, the client went away, the server shuts down) or a write does.
func (h *shopHandlers) serveSSE(c *gin.Context, next func(ctx context.Context, beat <-chan time.Time) (sseFrame, bool, error)) {
	w, flush, end, ok := startSSE(c)
	defer end()
	if !ok {
		return
	}
	beat := h.s.Heartbeat
	if beat <= 0 {
		beat = 15 * time.Second
	}
	tick := time.NewTicker(beat)
	defer tick.Stop()
	rctx := c.Request.Context()
	for {
		f, ok, err := next(rctx, tick.C)
		switch {
		case err != nil:
			return
		case !ok:
			_, _ = w.WriteString(": heartbeat\n\n")
		default:
			if f.id != "" {
				_, _ = w.WriteString("id: " + f.id + "\n")
			}
			_, _ = w.WriteString("event: " + f.event + "\ndata: ")
			_, _ = w.Write(f.data)
			_, _ = w.WriteString("\n\n")
		}
		if !flush() {
			return
		}
	}
}

// startSSE answers 200 text/event-stream and sends the retry line: flush
// sends what w holds (each write with its own deadline); end is deferred by
// the handler; ok false: the client is gone already.
func startSSE(c *gin.Context) (w gin.ResponseWriter, flush func() bool, end func(), ok bool) {
	rc := http.NewResponseController(c.Writer)
	// The server's ReadTimeout would otherwise end the request's context
	// (net/http's background read fails at the deadline and cancels it)
	// and its WriteTimeout cut the response: a stream has neither, and
	// each write has streamWriteWait instead.
	_ = rc.SetReadDeadline(time.Time{})
	// Each write sets its own deadline; the response's end (net/http
	// writes the last chunk after this returns) gets a fresh one too, or a
	// stream idle longer than streamWriteWait would end cut short (the
	// client sees an unexpected EOF, not the end).
	end = func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteWait)) }
	hd := c.Writer.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	c.Status(http.StatusOK)
	// net/http buffers the response already (2 KB before it is chunked):
	// the writes go there, and each event is flushed whole.
	w = c.Writer
	flush = func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
		return rc.Flush() == nil
	}
	// retry: how long a browser's EventSource waits before it reconnects.
	_, _ = w.WriteString("retry: 2000\n\n")
	return w, flush, end, flush()
}

// queueEvents serves a shopper's place in a sale's waiting room as
// Server-Sent Events (docs/waiting-room.md "The streams"): event "queue"
// with GET .../queue's body, at once, then as it changes, until it is the
// last (admitted, sold out, closed), the client goes away, or the server
// shuts down. Not joined: GET .../queue's error.
func (h *shopHandlers) queueEvents(c *gin.Context) {
	id, err := pathID(c, "id")
	if err != nil {
		fail(c, err)
		return
	}
	ctx, cancel := h.openContext(c)
	st, err := h.s.QueueStreams.Open(ctx, id, c.GetInt64(userKey))
	cancel()
	if err != nil {
		fail(c, err)
		return
	}
	defer st.Close()
	// An error ends the response: the last place sent (ErrEnded), the
	// client gone, the server shutting down (ErrClosed), the admission
	// lapsed; a client that wants more connects again or polls.
	h.serveSSE(c, func(ctx context.Context, beat <-chan time.Time) (sseFrame, bool, error) {
		p, ok, err := st.Next(ctx, beat)
		if err != nil || !ok {
			return sseFrame{}, ok, err
		}
		data, _ := json.Marshal(placeOut(p))
		return sseFrame{event: "queue", data: data}, true, nil
	})
}
