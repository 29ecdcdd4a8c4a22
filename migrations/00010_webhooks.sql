-- Order events and the shop's webhooks (docs/webhooks.md). 00010 is the
-- items work's (branch i40); this one does not depend on it.
--
-- webhook_events is the outbox: a producer appends an event in the same
-- transaction as the change it reports (mysqlstore.AppendTx), so an event
-- is never lost and never invented. An event's id is derived from its
-- type, subject and sequence (webhook.ID): the same event appended twice is
-- one row. The worker's dispatcher turns undispatched rows into delivery
-- tasks, oldest first (seq), and marks them; the rows stay, for
-- redelivery and for the order streams' replay by subject and sequence.
--
-- webhook_endpoints are the shop's receivers, with the secrets that sign
-- what they are sent (HMAC needs the secret itself: it is stored as is,
-- and shown only when made). webhook_attempts is the delivery log, one row
-- an attempt.

-- +goose Up
CREATE TABLE webhook_events (
    seq         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    id          VARCHAR(40)     NOT NULL, -- evt_…
    type        VARCHAR(32)     NOT NULL, -- order.paid, …
    subject     VARCHAR(64)     NOT NULL, -- the order no, group id, activity id or payment id
    sequence    BIGINT          NOT NULL, -- orders the subject's events
    activity_id BIGINT UNSIGNED NOT NULL,
    occurred_at DATETIME(3)     NOT NULL, -- when the change was made
    body        TEXT            NOT NULL, -- {"type","timestamp","data"}, sent as is
    dispatched  TINYINT(1)      NOT NULL DEFAULT 0,
    created_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY webhook_events_id (id),
    KEY webhook_events_undispatched (dispatched, seq),
    KEY webhook_events_subject (subject, sequence)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE webhook_endpoints (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    url             VARCHAR(2048)   NOT NULL,
    description     VARCHAR(255)    NOT NULL DEFAULT '',
    events          VARCHAR(1024)   NOT NULL, -- event types, comma-separated, or *
    secret          VARCHAR(64)     NOT NULL, -- whsec_…
    previous_secret VARCHAR(64)     NOT NULL DEFAULT '', -- signs too until previous_until
    previous_until  DATETIME(6)     NULL,
    enabled         TINYINT(1)      NOT NULL,
    disabled_reason VARCHAR(16)     NOT NULL DEFAULT '', -- failing: the worker disabled it
    created_at      DATETIME(6)     NOT NULL,
    updated_at      DATETIME(6)     NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE webhook_attempts (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    endpoint_id  BIGINT UNSIGNED NOT NULL,
    event_id     VARCHAR(40)     NOT NULL,
    type         VARCHAR(32)     NOT NULL,
    attempt      INT             NOT NULL, -- 1 the first
    http_status  INT             NOT NULL, -- 0: no answer
    latency_us   BIGINT          NOT NULL,
    reason       VARCHAR(255)    NOT NULL DEFAULT '', -- why it failed
    delivered    TINYINT(1)      NOT NULL,
    is_last      TINYINT(1)      NOT NULL, -- no attempt follows
    manual       TINYINT(1)      NOT NULL, -- an admin's redelivery
    attempted_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY webhook_attempts_endpoint (endpoint_id, id),
    KEY webhook_attempts_event (endpoint_id, event_id, id),
    KEY webhook_attempts_delivered (endpoint_id, delivered, attempted_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_endpoints;
DROP TABLE webhook_events;
