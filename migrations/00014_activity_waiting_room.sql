-- The waiting room (issue 42, docs/waiting-room.md): a sale may put its
-- shoppers in a queue and let them in admit_per_second a second, each
-- admission good for admission_ttl_seconds; joining may need a proof of
-- work of join_pow_bits leading zero bits. A sale without it
-- (waiting_room false, every activity made before) works as before.

-- +goose Up
ALTER TABLE activities
    ADD COLUMN waiting_room          BOOLEAN  NOT NULL DEFAULT FALSE,
    ADD COLUMN admit_per_second      INT      NOT NULL DEFAULT 0,
    ADD COLUMN admission_ttl_seconds INT      NOT NULL DEFAULT 300,
    ADD COLUMN join_pow_bits         SMALLINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities
    DROP COLUMN waiting_room,
    DROP COLUMN admit_per_second,
    DROP COLUMN admission_ttl_seconds,
    DROP COLUMN join_pow_bits;
