-- Group buys: a row per group, and each member order's group. A group's
-- status goes forming -> succeeded or failed and never back (the worker's
-- upsert only moves it forward).

-- +goose Up
CREATE TABLE `groups` (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    group_id       VARCHAR(48)     NOT NULL,
    activity_id    BIGINT UNSIGNED NOT NULL,
    leader_user_id BIGINT UNSIGNED NOT NULL,
    size           INT             NOT NULL,
    status         VARCHAR(16)     NOT NULL, -- forming | succeeded | failed
    paid           INT             NOT NULL,
    created_at     DATETIME(6)     NOT NULL,
    expires_at     DATETIME(6)     NOT NULL,
    updated_at     DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY groups_group_id (group_id),
    KEY groups_activity_status (activity_id, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

ALTER TABLE orders ADD COLUMN group_id VARCHAR(48) NULL, ADD KEY orders_group (group_id);

-- +goose Down
ALTER TABLE orders DROP KEY orders_group, DROP COLUMN group_id;
DROP TABLE `groups`;
