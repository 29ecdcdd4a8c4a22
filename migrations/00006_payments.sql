-- Payments at the provider (Stripe, or the simulated one), one per order in
-- the usual case, and their refunds. A payment's status only moves forward
-- (pending, failed or canceled, succeeded); a flag says why a confirmed
-- payment paid no order (late, mismatch, unknown_order, duplicate), and
-- such money is refunded. refunds.payment_id is unique: a payment is
-- refunded once, whatever retries the worker makes (the provider's
-- idempotency key is the payment's too). Written by the worker.

-- +goose Up
CREATE TABLE payments (
    id           VARCHAR(64)     NOT NULL, -- the provider's ("pi_…")
    provider     VARCHAR(16)     NOT NULL,
    order_no     VARCHAR(48)     NOT NULL,
    activity_id  BIGINT UNSIGNED NOT NULL, -- 0: the payment names no order we know
    amount_cents BIGINT          NOT NULL,
    currency     CHAR(3)         NOT NULL,
    status       VARCHAR(16)     NOT NULL, -- pending | failed | canceled | succeeded
    flag         VARCHAR(16)     NOT NULL DEFAULT '',
    created_at   DATETIME(6)     NOT NULL,
    updated_at   DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY payments_order (order_no),
    KEY payments_activity (activity_id, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE refunds (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    refund_id    VARCHAR(64)     NOT NULL, -- the provider's ("re_…")
    payment_id   VARCHAR(64)     NOT NULL,
    order_no     VARCHAR(48)     NOT NULL,
    amount_cents BIGINT          NOT NULL,
    currency     CHAR(3)         NOT NULL,
    reason       VARCHAR(16)     NOT NULL, -- the payment's flag, or group_failed
    created_at   DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY refunds_payment (payment_id),
    KEY refunds_order (order_no)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE refunds;
DROP TABLE payments;
