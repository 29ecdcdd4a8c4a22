-- A sale's shards: how many Redis hash slots its stock and orders are
-- spread over (internal/stock, docs/orders.md "Shards"). 1 is the layout of
-- every sale before it, and stays theirs.

-- +goose Up
ALTER TABLE activities ADD COLUMN shards SMALLINT NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE activities DROP COLUMN shards;
