-- An order's order.accepted event is its orders row, not a second row in
-- the outbox (docs/webhooks.md, "order.accepted is the order's row"; issue
-- 43): writing the event as a row of webhook_events, with its three keys,
-- cost MariaDB 43% of persisting an order (docs/benchmarks.md).
--
-- orders.event_seq is the accepted event's place in the outbox's order:
-- the same numbers as webhook_events.seq, which the outbox's clock now
-- hands out (webhook_outbox_clock.seq: an appending transaction takes as
-- many as it appends, under the clock's row lock, so they are commit
-- order as the auto-increment was). The dispatcher, the order streams'
-- catch-up and the repair read both tables by it, and render the event
-- from the row (webhook.OrderEvents). NULL: an order written before this
-- migration, whose order.accepted is a row of webhook_events.
--
-- The clock starts above every seq ever appended or dispatched, so that no
-- new event lands at or below the dispatcher's cursor.
--
-- Upgrade: as for 00016, every process that appends events (api, worker)
-- must run a version that takes seqs from the clock before events are
-- appended again: stop the old ones, migrate, start the new ones
-- (docs/upgrading.md). The new key on orders is built over the table
-- (online in InnoDB).

-- +goose Up
ALTER TABLE webhook_outbox_clock ADD COLUMN seq BIGINT UNSIGNED NOT NULL DEFAULT 0;
-- (Two statements, not GREATEST: go-mysql-server, embedded memory mode,
-- takes neither GREATEST of these nor an unqualified seq here.)
UPDATE webhook_outbox_clock SET seq = (SELECT COALESCE(MAX(e.seq), 0) FROM webhook_events e) WHERE id = 1;
UPDATE webhook_outbox_clock SET seq = (SELECT COALESCE(MAX(d.through_seq), 0) FROM webhook_dispatches d)
    WHERE id = 1 AND seq < (SELECT COALESCE(MAX(d.through_seq), 0) FROM webhook_dispatches d);
ALTER TABLE orders ADD COLUMN event_seq BIGINT UNSIGNED NULL;
ALTER TABLE orders ADD KEY orders_event_seq (event_seq);

-- +goose Down
-- The order.accepted events of orders written since are not rows of
-- webhook_events, and going down forgets them: let the dispatcher pass
-- them first (flashsale_webhook_events_undispatched at 0), and an order's
-- stream starts from its current state for those (docs/streams.md).
ALTER TABLE orders DROP KEY orders_event_seq;
ALTER TABLE orders DROP COLUMN event_seq;
ALTER TABLE webhook_outbox_clock DROP COLUMN seq;
