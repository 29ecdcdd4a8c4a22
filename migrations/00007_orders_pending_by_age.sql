-- The reconciler's sweep of unpaid orders past their payment time
-- (mysqlstore.Orders.PendingBefore) reads an activity's pending orders
-- oldest first: the index serves that without a sort, and still serves
-- everything (activity_id, status) did.

-- +goose Up
ALTER TABLE orders ADD KEY orders_activity_status_created (activity_id, status, created_at),
    DROP KEY orders_activity_status;

-- +goose Down
ALTER TABLE orders ADD KEY orders_activity_status (activity_id, status),
    DROP KEY orders_activity_status_created;
