-- The webhooks' upkeep (docs/webhooks.md, issue 41):
--
-- - endpoints' secrets encrypted at rest (AES-256-GCM under
--   WEBHOOK_SECRET_KEY): "enc1:" and the nonce, ciphertext and tag in
--   base64 is about 110 characters, more than VARCHAR(64) holds. A row
--   written before the key existed stays as it was ("whsec_…", read as
--   plaintext) until its next write or `api encrypt-webhook-secrets`.
-- - the outbox indexed by append time: the recovery of an endpoint reads
--   the events since a time (the first of them by this index, then by
--   seq). The retention's prune walks by primary key (seq, id) and needs
--   no index of its own.
--
-- Both are online in InnoDB (a VARCHAR widened within the same length
-- byte, an index added): no table copy, no long lock.

-- +goose Up
ALTER TABLE webhook_endpoints
    MODIFY secret          VARCHAR(255) NOT NULL,
    MODIFY previous_secret VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE webhook_events ADD KEY webhook_events_created (created_at);

-- +goose Down
ALTER TABLE webhook_events DROP KEY webhook_events_created;
ALTER TABLE webhook_endpoints
    MODIFY secret          VARCHAR(64) NOT NULL,
    MODIFY previous_secret VARCHAR(64) NOT NULL DEFAULT '';
