"""A writable index's connection and transactions: the base of every edit.

:class:`IndexTransactions` adds to :class:`~barecat.index.aggregates.IndexAggregates` what a
writer does with its connection as a whole: statistics owed by a run of files added one
at a time (``deferred_stats.py``) applied by :meth:`~IndexTransactions.settled_conn`,
which every query and edit but file rows by path calls first; commit and rollback;
closing, which commits and leaves the saved lookup table right; config values written;
and the blocks that change how the open transaction behaves: statistics triggers off
(``no_triggers``, and ``bulk_mode``, which rebuilds the statistics once at its end with
``treestats.py``), foreign keys off, another index attached (for merges). Imports
``entries``, ``exceptions``, ``layout`` and ``barecat.index``'s own modules.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator

from barecat.entries import SHARD_SIZE_UNLIMITED
from barecat.exceptions import BarecatError, ReadOnlyBarecatError
from barecat.index import merging, treestats
from barecat.index.aggregates import IndexAggregates
from barecat.index.connection import select, sqlite_uri
from barecat.index.deferred_stats import DeferredStats
from barecat.index.errors import raise_index_error
from barecat.index.lookup_table import LookupTable
from barecat.index.merging import MergeSource
from barecat.layout import lookup_table_path

# Secondary indexes a bulk load may drop and rebuild: name -> "table (columns)".
_SECONDARY_INDEXES = {
    "idx_files_parent": "files (parent)",
    "idx_dirs_parent": "dirs (parent)",
    "idx_files_shard_offset": "files (shard, offset)",
}


class IndexTransactions(IndexAggregates):
    """An index's connection and transactions, for a writer (a read-only one refuses
    every edit with :class:`ReadOnlyBarecatError`)."""

    _deferred: DeferredStats | None = None
    """Statistics owed for files added one by one (``add_file``), applied by
    :meth:`settled_conn`, which every query and edit but file rows by path calls first
    (see ``barecat.index.deferred_stats``)."""
    _adds_in_a_row = 0

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

    def _statistics_owed(self) -> bool:
        return self._deferred is not None

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
            with contextlib.suppress(sqlite3.Error, OSError, BarecatError):
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
            raise_index_error(self.path, e)

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
