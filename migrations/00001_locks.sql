-- The MySQL lock (internal/lock, mysql.go): one row per held lock, and the
-- fence counters, kept apart so that deleting a lock row on release never
-- resets its fences.

-- +goose Up
CREATE TABLE fs_locks (
    name       VARBINARY(512) NOT NULL,
    owner      CHAR(32)       NOT NULL,
    fence      BIGINT         NOT NULL,
    expires_at DATETIME(6)    NOT NULL,
    meta       VARCHAR(1024)  NOT NULL DEFAULT '',
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE fs_lock_fences (
    name  VARBINARY(512) NOT NULL,
    fence BIGINT         NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE fs_lock_fences;
DROP TABLE fs_locks;
