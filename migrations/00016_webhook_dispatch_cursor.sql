-- The outbox dispatched by a cursor instead of a mark on every row
-- (docs/webhooks.md, "The outbox is read by a cursor"; issue 43): marking each
-- event (an UPDATE moving it in two secondary keys) cost MariaDB as much as
-- writing it.
--
-- webhook_outbox_clock is one row that every transaction appending events
-- updates just before it inserts them (mysqlstore.AppendTx), and holds
-- until it commits: the inserts of events are serialized in commit order,
-- so an event's seq (its auto-increment, taken at the insert) is commit
-- order too, and "every event after seq N" is exact: once an event is
-- visible, every event below it is committed or never will be (a rollback,
-- or a duplicate's INSERT … ON DUPLICATE KEY, leaves a gap nobody fills).
-- appends counts the appending commits (a rollback takes its own back).
--
-- webhook_dispatches is the dispatcher's cursor and its history: one row a
-- pass, the last seq it queued (every event up to it is dispatched) and
-- when; the cursor is the greatest. The repair after a Redis loss reads an
-- event's dispatch time from the first pass at or above its seq
-- (webhook_events.dispatched_at before), and the retention prunes the
-- passes with the events.
--
-- The cursor starts below the oldest event still undispatched: the events
-- above it marked dispatched out of seq order are dispatched once more (at
-- least once; the delivery queue refuses those it still holds). Its row is
-- dated long ago, so that no repair takes the events below it for ones
-- just dispatched.
--
-- Upgrade: every process that appends events (api, worker) must run a
-- version with the clock before events are appended again; one appending
-- without it could commit below the cursor and never be dispatched. Stop
-- the old ones, migrate, start the new ones (docs/upgrading.md).

-- +goose Up
CREATE TABLE webhook_outbox_clock (
    id      TINYINT UNSIGNED NOT NULL,
    appends BIGINT UNSIGNED  NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT INTO webhook_outbox_clock (id, appends) VALUES (1, 0);

CREATE TABLE webhook_dispatches (
    through_seq   BIGINT UNSIGNED NOT NULL, -- every event up to it dispatched
    dispatched_at DATETIME(3)     NOT NULL,
    PRIMARY KEY (through_seq),
    KEY webhook_dispatches_at (dispatched_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
INSERT INTO webhook_dispatches (through_seq, dispatched_at)
    SELECT COALESCE(MIN(CASE WHEN dispatched = 0 THEN seq END) - 1, MAX(seq), 0), '1970-01-01 00:00:00.000'
    FROM webhook_events;

ALTER TABLE webhook_events DROP KEY webhook_events_dispatched_at;
ALTER TABLE webhook_events DROP KEY webhook_events_undispatched;
ALTER TABLE webhook_events DROP COLUMN dispatched_at;
ALTER TABLE webhook_events DROP COLUMN dispatched;

-- +goose Down
ALTER TABLE webhook_events ADD COLUMN dispatched TINYINT(1) NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN dispatched_at DATETIME(3) NULL;
UPDATE webhook_events SET dispatched = 1
    WHERE seq <= (SELECT COALESCE(MAX(through_seq), 0) FROM webhook_dispatches);
ALTER TABLE webhook_events ADD KEY webhook_events_undispatched (dispatched, seq);
ALTER TABLE webhook_events ADD KEY webhook_events_dispatched_at (dispatched_at);
DROP TABLE webhook_dispatches;
DROP TABLE webhook_outbox_clock;
