"""Turning an index in an older schema into a fresh schema-0.3 index file beside it.

Two older layouts exist (``docs/format.md``, "Older schemas"): schema 0.2 (and the
unreleased 0.0/0.1, same tables) differs from 0.3 only in its table definitions and
triggers, so its rows are copied column by column; the unversioned layout of 2023
(``files`` + ``directories``, no ``config``) has no CRC32C and no metadata, so only paths
and places are copied and the checksums are filled in afterwards by whoever can read the
shards (:meth:`UpgradeBuild.set_checksums`). Directory statistics are always recomputed:
the 0.2 triggers miscount ``num_files`` after directory moves and removals.

Nothing here ever writes to the old index. :func:`held_for_upgrade` keeps other writers
out while the new file is built and swapped in; the swap itself (and the backup) is the
caller's, in ``barecat.ops.upgrade``. Imports ``exceptions`` and this package's schema,
connection and statistics modules.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from barecat.exceptions import (
    ArchiveLockedBarecatError,
    CorruptIndexBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import schema_check, treestats
from barecat.index.connection import connect, is_busy, select, sqlite_uri, writers_locked_out
from barecat.index.lookup_table import CONFIG_KEY as LOOKUP_TABLE_KEY
from barecat.index.schema import (
    SCHEMA_VERSION_MAJOR,
    SCHEMA_VERSION_MINOR,
    SEALED_SCHEMA_VERSION_MAJOR,
    create_schema,
    read_version,
)

CURRENT_VERSION = (SCHEMA_VERSION_MAJOR, SCHEMA_VERSION_MINOR)
SEALED_VERSION = (SEALED_SCHEMA_VERSION_MAJOR, SCHEMA_VERSION_MINOR)
"""A sealed archive of the current layout: nothing to upgrade either."""
UNVERSIONED = (-1, 0)
"""What :func:`read_version` says about the 2023 layout without a ``config`` table."""

FileToChecksum = tuple[str, int, int, int, int | None]
"""(path, shard, offset, size, old zlib CRC-32 or None), as :meth:`files_to_checksum`
yields them."""

_FILE_COLUMNS = ("path", "shard", "offset", "size", "crc32c", "mode", "uid", "gid", "mtime_ns")
_DIR_META = ("mode", "uid", "gid", "mtime_ns")
_STAT_COLUMNS = ("num_subdirs", "num_files", "num_files_tree", "size_tree")
# the unversioned layout's names for two of the statistics
_UNVERSIONED_STATS = {"num_files_tree": "total_file_count", "size_tree": "total_size"}
_BUSY_TIMEOUT = 5.0


def format_version(version: tuple[int, int]) -> str:
    """'schema 0.2', or 'the unversioned layout' for the 2023 one."""
    if version == UNVERSIONED:
        return "the unversioned (pre-0.2) layout"
    return f"schema {version[0]}.{version[1]}"


@contextlib.contextmanager
def held_for_upgrade(path: str) -> Iterator[tuple[int, int]]:
    """Keep writers away from the index at ``path`` for the block; yields its version.

    Two locks, because two kinds of writers exist: barecat's own writer lock (``flock``
    on the index, taken by every writable ``Barecat``), and SQLite's RESERVED lock, which
    the reference's writers respect. A crashed writer's hot journal is rolled back and a
    WAL is checkpointed into the file first: a journal or WAL left beside the index would
    otherwise be applied to the *new* file once it takes the old one's name.
    """
    with writers_locked_out(path, "before upgrading"):
        writable = os.access(path, os.W_OK)  # a read-only index is upgraded all the same
        conn = sqlite3.connect(
            sqlite_uri(path, "rw" if writable else "ro"),
            uri=True,
            timeout=_BUSY_TIMEOUT,
            isolation_level=None,
        )
        try:
            yield _lock_and_read_version(conn, path, writable)
        finally:
            conn.close()  # ends the transaction; it never wrote anything


def _lock_and_read_version(conn: sqlite3.Connection, path: str, writable: bool) -> tuple[int, int]:
    """Settle journals, then hold the lock that keeps writers out until ``conn`` closes:
    RESERVED, or for a file nobody may write, the SHARED lock of an open read."""
    try:
        (mode,) = select(conn, "PRAGMA journal_mode").fetchone()
        if str(mode).lower() == "wal" and writable:
            conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("BEGIN IMMEDIATE" if writable else "BEGIN")
        schema_check.check(conn, path)  # (reading old.* must run no view of someone else's)
        version = read_version(conn, path)
    except sqlite3.OperationalError as e:
        if is_busy(e):
            raise ArchiveLockedBarecatError(
                f"Archive index {path} is being written by another program; "
                "close it before upgrading"
            ) from e
        raise CorruptIndexBarecatError(f"{path} cannot be read: {e}") from e
    except sqlite3.DatabaseError as e:
        raise CorruptIndexBarecatError(f"{path} is not a barecat index: {e}") from e
    with contextlib.suppress(FileNotFoundError):
        if os.path.getsize(path + "-wal") > 0:
            raise ReadOnlyBarecatError(
                f"{path} has a write-ahead log ({path}-wal) that must be merged first; open "
                "the archive once with write access"
            )
    return version


TEMP_SUFFIX = ".upgrading"


@dataclass(slots=True)
class BuildReport:
    """What the copy produced (row counts), what the old index held (its file count and
    total size, to check the copy against), and how many directories' statistics (or
    rows) the old index had wrong."""

    num_files: int = 0
    num_dirs: int = 0
    old_num_files: int = 0
    old_total_size: int = 0
    dirs_fixed: int = 0


class UpgradeBuild:
    """A schema-0.3 index under construction at ``new_path`` from the index at ``old_path``.

    The new file is scratch until :meth:`finish` returns: it is written without a journal
    or syncs (a crash just leaves a file that the next attempt deletes), and only
    :meth:`finish` makes it durable. Create with :meth:`start`; :meth:`discard` removes it.
    """

    def __init__(self, old_path: str, new_path: str, version: tuple[int, int]) -> None:
        self.old_path = old_path
        self.new_path = new_path
        self.version = version
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def start(cls, old_path: str, new_path: str, version: tuple[int, int]) -> UpgradeBuild:
        """Create the new file (owner-only until finished) and attach the old one."""
        remove_index_file(new_path)
        os.close(os.open(new_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        build = cls(old_path, new_path, version)
        try:
            conn = build._conn = connect(new_path, readonly=False)
            conn.execute("PRAGMA journal_mode = MEMORY")
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("ATTACH DATABASE ? AS old", (sqlite_uri(old_path, "ro"),))
            create_schema(conn, build._old_shard_size_limit())
        except BaseException:
            build.discard()
            raise
        return build

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError(f"Upgrade build of {self.new_path} is closed")
        return self._conn

    @property
    def needs_checksums(self) -> bool:
        """True for the unversioned layout, which stored no CRC32C."""
        return self.version == UNVERSIONED

    def _old_columns(self, table: str) -> set[str]:
        return {row[1] for row in select(self.conn, f"PRAGMA old.table_xinfo({table})")}

    def _old_tables(self) -> set[str]:
        rows = select(self.conn, "SELECT name FROM old.sqlite_master WHERE type = 'table'")
        return {row[0] for row in rows}

    def _old_shard_size_limit(self) -> int | None:
        if "config" not in self._old_tables():
            return None
        row = select(
            self.conn, "SELECT value_int FROM old.config WHERE key = 'shard_size_limit'"
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def copy_rows(self) -> None:
        """Copy directories, files and configuration; statistics come in :meth:`finish`."""
        conn = self.conn
        tables = self._old_tables()
        dir_table = "directories" if self.needs_checksums else "dirs"
        if "files" not in tables or (dir_table not in tables and not self.needs_checksums):
            raise CorruptIndexBarecatError(
                f"{self.old_path} claims {format_version(self.version)} but lacks "
                f"its tables (has: {', '.join(sorted(tables)) or 'none'})"
            )
        conn.execute("BEGIN")
        conn.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
        if dir_table in tables:
            self._copy_dirs(dir_table)
        self._copy_files()
        if "config" in tables:
            conn.execute(
                "INSERT OR REPLACE INTO config (key, value_text, value_int) "
                "SELECT key, value_text, value_int FROM old.config WHERE key NOT IN "
                "('schema_version_major', 'schema_version_minor', 'use_triggers', "
                f"'{LOOKUP_TABLE_KEY}')"
            )
        conn.commit()

    def _copy_dirs(self, table: str) -> None:
        have = self._old_columns(table)
        meta = [c for c in _DIR_META if c in have]
        cols = ", ".join(["path", *meta])
        self.conn.execute(
            f"INSERT INTO dirs ({cols}) SELECT {cols} FROM old.{table} "
            "WHERE typeof(path) = 'text' AND path != ''"
        )
        if meta:
            assigned = ", ".join(meta)
            self.conn.execute(
                f"UPDATE dirs SET ({assigned}) = (SELECT {assigned} FROM old.{table} "
                "WHERE path = '') WHERE path = '' "
                f"AND EXISTS (SELECT 1 FROM old.{table} WHERE path = '')"
            )

    def _copy_files(self) -> None:
        have = self._old_columns("files")
        missing = {"path", "shard", "offset"} - have
        if missing:
            raise CorruptIndexBarecatError(
                f"{self.old_path}: table files lacks {', '.join(sorted(missing))}"
            )
        cols = [c for c in _FILE_COLUMNS if c in have]
        names = ", ".join(cols)
        self.conn.execute(f"INSERT INTO files ({names}) SELECT {names} FROM old.files")

    def files_to_checksum(self) -> Iterator[FileToChecksum]:
        """Every file of the old index in storage order, with its old zlib CRC-32 if any."""
        crc = "crc32" if "crc32" in self._old_columns("files") else "NULL"
        rows = select(
            self.conn,
            f"SELECT path, shard, offset, ifnull(size, 0), {crc} FROM old.files "
            "ORDER BY shard, offset",
        )
        for path, shard, offset, size, old_crc in rows:
            yield str(path), int(shard), int(offset), int(size), old_crc

    def count_old_files(self) -> int:
        return int(select(self.conn, "SELECT count(*) FROM old.files").fetchone()[0])

    def set_checksums(self, rows: list[tuple[int, str]]) -> None:
        """Store (crc32c, path) pairs; committed by :meth:`finish`."""
        self.conn.executemany("UPDATE files SET crc32c = ? WHERE path = ?", rows)

    def finish(self) -> BuildReport:
        """Recompute statistics, compare with the old index, and make the file durable."""
        conn = self.conn
        if not conn.in_transaction:
            conn.execute("BEGIN")
        treestats.insert_missing_dirs(conn)
        treestats.rewrite_treestats(conn)
        conn.execute("UPDATE config SET value_int = 1 WHERE key = 'use_triggers'")
        report = self._report()
        conn.commit()
        conn.execute("DETACH DATABASE old")
        conn.execute("PRAGMA optimize")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.close()
        self._conn = None
        # the old file's permission bits, set only now: a read-only one could not be built
        os.chmod(self.new_path, os.stat(self.old_path).st_mode & 0o7777)
        fsync_path(self.new_path)
        return report

    def _report(self) -> BuildReport:
        conn = self.conn
        (files,) = select(conn, "SELECT count(*) FROM files").fetchone()
        (dirs,) = select(conn, "SELECT count(*) FROM dirs").fetchone()
        old_files, old_size = select(
            conn, "SELECT count(*), ifnull(sum(size), 0) FROM old.files"
        ).fetchone()
        return BuildReport(
            int(files), int(dirs), int(old_files), int(old_size), self._count_fixed_dirs()
        )

    def _count_fixed_dirs(self) -> int:
        """Directories whose old row was missing or whose stored statistics differ."""
        table = "directories" if self.needs_checksums else "dirs"
        if table not in self._old_tables():
            return int(select(self.conn, "SELECT count(*) FROM dirs").fetchone()[0])
        have = self._old_columns(table)
        pairs = [
            (new, old)
            for new in _STAT_COLUMNS
            if (old := (_UNVERSIONED_STATS.get(new) if self.needs_checksums else new)) in have
        ]
        differs = " OR ".join(f"n.{new} IS NOT o.{old}" for new, old in pairs) or "0"
        (count,) = select(
            self.conn,
            f"SELECT count(*) FROM dirs AS n LEFT JOIN old.{table} AS o ON o.path = n.path "
            f"WHERE o.path IS NULL OR {differs}",
        ).fetchone()
        return int(count)

    def discard(self) -> None:
        """Close and delete the unfinished file."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        remove_index_file(self.new_path)


def remove_index_file(path: str) -> None:
    """Delete an index file and any journal SQLite left beside it (missing is fine)."""
    for name in (path, path + "-journal", path + "-wal", path + "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def install_index(index: str, new: str, backup: str) -> None:
    """Keep the old index as ``backup``, then swap the new one in with one rename.

    The backup is a hard link made under a temporary name first, so that at every moment
    ``index`` names a complete index (old, then new) and ``backup`` is either absent, an
    older backup, or this one.
    """
    staged = backup + TEMP_SUFFIX
    remove_index_file(staged)
    try:
        os.link(index, staged)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
            raise
        shutil.copyfile(index, staged)  # no hard links here: a durable copy instead
        fsync_path(staged)
    os.replace(staged, backup)
    os.replace(new, index)
    _fsync_directory(os.path.dirname(index))


def fsync_path(path: str) -> None:
    """Make a file's contents durable (an index written by a connection now closed)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: str) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot sync a directory
        fd = os.open(directory or ".", os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
