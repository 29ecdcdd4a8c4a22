package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Shopper is one shopper's app, as the load kit and the soak drive it: a
// user's token against a deployment's public API, with the waiting room's
// join, poll and stream, an order and its stream.
type Shopper struct {
	Base  string // the public API, e.g. http://127.0.0.1:8080
	Token string // the user's bearer token
	HTTP  *http.Client
}

// Place is the waiting room's answer (GET/POST /v1/activities/{id}/queue).
type Place struct {
	Status         string   `json:"status"` // waiting, admitted, sold_out, closed
	Position       *int64   `json:"position"`
	EstimatedWait  *float64 `json:"estimated_wait_seconds"`
	PollAfter      float64  `json:"poll_after_seconds"`
	AdmissionToken string   `json:"admission_token"`
	AdmittedUntil  string   `json:"admitted_until"`
}

// Final tells whether the place is the last a wait sees: admitted, sold out
// or closed. The zero Place (no answer read yet) is not: until 2026-11-29
// Final was "not waiting", and WaitStreaming, its stream refused at
// connect (a 503 through a fault, 404 NOT_IN_QUEUE), returned the zero
// Place as final with a nil error.
func (p Place) Final() bool {
	return p.Status == "admitted" || p.Status == "sold_out" || p.Status == "closed"
}

// APIError is an answer that is not the one wanted: its status and the
// body's error code.
type APIError struct {
	Status int
	Code   string
}

func (e *APIError) Error() string { return fmt.Sprintf("loadtest: HTTP %d %s", e.Status, e.Code) }

// IsAPIError tells whether err is an answer with that status and code
// ("" for any code).
func IsAPIError(err error, status int, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status && (code == "" || ae.Code == code)
}

// apiError is an answer of status whose body is raw, with its error code
// ({"error":{"code":…}}).
func apiError(status int, raw []byte) *APIError {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return &APIError{Status: status, Code: e.Error.Code}
}

func (s Shopper) do(ctx context.Context, method, path string, header map[string]string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return apiError(resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Join joins sale's waiting room (POST .../queue, no proof of work).
func (s Shopper) Join(ctx context.Context, sale int64) (Place, error) {
	var p Place
	err := s.do(ctx, "POST", fmt.Sprintf("/v1/activities/%d/queue", sale), nil, nil, 200, &p)
	return p, err
}

// Poll reads the shopper's place (GET .../queue).
func (s Shopper) Poll(ctx context.Context, sale int64) (Place, error) {
	var p Place
	err := s.do(ctx, "GET", fmt.Sprintf("/v1/activities/%d/queue", sale), nil, nil, 200, &p)
	return p, err
}

// WaitPolling polls the shopper's place, each time after the
// poll_after_seconds the last answer gave (at most maxGap; 0: the server's),
// until it is final; each place read is passed to seen (nil: none). The
// first place is from, as Join gave it.
func (s Shopper) WaitPolling(ctx context.Context, sale int64, from Place, maxGap time.Duration, seen func(Place)) (Place, error) {
	p := from
	for !p.Final() {
		gap := time.Duration(p.PollAfter * float64(time.Second))
		if gap <= 0 {
			gap = time.Second
		}
		if maxGap > 0 && gap > maxGap {
			gap = maxGap
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(gap):
		}
		next, err := s.Poll(ctx, sale)
		if err != nil {
			return p, err // the last place read, not the failed poll's zero one
		}
		p = next
		if seen != nil {
			seen(p)
		}
	}
	return p, nil
}

// WaitStreaming follows the shopper's place on the queue's stream (GET
// .../queue/events) until it is final, each place passed to seen (nil:
// none). A stream that ends before a final place (an api shutting down)
// is opened again, as an app would.
func (s Shopper) WaitStreaming(ctx context.Context, sale int64, seen func(Place)) (Place, error) {
	var last Place
	for attempt := 0; ; attempt++ {
		err := s.Events(ctx, fmt.Sprintf("/v1/activities/%d/queue/events", sale), "", func(e Event) bool {
			if e.Name != "queue" {
				return true
			}
			if json.Unmarshal([]byte(e.Data), &last) != nil {
				return false
			}
			if seen != nil {
				seen(last)
			}
			return !last.Final()
		})
		if last.Final() {
			return last, nil
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if err != nil && attempt >= 5 {
			return last, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Event is one Server-Sent Event: its id, name and data ("" for a
// heartbeat comment's).
type Event struct{ ID, Name, Data string }

// Events opens a Server-Sent Events stream at path (from lastID, sent as
// Last-Event-ID when not "") and passes each event to fn until fn answers
// false or the stream ends; heartbeats are not passed. Its error is the
// request's or the read's; a clean end of the stream is nil.
func (s Shopper) Events(ctx context.Context, path, lastID string, fn func(Event) bool) error {
	req, err := http.NewRequestWithContext(ctx, "GET", s.Base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		return apiError(resp.StatusCode, raw)
	}
	return ReadEvents(resp.Body, fn)
}

// ReadEvents parses a Server-Sent Events body, passing each event to fn
// until fn answers false or the body ends (nil at its clean end).
func ReadEvents(r io.Reader, fn func(Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" || len(data) > 0 {
				ev.Data = strings.Join(data, "\n")
				if !fn(ev) {
					return nil
				}
			}
			ev, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimPrefix(strings.TrimPrefix(line, "event:"), " ")
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}

// Order places an order of quantity in sale (item "" for a sale of one
// item), with the admission token when not "": the order number of a 202,
// else an *APIError.
func (s Shopper) Order(ctx context.Context, sale int64, item string, quantity int, admission string) (string, error) {
	body := map[string]any{"quantity": quantity}
	if item != "" {
		body["item"] = item
	}
	raw, _ := json.Marshal(body)
	var header map[string]string
	if admission != "" {
		header = map[string]string{"Admission-Token": admission}
	}
	var out struct {
		OrderNo string `json:"order_no"`
	}
	err := s.do(ctx, "POST", fmt.Sprintf("/v1/activities/%d/orders", sale), header, raw, 202, &out)
	return out.OrderNo, err
}
