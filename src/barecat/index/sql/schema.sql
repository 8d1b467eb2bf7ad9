-- Barecat index, schema 0.3: tables and indexes.
-- Column names, types, defaults and generated `parent` expressions are the format
-- (documented in docs/format.md); the reference implementation reads them by name.

CREATE TABLE files
(
    path     TEXT NOT NULL,
    -- everything before the last '/', or '' for a top-level file
    parent   TEXT GENERATED ALWAYS AS (
        rtrim(rtrim(path, replace(path, '/', '')), '/')
        ) VIRTUAL NOT NULL REFERENCES dirs (path) ON DELETE RESTRICT,
    shard    INTEGER NOT NULL,
    offset   INTEGER NOT NULL,
    size     INTEGER DEFAULT 0,
    crc32c   INTEGER DEFAULT NULL,
    mode     INTEGER DEFAULT NULL,
    uid      INTEGER DEFAULT NULL,
    gid      INTEGER DEFAULT NULL,
    mtime_ns INTEGER DEFAULT NULL
);

CREATE TABLE dirs
(
    path           TEXT NOT NULL,
    -- the root '' has no parent
    parent         TEXT GENERATED ALWAYS AS (
        CASE WHEN path = '' THEN NULL
             ELSE rtrim(rtrim(path, replace(path, '/', '')), '/') END
        ) VIRTUAL REFERENCES dirs (path) ON DELETE RESTRICT,
    num_subdirs    INTEGER DEFAULT 0,
    num_files      INTEGER DEFAULT 0,
    num_files_tree INTEGER DEFAULT 0,
    size_tree      INTEGER DEFAULT 0,
    mode           INTEGER DEFAULT NULL,
    uid            INTEGER DEFAULT NULL,
    gid            INTEGER DEFAULT NULL,
    mtime_ns       INTEGER DEFAULT NULL
);

CREATE TABLE config
(
    key        TEXT PRIMARY KEY,
    value_text TEXT    DEFAULT NULL,
    value_int  INTEGER DEFAULT NULL
) WITHOUT ROWID;

CREATE UNIQUE INDEX idx_files_path ON files (path);
CREATE UNIQUE INDEX idx_dirs_path ON dirs (path);
CREATE INDEX idx_files_parent ON files (parent);
CREATE INDEX idx_dirs_parent ON dirs (parent);
CREATE INDEX idx_files_shard_offset ON files (shard, offset);
