"""The index's lookups part: point lookups, storage addresses and the lookup table.

:class:`IndexLookups` (``index.lookups``) answers questions about single entries: their
records, whether they exist, where their bytes are (from the lookup table when one is
current, ``lookup_table.py``, vouched for by ``table_trust.py``); its base
:class:`~barecat.index.aggregates.IndexAggregates` the totals and storage-layout queries
over all rows. It queries through the index's connection part (``transactions.py``) and
edits nothing. Every query is index-assisted (see ``query.py``). SQL lives only in this
package; imports go down to ``entries``, ``paths`` and ``exceptions``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from typing import Protocol

from barecat.entries import Address, BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import (
    DamagedEntryBarecatError,
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryLookupBarecatError,
)
from barecat.index import query
from barecat.index.aggregates import IndexAggregates
from barecat.index.connection import select
from barecat.index.errors import FAULTS, guard_public_methods, guards_itself, raise_index_error
from barecat.index.lookup_table import LookupTable
from barecat.index.table_trust import TableTrust, Tagger
from barecat.index.transactions import IndexConnection
from barecat.paths import ancestors, normalize

_AUTO_TABLE_MIN_LOOKUPS = 10_000


class FileLookup(Protocol):
    """Answers where files are for a whole index, finally (see
    :meth:`IndexLookups.answer_files_from`)."""

    def find(self, path: str) -> Address | None:
        """The address of the file at the normalized ``path``; None: no file there."""
        ...

    def find_many(self, paths: list[str]) -> list[tuple[int, Address]]:
        """(position, address) per path that is a file, sorted by address."""
        ...


_IS_FILE = "SELECT 1 FROM files WHERE path = ? LIMIT 1"
_IS_DIR = "SELECT 1 FROM dirs WHERE path = ? LIMIT 1"
_EXISTS = (
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM files WHERE path = ?1) "
    "OR EXISTS (SELECT 1 FROM dirs WHERE path = ?1)"
)  # one statement for both tables: half of what a file query, then a directory one, cost


class IndexLookups(IndexAggregates):
    """The read-only lookups of an index (``index.lookups``), on its ``connection``.

    ``lookup_table``: None (a reader takes up a saved table, or builds one, once enough
    lookups were made), True (a reader loads or builds one at once; a writer always leaves
    one saved at close) or False (none is built).

    Raises:
        BarecatError: what loading a lookup table at once raises.
    """

    def __init__(self, connection: IndexConnection, lookup_table: bool | None = None) -> None:
        super().__init__(connection)
        readonly = connection.readonly
        self._immutable = connection.immutable
        self._table: LookupTable | None = None
        self._authority: FileLookup | None = None
        self._trust = TableTrust(connection.file)  # (and whether a saved table is checked)
        self._index_fd: int | None = None
        self._lookups = 0
        self._table_after: int | None = None
        self._table_pending = False
        self._keep_table_fresh = not readonly and lookup_table is not False
        self._force_table = not readonly and lookup_table is True
        self._files_at_open = 0 if readonly else self.num_files
        if readonly and lookup_table:
            try:
                if not self._load_lookup_table():
                    self.build_lookup_table()
            except BaseException:
                self.close()
                raise
        elif readonly and lookup_table is None:
            # a saved table is looked for at the first lookup, and mapped and checked
            # after enough of them (``_take_up_table``): an open that only lists, globs,
            # counts or reads a file or two never pays for it
            self._table_pending = True

    def answer_files_from(self, authority: FileLookup | None) -> None:
        """Have ``authority`` answer every lookup of a file's address (and whether a file
        is there) instead of SQLite and the lookup table: a remote index's sidecar, whose
        answer, found or not, is final (``archive/lazy_remote.py`` checks it is fresh).

        Args:
            authority: answers for every file row of this index; None: SQLite answers
                from now on (a remote index whose pages became local), never a table.
        """
        self._authority = authority
        self._table_pending = False
        self._table_after = None

    def close(self) -> None:
        """Forget the lookup table and close the index's descriptor (the connection part
        closes the connections)."""
        self._table = None
        self._trust.forget()
        self._table_pending = False
        if self._index_fd is not None:
            os.close(self._index_fd)
            self._index_fd = None

    def refresh_saved_table(self, optimize: bool) -> None:
        """Leave the saved lookup table right for the index as this writer leaves it, and
        with ``optimize`` refresh SQLite's statistics (``PRAGMA optimize``); run by the
        connection part's ``close``, after its commit.

        Rebuilt when the archive is at least half this session's files (a new archive,
        say), or always with ``lookup_table=True``, so building costs at most about 3 us
        per file written and the first reader is fast; saved with what vouches for it
        (``table_trust.py``: a plain archive's config row, committed with the statistics;
        an encrypted archive's tag, with the key). Otherwise a table that no longer
        matches is removed, since readers would ignore it anyway. ``lookup_table=False``
        opts out of building.

        Args:
            optimize: the commit changed something: refresh SQLite's statistics.
        """
        conn, path, fd = self.settled_conn(), self._trust.file, self._index_descriptor()
        analysed = False

        def last_steps(conn: sqlite3.Connection) -> None:  # (the row's commit is the
            nonlocal analysed  # statistics' too: no commit more than before)
            if optimize:
                conn.execute("PRAGMA optimize")
            analysed = True
            self.connection.check_schema(conn)

        current = LookupTable.load(path, fd) is not None  # (nothing committed since saved)
        wanted = not current and self._table_wanted()
        if wanted and self._trust.commit_and_save(conn, fd, last_steps):
            return
        if optimize and not analysed:
            conn.execute("PRAGMA optimize")
        if not current:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def _table_wanted(self) -> bool:
        files = self.num_files
        grown = files >= 2 * self._files_at_open or self._force_table
        return self._keep_table_fresh and files > 0 and grown

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
            self._pool.get(),
            f"SELECT {self.connection.file_columns} FROM files WHERE path = ?",
            (path,),
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
        elif self._authority is not None:
            return self._authority.find(path)
        elif self._table_pending:
            self._take_up_table()
            return self.lookup_address(path)
        elif self._table_after is not None:
            self._lookups += 1
            if self._lookups >= self._table_after:
                self._table_due()
                return self.lookup_address(path)
        return self.lookup_address_in_sqlite(path)

    @property
    def table(self) -> LookupTable | None:
        """The lookup table taken up, if any, for a caller that reads through it in one
        call (:meth:`LookupTable.get`, which answers only while the table is current);
        :meth:`lookup_address` decides everything else."""
        return self._table

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
                self._pool.get(),
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
            self._index_fd = os.open(self.connection.file, os.O_RDONLY | os.O_CLOEXEC)
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
        if not self.connection.readonly:
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
        if self._authority is not None:
            return self._authority.find_many(paths)
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
        if self._authority is not None:
            return self._authority.find(normalize(path)) is not None
        return self._pool.one_row(self._pool.get(), _IS_FILE, (normalize(path),)) is not None

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
        if self.connection.statistics_owed() and self.isfile(path):
            return True  # (a file row needs nothing applied; a directory may)
        return self._pool.one_row(self.settled_conn(), _EXISTS, (path,)) is not None


guard_public_methods(IndexLookups, lambda part: part.path)
