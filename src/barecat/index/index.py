"""The :class:`CoreIndex`: an archive's SQLite index, with every edit it supports.

Adds to :class:`IndexReader` the write side: adding, updating, removing and renaming
entries, transactions, and directory statistics. Statistics stay right by the schema's
triggers; bulk edits (``no_triggers``, subtree renames and removals) switch them off
inside their own transaction and fix the numbers with a few set-based updates instead
(``treestats.py``), and so do runs of files added one at a time, whose statistics are
owed until :meth:`CoreIndex.settled_conn` is next called (``deferred_stats.py``), which
every query and edit but file rows by path does first. Method names and meanings are
the reference's where it had them; its other names are in ``compat.py``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from barecat.entries import (
    SHARD_SIZE_UNLIMITED,
    BarecatDirInfo,
    BarecatEntryInfo,
    BarecatFileInfo,
)
from barecat.exceptions import (
    BarecatError,
    DirectoryNotEmptyBarecatError,
    FileExistsBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import (
    bulk,
    deferred_stats,
    file_digest,
    merging,
    query,
    treestats,
)
from barecat.index.connection import open_savepoint, select, sqlite_uri
from barecat.index.deferred_stats import DeferredStats
from barecat.index.errors import disk_full_or, integrity_error
from barecat.index.listing import DirItem, FileItem, path_of
from barecat.index.lookup_table import LookupTable
from barecat.index.merging import MergeSource
from barecat.index.reading import IndexReader
from barecat.index.schema import (
    SEALING_KEY,
    ConfigValue,
    check_version,
    enable_sealing,
    write_config,
)
from barecat.layout import lookup_table_path
from barecat.paths import ancestors, check_depth, is_within, normalize, subtree_bounds

# Secondary indexes a bulk load may drop and rebuild: name -> "table (columns)".
_SECONDARY_INDEXES = {
    "idx_files_parent": "files (parent)",
    "idx_dirs_parent": "dirs (parent)",
    "idx_files_shard_offset": "files (shard, offset)",
}


class CoreIndex(IndexReader):
    """An archive's SQLite index, readable and (unless ``readonly``) editable.

    ``barecat.Index`` (``compat.py``) is this class with barecat 0.3.1's names added.
    """

    _deferred: DeferredStats | None = None
    """Statistics owed for files added one by one (``add_file``), applied by
    :meth:`settled_conn`, which every query and edit but file rows by path calls first
    (see ``barecat.index.deferred_stats``)."""
    _adds_in_a_row = 0
    file_digest_kept = False
    """True once edits of file rows update the stored digest (``keep_file_digest``)."""

    def settled_conn(self) -> sqlite3.Connection:
        """This thread's connection, with any statistics still owed applied first (the
        explicit step before every query or edit but file rows by path, and before SQL
        of one's own); it also ends a run of single adds.

        Returns:
            The connection.
        """
        conn = self._pool.get()
        self._adds_in_a_row = 0
        deferred = self._deferred
        if deferred is not None:
            if deferred.conn is conn:
                deferred.apply()
            # else: a forked child's fresh connection, the rows it was owed for not in it
            self._deferred = None
        return conn

    def _configure(self, shard_size_limit: int | None) -> None:
        """An explicit limit given when opening an existing archive for writing is stored."""
        if shard_size_limit is not None and not self.created and not self.readonly:
            self.shard_size_limit = shard_size_limit
        self._files_at_open = 0 if self.readonly else self.num_files

    def close(self) -> None:
        """Commit (a writer), leave the saved lookup table right for what was written,
        and close the database. Errors while committing are swallowed: what was not
        committed is lost."""
        if not self.readonly:
            with contextlib.suppress(sqlite3.Error):
                conn = self.settled_conn()
                conn.commit()
                if conn.total_changes:  # (else the file stays as it was, byte for byte)
                    conn.execute("PRAGMA optimize")
            with contextlib.suppress(sqlite3.Error, OSError):
                self._refresh_lookup_table()
        super().close()

    def _refresh_lookup_table(self) -> None:
        """Leave the saved lookup table right for the index as this writer leaves it.

        Rebuilt when the archive is at least half this session's files (a new archive,
        say), so building costs at most about 3 us per file written and the first reader
        is fast; otherwise a table that no longer matches is removed, since readers would
        ignore it anyway. ``lookup_table=False`` opts out of building.
        """
        path = lookup_table_path(self.path)
        fd = self._index_descriptor()
        if not os.path.exists(path) and not self._keep_table_fresh:
            return
        if LookupTable.load(path, fd) is not None:
            return  # nothing was committed: still right
        files = self.num_files
        if self._keep_table_fresh and files and files >= 2 * self._files_at_open:
            table = LookupTable.build(self.settled_conn(), fd)
            if table is not None and table.save(path):
                return
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    @property
    def shard_size_limit(self) -> int:
        """The largest size in bytes a shard may grow to, as stored in the index
        (settable on a writable index, committed at once)."""
        value = self._config_int("shard_size_limit")
        return SHARD_SIZE_UNLIMITED if value is None else value

    @shard_size_limit.setter
    def shard_size_limit(self, value: int) -> None:
        self._require_writable()
        self._set_config_int("shard_size_limit", value)
        self.settled_conn().commit()

    def commit(self) -> None:
        """Commit the index's open transaction.

        Raises:
            NotEnoughSpaceBarecatError: the disk is full.
        """
        try:
            self.settled_conn().commit()
        except sqlite3.OperationalError as e:
            raise disk_full_or(e, self.path) from e

    def rollback(self) -> None:
        """Drop what was changed since the last commit."""
        self._deferred = None  # owed for rows this rolls back
        self._pool.get().rollback()

    def _require_writable(self) -> None:
        if self.readonly:
            raise ReadOnlyBarecatError(f"Archive index {self.path} is open read-only")

    def _set_config_int(self, key: str, value: int) -> None:
        self.settled_conn().execute(
            "INSERT INTO config (key, value_int) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value_int = excluded.value_int",
            (key, value),
        )

    @contextlib.contextmanager
    def no_triggers(self) -> Iterator[None]:
        """Suspend statistics triggers; call :meth:`update_treestats` afterwards.

        A config flag rather than DROP TRIGGER, so it is transactional and needs no schema
        rights; nesting is allowed (only the outermost level turns triggers back on).

        Returns:
            A context manager.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        before = self._config_int("use_triggers", 1)
        self._set_config_int("use_triggers", 0)
        try:
            yield
        finally:
            self._set_config_int("use_triggers", before if before is not None else 1)

    @contextlib.contextmanager
    def bulk_mode(
        self,
        drop_indexes: bool = False,
        update_dirs_at_end: bool = True,
        update_treestats_at_end: bool = True,
    ) -> Iterator[None]:
        """Triggers off for a bulk load, statistics rebuilt once at the end.

        ``drop_indexes`` also drops the secondary indexes during the load (the unique path
        indexes stay, so duplicates are still refused) and rebuilds them afterwards.

        Args:
            drop_indexes: drop the secondary indexes during the load.
            update_dirs_at_end: create the directories the loaded rows imply.
            update_treestats_at_end: recompute every directory's statistics.

        Returns:
            A context manager.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        dropped = _SECONDARY_INDEXES if drop_indexes else {}
        for name in dropped:
            self.settled_conn().execute(f"DROP INDEX IF EXISTS {name}")
        try:
            with self.no_triggers():
                yield
                if update_dirs_at_end:
                    treestats.insert_missing_dirs(self.settled_conn())
                if update_treestats_at_end:
                    treestats.rewrite_treestats(self.settled_conn())
        finally:
            for name, definition in dropped.items():
                self.settled_conn().execute(f"CREATE INDEX IF NOT EXISTS {name} ON {definition}")

    def enable_sealing(self, records: dict[str, ConfigValue]) -> None:
        """Make this empty archive a sealed one, described by the ``sealing*`` ``records``
        (see ``schema.enable_sealing``); committed at once.

        Args:
            records: the sealing settings, as config rows.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            SchemaVersionBarecatError: the archive already holds files.
        """
        self._require_writable()
        self.commit()
        conn = self.settled_conn()
        enable_sealing(conn, {SEALING_KEY: "1", **records})
        self.schema_version = check_version(conn, self.path)
        self._read_layout()

    def update_sealing_config(self, records: dict[str, ConfigValue]) -> None:
        """Replace ``sealing*`` config rows (a new wrapped key, say); committed at once.

        Args:
            records: the rows to write, each key starting with ``sealing``.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            BarecatError: the archive is not sealed, or a key is not a sealing one.
        """
        self._require_writable()
        if not self.sealed or any(not k.startswith(SEALING_KEY) for k in records):
            raise BarecatError("Only a sealed archive's sealing settings can be updated")
        conn = self.settled_conn()
        with conn:
            write_config(conn, records)

    def keep_file_digest(self, step: file_digest.Step | None) -> None:
        """Keep the encrypted archive's digest of its file rows (``file_digest``) with
        ``step`` on every connection of this index; None refuses the edits it covers.

        Args:
            step: the digest's step function, or None.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        self._pool.set_up_each("file_digest", lambda conn: file_digest.install(conn, step))
        self.file_digest_kept = step is not None

    @contextlib.contextmanager
    def attached_database(
        self, path: str, name: str = "sourcedb", readonly: bool = True
    ) -> Iterator[str]:
        """ATTACH another index (e.g. for merges) for the duration of the block.

        Args:
            path: the other index file.
            name: the schema name it is attached as.
            readonly: attach it read-only.

        Returns:
            A context manager giving ``name``.

        Raises:
            ValueError: ``name`` is not an identifier.
            sqlite3.Error: the database cannot be attached.
        """
        if not name.isidentifier():
            raise ValueError(f"Invalid schema name: {name!r}")
        target = sqlite_uri(path, "ro" if readonly else "rw")
        self.settled_conn().execute(f"ATTACH DATABASE ? AS {name}", (target,))
        try:
            yield name
        finally:
            self.settled_conn().execute(f"DETACH DATABASE {name}")

    @contextlib.contextmanager
    def merge_source(self, path: str, prefix: str = "") -> Iterator[MergeSource]:
        """Attach another archive's index (``path``, the index file) to take rows from it.

        Commits first (SQLite attaches only outside a transaction). The block owns one
        transaction: it commits what it wants kept; anything uncommitted when it ends,
        normally or by an exception, is rolled back before the source is detached.

        Args:
            path: the other archive's index file.
            prefix: the directory its entries go under in this archive.

        Returns:
            A context manager giving the attached source.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        self.commit()
        with self.attached_database(path, merging.SCHEMA):
            source = MergeSource(self.settled_conn(), prefix, self.sealed)
            try:
                yield source
            finally:
                if self.settled_conn().in_transaction:
                    self.settled_conn().rollback()
                source.drop_temp_tables()

    @contextlib.contextmanager
    def no_foreign_keys(self) -> Iterator[None]:
        """Foreign-key enforcement off inside the block, restored to its setting after.

        SQLite ignores this pragma inside a transaction: commit before entering.
        """
        (before,) = select(self.settled_conn(), "PRAGMA foreign_keys").fetchone()
        self.settled_conn().execute("PRAGMA foreign_keys = OFF")
        try:
            yield
        finally:
            self.settled_conn().execute(f"PRAGMA foreign_keys = {'ON' if before else 'OFF'}")

    def add_file(self, finfo: BarecatFileInfo) -> None:
        """Insert a file row; its directories and their statistics follow before the
        next use of the index (by the triggers, or deferred, see ``_deferred``).

        Args:
            finfo: the file's record, with its path, metadata and address.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileExistsBarecatError: a file is at the path.
            IsADirectoryBarecatError: a directory is at the path.
            NotADirectoryBarecatError: an ancestor of the path is a file.
            InvalidPathBarecatError: the path is too deep.
            NotEnoughSpaceBarecatError: the disk is full.
        """
        self._require_writable()
        f = finfo
        check_depth(f.path)
        conn = self._pool.get()

        def insert_row() -> None:
            conn.execute(
                bulk.INSERT_SEALED_FILE if self.sealed else bulk.INSERT_FILE,
                bulk.file_row(f, self.sealed),
            )

        try:
            deferred = self._deferred
            if deferred is not None and deferred.conn is not conn:
                conn = self.settled_conn()  # (applies or drops what another connection was owed)
                deferred = None
            if deferred is None and not self._pool.threadsafe:
                self._adds_in_a_row += 1
                if self._adds_in_a_row > deferred_stats.ADDS_BEFORE_DEFERRING:
                    deferred = self._deferred = DeferredStats.begin(conn)
                    if deferred is None:  # statistics switched off: try again later
                        self._adds_in_a_row = 0
            if deferred is None:
                insert_row()
            else:
                deferred.insert(f.path, f.stored_size, insert_row)
        except sqlite3.IntegrityError as e:
            raise integrity_error(e, f.path, True, self.isfile) from None
        except sqlite3.OperationalError as e:
            raise disk_full_or(e, self.path) from e

    def add_files_bulk(self, finfos: Sequence[BarecatFileInfo]) -> None:
        """Insert many files at once, statistics applied once per batch; all or nothing.

        Args:
            finfos: the files' records, with paths, metadata and addresses.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileExistsBarecatError: a path is taken.
            IsADirectoryBarecatError: a directory is at a path.
            NotADirectoryBarecatError: an ancestor of a path is a file.
            NotEnoughSpaceBarecatError: the disk is full.
        """
        self._require_writable()
        try:
            bulk.insert_files(self.settled_conn(), finfos, self.sealed)
        except sqlite3.OperationalError as e:
            raise disk_full_or(e, self.path) from e

    def upsert_dirs_bulk(self, dinfos: Sequence[BarecatDirInfo]) -> None:
        """Create directories, or update the metadata of existing ones, in one statement.

        Parents are written before children; missing ancestors appear as with
        :meth:`add_dir`; a path that is a file is refused. All or nothing.

        Args:
            dinfos: the directories' records (None fields keep stored values).

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileExistsBarecatError: a file is at one of the paths.
            NotADirectoryBarecatError: an ancestor of a path is a file.
            InvalidPathBarecatError: a path is too deep.
        """
        self._require_writable()
        rows = sorted(
            ((check_depth(d.path), d.mode, d.uid, d.gid, d.mtime_ns) for d in dinfos),
            key=lambda r: r[0],
        )
        conn = self.settled_conn()
        open_savepoint(conn, "barecat_dirs")
        try:
            conn.executemany(
                "INSERT INTO dirs (path, mode, uid, gid, mtime_ns) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (path) DO UPDATE SET mode = ifnull(excluded.mode, mode), "
                "uid = ifnull(excluded.uid, uid), gid = ifnull(excluded.gid, gid), "
                "mtime_ns = ifnull(excluded.mtime_ns, mtime_ns)",
                rows,
            )
        except sqlite3.IntegrityError as e:
            conn.execute("ROLLBACK TO barecat_dirs")
            conn.execute("RELEASE barecat_dirs")
            clash = next((r[0] for r in rows if self.isfile(r[0])), rows[0][0])
            raise integrity_error(e, clash, False, self.isfile) from None
        except BaseException:
            conn.execute("ROLLBACK TO barecat_dirs")
            conn.execute("RELEASE barecat_dirs")
            raise
        conn.execute("RELEASE barecat_dirs")

    def add_dir(self, dinfo: BarecatDirInfo, exist_ok: bool = False) -> None:
        """Create a directory (and its ancestors); with ``exist_ok`` update its metadata.

        Args:
            dinfo: the directory's record.
            exist_ok: update an existing directory's metadata (None fields kept)
                instead of raising (the root never raises).

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileExistsBarecatError: the directory exists (without ``exist_ok``), or a
                file is at the path.
            NotADirectoryBarecatError: an ancestor of the path is a file.
            InvalidPathBarecatError: the path is too deep.
        """
        self._require_writable()
        d = dinfo
        check_depth(d.path)
        conn = self.settled_conn()
        if self.isdir(d.path):
            if not exist_ok and d.path:
                raise FileExistsBarecatError(d.path, "Directory")
            conn.execute(
                "UPDATE dirs SET mode = ifnull(?, mode), uid = ifnull(?, uid), "
                "gid = ifnull(?, gid), "
                "mtime_ns = ifnull(?, mtime_ns) WHERE path = ?",
                (d.mode, d.uid, d.gid, d.mtime_ns, d.path),
            )
            return
        try:
            conn.execute(
                "INSERT INTO dirs (path, mode, uid, gid, mtime_ns) VALUES (?, ?, ?, ?, ?)",
                (d.path, d.mode, d.uid, d.gid, d.mtime_ns),
            )
        except sqlite3.IntegrityError as e:
            raise integrity_error(e, d.path, False, self.isfile) from None

    def add(self, info: BarecatEntryInfo) -> None:
        """Add a file (:meth:`add_file`) or a directory (:meth:`add_dir`).

        Args:
            info: a :class:`BarecatFileInfo` or :class:`BarecatDirInfo`.

        Raises:
            TypeError: ``info`` is neither.
            BarecatError: what :meth:`add_file` or :meth:`add_dir` raises.
        """
        if isinstance(info, BarecatFileInfo):
            self.add_file(info)
        elif isinstance(info, BarecatDirInfo):
            self.add_dir(info)
        else:
            raise TypeError(f"Expected a file or directory info, got {type(info).__name__}")

    _FILE_FIELDS = (
        *("shard", "offset", "size", "crc32c", "mtime_ns", "mode", "uid", "gid", "logical_size"),
    )

    def update_file(
        self,
        path: str,
        new_shard: int | None = None,
        new_offset: int | None = None,
        new_size: int | None = None,
        new_crc32c: int | None = None,
        new_mtime_ns: int | None = None,
        new_mode: int | None = None,
        new_uid: int | None = None,
        new_gid: int | None = None,
        new_logical_size: int | None = None,
    ) -> None:
        """Change the given fields of a file's row (None = keep). In a sealed archive
        ``new_size`` is the length of the sealed bytes and ``new_logical_size`` the file's.

        Args:
            path: the file.
            new_shard: its new shard.
            new_offset: its new offset in the shard.
            new_size: its new stored size.
            new_crc32c: its new checksum.
            new_mtime_ns: its new modification time in nanoseconds.
            new_mode: its new permission bits.
            new_uid: its new owner's user id.
            new_gid: its new group id.
            new_logical_size: its new length (sealed archives only).

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            BarecatError: ``new_logical_size`` given for a plain archive.
            FileNotFoundBarecatError: no file is at ``path``.
            IsADirectoryBarecatError: a directory is at ``path``.
        """
        self._require_writable()
        if new_logical_size is not None and not self.sealed:
            raise BarecatError("Only a sealed archive stores a logical size apart")
        values = (
            *(new_shard, new_offset, new_size, new_crc32c),
            *(new_mtime_ns, new_mode, new_uid, new_gid, new_logical_size),
        )
        sets = [(f, v) for f, v in zip(self._FILE_FIELDS, values, strict=False) if v is not None]
        if not sets:
            return
        path = normalize(path)
        sql = "UPDATE files SET " + ", ".join(f"{f} = ?" for f, _ in sets) + " WHERE path = ?"
        if self.settled_conn().execute(sql, (*[v for _, v in sets], path)).rowcount == 0:
            self.lookup_file(path)  # raises the precise error

    def _update_meta(self, path: str, assignments: str, args: tuple[Any, ...]) -> None:
        self._require_writable()
        path = normalize(path)
        conn = self.settled_conn()
        for table in ("files", "dirs"):
            sql = f"UPDATE {table} SET {assignments} WHERE path = ?"
            if conn.execute(sql, (*args, path)).rowcount:
                return
        raise self.not_found_error(path)

    def chmod(self, path: str, mode: int) -> None:
        """Set a file's or directory's permission bits.

        Args:
            path: the file or directory.
            mode: the new permission bits.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: nothing is at ``path`` (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._update_meta(path, "mode = ?", (mode,))

    def chown(self, path: str, uid: int, gid: int) -> None:
        """Set a file's or directory's owner and group.

        Args:
            path: the file or directory.
            uid: the new owner's user id.
            gid: the new group id.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: nothing is at ``path`` (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._update_meta(path, "uid = ?, gid = ?", (uid, gid))

    def update_mtime(self, path: str, mtime_ns: int) -> None:
        """Set a file's or directory's modification time.

        Args:
            path: the file or directory.
            mtime_ns: the new time in nanoseconds.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: nothing is at ``path`` (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._update_meta(path, "mtime_ns = ?", (mtime_ns,))

    def remove_file(self, item: FileItem) -> None:
        """Delete a file's row (its bytes stay in the shards as a hole).

        Args:
            item: the file's path or record.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
        """
        self._require_writable()
        path = path_of(item)
        if self.settled_conn().execute("DELETE FROM files WHERE path = ?", (path,)).rowcount == 0:
            self.lookup_file(path, normalized=True)

    def remove_empty_dir(self, item: DirItem) -> None:
        """Delete an empty directory's row.

        Args:
            item: the directory's path or record.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no directory is there.
            InvalidPathBarecatError: ``item`` is the root.
            DirectoryNotEmptyBarecatError: the directory holds files or directories.
        """
        self._require_writable()
        d = self.lookup_dir(path_of(item))
        if not d.path:
            raise InvalidPathBarecatError("The archive root cannot be removed")
        conn = self.settled_conn()
        if select(
            conn,
            "SELECT 1 FROM files WHERE parent = ? "
            "UNION ALL SELECT 1 FROM dirs WHERE parent = ? LIMIT 1",
            (d.path, d.path),
        ).fetchone():
            raise DirectoryNotEmptyBarecatError(d.path)
        conn.execute("DELETE FROM dirs WHERE path = ?", (d.path,))

    def remove_recursively(self, item: DirItem) -> None:
        """Remove a directory and everything below it (the root is emptied, not removed).

        Args:
            item: the directory's path or record.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no directory is there.
        """
        self._require_writable()
        d = self.lookup_dir(path_of(item))
        where, args = query.subtree_where(d.path)
        conn = self.settled_conn()
        stats = treestats.subtree_totals(conn, d.path)
        with self.no_triggers():
            conn.execute(f"DELETE FROM files{where}", args)
            conn.execute(f"DELETE FROM dirs{where or ' WHERE parent IS NOT NULL'}", args)
            if d.path:
                conn.execute("DELETE FROM dirs WHERE path = ?", (d.path,))
                treestats.adjust_ancestors(conn, d.path, -stats[0], -stats[1], subdir_delta=-1)
            else:
                conn.execute(
                    "UPDATE dirs SET num_subdirs = 0, num_files = 0, num_files_tree = 0, "
                    "size_tree = 0 "
                    "WHERE path = ''"
                )

    def rename_with_new_bytes(
        self, old: str, new: str, places: Sequence[tuple[str, int, int, int, int | None]]
    ) -> None:
        """Rename, and point renamed files at new bytes: ``places`` holds (new path, shard,
        offset, size, crc32c) for each. All or nothing (encrypted files are re-sealed for
        their new path, so no row may keep the old bytes).

        Args:
            old: the file or directory to move.
            new: where it goes.
            places: (new path, shard, offset, size, crc32c) of each moved file.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            BarecatError: what :meth:`rename` raises.
        """
        self._require_writable()
        conn = self.settled_conn()
        open_savepoint(conn, "barecat_rename")
        try:
            self.rename(old, new)
            conn.executemany(
                "UPDATE files SET shard = ?, offset = ?, size = ?, crc32c = ? WHERE path = ?",
                [(shard, offset, size, crc, path) for path, shard, offset, size, crc in places],
            )
        except BaseException:
            conn.execute("ROLLBACK TO barecat_rename")
            conn.execute("RELEASE barecat_rename")
            raise
        conn.execute("RELEASE barecat_rename")

    def rename(self, old: BarecatEntryInfo | str, new: str, allow_overwrite: bool = False) -> None:
        """Move a file (:meth:`rename_file`) or a directory and its subtree
        (:meth:`rename_dir`); missing parents of the new path are created.

        Args:
            old: the file's or directory's path or record.
            new: the new path.
            allow_overwrite: replace a file, or an empty directory, at the new path.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: nothing is at the old path.
            FileExistsBarecatError: something is at the new path (without
                ``allow_overwrite``).
            IsADirectoryBarecatError: a file would replace a directory.
            NotADirectoryBarecatError: a directory would replace a file, or an ancestor
                of the new path is a file.
            InvalidPathBarecatError: the root is moved or replaced, a directory is moved
                into itself, or a path gets too deep.
            DirectoryNotEmptyBarecatError: a directory would replace a non-empty one.
        """
        path = path_of(old)
        if self.isdir(path):
            self.rename_dir(path, new, allow_overwrite)
        else:
            self.rename_file(path, new, allow_overwrite)

    def _prepare_target(self, new: str, allow_overwrite: bool, moving_dir: bool) -> None:
        check_depth(new)
        if self.isdir(new):
            if not moving_dir:
                raise IsADirectoryBarecatError(new)
            if not allow_overwrite:
                raise FileExistsBarecatError(new, "Directory")
            self.remove_empty_dir(new)
        elif self.isfile(new):
            if moving_dir:
                raise NotADirectoryBarecatError(f"Not a directory: {new}")
            if not allow_overwrite:
                raise FileExistsBarecatError(new)
            self.remove_file(new)
        for a in ancestors(new):
            if self.isfile(a):
                raise NotADirectoryBarecatError(f"A parent of {new!r} is a file")

    def rename_file(self, old: FileItem, new: str, allow_overwrite: bool = False) -> None:
        """Move a file; missing parents of the new path are created.

        Args:
            old: the file's path or record.
            new: the new path.
            allow_overwrite: replace a file at the new path.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no file is at the old path.
            IsADirectoryBarecatError: a directory is at the old or the new path.
            FileExistsBarecatError: a file is at the new path (without
                ``allow_overwrite``).
            NotADirectoryBarecatError: an ancestor of the new path is a file.
            InvalidPathBarecatError: the new path is too deep.
        """
        self._require_writable()
        old_path, new_path = path_of(old), normalize(new)
        self.lookup_file(old_path, normalized=True)
        if old_path == new_path:
            return
        self._prepare_target(new_path, allow_overwrite, moving_dir=False)
        self.settled_conn().execute(
            "UPDATE files SET path = ? WHERE path = ?", (new_path, old_path)
        )

    def rename_dir(self, old: DirItem, new: str, allow_overwrite: bool = False) -> None:
        """Move a directory and its subtree; statistics are fixed with set updates.

        Args:
            old: the directory's path or record.
            new: the new path.
            allow_overwrite: replace an empty directory at the new path.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no directory is at the old path.
            FileExistsBarecatError: something is at the new path (without
                ``allow_overwrite``).
            IsADirectoryBarecatError: a file would replace a directory.
            NotADirectoryBarecatError: a directory would replace a file, or an ancestor
                of the new path is a file.
            InvalidPathBarecatError: the root is moved or replaced, a directory is moved
                into itself, or a path gets too deep.
            DirectoryNotEmptyBarecatError: a directory would replace a non-empty one.
        """
        self._require_writable()
        d = self.lookup_dir(path_of(old))
        new_path = normalize(new)
        if not d.path or not new_path:
            raise InvalidPathBarecatError("The archive root cannot be renamed or replaced")
        if d.path == new_path:
            return
        if is_within(new_path, d.path):
            raise InvalidPathBarecatError(f"Cannot move {d.path!r} into itself ({new_path!r})")
        self._prepare_target(new_path, allow_overwrite, moving_dir=True)
        conn = self.settled_conn()
        deepest = treestats.deepest_below(conn, d.path)
        if deepest is not None:  # the subtree's deepest path, as it would be after the move
            check_depth(new_path + deepest[len(d.path) :])
        n_files, size = treestats.subtree_totals(conn, d.path)
        lo, hi = subtree_bounds(d.path)
        cut = len(d.path) + 1
        with self.no_triggers():
            treestats.adjust_ancestors(conn, d.path, -n_files, -size, subdir_delta=-1)
            for table in ("files", "dirs"):
                conn.execute(
                    f"UPDATE {table} SET path = ? || substr(path, ?) WHERE path >= ? AND path < ?",
                    (new_path + "/", cut + 1, lo, hi),
                )
            conn.execute("UPDATE dirs SET path = ? WHERE path = ?", (new_path, d.path))
            treestats.ensure_ancestors(conn, new_path)
            treestats.adjust_ancestors(conn, new_path, n_files, size, subdir_delta=1)

    def update_dirs(self) -> None:
        """Create every directory that a file or directory implies but that has no row.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        treestats.insert_missing_dirs(self.settled_conn())

    def update_treestats(self) -> None:
        """Recompute every directory's statistics from the files (after bulk loads).

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        with self.no_triggers():
            treestats.rewrite_treestats(self.settled_conn())

    def find_inconsistencies(self) -> list[str]:
        """Every way the index disagrees with itself, as human-readable lines.

        Returns:
            The problems found; empty for a consistent index.
        """
        return treestats.find_inconsistencies(self.settled_conn())

    def optimize(self) -> None:
        """Let SQLite refresh its query planner statistics (``PRAGMA optimize``)."""
        self.settled_conn().execute("PRAGMA optimize")
