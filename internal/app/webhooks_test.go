package app_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
)

// envInt is the test's setting name as an integer, or def.
func envInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, v, err)
		}
		return n
	}
	return def
}

// Order events of real orders through the worker to a real receiver
// process that checks every signature with the Standard Webhooks library.
// Shoppers place orders through the api, pay them, cancel them, leave
// some unpaid to time out; groups fill and succeed, others fail at their
// deadline (their paid member refunded, the unpaid one cancelled); a
// small sale sells out, a unit comes back and it sells out again; the
// admin closes a sale; money that paid no order is flagged. Every event is
// produced by the worker's writes (docs/webhooks.md), none by the test.
// Meanwhile the receiver answers 500s, answers too slowly (after it took
// the delivery: the worker sends again), and is killed with -9
// mid-request and stays down — its endpoint's secret rotated meanwhile,
// and the receiver back with the new secret only.
//
// At the end: the outbox holds exactly the events the test's actions make
// (derived by the test from what it did, not read back: none invented,
// e.g. no order.paid of an unpaid order), each delivered; each order's
// sequence complete (1 to its last, no hole) with the right types and
// cancel reasons; every duplicate a retry of the same id with the same
// body; no signature refused; the endpoint still enabled.
// WEBHOOK_TEST_ORDERS (default 1,000) and WEBHOOK_TEST_DOWN (seconds,
// default 5) make it the 20,000 orders and a minute down: make
// test-webhooks.
func TestWebhooks_receiverFailsSlowsAndDies_everyEventDeliveredOnceOrRetried(t *testing.T) {
	waits(t)
	orders := envInt(t, "WEBHOOK_TEST_ORDERS", 1000)
	down := time.Duration(envInt(t, "WEBHOOK_TEST_DOWN", 5)) * time.Second
	// Compressed, and long enough to outlast the receiver's death: every
	// delivery's last try comes well after it is back.
	schedule := "100ms,200ms,500ms,1s,2s,3s,5s,5s,5s,5s,5s,10s,10s,10s"
	if down > 10*time.Second {
		schedule = "100ms,500ms,1s,2s,5s,10s,20s,30s,30s,30s,30s,30s"
	}
	s := newStackWith(t, "", map[string]string{
		"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_RETRY_SCHEDULE": schedule, "WEBHOOK_TIMEOUT": "1s",
		"WEBHOOK_DISPATCH_INTERVAL": "50ms",
	})
	s.worker()
	db, err := connect.MySQL(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	hooks := mysqlstore.NewWebhooks(db)
	t.Cleanup(hooks.Close)

	addr := testenv.FreeAddr(t)
	ep := s.admin("POST", "/admin/v1/webhook-endpoints", `{"url":"http://`+addr+`/hooks","events":["*"],"description":"the test's receiver"}`)
	if ep.code != 201 {
		t.Fatalf("create the endpoint: %d %v", ep.code, ep.body)
	}
	epPath := fmt.Sprintf("/admin/v1/webhook-endpoints/%d", int64(ep.body["id"].(float64)))
	rec := startReceiver(t, addr, ep.str("secret"))
	x := newExpected()

	// The flash sale (never sold out: twice the units), while the receiver
	// answers 30% of deliveries 500: each shopper places, then 60% pay,
	// 30% cancel, 10% leave it to time out (10 s).
	rec.control(t, "fail=0.3")
	big := s.sale(2*orders, 1, 10)
	x.flashOrders(t, s, big, orders, 1)

	// Groups of 3 (15 s to fill): half fill and pay (succeeded), half get
	// two members of whom the opener pays: at the deadline the group
	// fails, the opener is refunded, the other cancelled (group_failed).
	groups := max(4, orders/200)
	gb := s.groupBuy(3*groups, 1, 3, 15, 60)
	x.groups(t, s, gb, groups, int64(orders)+1)

	// A sale of 3 units sells out; its first order is cancelled and a 4th
	// shopper takes the unit: sold out again at the same version, the same
	// activity.sold_out. Its orders are left to time out.
	small := s.sale(3, 1, 10)
	var smallNos []string
	for u := int64(900_001); u <= 900_003; u++ {
		smallNos = append(smallNos, x.place(t, s, small, u))
	}
	if r := s.call("POST", "/v1/orders/"+smallNos[0]+"/cancel", s.bearer(900_001), ""); r.code != 200 {
		t.Fatalf("cancel: %d %v", r.code, r.body)
	}
	x.order(smallNos[0], webhook.CancelShopper)
	smallNos = append(smallNos, x.place(t, s, small, 900_004))
	for _, no := range smallNos[1:] {
		x.order(no, webhook.CancelTimeout)
	}
	x.add(webhook.ActivitySoldOut, strconv.FormatInt(small, 10), 0)

	// A sale of 6 units in 3 shards sells out to 12 shoppers: no one script
	// sees the whole sale, and the worker's reconciler proves the sell-out
	// by a snapshot of every shard: one activity.sold_out all the same.
	sharded, _ := s.publishedSale(6, 1, 10, `,"shards":3`)
	for u := int64(900_101); u <= 900_112; u++ {
		r := s.order(u, sharded, 1)
		for try := 0; r.code == 503 && try < 5; try++ { // units on their way between shards
			time.Sleep(100 * time.Millisecond)
			r = s.order(u, sharded, 1)
		}
		switch r.code {
		case 202:
			x.mu.Lock()
			x.orders++
			x.mu.Unlock()
			x.order(r.str("order_no"), webhook.CancelTimeout)
		case 409:
		default:
			t.Fatalf("place in the sharded sale: %d %v", r.code, r.body)
		}
	}
	x.add(webhook.ActivitySoldOut, strconv.FormatInt(sharded, 10), 0)

	// A sale closed by the admin, and money flagged, from their producers.
	closed := s.sale(10, 1, 900)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/close", closed), ""); r.code != 200 {
		t.Fatalf("close: %d %v", r.code, r.body)
	}
	x.add(webhook.ActivityClosed, strconv.FormatInt(closed, 10), 0)
	pays := mysqlstore.NewPayments(db)
	for i, flag := range []payment.Flag{payment.Late, payment.Duplicate, payment.Mismatch} {
		p := payment.Payment{ID: fmt.Sprintf("sim_pi_flagged_%d", i), Provider: "simulated", OrderNo: smallNos[0], ActivityID: small,
			AmountCents: 500, Currency: "cny", Status: payment.Succeeded, Flag: flag, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if err := pays.WritePayment(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		x.add(webhook.PaymentFlagged, p.ID, 1)
	}

	// The 500s happen before the phase ends: on a fast machine the actions
	// above take 2 s, and the worker's first deliveries may come after
	// them (its first sync up to asynq's poll of a second late), which
	// left the receiver no delivery to refuse (a failing run, 2026-11-30).
	for deadline := time.Now().Add(30 * time.Second); rec.stats(t)["refused"] == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}

	// The timeouts and the groups' deadlines come while the receiver takes
	// 30% of deliveries and answers only after the worker's 1 s timeout:
	// those it gets again.
	rec.control(t, "slow=0.3&delay=1500ms")
	time.Sleep(16 * time.Second)
	// Killed -9 with deliveries in flight (it answers each after 300 ms),
	// down for a while; meanwhile the secret is rotated, and it comes back
	// knowing the new one only: every delivery carries both signatures
	// during the rotation's window.
	rec.control(t, "slow=1&delay=300ms")
	time.Sleep(time.Second)
	rec.kill(t)
	rotated := s.admin("POST", epPath+"/rotate-secret", "")
	if rotated.code != 200 || rotated.str("secret") == "" {
		t.Fatalf("rotate: %d %v", rotated.code, rotated.body)
	}
	time.Sleep(down)
	rec.secret = rotated.str("secret")
	rec.start(t)

	// Every order reaches its end in MySQL; then every expected event
	// arrives, however long the schedule takes.
	s.waitMySQL(0, 2*time.Minute, "SELECT COUNT(*) FROM orders WHERE status = 'pending_payment'")
	s.waitMySQL(int64(x.orders), time.Minute, "SELECT COUNT(*) FROM orders")
	deadline := time.Now().Add(3*time.Minute + time.Duration(orders)*10*time.Millisecond)
	var got map[string][]receivedLine
	for {
		got = rec.lines(t)
		if len(got) >= len(x.want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything more, invented, would come now
	got = rec.lines(t)

	// The outbox: exactly the expected events, by (type, subject,
	// sequence); their bodies say the reasons.
	stored := map[string]webhook.Event{}
	rows, err := outboxRows(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rows {
		stored[e.ID] = e
		if _, ok := x.want[x.key(e.Type, e.Subject, e.Sequence)]; !ok {
			t.Errorf("the outbox holds %s of %s #%d, which no action made (%s)", e.Type, e.Subject, e.Sequence, e.Body)
		}
	}
	if len(rows) != len(x.want) {
		t.Errorf("the outbox holds %d events, the test's actions make %d", len(rows), len(x.want))
	}
	dups, lines := 0, 0
	arrived := map[string]bool{}
	for id, ls := range got {
		lines += len(ls)
		e, ok := stored[id]
		if !ok {
			t.Errorf("the receiver got %s (%s of %s), which is not in the outbox", id, ls[0].Type, ls[0].Subject)
			continue
		}
		sum := sha256.Sum256(e.Body)
		for _, l := range ls {
			if l.BodySHA != hex.EncodeToString(sum[:8]) {
				t.Errorf("%s arrived with a body that is not the outbox's", id)
			}
		}
		dups += len(ls) - 1
		if ls[0].Type != string(e.Type) || ls[0].Subject != e.Subject || ls[0].Sequence != e.Sequence {
			t.Errorf("%s arrived as %s of %s #%d, stored as %s of %s #%d", id, ls[0].Type, ls[0].Subject, ls[0].Sequence,
				e.Type, e.Subject, e.Sequence)
		}
		arrived[x.key(e.Type, e.Subject, e.Sequence)] = true
		if want := x.reason[e.Subject]; e.Type == webhook.OrderCancelled {
			var b struct {
				Data struct {
					Reason webhook.CancelReason `json:"reason"`
				} `json:"data"`
			}
			if err := json.Unmarshal(e.Body, &b); err != nil || b.Data.Reason != want {
				t.Errorf("%s cancelled for %q, want %q", e.Subject, b.Data.Reason, want)
			}
		}
	}
	// Each subject's sequence complete: every expected event arrived.
	missing := 0
	for _, e := range rows {
		if k := x.key(e.Type, e.Subject, e.Sequence); !arrived[k] {
			if missing++; missing <= 5 {
				t.Errorf("%s (%s) never arrived; %s", k, e.ID, s.attempts(e))
			}
		}
	}
	inOutbox := map[string]bool{}
	for _, e := range rows {
		inOutbox[x.key(e.Type, e.Subject, e.Sequence)] = true
	}
	for k := range x.want {
		if !inOutbox[k] {
			missing++ // never produced (the outbox's count said so above)
		}
	}
	stats := rec.stats(t)
	if stats["bad_signature"] != 0 {
		t.Errorf("the receiver refused %v signatures", stats["bad_signature"])
	}
	if e := s.admin("GET", epPath, ""); e.body["enabled"] != true {
		t.Errorf("the endpoint: %v", e.body)
	}
	failed := s.count("SELECT COUNT(*) FROM webhook_attempts WHERE delivered = 0")
	noAnswer := s.count("SELECT COUNT(*) FROM webhook_attempts WHERE delivered = 0 AND http_status = 0")
	refused := s.count("SELECT COUNT(*) FROM webhook_attempts WHERE http_status = 500")
	t.Logf("%d orders (%d flash, %d groups), %d events produced; %d lines at the receiver (%d duplicates: retries of the same id), "+
		"%d attempts failed (%d answered 500, %d no answer: timeouts, the kill, connection refused); receiver %v",
		x.orders, orders, groups, len(x.want), lines, dups, failed, refused, noAnswer, stats)
	if missing > 0 || refused == 0 || noAnswer == 0 || dups == 0 {
		t.Fatalf("%d events never arrived; faults seen: %d answered 500, %d unanswered, %d duplicates (want each > 0)",
			missing, refused, noAnswer, dups)
	}
}

// expected is the events a test's actions make, derived from the actions
// (never read back from the service): by "type subject sequence".
type expected struct {
	mu     sync.Mutex
	want   map[string]bool
	reason map[string]webhook.CancelReason // an order's cancel reason
	orders int
}

func newExpected() *expected {
	return &expected{want: map[string]bool{}, reason: map[string]webhook.CancelReason{}}
}

func (x *expected) key(t webhook.Type, subject string, seq int64) string {
	if t == webhook.ActivitySoldOut || t == webhook.ActivityClosed {
		seq = 0 // an activity's version: not the test's to know
	}
	return fmt.Sprintf("%s %s %d", t, subject, seq)
}

func (x *expected) add(t webhook.Type, subject string, seq int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.want[x.key(t, subject, seq)] = true
}

// order expects order no's events: accepted, then paid (and refunded,
// when reason is "refunded"), or cancelled for reason; "paid" for a paid
// one.
func (x *expected) order(no string, end webhook.CancelReason) {
	x.add(webhook.OrderAccepted, no, 1)
	switch end {
	case "paid":
		x.add(webhook.OrderPaid, no, 2)
	case "refunded":
		x.add(webhook.OrderPaid, no, 2)
		x.add(webhook.OrderRefunded, no, 3)
	default:
		x.add(webhook.OrderCancelled, no, 2)
		x.mu.Lock()
		x.reason[no] = end
		x.mu.Unlock()
	}
}

// place places user's order of one unit in sale act and returns its number.
func (x *expected) place(t *testing.T, s *stack, act, user int64) string {
	r := s.order(user, act, 1)
	if r.code != 202 {
		t.Errorf("place: %d %v", r.code, r.body)
		return ""
	}
	x.mu.Lock()
	x.orders++
	x.mu.Unlock()
	return r.str("order_no")
}

// flashOrders has n shoppers from user first on place an order in act
// each, 8 at a time; 60% pay it, 30% cancel it, 10% leave it unpaid.
func (x *expected) flashOrders(t *testing.T, s *stack, act int64, n int, first int64) {
	var wg sync.WaitGroup
	next := make(chan int64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				no := x.place(t, s, act, u)
				if no == "" {
					continue
				}
				switch r := u % 10; {
				case r < 6:
					if p := s.pay(u, no); p.code != 200 {
						t.Errorf("pay: %d %v", p.code, p.body)
					}
					x.order(no, "paid")
				case r < 9:
					if c := s.call("POST", "/v1/orders/"+no+"/cancel", s.bearer(u), ""); c.code != 200 {
						t.Errorf("cancel: %d %v", c.code, c.body)
					}
					x.order(no, webhook.CancelShopper)
				default:
					x.order(no, webhook.CancelTimeout)
				}
			}
		}()
	}
	for u := first; u < first+int64(n); u++ {
		next <- u
	}
	close(next)
	wg.Wait()
}

// groups opens n groups of 3 in act with users from first on: the even
// ones filled and paid (succeeded), the odd ones given a second member and
// the opener's payment only (failed at the deadline: the opener refunded,
// the other cancelled).
func (x *expected) groups(t *testing.T, s *stack, act int64, n int, first int64) {
	u := first
	for i := range n {
		size := 3
		if i%2 == 1 {
			size = 2
		}
		gid, ms := s.fill(act, size, u)
		u += int64(size)
		x.mu.Lock()
		x.orders += size
		x.mu.Unlock()
		for j, m := range ms {
			if i%2 == 0 || j == 0 {
				if p := s.pay(m.user, m.no); p.code != 200 {
					t.Fatalf("pay: %d %v", p.code, p.body)
				}
			}
			switch {
			case i%2 == 0:
				x.order(m.no, "paid")
			case j == 0:
				x.order(m.no, "refunded")
			default:
				x.order(m.no, webhook.CancelGroupFailed)
			}
		}
		x.add(map[bool]webhook.Type{true: webhook.GroupSucceeded, false: webhook.GroupFailed}[i%2 == 0], gid, 1)
	}
}

// attempts says what the outbox and the delivery log hold of event e.
func (s *stack) attempts(e webhook.Event) string {
	id := e.ID
	var b strings.Builder
	q, arg := "SELECT COUNT(*) FROM webhook_events WHERE id = ? AND seq <= ", id
	if e.Type == webhook.OrderAccepted {
		q, arg = "SELECT COUNT(*) FROM orders WHERE order_no = ? AND event_seq <= ", e.Subject // its row (migrations/00018)
	}
	fmt.Fprintf(&b, "dispatched %d, attempts:", s.count(q+"(SELECT COALESCE(MAX(through_seq), 0) FROM webhook_dispatches)", arg))
	rows, err := s.db.Query("SELECT attempt, http_status, delivered, is_last, reason, attempted_at FROM webhook_attempts WHERE event_id = ? ORDER BY id", id)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	for rows.Next() {
		var n, status int
		var delivered, last bool
		var reason string
		var at time.Time
		_ = rows.Scan(&n, &status, &delivered, &last, &reason, &at)
		fmt.Fprintf(&b, " [#%d %d delivered=%v last=%v %q %s]", n, status, delivered, last, reason, at.Format("15:04:05.000"))
	}
	return b.String()
}

// outboxRows is every event in the outbox, dispatched or not, in the
// order appended: the rows of webhook_events and the orders' order.accepted,
// which is their row (migrations/00018), in the stack's currency (the
// default), read as the recovery reads them from the first.
func outboxRows(db *gorm.DB) ([]webhook.Event, error) {
	w := mysqlstore.NewWebhooks(db)
	defer w.Close()
	var out []webhook.Event
	for cursor := uint64(0); ; {
		page, next, err := w.EventsSince(context.Background(), time.Time{}, cursor, 500)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 500 {
			return out, nil
		}
		cursor = next
	}
}

// receivedLine is a line of the receiver's log (internal/webhook/receiver).
type receivedLine struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Subject  string `json:"subject"`
	Sequence int64  `json:"sequence"`
	BodySHA  string `json:"body_sha"`
}

// receiverProc is the receiver program as a process of its own.
type receiverProc struct {
	bin, addr, secret, log string
	cmd                    *exec.Cmd
}

// startReceiver builds internal/webhook/receiver and starts it on addr
// with secret.
func startReceiver(t *testing.T, addr, secret string) *receiverProc {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "receiver")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/flashsale/flashsale/internal/webhook/receiver").CombinedOutput(); err != nil {
		t.Fatalf("build the receiver: %v\n%s", err, out)
	}
	r := &receiverProc{bin: bin, addr: addr, secret: secret, log: filepath.Join(dir, "deliveries.jsonl")}
	r.start(t)
	t.Cleanup(func() {
		if r.cmd != nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	return r
}

func (r *receiverProc) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "-addr", r.addr, "-secret", r.secret, "-log", r.log)
	r.cmd.Stderr = os.Stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitHTTP(t, "http://"+r.addr+"/control", 10*time.Second)
}

// kill kills the receiver with -9, whatever it was doing.
func (r *receiverProc) kill(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

func (r *receiverProc) control(t *testing.T, query string) {
	t.Helper()
	resp, err := http.Post("http://"+r.addr+"/control?"+query, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func (r *receiverProc) stats(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/control")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]float64
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return m
}

// lines reads the receiver's log: each delivery it took, by event id.
func (r *receiverProc) lines(t *testing.T) map[string][]receivedLine {
	t.Helper()
	f, err := os.Open(r.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]receivedLine{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l receivedLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			t.Fatalf("receiver log line %q: %v", sc.Text(), err)
		}
		out[l.ID] = append(out[l.ID], l)
	}
	return out
}
