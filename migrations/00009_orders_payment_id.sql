-- An order's paying payment: the provider's payment that paid it (the one
-- the order names in Redis, order.Order.PaymentID), carried into MySQL by
-- the order's sync with the status change that set it. A confirmation of
-- a payment that comes after Redis let the order go (its sale long over,
-- or lost) is judged from here: paid by this payment (done, nothing to
-- give back) or by another (a duplicate, refunded) — before, every such
-- confirmation was taken for late money and refunded, the paying one too.
-- Rows paid before this column are filled from the payments table: the
-- order's succeeded payment that carries no flag is the one that paid it.

-- +goose Up
ALTER TABLE orders ADD COLUMN payment_id VARCHAR(64) NULL;
UPDATE orders o
    JOIN payments p ON p.order_no = o.order_no AND p.status = 'succeeded' AND p.flag = ''
SET o.payment_id = p.id
WHERE o.status IN ('paid', 'refunded');

-- +goose Down
ALTER TABLE orders DROP COLUMN payment_id;
