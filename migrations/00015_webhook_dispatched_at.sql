-- When the dispatcher queued each event (docs/webhooks.md, "Redis lost
-- what it was given"): the delivery tasks live in Redis, which loses the
-- last writes it was given when it is killed before its fsync, failed over
-- to a replica behind it, or cut off from its sentinels while it still
-- took writes. The dispatcher's leader then reads the events it queued
-- within the window before the loss (by this index, the first of them,
-- then by seq) and queues again the deliveries no task holds and no
-- attempt finished. NULL for an event not yet dispatched, and for those
-- dispatched before this column.
--
-- Online in InnoDB (a NULL column added last, an index added).

-- +goose Up
ALTER TABLE webhook_events ADD COLUMN dispatched_at DATETIME(3) NULL;
ALTER TABLE webhook_events ADD KEY webhook_events_dispatched_at (dispatched_at);

-- +goose Down
ALTER TABLE webhook_events DROP KEY webhook_events_dispatched_at;
ALTER TABLE webhook_events DROP COLUMN dispatched_at;
