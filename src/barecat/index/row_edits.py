"""Edits of single rows: files and directories added, updated and removed one by one.

:class:`IndexRowEdits`, the base of the edits part (``tree_edits.py``), makes the edits
that touch one file's or one directory's row (and, in bulk, many files' rows
at once: ``bulk.py``). Directory statistics follow by the schema's triggers, or for a
run of files added one by one are owed (``deferred_stats.py``) until the connection is
next settled. Imports ``entries``, ``exceptions``, ``paths`` and ``barecat.index``'s own
modules.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import (
    BarecatError,
    DirectoryNotEmptyBarecatError,
    FileExistsBarecatError,
    InvalidPathBarecatError,
)
from barecat.index import bulk, deferred_stats
from barecat.index.connection import open_savepoint, select
from barecat.index.deferred_stats import DeferredStats
from barecat.index.errors import (
    FAULTS,
    guard_public_methods,
    guards_itself,
    integrity_error,
    out_of_range,
    raise_index_error,
)
from barecat.index.listing import DirItem, FileItem, path_of
from barecat.index.reading import IndexLookups
from barecat.index.transactions import IndexConnection, reports_full_disk
from barecat.paths import check_depth, normalize


class IndexRowEdits:
    """Rows of single files and directories added, updated and removed, through an
    index's ``connection``, with its ``lookups`` to tell what is where."""

    def __init__(self, connection: IndexConnection, lookups: IndexLookups) -> None:
        self.connection = connection
        self.lookups = lookups
        self.path = connection.path
        self._pool = connection.pool
        self.settled_conn = connection.settled_conn
        """The connection's :meth:`~IndexConnection.settled_conn` (bound once: a hot path)."""

    @guards_itself
    def add_file(self, finfo: BarecatFileInfo) -> None:
        """Insert a file row; its directories and their statistics follow before the
        next use of the index (by the triggers, or owed by the connection part: see
        ``deferred_stats.py``).

        Args:
            finfo: the file's record, with its path, metadata and address.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileExistsBarecatError: a file is at the path.
            IsADirectoryBarecatError: a directory is at the path.
            NotADirectoryBarecatError: an ancestor of the path is a file.
            InvalidPathBarecatError: the path is too deep.
            NotEnoughSpaceBarecatError: the disk is full.
            OutOfRangeBarecatError: a number of a record is beyond 64 bits.
        """
        db = self.connection
        db.require_writable()
        f = finfo
        check_depth(f.path)
        conn = self._pool.get()

        def insert_row() -> None:
            conn.execute(
                bulk.INSERT_SEALED_FILE if db.sealed else bulk.INSERT_FILE,
                bulk.file_row(f, db.sealed),
            )

        try:
            deferred = db.deferred
            if deferred is not None and deferred.conn is not conn:
                conn = self.settled_conn()  # (applies or drops what another connection was owed)
                deferred = None
            if deferred is None and not self._pool.threadsafe:
                db.adds_in_a_row += 1
                if db.adds_in_a_row > deferred_stats.ADDS_BEFORE_DEFERRING:
                    deferred = DeferredStats.begin(conn)
                    db.owe_statistics(deferred)
                    if deferred is None:  # statistics switched off: try again later
                        db.adds_in_a_row = 0
            if deferred is None:
                insert_row()
            else:
                deferred.insert(f.path, f.stored_size, insert_row)
        except sqlite3.IntegrityError as e:
            raise integrity_error(e, f.path, True, self.lookups.isfile) from None
        except sqlite3.OperationalError as e:
            raise db.edit_failed(e) from e
        except FAULTS as e:
            raise_index_error(self.path, e)
        except OverflowError as e:
            raise out_of_range(f, e) from None

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
            OutOfRangeBarecatError: a number of a record is beyond 64 bits.
        """
        self.connection.require_writable()
        try:
            bulk.insert_files(self.settled_conn(), finfos, self.connection.sealed)
        except sqlite3.OperationalError as e:
            raise self.connection.edit_failed(e) from e
        except OverflowError as e:
            raise out_of_range(list(finfos), e) from None

    @reports_full_disk
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
        self.connection.require_writable()
        rows = sorted(
            ((check_depth(d.path), d.mode, d.uid, d.gid, d.mtime_ns) for d in dinfos),
            key=lambda r: r[0],
        )
        conn = self.settled_conn()
        open_savepoint(conn, "barecat_dirs")
        try:
            if len(rows) < bulk.SUSPEND_TRIGGERS_ROWS or not bulk.upsert_dirs(conn, rows):
                conn.executemany(bulk.UPSERT_DIR, rows)
        except sqlite3.IntegrityError as e:
            conn.execute("ROLLBACK TO barecat_dirs")
            conn.execute("RELEASE barecat_dirs")
            clash = next((r[0] for r in rows if self.lookups.isfile(r[0])), rows[0][0])
            raise integrity_error(e, clash, False, self.lookups.isfile) from None
        except BaseException:
            conn.execute("ROLLBACK TO barecat_dirs")
            conn.execute("RELEASE barecat_dirs")
            raise
        conn.execute("RELEASE barecat_dirs")

    @reports_full_disk
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
        self.connection.require_writable()
        d = dinfo
        check_depth(d.path)
        conn = self.settled_conn()
        if self.lookups.isdir(d.path):
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
            raise integrity_error(e, d.path, False, self.lookups.isfile) from None

    @reports_full_disk
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

    @reports_full_disk
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
        self.connection.require_writable()
        if new_logical_size is not None and not self.connection.sealed:
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
            self.lookups.lookup_file(path)  # raises the precise error

    def _update_meta(self, path: str, assignments: str, args: tuple[Any, ...]) -> None:
        self.connection.require_writable()
        path = normalize(path)
        conn = self.settled_conn()
        for table in ("files", "dirs"):
            sql = f"UPDATE {table} SET {assignments} WHERE path = ?"
            if conn.execute(sql, (*args, path)).rowcount:
                return
        raise self.lookups.not_found_error(path)

    @reports_full_disk
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

    @reports_full_disk
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

    @reports_full_disk
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

    @reports_full_disk
    def remove_file(self, item: FileItem) -> None:
        """Delete a file's row (its bytes stay in the shards as a hole).

        Args:
            item: the file's path or record.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
        """
        self.connection.require_writable()
        path = path_of(item)
        if self.settled_conn().execute("DELETE FROM files WHERE path = ?", (path,)).rowcount == 0:
            self.lookups.lookup_file(path, normalized=True)

    @reports_full_disk
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
        self.connection.require_writable()
        d = self.lookups.lookup_dir(path_of(item))
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


guard_public_methods(IndexRowEdits, lambda part: part.path)
