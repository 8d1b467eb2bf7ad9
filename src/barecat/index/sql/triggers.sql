-- Barecat index, schema 0.3: triggers that keep directory statistics current.
--
-- Invariants, for every row d of `dirs`:
--   num_files      = files whose parent is d
--   num_subdirs    = dirs whose parent is d
--   num_files_tree = files anywhere below d
--   size_tree      = total size of files anywhere below d
-- A change to a file updates its parent; a change of a directory's totals is passed to
-- its parent by `dir_totals_changed`, so each edit walks up the tree once. Missing
-- ancestors are created on the way (upserts). Every trigger is gated by the config flag
-- `use_triggers`, which bulk loads switch off inside their own transaction before
-- recomputing everything at once. Requires PRAGMA recursive_triggers = ON.

CREATE TRIGGER file_inserted AFTER INSERT ON files
    WHEN (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    INSERT INTO dirs (path, num_files, num_files_tree, size_tree)
    VALUES (NEW.parent, 1, 1, NEW.size)
    ON CONFLICT (path) DO UPDATE SET
        num_files = num_files + 1,
        num_files_tree = num_files_tree + 1,
        size_tree = size_tree + excluded.size_tree;
END;

CREATE TRIGGER file_deleted AFTER DELETE ON files
    WHEN (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    UPDATE dirs SET
        num_files = num_files - 1,
        num_files_tree = num_files_tree - 1,
        size_tree = size_tree - OLD.size
    WHERE path = OLD.parent;
END;

CREATE TRIGGER file_moved AFTER UPDATE OF path ON files
    WHEN NEW.parent != OLD.parent
        AND (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    UPDATE dirs SET
        num_files = num_files - 1,
        num_files_tree = num_files_tree - 1,
        size_tree = size_tree - OLD.size
    WHERE path = OLD.parent;
    INSERT INTO dirs (path, num_files, num_files_tree, size_tree)
    VALUES (NEW.parent, 1, 1, NEW.size)
    ON CONFLICT (path) DO UPDATE SET
        num_files = num_files + 1,
        num_files_tree = num_files_tree + 1,
        size_tree = size_tree + excluded.size_tree;
END;

CREATE TRIGGER file_resized AFTER UPDATE OF size ON files
    WHEN NEW.parent = OLD.parent AND NEW.size IS NOT OLD.size
        AND (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    UPDATE dirs SET size_tree = size_tree + ifnull(NEW.size, 0) - ifnull(OLD.size, 0)
    WHERE path = NEW.parent;
END;

CREATE TRIGGER dir_inserted AFTER INSERT ON dirs
    WHEN NEW.parent IS NOT NULL
        AND (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    INSERT INTO dirs (path, num_subdirs, num_files_tree, size_tree)
    VALUES (NEW.parent, 1, NEW.num_files_tree, NEW.size_tree)
    ON CONFLICT (path) DO UPDATE SET
        num_subdirs = num_subdirs + 1,
        num_files_tree = num_files_tree + excluded.num_files_tree,
        size_tree = size_tree + excluded.size_tree;
END;

CREATE TRIGGER dir_deleted AFTER DELETE ON dirs
    WHEN OLD.parent IS NOT NULL
        AND (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    UPDATE dirs SET
        num_subdirs = num_subdirs - 1,
        num_files_tree = num_files_tree - OLD.num_files_tree,
        size_tree = size_tree - OLD.size_tree
    WHERE path = OLD.parent;
END;

CREATE TRIGGER dir_moved AFTER UPDATE OF path ON dirs
    WHEN NEW.parent IS NOT OLD.parent
        AND (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    UPDATE dirs SET
        num_subdirs = num_subdirs - 1,
        num_files_tree = num_files_tree - OLD.num_files_tree,
        size_tree = size_tree - OLD.size_tree
    WHERE path = OLD.parent;
    UPDATE dirs SET
        num_subdirs = num_subdirs + 1,
        num_files_tree = num_files_tree + NEW.num_files_tree,
        size_tree = size_tree + NEW.size_tree
    WHERE path = NEW.parent;
END;

CREATE TRIGGER dir_totals_changed AFTER UPDATE OF num_files_tree, size_tree ON dirs
    WHEN NEW.parent IS OLD.parent AND NEW.parent IS NOT NULL
        AND (NEW.num_files_tree != OLD.num_files_tree OR NEW.size_tree != OLD.size_tree)
        AND (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    UPDATE dirs SET
        num_files_tree = num_files_tree + NEW.num_files_tree - OLD.num_files_tree,
        size_tree = size_tree + NEW.size_tree - OLD.size_tree
    WHERE path = NEW.parent;
END;

CREATE TRIGGER file_over_dir BEFORE INSERT ON files
    WHEN (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    SELECT RAISE(ABORT, 'barecat: a directory already has this path')
    WHERE EXISTS (SELECT 1 FROM dirs WHERE path = NEW.path);
END;

CREATE TRIGGER dir_over_file BEFORE INSERT ON dirs
    WHEN (SELECT value_int FROM config WHERE key = 'use_triggers') = 1
BEGIN
    SELECT RAISE(ABORT, 'barecat: a file already has this path')
    WHERE EXISTS (SELECT 1 FROM files WHERE path = NEW.path);
END;
