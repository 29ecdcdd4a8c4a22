package soak

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// ledger is what the shoppers were told: every order a 202 named, and which
// of them a pay or a cancel was confirmed for. At the end the service must
// agree: an accepted order exists, a confirmed pay stayed paid (or was
// refunded, in a group that failed), a confirmed cancel stayed cancelled.
type ledger struct {
	mu      sync.Mutex
	orders  map[string]*note
	answers map[string]int64 // "place 202", "pay 409 CONFLICT", "retry 502", …
}

// note is one accepted order as its shopper knows it.
type note struct {
	sale            *sale
	at              time.Duration // when its first 202 came, after the start
	user            int64
	qty             int64
	group           string
	paid, cancelled bool // confirmed to the shopper
}

func newLedger() *ledger {
	return &ledger{orders: map[string]*note{}, answers: map[string]int64{}}
}

// answer counts one answer the shoppers got.
func (l *ledger) answer(what string) {
	l.mu.Lock()
	l.answers[what]++
	l.mu.Unlock()
}

// accepted notes an order a 202 named (a retry's 202 names the same order).
func (l *ledger) accepted(s *sale, no string, user, qty int64, group string, at time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.orders[no]; !ok {
		l.orders[no] = &note{sale: s, user: user, qty: qty, group: group, at: at}
	}
}

// acceptedAt is when order no's first 202 came.
func (l *ledger) acceptedAt(no string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.orders[no]; n != nil {
		return n.at
	}
	return 0
}

// saleOf is the sale of order no, nil if no 202 named it.
func (l *ledger) saleOf(no string) *sale {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.orders[no]; n != nil {
		return n.sale
	}
	return nil
}

// confirmed notes a pay or a cancel the service confirmed; a pay counts
// towards its sale's paid units once.
func (l *ledger) confirmed(no string, status order.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.orders[no]
	switch {
	case n == nil:
	case status == order.Paid && !n.paid:
		n.paid = true
		n.sale.paidUnits.Add(n.qty)
	case status == order.Cancelled:
		n.cancelled = true
	}
}

// acceptedIn is how many distinct orders of sale id the shoppers saw
// accepted.
func (l *ledger) acceptedIn(id int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, o := range l.orders {
		if o.sale.ID == id {
			n++
		}
	}
	return n
}

// outcome is how the shoppers' orders ended, by the statuses in Redis.
type outcome struct {
	accepted, paid, cancelled, expired, refunded int64
	broken                                       []string // promises the service did not keep
}

// settle reads the final status of every order the shoppers saw accepted
// and compares it with what they were told.
func (l *ledger) settle(ctx context.Context, rdb redis.UniversalClient) (outcome, error) {
	l.mu.Lock()
	nos := make([]string, 0, len(l.orders))
	for no := range l.orders {
		nos = append(nos, no)
	}
	l.mu.Unlock()
	sort.Strings(nos)
	var out outcome
	for len(nos) > 0 {
		chunk := nos[:min(len(nos), 1000)]
		nos = nos[len(chunk):]
		cmds := make([]*redis.StringCmd, len(chunk))
		p := rdb.Pipeline()
		for i, no := range chunk {
			l.mu.Lock()
			id := l.orders[no].sale.ID
			l.mu.Unlock()
			k := rediskeys.For(id)
			if _, shard, shards, err := order.ParseNoShard(no); err == nil {
				k = rediskeys.ForShard(id, shard, shards) // a sharded sale's order is in its shard
			}
			cmds[i] = p.HGet(ctx, k.Orders, no)
		}
		if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
			return out, fmt.Errorf("soak: final statuses: %w", err)
		}
		l.mu.Lock()
		for i, no := range chunk {
			n, status := l.orders[no], redisstore.RecordStatus(cmds[i].Val())
			out.accepted++
			switch status {
			case order.Paid:
				out.paid++
			case order.Refunded:
				out.refunded++
			case order.Cancelled:
				if n.cancelled {
					out.cancelled++
				} else {
					out.expired++ // timed out, or cancelled with its failed group
				}
			}
			switch {
			case status == "":
				out.broken = append(out.broken, fmt.Sprintf("order %s (sale %d, user %d) was accepted with a 202 and is not in Redis", no, n.sale.ID, n.user))
			case n.paid && status != order.Paid && !(n.group != "" && status == order.Refunded):
				out.broken = append(out.broken, fmt.Sprintf("order %s (sale %d, user %d) was confirmed paid and is %s", no, n.sale.ID, n.user, status))
			case n.cancelled && status != order.Cancelled:
				out.broken = append(out.broken, fmt.Sprintf("order %s (sale %d, user %d) was confirmed cancelled and is %s", no, n.sale.ID, n.user, status))
			case status == order.PendingPayment:
				out.broken = append(out.broken, fmt.Sprintf("order %s (sale %d, user %d) is still pending payment after its pay-by", no, n.sale.ID, n.user))
			}
		}
		l.mu.Unlock()
	}
	return out, nil
}

// answerCounts is a copy of the answers.
func (l *ledger) answerCounts() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.answers))
	for k, v := range l.answers {
		out[k] = v
	}
	return out
}
