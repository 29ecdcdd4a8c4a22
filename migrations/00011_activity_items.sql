-- Items (issue 40): an activity sells 1 to 50 items, each with its own
-- stock and price and, if it has one, its own per-user limit; the
-- activity's per_user_limit caps a user's units across them. The
-- activities' sku, price_cents and total_stock stay: the first item's sku
-- and price, and the sum of the items' stock (what every reader of the
-- flat form sees). Every activity made before becomes one item, its own
-- sku, price and stock.
--
-- An item's stock is what it was created with (initial_stock) plus what
-- restocks added, less what they removed: stock_ledger has one row per
-- change, with the activity's version the change made (the admin change
-- that made it: each admin change of an activity is one version, under
-- its row lock), so sold ≤ initial_stock + the ledger's sum = stock, item
-- by item, is what the invariants check.
--
-- Orders carry their item (item_sku; their price_cents is the item's).
-- NULL is the activity's one item: the orders of a sale made before items
-- (not filled in here: a single UPDATE of every order would hold the
-- orders table for the length of a migration, and NULL says the same). A paused sale refuses
-- new orders until resumed (paused; a closed sale is never paused).

-- +goose Up
CREATE TABLE activity_items (
    activity_id    BIGINT UNSIGNED NOT NULL,
    position       SMALLINT        NOT NULL, -- the item's place among the activity's, from 0
    sku            VARCHAR(64)     NOT NULL,
    label          VARCHAR(100)    NOT NULL DEFAULT '',
    price_cents    BIGINT          NOT NULL,
    initial_stock  INT             NOT NULL,
    stock          INT             NOT NULL, -- initial_stock + the item's stock_ledger rows' delta
    per_user_limit INT             NULL,     -- NULL: the activity's per_user_limit alone
    PRIMARY KEY (activity_id, position),
    UNIQUE KEY activity_items_sku (activity_id, sku)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

INSERT INTO activity_items (activity_id, position, sku, label, price_cents, initial_stock, stock)
SELECT id, 0, sku, '', price_cents, total_stock, total_stock FROM activities;

CREATE TABLE stock_ledger (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    activity_id BIGINT UNSIGNED NOT NULL,
    sku         VARCHAR(64)     NOT NULL,
    delta       INT             NOT NULL, -- units added; negative: unsold units removed
    stock_after INT             NOT NULL, -- the item's stock once it applied
    version     BIGINT          NOT NULL, -- the activity's version this change made
    created_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY stock_ledger_change (activity_id, version),
    KEY stock_ledger_item (activity_id, sku, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

ALTER TABLE activities ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE orders ADD COLUMN item_sku VARCHAR(64) NULL;

-- +goose Down
ALTER TABLE orders DROP COLUMN item_sku;
ALTER TABLE activities DROP COLUMN paused;
DROP TABLE stock_ledger;
DROP TABLE activity_items;
