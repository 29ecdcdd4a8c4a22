-- An activity's version: one more with each change, under the row lock.
-- Loading the activity into Redis carries it, and Redis ignores a load
-- older than the one it holds, so admin changes racing each other (a close
-- with a publish and edits) leave Redis at MySQL's latest state.

-- +goose Up
ALTER TABLE activities ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN version;
