package waitingroom_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const secret = "0123456789abcdef0123456789abcdef"

// figuresAge is past the most a poll's figures may lag Redis (the memory
// path's 10 ms, fastread.go): a read after it sees every change before it.
const figuresAge = 25 * time.Millisecond

func roomSale(id int64, stock, rate int, starts time.Time) activity.Activity {
	return activity.Activity{
		ID: id, Type: activity.Seckill, Name: "sale", SKU: "S", PriceCents: 100, TotalStock: stock,
		PerUserLimit: 1, StartsAt: starts, EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute,
		Status: activity.Published, WaitingRoom: true, AdmitPerSecond: rate, AdmissionTTL: time.Minute, Version: 1,
	}
}

type fixture struct {
	sh  *ordertest.Shop
	svc *waitingroom.Service
	rdb redis.UniversalClient
}

func setup(t *testing.T, sales ...activity.Activity) fixture {
	t.Helper()
	sh := ordertest.New(t)
	for _, a := range sales {
		if _, err := sh.Stock.Load(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	signer, err := waitingroom.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{sh: sh, svc: waitingroom.New(sh.RDB, signer), rdb: sh.RDB}
}

// A sale without a waiting room, or unknown, is refused with its error;
// reading before joining is ErrNotInQueue; joining again answers the same
// ticket, never a better one.
func TestJoin_onePlacePerUser_andRefusals(t *testing.T) {
	plain := roomSale(2, 10, 10, time.Now().Add(-time.Minute))
	plain.WaitingRoom, plain.AdmitPerSecond = false, 0
	f := setup(t, roomSale(1, 10, 1, time.Now().Add(-time.Minute)), plain)
	ctx := context.Background()
	if _, err := f.svc.Join(ctx, 2, 7, waitingroom.Proof{}); !errors.Is(err, waitingroom.ErrNoWaitingRoom) {
		t.Fatalf("join a sale without a room: %v", err)
	}
	if _, err := f.svc.Join(ctx, 99, 7, waitingroom.Proof{}); !errors.Is(err, activity.ErrNotOnSale) {
		t.Fatalf("join an unknown sale: %v", err)
	}
	if _, err := f.svc.Read(ctx, 1, 7); !errors.Is(err, waitingroom.ErrNotInQueue) {
		t.Fatalf("read before joining: %v", err)
	}
	var first []int64
	for u := int64(1); u <= 5; u++ {
		p, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{})
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, p.Ticket)
	}
	for u := int64(1); u <= 5; u++ {
		p, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{})
		if err != nil || p.Ticket != first[u-1] {
			t.Fatalf("join again user %d: %+v, %v; want ticket %d", u, p, err, first[u-1])
		}
	}
	if first[4] != 5 {
		t.Fatalf("tickets %v: want 1..5", first)
	}
}

// After the start, joins from many goroutines take tickets in the order
// Redis ran them (a join that returned before another was sent has the
// lower ticket), and reads never see a later ticket admitted while an
// earlier one waits: 0 inversions.
func TestQueue_afterStart_admitsInJoinOrder_zeroInversions(t *testing.T) {
	const users, workers = 400, 16
	f := setup(t, roomSale(1, 10_000, 2000, time.Now().Add(-time.Second)))
	ctx := context.Background()
	type join struct {
		sent, done time.Time
		ticket     int64
	}
	joins := make([]join, users+1)
	var wg sync.WaitGroup
	next := make(chan int64)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				sent := time.Now()
				p, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{})
				if err != nil {
					t.Error(err)
					return
				}
				joins[u] = join{sent, time.Now(), p.Ticket}
			}
		}()
	}
	for u := int64(1); u <= users; u++ {
		next <- u
	}
	close(next)
	wg.Wait()
	seen := map[int64]bool{}
	for u := 1; u <= users; u++ {
		seen[joins[u].ticket] = true
		for v := 1; v <= users; v++ {
			if joins[u].done.Before(joins[v].sent) && joins[u].ticket > joins[v].ticket {
				t.Fatalf("user %d's join returned before %d's was sent, with ticket %d > %d", u, v, joins[u].ticket, joins[v].ticket)
			}
		}
	}
	if len(seen) != users {
		t.Fatalf("%d distinct tickets of %d joins", len(seen), users)
	}
	// Reads in one goroutine, in time order: once a ticket is seen admitted,
	// every lower ticket read later must be too.
	var maxAdmitted int64
	inversions, admitted := 0, 0
	for round := 0; round < 40 && admitted < users; round++ {
		admitted = 0
		for u := int64(1); u <= users; u++ {
			p, err := f.svc.Read(ctx, 1, u)
			if err != nil {
				t.Fatal(err)
			}
			switch p.Status {
			case waitingroom.Admitted:
				admitted++
				maxAdmitted = max(maxAdmitted, p.Ticket)
				if p.Admission == "" || !p.AdmittedUntil.After(time.Now()) {
					t.Fatalf("admitted without a token or already expired: %+v", p)
				}
			case waitingroom.Waiting:
				if p.Ticket < maxAdmitted {
					inversions++
				}
				if p.Position <= 0 || p.EstimatedWait <= 0 || p.PollAfter < waitingroom.MinPoll {
					t.Fatalf("waiting at position %d: %+v", p.Position, p)
				}
			default:
				t.Fatalf("user %d: %+v", u, p)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if inversions != 0 {
		t.Fatalf("%d inversions", inversions)
	}
	if admitted != users {
		t.Fatalf("%d of %d admitted after the reads: the counter stopped?", admitted, users)
	}
}

// The early joiners' order is a uniform random shuffle: over many sales
// of 4 early joiners each, the slot (the ticket at the start) of the i-th
// to join is uniform — a chi-square test of each joiner's slots, at p =
// 0.001 (3 degrees of freedom: 16.27).
func TestShuffle_beforeStart_isUniform_chiSquare(t *testing.T) {
	const runs, k = 2000, 4
	f := setup(t)
	ctx := context.Background()
	var counts [k][k]int
	for r := int64(1); r <= runs; r++ {
		key := rediskeys.For(r)
		f.rdb.HSet(ctx, key.Meta, "status", "published", "wr", "1", "wr_rate", 10, "wr_ttl_ms", 60000,
			"starts_ms", time.Now().Add(time.Hour).UnixMilli(), "ends_ms", time.Now().Add(2*time.Hour).UnixMilli())
		f.rdb.Set(ctx, key.Stock, 10, 0)
		for i := int64(0); i < k; i++ {
			p, err := f.svc.Join(ctx, r, 100+i, waitingroom.Proof{})
			if err != nil || p.Status != waitingroom.Waiting || p.Position != -1 {
				t.Fatalf("early join: %+v, %v", p, err)
			}
		}
		for i := int64(0); i < k; i++ {
			v, err := f.rdb.HGet(ctx, key.QueueUser(100+i), strconv.FormatInt(100+i, 10)).Result()
			if err != nil {
				t.Fatal(err)
			}
			s, _ := strconv.Atoi(v[1:])
			counts[i][s-1]++
		}
	}
	exp := float64(runs) / k
	for i := range k {
		chi := 0.0
		for s := range k {
			d := float64(counts[i][s]) - exp
			chi += d * d / exp
		}
		if chi > 16.27 {
			t.Errorf("joiner %d's slots %v: chi-square %.1f > 16.27 (p < 0.001)", i, counts[i], chi)
		}
	}
	t.Logf("slots by join order: %v", counts)
}

// At the start the early joiners hold tickets 1..n in a shuffled order, and
// the first join after it takes n+1.
func TestShuffle_atStart_ticketsArePermutation(t *testing.T) {
	starts := time.Now().Add(800 * time.Millisecond)
	f := setup(t, roomSale(1, 100, 1000, starts))
	ctx := context.Background()
	for u := int64(1); u <= 6; u++ {
		if p, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil || p.Position != -1 {
			t.Fatalf("early join: %+v, %v", p, err)
		}
	}
	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	late, err := f.svc.Join(ctx, 1, 7, waitingroom.Proof{})
	if err != nil || late.Ticket != 7 {
		t.Fatalf("late join: %+v, %v; want ticket 7", late, err)
	}
	seen := map[int64]bool{}
	for u := int64(1); u <= 6; u++ {
		p, err := f.svc.Read(ctx, 1, u)
		if err != nil || p.Ticket < 1 || p.Ticket > 6 || seen[p.Ticket] {
			t.Fatalf("user %d: %+v, %v", u, p, err)
		}
		seen[p.Ticket] = true
	}
}

// Admission stops while the admitted who have not ordered fill the units
// left (and their margin), and goes on as they order; when the sale sells
// out every waiting shopper reads sold_out, and closed once it closes.
func TestAdmission_businessAware_stopsAtStock_soldOut_closed(t *testing.T) {
	a := roomSale(1, 5, 1000, time.Now().Add(-time.Second))
	f := setup(t, a)
	ctx := context.Background()
	for u := int64(1); u <= 30; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // 100 could be admitted at the rate
	admitted := func() (n int) {
		for u := int64(1); u <= 30; u++ {
			p, err := f.svc.Read(ctx, 1, u)
			if err != nil {
				t.Fatal(err)
			}
			if p.Status == waitingroom.Admitted {
				n++
			}
		}
		return n
	}
	if n := admitted(); n != 6 { // 5 left, and a margin of a tenth, rounded up
		t.Fatalf("%d admitted with 5 units left and none ordered: want 6", n)
	}
	svc := f.sh.Service(ordertest.NoTasks{})
	for u := int64(1); u <= 3; u++ {
		if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 1, UserID: u, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	// 2 left (room 3), 3 admitted not ordered: still 6... then read again.
	if n := admitted(); n != 6 {
		t.Fatalf("%d admitted with 2 left and 3 admitted unordered: want 6", n)
	}
	for u := int64(4); u <= 5; u++ {
		if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 1, UserID: u, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// A poll answers from figures at most 10 ms old (the memory path,
	// fastread.go): a read that soon after the sell-out may still wait.
	time.Sleep(figuresAge)
	for u := int64(7); u <= 30; u++ {
		if p, err := f.svc.Read(ctx, 1, u); err != nil || p.Status != waitingroom.SoldOut {
			t.Fatalf("user %d after the sale sold out: %+v, %v", u, p, err)
		}
	}
	a.Status, a.Version = activity.Closed, 2
	if _, err := f.sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(figuresAge)
	for u := int64(1); u <= 30; u++ {
		if p, err := f.svc.Read(ctx, 1, u); err != nil || p.Status != waitingroom.Closed {
			t.Fatalf("user %d after the sale closed: %+v, %v", u, p, err)
		}
	}
}

// A new admit_per_second applies from the load that brings it: the counter
// first advances at the old rate, so the change neither drops nor banks
// admissions.
func TestRateChange_advancesAtOldRateFirst(t *testing.T) {
	a := roomSale(1, 100_000, 1, time.Now().Add(-time.Second))
	f := setup(t, a)
	ctx := context.Background()
	for u := int64(1); u <= 50; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	a.AdmitPerSecond, a.Version = 1000, 2
	if _, err := f.sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.Read(ctx, 1, 50)
	if err != nil {
		t.Fatal(err)
	}
	srv := p.Ticket - p.Position
	if p.Status == waitingroom.Admitted || srv < 1 || srv > 5 {
		t.Fatalf("right after the change: %+v (serving %d); want 1-5 admitted at the old rate", p, srv)
	}
	time.Sleep(100 * time.Millisecond)
	if p, err := f.svc.Read(ctx, 1, 50); err != nil || p.Status != waitingroom.Admitted {
		t.Fatalf("100 ms at the new rate: %+v, %v", p, err)
	}
}

// A join of a sale with join_pow_bits needs a proof of work on a challenge
// given to that user for that sale.
func TestJoin_proofOfWork(t *testing.T) {
	a := roomSale(1, 10, 10, time.Now().Add(-time.Second))
	a.JoinPowBits = 8
	f := setup(t, a)
	ctx := context.Background()
	if _, err := f.svc.Join(ctx, 1, 7, waitingroom.Proof{}); !errors.Is(err, waitingroom.ErrPowRequired) {
		t.Fatalf("no proof: %v", err)
	}
	ch, err := f.svc.NewChallenge(ctx, 1, 7)
	if err != nil || ch.Bits != 8 {
		t.Fatalf("challenge: %+v, %v", ch, err)
	}
	good, bad := solve(ch.Challenge, 8)
	if _, err := f.svc.Join(ctx, 1, 7, waitingroom.Proof{Challenge: ch.Challenge, Nonce: bad}); !errors.Is(err, waitingroom.ErrPowInvalid) {
		t.Fatalf("too few bits: %v", err)
	}
	if _, err := f.svc.Join(ctx, 1, 8, waitingroom.Proof{Challenge: ch.Challenge, Nonce: good}); !errors.Is(err, waitingroom.ErrPowInvalid) {
		t.Fatalf("another user's challenge: %v", err)
	}
	forged := ch.Challenge[:len(ch.Challenge)-2] + "xx"
	if _, err := f.svc.Join(ctx, 1, 7, waitingroom.Proof{Challenge: forged, Nonce: good}); !errors.Is(err, waitingroom.ErrPowInvalid) {
		t.Fatalf("forged challenge: %v", err)
	}
	if p, err := f.svc.Join(ctx, 1, 7, waitingroom.Proof{Challenge: ch.Challenge, Nonce: good}); err != nil || p.Ticket != 1 {
		t.Fatalf("good proof: %+v, %v", p, err)
	}
}

// solve finds a nonce with bits leading zero bits, and one with fewer.
func solve(challenge string, bits int) (good, bad string) {
	for i := 0; good == "" || bad == ""; i++ {
		n := strconv.Itoa(i)
		if waitingroom.LeadingZeroBits(challenge, n) >= bits {
			good = n
		} else if bad == "" {
			bad = n
		}
	}
	return good, bad
}

// An admission token admits its user to its sale until it expires; a
// missing, forged, expired, other user's or other sale's is ErrNotAdmitted.
// A sale without a waiting room needs none.
func TestAdmit_tokenBoundToUserSaleExpiry(t *testing.T) {
	plain := roomSale(2, 10, 10, time.Now().Add(-time.Minute))
	plain.WaitingRoom, plain.AdmitPerSecond = false, 0
	f := setup(t, roomSale(1, 10, 10, time.Now().Add(-time.Minute)), plain)
	ctx := context.Background()
	s := f.svc.Signer()
	tok, err := s.Issue(7, 1, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	expired, _ := s.Issue(7, 1, time.Now().Add(-time.Minute))
	other, _ := waitingroom.NewSigner("another secret of thirty-two bytes!")
	forged, _ := other.Issue(7, 1, time.Now().Add(time.Minute))
	if err := f.svc.Admit(ctx, 1, 7, tok); err != nil {
		t.Fatalf("good token: %v", err)
	}
	for name, c := range map[string]struct {
		user, sale int64
		tok        string
	}{"missing": {7, 1, ""}, "expired": {7, 1, expired}, "forged": {7, 1, forged}, "other user": {8, 1, tok},
		"garbage": {7, 1, "x.y.z"}} {
		if err := f.svc.Admit(ctx, c.sale, c.user, c.tok); !errors.Is(err, waitingroom.ErrNotAdmitted) {
			t.Errorf("%s: %v", name, err)
		}
	}
	tok3, _ := s.Issue(7, 3, time.Now().Add(time.Minute))
	if err := s.Verify(tok3, 7, 1); !errors.Is(err, waitingroom.ErrNotAdmitted) {
		t.Errorf("another sale's: %v", err)
	}
	if err := f.svc.Admit(ctx, 2, 7, ""); err != nil {
		t.Errorf("a sale without a waiting room: %v", err)
	}
}

// The queue's length is exported per live sale with a room: places given
// less the serving counter; a sale without a room exports none.
func TestQueueCollector_exportsWaitingPerSaleWithARoom(t *testing.T) {
	plain := roomSale(2, 10, 10, time.Now().Add(-time.Minute))
	plain.WaitingRoom, plain.AdmitPerSecond = false, 0
	f := setup(t, roomSale(1, 100, 1, time.Now().Add(time.Hour)), plain)
	ctx := context.Background()
	for u := int64(1); u <= 5; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(waitingroom.QueueCollector{Rdb: f.rdb,
		Live: func(context.Context) ([]int64, error) { return []int64{1, 2}, nil }})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 2 || mfs[0].GetName() != "flashsale_waitingroom_queue_length" || len(mfs[0].Metric) != 1 ||
		mfs[0].Metric[0].Gauge.GetValue() != 5 || mfs[0].Metric[0].Label[0].GetValue() != "1" {
		t.Fatalf("gathered %v: want flashsale_waitingroom_queue_length{activity=\"1\"} 5 alone", mfs)
	}
	if mfs[1].GetName() != "flashsale_waitingroom_serving" || len(mfs[1].Metric) != 1 || mfs[1].Metric[0].Gauge.GetValue() != 0 {
		t.Fatalf("gathered %v: want flashsale_waitingroom_serving{activity=\"1\"} 0 (before the start)", mfs[1])
	}
}
