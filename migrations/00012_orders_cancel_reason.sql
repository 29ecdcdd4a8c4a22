-- Why a cancelled order was (issue 41): shopper, timeout or group_failed,
-- as the order's Redis record says since transition.lua records it;
-- order.cancelled's reason. NULL for an order not cancelled, or cancelled
-- before the record carried a reason (its order.cancelled says
-- "unknown": the status alone does not tell which it was).

-- +goose Up
ALTER TABLE orders ADD COLUMN cancel_reason VARCHAR(16) NULL;

-- +goose Down
ALTER TABLE orders DROP COLUMN cancel_reason;
