"""An index's page layout, and rewriting it into the layout a published archive has.

A published index (``barecat publish``, ``ops/publish.py``) is read by remote readers a
page at a time, so it is laid out for that: 64 KiB pages (a 10-million-file index keeps
its size, and its interior b-tree pages come to about 1 MB), a rollback journal (a WAL
would hold committed pages outside the file), and vacuumed (no free pages, each b-tree
written afresh in order). :func:`read_layout` tells what an index has; :func:`rewrite`
gets it there with SQLite's own ``VACUUM``, checking that every row survived. The
caller holds barecat's writer lock (``connection.writers_locked_out``). Imports
``index.connection``, ``index.schema`` and ``exceptions``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from barecat.exceptions import (
    ArchiveLockedBarecatError,
    BarecatIntegrityError,
    ReadOnlyBarecatError,
    SchemaVersionBarecatError,
)
from barecat.index.connection import (
    is_busy,
    roll_back_crashed_transaction,
    select,
    sqlite_uri,
)
from barecat.index.errors import FAULTS, raise_index_error
from barecat.index.schema import (
    SCHEMA_VERSION_MAJOR,
    SCHEMA_VERSION_MINOR,
    SEALED_SCHEMA_VERSION_MAJOR,
    read_version,
)

PUBLISHED_PAGE_SIZE = 65536
"""The page size of a published index."""
_BUSY_TIMEOUT = 5.0
_TABLES = ("files", "dirs", "config")
_COLUMNS = "SELECT * FROM pragma_table_xinfo(?)"
"""A table's columns; ``hidden`` is not 0 for a generated one (``parent``: not stored)."""


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """How an index is laid out on disk: what publishing looks at."""

    page_size: int
    page_count: int
    journal_mode: str
    free_pages: int
    has_wal: bool

    @property
    def published(self) -> bool:
        """64 KiB pages, a rollback journal, no write-ahead log, no free page."""
        return (
            self.page_size == PUBLISHED_PAGE_SIZE
            and self.journal_mode == "delete"
            and not self.has_wal
            and self.free_pages == 0
        )


def read_layout(path: str) -> IndexLayout:
    """The layout of the index at ``path``, which must be a plain schema-0.3 index; a
    crashed writer's hot journal is rolled back first.

    Raises:
        SchemaVersionBarecatError: a sealed archive (for an encrypted one, publishing
            would give remote readers addresses its index digest does not vouch for;
            compressed-only ones are refused too, until remote readers unseal) or an
            older schema (``barecat upgrade`` first).
    """
    roll_back_crashed_transaction(path)  # (a read-only connection cannot)
    with plain_connection(path, "ro") as conn:
        version = read_version(conn, path)
        if version[0] == SEALED_SCHEMA_VERSION_MAJOR:
            raise SchemaVersionBarecatError(
                f"{path} is a sealed archive (schema {version[0]}.{version[1]}: compressed "
                "and/or encrypted): publishing it is not supported yet (a sidecar would "
                "answer lookups that an encrypted archive's index digest does not vouch for)"
            )
        if version != (SCHEMA_VERSION_MAJOR, SCHEMA_VERSION_MINOR):
            raise SchemaVersionBarecatError(
                f"{path} is at schema {version[0]}.{version[1]}; run 'barecat upgrade' first"
            )
        (page_size,) = select(conn, "PRAGMA page_size").fetchone()
        (page_count,) = select(conn, "PRAGMA page_count").fetchone()
        (journal,) = select(conn, "PRAGMA journal_mode").fetchone()
        (free,) = select(conn, "PRAGMA freelist_count").fetchone()
    wal = path + "-wal"
    has_wal = os.path.exists(wal) and os.path.getsize(wal) > 0
    return IndexLayout(page_size, page_count, str(journal).lower(), free, has_wal)


def rewrite(path: str) -> None:
    """Give the index at ``path`` the published layout: checkpoint a WAL, switch to a
    rollback journal, 64 KiB pages, ``VACUUM``; then check that every row is there as
    before (counts of each table and a digest of every row, in path order). SQLite's
    exclusive lock is held from before the first count to after the last, so no other
    program reads or writes the index meanwhile.

    Raises:
        ReadOnlyBarecatError: the index cannot be written.
        ArchiveLockedBarecatError: another program is writing it.
        BarecatIntegrityError: rows differ after the rewrite (never seen: SQLite's VACUUM
            copies every row).
    """
    with plain_connection(path, "rw") as conn:
        try:
            select(conn, "PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            select(conn, "PRAGMA journal_mode = DELETE").fetchall()
            # SQLite's EXCLUSIVE lock, taken now and kept until the connection closes:
            # no other program (barecat 0.3.1) commits between the census and VACUUM
            select(conn, "PRAGMA locking_mode = EXCLUSIVE").fetchall()
            conn.execute("BEGIN EXCLUSIVE")
            conn.execute("COMMIT")
            before = census(conn)
            conn.execute(f"PRAGMA page_size = {PUBLISHED_PAGE_SIZE}")
            conn.execute("VACUUM")
        except sqlite3.OperationalError as e:
            if is_busy(e):
                raise ArchiveLockedBarecatError(
                    f"Archive index {path} is being written by another program; close it "
                    "before publishing"
                ) from e
            if "readonly" in str(e):
                raise ReadOnlyBarecatError(f"{path} cannot be written: {e}") from e
            raise
        after = census(conn)
    if after != before:
        raise BarecatIntegrityError(
            f"{path}: the rows differ after VACUUM ({before[0]} before, {after[0]} after)"
        )


def stamp(path: str) -> int:
    """Write a new random number into the index's header (SQLite's ``user_version``,
    which neither barecat nor barecat 0.3.1 uses otherwise), so that the header a sidecar
    records is this index's alone: another index, even one built the same way to the same
    size and change counter, has a header of its own (a chance of 1 in 2**31 to share it).

    Returns:
        The number written.
    """
    number = secrets.randbelow(2**31 - 1) + 1
    with plain_connection(path, "rw") as conn:
        conn.execute(f"PRAGMA user_version = {number}")
    return number


@contextlib.contextmanager
def commits_held_off(path: str) -> Iterator[None]:
    """Hold a read transaction on the index at ``path`` for the block: SQLite's SHARED
    lock, which lets other readers in but no other program's commit (barecat 0.3.1's
    writers wait, or fail as busy), so what is built from the index in the block and
    checked against it later in the block sees one state of it."""
    with plain_connection(path, "ro") as conn:
        conn.execute("BEGIN")
        select(conn, "SELECT count(*) FROM sqlite_master").fetchone()  # takes SHARED
        yield
        conn.execute("COMMIT")


def census(conn: sqlite3.Connection) -> tuple[tuple[int, ...], str]:
    """Row counts of the index's tables and a SHA-256 of all their rows (their stored
    columns, text as its bytes) in key order."""
    digest = hashlib.sha256()
    counts = []
    stored = {
        table: [c for _, c, _, _, _, _, hidden in select(conn, _COLUMNS, (table,)) if not hidden]
        for table in _TABLES
    }
    factory, conn.text_factory = conn.text_factory, bytes  # (text as stored, no decoding)
    try:
        for table, key in zip(_TABLES, ("path", "path", "key"), strict=True):
            columns = ", ".join(stored[table])
            rows = select(conn, f"SELECT {columns} FROM {table} ORDER BY {key}")
            n = 0
            while batch := rows.fetchmany(8192):  # (repr of a batch: one call, not one a row)
                digest.update(repr(batch).encode())
                n += len(batch)
            counts.append(n)
    finally:
        conn.text_factory = factory
    return tuple(counts), digest.hexdigest()


@contextlib.contextmanager
def plain_connection(path: str, mode: str) -> Iterator[sqlite3.Connection]:
    """A connection to the index at ``path`` (``mode`` ro or rw) outside any transaction,
    with none of barecat's pragmas or triggers, reading paths as the lookup table and the
    sidecar encode them (undecodable bytes kept by ``surrogateescape``). SQLite's errors
    in the block are raised as barecat's, naming the index (``errors.py``)."""
    conn = sqlite3.connect(
        sqlite_uri(path, mode), uri=True, timeout=_BUSY_TIMEOUT, isolation_level=None
    )
    conn.text_factory = _text
    try:
        yield conn
    except FAULTS as e:
        raise_index_error(path, e)
    finally:
        conn.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")
