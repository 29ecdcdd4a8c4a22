// Command receiver is a shop's webhook receiver, as the tests run it: it
// verifies every delivery's signature with the Standard Webhooks library
// (github.com/standard-webhooks/standard-webhooks/libraries/go, what a
// shop's own receiver would use), writes each one it accepts to a log, one
// JSON line, before it answers 200, and can be told to misbehave: answer
// 500s, answer slowly. Killed with -9 between the write and the answer,
// the sender sees no answer and sends again: the log then holds that
// delivery twice, with the same id, which is what "at least once" means to
// a receiver (it dedups on webhook-id).
//
//	receiver -addr 127.0.0.1:9000 -secret whsec_… -log deliveries.jsonl
//
// POST /hooks takes deliveries. POST /control?fail=0.3&slow=0.2&delay=1.5s
// sets the share of deliveries answered 500 (not logged) and the share
// logged and then answered only after delay (past the sender's timeout it
// sends again: a duplicate, as a kill between the two makes); GET /control
// says how many it took and refused.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Line is one accepted delivery in the log.
type Line struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Subject  string `json:"subject"`
	Sequence int64  `json:"sequence"`
	BodySHA  string `json:"body_sha"`
	At       string `json:"at"`
}

type receiver struct {
	hooks []*standardwebhooks.Webhook
	log   *os.File

	mu    sync.Mutex
	fail  float64
	slow  float64
	delay time.Duration

	accepted, refused, badSignature atomic.Int64
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "where to listen")
	secrets := flag.String("secret", "", "the endpoint's signing secrets (whsec_…), comma-separated")
	logPath := flag.String("log", "deliveries.jsonl", "the log of accepted deliveries (appended to)")
	flag.Parse()
	r := &receiver{}
	for _, s := range strings.Split(*secrets, ",") {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil || s == "" {
			log.Fatalf("receiver: secret %q: %v", s, err)
		}
		r.hooks = append(r.hooks, wh)
	}
	f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	r.log = f
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks", r.hook)
	mux.HandleFunc("/control", r.control)
	log.Printf("receiver listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

func (r *receiver) hook(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if !r.verify(body, req.Header) {
		r.badSignature.Add(1)
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	fail, slow, delay := r.fail, r.slow, r.delay
	r.mu.Unlock()
	if rand.Float64() < fail {
		r.refused.Add(1)
		http.Error(w, "not now", http.StatusInternalServerError)
		return
	}
	var b struct {
		Type string `json:"type"`
		Data struct {
			OrderNo    string `json:"order_no"`
			GroupID    string `json:"group_id"`
			PaymentID  string `json:"payment_id"`
			ActivityID int64  `json:"activity_id"`
			Sequence   int64  `json:"sequence"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	subject := b.Data.OrderNo
	switch {
	case strings.HasPrefix(b.Type, "group."):
		subject = b.Data.GroupID
	case strings.HasPrefix(b.Type, "payment."):
		subject = b.Data.PaymentID
	case strings.HasPrefix(b.Type, "activity."):
		subject = strconv.FormatInt(b.Data.ActivityID, 10)
	}
	sum := sha256.Sum256(body)
	line, _ := json.Marshal(Line{ID: req.Header.Get(standardwebhooks.HeaderWebhookID), Type: b.Type, Subject: subject,
		Sequence: b.Data.Sequence, BodySHA: hex.EncodeToString(sum[:8]), At: time.Now().UTC().Format(time.RFC3339Nano)})
	// One write of one line, before the answer: a kill after it leaves the
	// line and no answer, and the sender sends again.
	if _, err := r.log.Write(append(line, '\n')); err != nil {
		http.Error(w, "log", http.StatusInternalServerError)
		return
	}
	r.accepted.Add(1)
	if rand.Float64() < slow {
		time.Sleep(delay) // done, but slow to say so: past the sender's timeout, it sends again
	}
	w.WriteHeader(http.StatusOK)
}

// verify reports whether any of the receiver's secrets verifies the
// delivery (webhook-id, webhook-timestamp within 5 minutes, and
// webhook-signature over id.timestamp.body).
func (r *receiver) verify(body []byte, h http.Header) bool {
	for _, wh := range r.hooks {
		if wh.Verify(body, h) == nil {
			return true
		}
	}
	return false
}

func (r *receiver) control(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost {
		q := req.URL.Query()
		r.mu.Lock()
		r.fail, _ = strconv.ParseFloat(q.Get("fail"), 64)
		r.slow, _ = strconv.ParseFloat(q.Get("slow"), 64)
		r.delay, _ = time.ParseDuration(q.Get("delay"))
		r.mu.Unlock()
	}
	fmt.Fprintf(w, `{"accepted":%d,"refused":%d,"bad_signature":%d}`+"\n", r.accepted.Load(), r.refused.Load(), r.badSignature.Load())
}
