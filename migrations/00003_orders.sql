-- Orders: the record of what sold. The API accepts an order into Redis at
-- once; the worker writes it here, idempotently (order_no is unique), and
-- applies status changes only with a larger fencing token than the row has.

-- +goose Up
CREATE TABLE orders (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_no     VARCHAR(48)     NOT NULL,
    activity_id  BIGINT UNSIGNED NOT NULL,
    user_id      BIGINT UNSIGNED NOT NULL,
    quantity     INT             NOT NULL,
    price_cents  BIGINT          NOT NULL,
    amount_cents BIGINT          NOT NULL,
    status       VARCHAR(24)     NOT NULL, -- pending_payment | paid | cancelled | refunded
    fence        BIGINT          NOT NULL, -- of the last status change applied
    created_at   DATETIME(6)     NOT NULL,
    paid_at      DATETIME(6)     NULL,
    cancelled_at DATETIME(6)     NULL,
    updated_at   DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY orders_order_no (order_no),
    KEY orders_user (user_id, id),
    KEY orders_activity_status (activity_id, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE orders;
