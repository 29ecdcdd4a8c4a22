package invariants

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// checkMoney adds the money's invariants to a settled sale's report, from
// MySQL's payments and refunds and Redis's order records (which name the
// payment that paid each order):
//
//   - every paid or refunded order was paid by a payment the provider
//     confirmed (recorded succeeded, unflagged);
//   - every confirmed payment paid its order (the order's record names it)
//     or was given back (a refund);
//   - every refund has its payment, confirmed;
//   - nothing refunded twice: one refund per payment, and no order's
//     money refunded twice (as MySQL records them: its one row per payment
//     cannot show a payment refunded twice at the provider, which
//     CheckProviderRefunds asks the provider);
//   - the refunds never add up to more than the confirmed payments;
//   - every refunded order's payment was refunded;
//   - every paid or refunded order's live payment record (Redis, kept as
//     long as the sale) exists and names the payment that paid it (the
//     record a failed group's refund and the worker's backstop read).
func (r *Report) checkMoney(ctx context.Context, rdb redis.UniversalClient, db *sql.DB, id int64) error {
	orders, err := redisOrders(ctx, rdb, rediskeys.For(id))
	if err != nil {
		return err
	}
	misrecorded, err := liveRecords(ctx, rdb, orders)
	if err != nil {
		return err
	}
	type pay struct {
		order, status, flag string
		amount              int64
		refunds             int
	}
	pays := map[string]*pay{}
	rows, err := db.QueryContext(ctx, "SELECT id, order_no, status, flag, amount_cents FROM payments WHERE activity_id = ?", id)
	if err != nil {
		return fmt.Errorf("invariants: payments: %w", err)
	}
	var paid int64
	for rows.Next() {
		p := &pay{}
		var pid string
		if err := rows.Scan(&pid, &p.order, &p.status, &p.flag, &p.amount); err != nil {
			rows.Close()
			return fmt.Errorf("invariants: payments: %w", err)
		}
		pays[pid] = p
		if p.status == "succeeded" {
			paid += p.amount
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("invariants: payments: %w", err)
	}
	// The sale's refunds: those of its payments, and those of no payment
	// recorded that name one of its orders (an order's number starts with
	// its sale's id, then "-", or "." and its shard), which a join on the
	// payments would never see.
	rows, err = db.QueryContext(ctx, "SELECT r.payment_id, r.order_no, r.amount_cents FROM refunds r "+
		"LEFT JOIN payments p ON p.id = r.payment_id "+
		"WHERE p.activity_id = ? OR (p.id IS NULL AND (r.order_no LIKE ? OR r.order_no LIKE ?))",
		id, fmt.Sprintf("%d-%%", id), fmt.Sprintf("%d.%%", id))
	if err != nil {
		return fmt.Errorf("invariants: refunds: %w", err)
	}
	var refunded int64
	var orphans, unpaid []string
	refundsOfOrder := map[string]int{}
	for rows.Next() {
		var pid, no string
		var amount int64
		if err := rows.Scan(&pid, &no, &amount); err != nil {
			rows.Close()
			return fmt.Errorf("invariants: refunds: %w", err)
		}
		refunded += amount
		p := pays[pid]
		switch {
		case p == nil:
			orphans = append(orphans, pid)
		case p.status != "succeeded":
			unpaid = append(unpaid, pid)
		default:
			p.refunds++
			if p.flag == "" {
				refundsOfOrder[no]++
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("invariants: refunds: %w", err)
	}

	var noPayment, notPaying, twice, notRefunded []string
	for no, o := range orders {
		if o.status != "paid" && o.status != "refunded" {
			continue
		}
		p := pays[o.payment]
		if o.payment == "" || p == nil || p.status != "succeeded" || p.flag != "" {
			noPayment = append(noPayment, no)
		}
		if o.status == "refunded" && (p == nil || p.refunds == 0) {
			notRefunded = append(notRefunded, no)
		}
	}
	for pid, p := range pays {
		if p.refunds > 1 || refundsOfOrder[p.order] > 1 {
			twice = append(twice, pid)
		}
		if p.status != "succeeded" || p.refunds > 0 {
			continue
		}
		if o, ok := orders[p.order]; !ok || o.payment != pid || p.flag != "" {
			notPaying = append(notPaying, pid)
		}
	}
	r.Money = Money{Payments: int64(len(pays)), PaidCents: paid, RefundedCents: refunded}
	for _, p := range pays {
		if p.status == "succeeded" {
			r.Money.Confirmed++
		}
		r.Money.Refunds += int64(p.refunds)
	}
	add := r.adder()
	add("every paid order paid by a confirmed payment", len(noPayment) == 0,
		"%d paid or refunded orders without their payment confirmed%s", len(noPayment), examples(noPayment))
	add("every confirmed payment paid its order or was refunded", len(notPaying) == 0,
		"%d payments recorded, %d confirmed ones that paid nothing and were not refunded%s", len(pays), len(notPaying), examples(notPaying))
	add("every refund has its confirmed payment", len(orphans) == 0 && len(unpaid) == 0,
		"%d refunds of no payment, %d of a payment not confirmed%s", len(orphans), len(unpaid), examples(append(orphans, unpaid...)))
	add("nothing refunded twice", len(twice) == 0, "%d payments or orders refunded more than once%s", len(twice), examples(twice))
	add("refunds never exceed payments", refunded <= paid, "refunded %d of %d confirmed (cents)", refunded, paid)
	add("every refunded order's money given back", len(notRefunded) == 0,
		"%d refunded orders whose payment has no refund%s", len(notRefunded), examples(notRefunded))
	add("every paid order's live payment record names its payment", len(misrecorded) == 0,
		"%d paid or refunded orders whose live payment record is missing or names another payment%s",
		len(misrecorded), examples(misrecorded))
	return nil
}

// liveRecords lists the paid or refunded orders (of orders, read from
// Redis) whose payment record in Redis is missing or names a payment
// other than the one that paid the order: one pipelined HGET per order,
// in its shard's payments hash.
func liveRecords(ctx context.Context, rdb redis.UniversalClient, orders map[string]redisOrder) ([]string, error) {
	var nos []string
	for no, o := range orders {
		if (o.status == "paid" || o.status == "refunded") && o.payment != "" {
			nos = append(nos, no)
		}
	}
	cmds := make([]*redis.StringCmd, len(nos))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, no := range nos {
			act, shard, shards, err := order.ParseNoShard(no)
			if err != nil {
				return err
			}
			cmds[i] = p.HGet(ctx, rediskeys.ForShard(act, shard, shards).Payments, no)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("invariants: payment records: %w", err)
	}
	var bad []string
	for i, no := range nos {
		var rec struct {
			ID string `json:"id"`
		}
		v, err := cmds[i].Result()
		if err == nil {
			err = json.Unmarshal([]byte(v), &rec)
		}
		if err != nil || rec.ID != orders[no].payment {
			bad = append(bad, no)
		}
	}
	return bad, nil
}

// ProviderRefunds is the payment provider as the money checks ask it: the
// refunds it made of a payment (paysim.Provider, stripepay.Provider).
type ProviderRefunds interface {
	// Refunds returns the ids of the refunds made of payment paymentID.
	Refunds(ctx context.Context, paymentID string) ([]string, error)
}

// CheckProviderRefunds adds to a settled sale's report what only the
// provider knows: for each payment MySQL records of sale id, how many
// times the provider refunded it. MySQL keeps one refund row per payment,
// so a second refund at the provider (a retry under another idempotency
// key) is invisible there; here it fails "nothing refunded twice
// (provider)". A refund the provider made that MySQL does not hold (the
// worker died after the refund and its task never ran again) fails
// "every provider refund recorded".
func (r *Report) CheckProviderRefunds(ctx context.Context, db *sql.DB, id int64, prov ProviderRefunds) error {
	rows, err := db.QueryContext(ctx, "SELECT p.id, COALESCE(r.refund_id, '') FROM payments p "+
		"LEFT JOIN refunds r ON r.payment_id = p.id WHERE p.activity_id = ?", id)
	if err != nil {
		return fmt.Errorf("invariants: payments: %w", err)
	}
	recorded := map[string]string{} // payment id → its refund's id in MySQL, "" for none
	for rows.Next() {
		var pid, rid string
		if err := rows.Scan(&pid, &rid); err != nil {
			rows.Close()
			return fmt.Errorf("invariants: payments: %w", err)
		}
		recorded[pid] = rid
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("invariants: payments: %w", err)
	}
	var refunds int
	var twice, unrecorded []string
	for pid, rid := range recorded {
		made, err := prov.Refunds(ctx, pid)
		if err != nil {
			return fmt.Errorf("invariants: the provider's refunds of %s: %w", pid, err)
		}
		refunds += len(made)
		if len(made) > 1 {
			twice = append(twice, pid)
		}
		for _, m := range made {
			if m != rid {
				unrecorded = append(unrecorded, pid)
				break
			}
		}
	}
	// Every refunded order's paying payment (MySQL's orders.payment_id)
	// was refunded at the provider: the money that paid, not another
	// payment of the order.
	rows, err = db.QueryContext(ctx, "SELECT order_no, payment_id FROM orders WHERE activity_id = ? AND status = 'refunded' "+
		"AND payment_id IS NOT NULL", id)
	if err != nil {
		return fmt.Errorf("invariants: refunded orders: %w", err)
	}
	var payers []string
	for rows.Next() {
		var no, pid string
		if err := rows.Scan(&no, &pid); err != nil {
			rows.Close()
			return fmt.Errorf("invariants: refunded orders: %w", err)
		}
		payers = append(payers, no, pid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("invariants: refunded orders: %w", err)
	}
	var payerKept []string
	for i := 0; i < len(payers); i += 2 {
		made, err := prov.Refunds(ctx, payers[i+1])
		if err != nil {
			return fmt.Errorf("invariants: the provider's refunds of %s: %w", payers[i+1], err)
		}
		if len(made) == 0 {
			payerKept = append(payerKept, payers[i])
		}
	}
	add := r.adder()
	add("every refunded order's paying payment refunded (provider)", len(payerKept) == 0,
		"%d refunded orders, %d whose paying payment the provider did not refund%s", len(payers)/2, len(payerKept),
		examples(payerKept))
	add("nothing refunded twice (provider)", len(twice) == 0,
		"%d refunds at the provider of %d payments, %d payments refunded more than once%s",
		refunds, len(recorded), len(twice), examples(twice))
	add("every provider refund recorded", len(unrecorded) == 0,
		"%d payments with a refund at the provider that MySQL does not hold%s", len(unrecorded), examples(unrecorded))
	return nil
}
