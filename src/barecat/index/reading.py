"""The read side of the index: opening, point lookups and storage addresses.

:class:`IndexReader` opens (and for a new writable archive, creates) the SQLite index and
answers questions about single entries: their records, whether they exist, where their
bytes are (from the lookup table when one is current) and how many files there are.
:class:`~barecat.index.aggregates.IndexAggregates` extends it with the other totals and
storage-layout queries over all rows, the queries that list many entries are its
``listing`` (``listing.py``), and :class:`barecat.index.index.CoreIndex` adds the
edits. Every query is index-assisted (see ``query.py``). SQL lives only in this
package; imports go down to ``entries``, ``paths`` and ``exceptions``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from typing import Any, TypeVar

from barecat.entries import (
    SHARD_SIZE_UNLIMITED,
    Address,
    BarecatDirInfo,
    BarecatEntryInfo,
    BarecatFileInfo,
)
from barecat.exceptions import (
    DamagedEntryBarecatError,
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryLookupBarecatError,
)
from barecat.index import file_digest, query, schema_check
from barecat.index.connection import (
    ConnectionPool,
    map_pages,
    roll_back_crashed_transaction,
    select,
)
from barecat.index.errors import (
    FAULTS,
    guard_public_methods,
    guards_itself,
    open_error,
    raise_index_error,
)
from barecat.index.listing import IndexListing
from barecat.index.lookup_table import LookupTable
from barecat.index.schema import (
    SEALED_SCHEMA_VERSION_MAJOR,
    SEALING_KEY,
    ConfigValue,
    check_version_and_limit,
    config_int,
    make_schema_if_missing,
    read_config,
)
from barecat.index.table_trust import TableTrust, Tagger
from barecat.layout import archive_not_found, base_path, shards_with_bytes
from barecat.paths import ancestors, normalize

_AUTO_TABLE_MIN_LOOKUPS = 10_000
ROOT_TOTAL_SQL = {
    column: f"SELECT {column} FROM dirs WHERE path = '' AND NOT EXISTS "
    "(SELECT 1 FROM config WHERE key = 'use_triggers' AND value_int IS NOT 1) LIMIT 1"
    for column in ("num_files_tree", "size_tree")
}
"""A total from the root's statistics, unless ``use_triggers`` is set to anything but 1
(as before: a missing row is taken as 1): one statement, all a ``len(bc)`` costs."""
_NUM_FILES = ROOT_TOTAL_SQL["num_files_tree"]
_IS_FILE = "SELECT 1 FROM files WHERE path = ? LIMIT 1"
_IS_DIR = "SELECT 1 FROM dirs WHERE path = ? LIMIT 1"
_EXISTS = (
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM files WHERE path = ?1) "
    "OR EXISTS (SELECT 1 FROM dirs WHERE path = ?1)"
)  # one statement for both tables: half of what a file query, then a directory one, cost


_Reader = TypeVar("_Reader", bound="IndexReader")


class IndexReader:
    """Read access to an archive's SQLite index.

    ``path`` is the index file itself. ``readonly`` opens it with SQLite's read-only
    mode; ``readonly_is_immutable`` additionally tells SQLite nobody else changes the
    file (no locking at all — fastest for archives on read-only media). A writer makes
    the schema of an index that holds no archive yet (``created`` says it did), unless
    the archive's shard files exist: see :func:`~barecat.index.schema.make_schema_if_missing`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shard_size_limit: int | None = None,
        bufsize: int | None = None,
        readonly: bool = True,
        wal: bool = False,
        readonly_is_immutable: bool = False,
        threadsafe: bool = False,
        lookup_table: bool | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.readonly = readonly
        self.bufsize = bufsize or 1000
        self.created = False
        if readonly and not os.path.isfile(self.path):
            raise archive_not_found(self.path, "Archive index")
        self._pool = ConnectionPool(
            self.path, readonly, readonly and readonly_is_immutable, threadsafe
        )
        self._immutable = readonly and readonly_is_immutable
        self._table: LookupTable | None = None
        self._trust = TableTrust(self.path)  # (and whether a saved table is to be checked)
        self._index_fd: int | None = None
        self._lookups = 0
        self._table_after: int | None = None
        self._table_pending = False
        self._keep_table_fresh = not readonly and lookup_table is not False
        self._force_table = not readonly and lookup_table is True
        try:
            if readonly and not readonly_is_immutable:
                roll_back_crashed_transaction(self.path)
            conn = self._pool.get()
            # before anything else: no statement of ours may run a trigger or view that
            # barecat did not make (its first read rolls back a crashed writer's journal);
            # a writer checks again at commit if the schema cookie moved since
            self._schema_checked = 0 if readonly else schema_check.schema_version(conn)
            schema_check.check(conn, self.path)
            if not readonly:
                self.created = make_schema_if_missing(
                    conn,
                    self.path,
                    shard_size_limit,
                    lambda: shards_with_bytes(base_path(self.path)),
                )
            self.schema_version, self._limit_at_open = check_version_and_limit(conn, self.path)
            self._pool.set_up_each("mmap", map_pages)
            self._read_layout()
        except FAULTS as e:
            self._pool.close()
            raise open_error(self.path, e) from e
        except BaseException:
            self._pool.close()
            raise
        self.listing = IndexListing(self)
        """The listing queries (every file, a directory's entries, walk, glob)."""
        self._finish_opening(conn, shard_size_limit, lookup_table, wal)

    def _finish_opening(
        self,
        conn: sqlite3.Connection,
        shard_size_limit: int | None,
        lookup_table: bool | None,
        wal: bool,
    ) -> None:
        """An open's last steps, the index readable: a writer's limit stored, the lookup
        table taken up or planned, WAL mode. If one fails, the connections and the
        index's descriptor are closed, nothing committed."""
        try:
            self._configure(shard_size_limit)
            if self.readonly and lookup_table:
                if not self._load_lookup_table():
                    self.build_lookup_table()
            elif self.readonly and lookup_table is None:
                # a saved table is looked for at the first lookup, and mapped and checked
                # after enough of them (``_take_up_table``): an open that only lists,
                # globs, counts or reads a file or two never pays for it
                self._table_pending = True
            if wal and not self.readonly:
                conn.execute("PRAGMA journal_mode = WAL")
        except BaseException:
            IndexReader.close(self)
            raise

    def _read_layout(self) -> None:
        """Which columns file records come from: a sealed archive's hold two sizes.
        (``check_version`` admits the sealed major only with its ``sealing`` row, and
        refuses that row under a plain version.)"""
        self.sealed = self.schema_version[0] == SEALED_SCHEMA_VERSION_MAJOR
        self.file_columns = query.SEALED_FILE_COLUMNS if self.sealed else query.FILE_COLUMNS

    def sealing_config(self) -> dict[str, ConfigValue]:
        """The ``sealing*`` config rows (empty for a plain archive).

        Returns:
            The rows, by key.
        """
        return read_config(self.settled_conn(), SEALING_KEY, self.path) if self.sealed else {}

    def stored_file_digest(self) -> str | None:
        """The digest of the file rows stored in the config.

        Returns:
            The digest; None when the archive keeps none.
        """
        return file_digest.stored(self.settled_conn())

    def file_digest_rows(self) -> Iterator[tuple[object, object, object, object]]:
        """Every file row's columns the digest covers.

        Returns:
            An iterator of (path, size, crc32c, logical_size) rows.
        """
        return file_digest.covered_rows(self.settled_conn())

    def _configure(self, shard_size_limit: int | None) -> None:
        """Hook for the editable subclass; reading needs no configuration."""

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's (and this process's) connection, as it is: no statistics are
        applied first (see :meth:`settled_conn`; ``barecat.Index`` hands that out under
        this name, as barecat 0.3.1 code expects)."""
        return self._pool.get()

    def settled_conn(self) -> sqlite3.Connection:
        """This thread's connection, with every directory statistic right in it: the
        connection for any query or edit other than file rows by path, and for SQL of
        one's own. A reader never owes statistics; a writer's run of single adds may
        (:meth:`barecat.index.transactions.IndexTransactions.settled_conn` applies them)."""
        return self._pool.get()

    @property
    def _files_conn(self) -> sqlite3.Connection:
        """The connection for queries of file rows by path alone, which a writer's
        statistics still owed (``IndexTransactions._deferred``) do not change: they need not wait.
        (Not :attr:`conn`, which ``barecat.Index`` settles.)"""
        return self._pool.get()

    def close(self) -> None:
        self._pool.close()
        self._table = None
        self._trust.forget()
        self._table_pending = False
        if self._index_fd is not None:
            os.close(self._index_fd)
            self._index_fd = None

    def __enter__(self: _Reader) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _config_int(self, key: str, default: int | None = None) -> int | None:
        row = select(
            self.settled_conn(), "SELECT value_int FROM config WHERE key = ?", (key,)
        ).fetchone()
        return default if row is None else config_int(row[0], key, self.path)

    def _root_total(self, total_sql: str, recount_sql: str) -> int:
        """A whole-archive total from the root's statistics (``total_sql``, one of
        :data:`ROOT_TOTAL_SQL`), recounted if they are off (the triggers that keep them
        are switched off: no row) or damaged (not an integer, or negative)."""
        conn = self.settled_conn()
        row = self._pool.one_row(conn, total_sql)
        if row is not None and type(value := row[0]) is int and value >= 0:
            return value
        return int(select(conn, recount_sql).fetchone()[0])

    @property
    def num_files(self) -> int:
        """The number of files in the index."""
        return self._root_total(_NUM_FILES, "SELECT count(*) FROM files")

    def shard_size_limit_at_open(self) -> int:
        """The shard size limit when the index was opened: a reader's as read with the
        schema version (one statement for both: every open pays for it); a writer's asked
        again, since opening may have stored another (``shard_size_limit=`` given).

        Returns:
            The limit in bytes (``SHARD_SIZE_UNLIMITED`` when none is stored).
        """
        if not self.readonly:
            return self.shard_size_limit
        return SHARD_SIZE_UNLIMITED if self._limit_at_open is None else self._limit_at_open

    @property
    def shard_size_limit(self) -> int:
        value = self._config_int("shard_size_limit")
        return SHARD_SIZE_UNLIMITED if value is None else value

    def __len__(self) -> int:
        return self.num_files

    def __iter__(self) -> Iterator[str]:
        return self.listing.file_paths()

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.isfile(path)

    def lookup_file(self, path: str, normalized: bool = False) -> BarecatFileInfo:
        """The record of the file at ``path``.

        Args:
            path: the file's path.
            normalized: ``path`` is already normalized (skips normalizing).

        Returns:
            Its path, metadata and address.

        Raises:
            FileNotFoundBarecatError: no file is there (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
            IsADirectoryBarecatError: a directory is there.
        """
        if not normalized:
            path = normalize(path)
        row = select(
            self._files_conn, f"SELECT {self.file_columns} FROM files WHERE path = ?", (path,)
        ).fetchone()
        if row is None:
            if self.isdir(path):
                raise IsADirectoryBarecatError(path)
            raise self.not_found_error(path)
        return query.file_from_row(row)

    def not_found_error(self, path: str, what: str = "File") -> FileNotFoundBarecatError:
        """The error for a missing ``path``: ENOTDIR (as ``os``) if an ancestor is a file,
        a :class:`NotADirectoryLookupBarecatError`, which is also the
        ``FileNotFoundBarecatError`` 0.3.1 raised; ENOENT otherwise.

        Args:
            path: the normalized path that was not found.
            what: the kind of entry looked for, for the message (``"File"``,
                ``"Directory"``).

        Returns:
            The error, to raise.
        """
        ups = ancestors(path)
        marks = ",".join("?" * len(ups))
        sql = f"SELECT path FROM files WHERE path IN ({marks}) LIMIT 1"
        if ups and (row := select(self.settled_conn(), sql, ups).fetchone()) is not None:
            message = f"Not a directory: {row[0]!r} (in {path!r}) is a file"
            return NotADirectoryLookupBarecatError(message, path)
        return FileNotFoundBarecatError(path, what)

    @guards_itself
    def lookup_address(self, path: str) -> Address | None:
        """(shard, offset, size, crc32c) of a normalized file path, or None: the read hot path.

        Read-only indexes answer from a :class:`LookupTable` when one is current (saved
        beside the index by a writer, or a reader of an encrypted archive holding its key,
        and checked; built after enough lookups, or at open with ``lookup_table=True``),
        SQLite otherwise and for whatever the table cannot tell.

        Args:
            path: the normalized path.

        Returns:
            The address, or None if no file is there.

        Raises:
            DamagedEntryBarecatError: the file's row cannot address bytes (found when
                SQLite answers).
        """
        table = self._table
        if table is not None:
            if self._immutable or table.is_current():
                found = table.find(path)
                if found is not None:
                    return found
            else:
                self._table = None
                self._lookups = 0
        elif self._table_pending:
            self._take_up_table()
            return self.lookup_address(path)
        elif self._table_after is not None:
            self._lookups += 1
            if self._lookups >= self._table_after:
                self._table_due()
                return self.lookup_address(path)
        return self.lookup_address_in_sqlite(path)

    @guards_itself
    def lookup_address_in_sqlite(self, path: str) -> Address | None:
        """As :meth:`lookup_address`, always from SQLite: the second opinion when bytes
        read at a table's address fail their check.

        Args:
            path: the normalized path.

        Returns:
            (shard, offset, size, crc32c), or None if no file is there.

        Raises:
            DamagedEntryBarecatError: the file's row cannot address bytes (text or a
                negative number where an offset belongs, say).
        """
        try:
            row = select(
                self._files_conn,
                "SELECT shard, offset, size, crc32c FROM files WHERE path = ?",
                (path,),
            ).fetchone()
        except FAULTS as e:
            raise_index_error(self.path, e)
        if row is None:
            return None
        if (problem := query.address_problem(*row)) is not None:
            raise DamagedEntryBarecatError(path, problem)
        return Address._make(row)

    @property
    def lookup_table_size(self) -> int | None:
        """Entries in the active lookup table, or None when lookups go to SQLite (a saved
        table not checked yet is checked now)."""
        if self._table_pending:
            self._take_up_table()
        if self._trust.saved:
            self._table_due()
        return None if self._table is None else len(self._table)

    def trust_lookup_tables_with(self, tagger: Tagger) -> None:
        """Make and check the tags of an encrypted archive's saved tables with ``tagger``
        (the archive's key, once known; see ``table_trust.py``).

        Args:
            tagger: bytes -> their tag under the key.
        """
        self._trust.tagger = tagger
        if self._trust.saved and self._table_after is None:
            self._table_after = self._lookups  # it waited for the key: checked next time

    def _index_descriptor(self) -> int:
        if self._index_fd is None:
            self._index_fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return self._index_fd

    def _take_up_table(self) -> None:
        """At a reader's first lookup: plan to check the saved table after some lookups
        (``TableTrust.take_up``); without one, to build one after one archive's worth of
        random lookups (by then building, about 2 us per file, costs at most a fifth of
        what they took, and every later lookup saves about 6 us)."""
        self._table_pending = False
        check_after = self._trust.take_up()
        if check_after is None:
            check_after = max(_AUTO_TABLE_MIN_LOOKUPS, self.num_files)
        self._table_after = self._lookups + check_after

    def _table_due(self) -> None:
        """Enough lookups were made: use the saved table if it may answer, else build one
        (or, for a table that is refused, plan to, as if none were saved)."""
        self._table_after = None
        if not self._trust.saved:
            self.build_lookup_table()
            return
        found = self._trust.due(self.settled_conn(), self._index_descriptor())
        if isinstance(found, LookupTable):
            self._table = found
        elif not found:
            self._table_after = self._lookups + max(_AUTO_TABLE_MIN_LOOKUPS, self.num_files)

    def _load_lookup_table(self) -> bool:
        self._take_up_table()
        if self._trust.saved:
            self._table_due()
        return self._table is not None

    def build_lookup_table(self, save: bool = True) -> bool:
        """Build the lookup table now (read-only, rollback-journal indexes only) and, with
        ``save``, keep it beside the index for the next reader where it can be vouched for
        without writing the index: an encrypted archive's, with the key known (see
        ``table_trust.py``; a plain archive's tables are saved by writers).

        Args:
            save: write the table beside the index too, when it can be.

        Returns:
            True if a table was built; False for a writable index or one whose journal
            mode allows no table.
        """
        self._table_after = None
        self._table_pending = False
        self._trust.forget()
        if not self.readonly:
            return False
        conn = self.settled_conn()
        table = LookupTable.build(conn, self._index_descriptor())
        if table is None:
            return False
        self._table = table
        if save:
            self._trust.save(conn, table)
        return True

    @guards_itself
    def locate_many(self, paths: list[str]) -> list[tuple[int, Address]]:
        """(request position, address) for each existing normalized path, sorted by
        storage address: one query joins the whole request against the index.

        Args:
            paths: the normalized paths.

        Returns:
            One pair per path that is a file (missing ones are left out).

        Raises:
            DamagedEntryBarecatError: a file's row cannot address bytes.
        """
        if self._table_pending:
            self._take_up_table()
        if self._trust.saved and self._table_after is not None:
            self._lookups += len(paths)
            if self._lookups >= self._table_after:
                self._table_due()
        table = self._table
        if table is not None and (self._immutable or table.is_current()):
            located = table.find_many(paths)
            if located is not None:  # (else the table cannot tell: SQLite answers the batch)
                return located
        return self.locate_many_in_sqlite(paths)

    @guards_itself
    def locate_many_in_sqlite(self, paths: list[str]) -> list[tuple[int, Address]]:
        """As :meth:`locate_many`, always from SQLite (a damaged row raises
        ``DamagedEntryBarecatError``, as in :meth:`lookup_address_in_sqlite`).

        Args:
            paths: the normalized paths.

        Returns:
            One (request position, address) pair per path that is a file, by storage
            address.

        Raises:
            DamagedEntryBarecatError: a file's row cannot address bytes.
        """
        sql = (
            "SELECT j.key, f.shard, f.offset, f.size, f.crc32c FROM json_each(?) AS j "
            "JOIN files AS f ON f.path = j.value ORDER BY f.shard, f.offset"
        )
        try:
            rows = select(self.settled_conn(), sql, (json.dumps(paths),)).fetchall()
        except FAULTS as e:
            raise_index_error(self.path, e)
        located = []
        for pos, *row in rows:
            if (problem := query.address_problem(*row)) is not None:
                raise DamagedEntryBarecatError(paths[pos], problem)
            located.append((pos, Address._make(row)))
        return located

    def lookup_dir(self, dirpath: str) -> BarecatDirInfo:
        """The record of the directory at ``dirpath``.

        Args:
            dirpath: the directory's path (``""``: the root).

        Returns:
            Its path, metadata and statistics.

        Raises:
            FileNotFoundBarecatError: no directory is there
                (``NotADirectoryLookupBarecatError`` when a file is, or an ancestor is one).
        """
        path = normalize(dirpath)
        row = select(
            self.settled_conn(), f"SELECT {query.DIR_COLUMNS} FROM dirs WHERE path = ?", (path,)
        ).fetchone()
        if row is None:
            if self.isfile(path):
                raise NotADirectoryLookupBarecatError(f"Not a directory: {path}", path)
            raise self.not_found_error(path, "Directory")
        return query.dir_from_row(row)

    def lookup(self, path: str) -> BarecatEntryInfo:
        """The record of the file or directory at ``path``.

        Args:
            path: the path (``""``: the root).

        Returns:
            A :class:`BarecatFileInfo` or :class:`BarecatDirInfo`.

        Raises:
            FileNotFoundBarecatError: nothing is there.
        """
        path = normalize(path)
        try:
            return self.lookup_file(path, normalized=True)
        except IsADirectoryBarecatError:
            return self.lookup_dir(path)

    def isfile(self, path: str) -> bool:
        """Whether a file is at ``path``.

        Args:
            path: the path.

        Returns:
            True if a file is there.

        Raises:
            InvalidPathBarecatError: ``path`` escapes the archive root.
        """
        return self._pool.one_row(self._files_conn, _IS_FILE, (normalize(path),)) is not None

    def isdir(self, path: str) -> bool:
        """Whether a directory is at ``path``.

        Args:
            path: the path.

        Returns:
            True if a directory is there.

        Raises:
            InvalidPathBarecatError: ``path`` escapes the archive root.
        """
        return self._pool.one_row(self.settled_conn(), _IS_DIR, (normalize(path),)) is not None

    def exists(self, path: str) -> bool:
        """Whether a file or directory is at ``path``.

        Args:
            path: the path (``""``: the root).

        Returns:
            True if a file or directory is there.

        Raises:
            InvalidPathBarecatError: ``path`` escapes the archive root.
        """
        path = normalize(path)
        if self._statistics_owed() and self.isfile(path):
            return True  # (a file row needs nothing applied; a directory may)
        return self._pool.one_row(self.settled_conn(), _EXISTS, (path,)) is not None

    def _statistics_owed(self) -> bool:
        """Hook for the editable subclass: whether directory statistics (and directory
        rows) of a run of single adds are still to be applied; a reader owes none."""
        return False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every layer's public methods raise barecat's errors, never SQLite's."""
        super().__init_subclass__(**kwargs)
        guard_public_methods(cls, _index_path)


def _index_path(index: IndexReader) -> str:
    return index.path


guard_public_methods(IndexReader, _index_path)
