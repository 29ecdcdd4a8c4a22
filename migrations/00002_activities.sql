-- Flash-sale and group-buy activities: the record of what is on sale. While
-- an activity runs, its live stock is in Redis (internal/stock); the orders
-- tables (the record of what sold) come with the orders migration.

-- +goose Up
CREATE TABLE activities (
    id                  BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    type                VARCHAR(16)     NOT NULL, -- seckill | groupbuy
    name                VARCHAR(200)    NOT NULL,
    sku                 VARCHAR(64)     NOT NULL,
    price_cents         BIGINT          NOT NULL,
    total_stock         INT             NOT NULL,
    per_user_limit      INT             NOT NULL,
    starts_at           DATETIME(6)     NOT NULL,
    ends_at             DATETIME(6)     NOT NULL,
    payment_ttl_seconds INT             NOT NULL,
    group_size          INT             NULL,     -- groupbuy only
    group_ttl_seconds   INT             NULL,     -- groupbuy only
    status              VARCHAR(16)     NOT NULL DEFAULT 'draft', -- draft | published | closed
    created_at          DATETIME(6)     NOT NULL,
    updated_at          DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY activities_status (status, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE activities;
