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
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Concatenate, ParamSpec, TypeVar

from barecat.entries import SHARD_SIZE_UNLIMITED
from barecat.exceptions import (
    ArchiveLockedBarecatError,
    BarecatError,
    ForeignSchemaBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import merging, schema_check, treestats
from barecat.index.aggregates import IndexAggregates
from barecat.index.connection import is_busy, select, sqlite_uri
from barecat.index.deferred_stats import DeferredStats
from barecat.index.errors import index_error, out_of_range
from barecat.index.lookup_table import LookupTable
from barecat.index.merging import MergeSource

_T = TypeVar("_T", bound="IndexTransactions")
_P = ParamSpec("_P")
_R = TypeVar("_R")

# Secondary indexes a bulk load may drop and rebuild: name -> "table (columns)".
_SECONDARY_INDEXES = {
    "idx_files_parent": "files (parent)",
    "idx_dirs_parent": "dirs (parent)",
    "idx_files_shard_offset": "files (shard, offset)",
}


def reports_full_disk(
    method: Callable[Concatenate[_T, _P], _R],
) -> Callable[Concatenate[_T, _P], _R]:
    """An edit whose SQLite errors are barecat's: a full disk raises
    ``NotEnoughSpaceBarecatError``, and a transaction SQLite rolled back is counted (see
    :meth:`IndexTransactions._edit_failed`); a number SQLite cannot hold raises
    ``OutOfRangeBarecatError`` naming the entry (the edit's first argument)."""

    @functools.wraps(method)
    def edit(self: _T, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as e:
            raise self._edit_failed(e) from e
        except OverflowError as e:
            raise out_of_range(args[0] if args else None, e) from None

    return edit


class IndexTransactions(IndexAggregates):
    """An index's connection and transactions, for a writer (a read-only one refuses
    every edit with :class:`ReadOnlyBarecatError`)."""

    _deferred: DeferredStats | None = None
    """Statistics owed for files added one by one (``add_file``), applied by
    :meth:`settled_conn`, which every query and edit but file rows by path calls first
    (see ``barecat.index.deferred_stats``)."""
    _adds_in_a_row = 0
    rollbacks = 0
    """How many times the open transaction was rolled back (by :meth:`rollback`, or by
    SQLite after a statement failed, a full disk say): its changes are gone."""
    rolled_back_by: Exception | None = None
    """The error of the latest failure that rolled the transaction back."""

    def settled_conn(self) -> sqlite3.Connection:
        """This thread's connection, with any statistics still owed applied first (the
        explicit step before every query or edit but file rows by path, and before SQL
        of one's own); it also ends a run of single adds.

        Returns:
            The connection.
        """
        conn = self._pool.get()
        self._adds_in_a_row = 0
        if self._deferred is not None:
            with self._settling:
                deferred = self._deferred
                if deferred is not None:
                    if deferred.conn is conn:
                        deferred.apply()
                    # else: a forked child's fresh connection, without the rows owed for
                    self._deferred = None
        return conn

    def _edit_failed(self, e: sqlite3.OperationalError, say_lost: bool = True) -> Exception:
        """What an edit's SQLite error becomes: barecat's error naming the index
        (``index_error``: a full disk is ``NotEnoughSpaceBarecatError``, a directory no
        longer writable ``ReadOnlyBarecatError``...). When SQLite rolled the whole
        transaction back (it may, on a full disk), the statistics owed for its rows are
        dropped and the rollback counted, so the writer knows its uncommitted changes are
        gone."""
        error: Exception = index_error(self.path, e)
        if not self._pool.get().in_transaction:
            if say_lost and isinstance(error, NotEnoughSpaceBarecatError):
                error = NotEnoughSpaceBarecatError(
                    f"{error}; SQLite rolled the open transaction back: the changes since the "
                    "last commit are not stored"
                )
            self._transaction_lost(error)
        return error

    def _transaction_lost(self, why: Exception | None) -> None:
        self._deferred = None  # owed for rows that are gone
        self.rollbacks += 1
        self.rolled_back_by = why

    def _statistics_owed(self) -> bool:
        return self._deferred is not None

    def _configure(self, shard_size_limit: int | None) -> None:
        """An explicit limit given when opening an existing archive for writing is stored."""
        self._settling = threading.Lock()
        """Applies owed statistics once: a writer's queries on its own thread and its
        background committer's commit may both settle."""
        if shard_size_limit is not None and not self.created and not self.readonly:
            self.shard_size_limit = shard_size_limit
        self._files_at_open = 0 if self.readonly else self.num_files

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """Before a commit: refuse (the caller rolls back) if an object barecat did not
        make appeared since the schema was last checked (``schema_check.changed_since``)."""
        self._schema_checked = schema_check.changed_since(conn, self._schema_checked, self.path)

    def close(self) -> None:
        """Commit (a writer), leave the saved lookup table right for what was written,
        and close the database. Errors while committing are swallowed: what was not
        committed is lost.

        Raises:
            ForeignSchemaBarecatError: a schema object barecat did not make appeared
                while the index was open: nothing since the last commit was committed.
        """
        refused: ForeignSchemaBarecatError | None = None
        optimize = False
        if not self.readonly:
            with contextlib.suppress(sqlite3.Error):
                conn = self.settled_conn()
                try:
                    self._check_schema(conn)
                except ForeignSchemaBarecatError as e:
                    refused = e
                    self.rollback()
                else:
                    conn.commit()
                    optimize = conn.total_changes > 0  # (else the file stays byte for byte)
            if refused is None:  # (a schema object planted since: no table, rolled back)
                with contextlib.suppress(sqlite3.Error, OSError, BarecatError):
                    self._refresh_lookup_table(optimize)
        super().close()
        if refused is not None:
            raise refused

    def _refresh_lookup_table(self, optimize: bool) -> None:
        """Leave the saved lookup table right for the index as this writer leaves it, and
        with ``optimize`` refresh SQLite's statistics (``PRAGMA optimize``).

        Rebuilt when the archive is at least half this session's files (a new archive,
        say), or always with ``lookup_table=True``, so building costs at most about 3 us
        per file written and the first reader is fast; saved with what vouches for it
        (``table_trust.py``: a plain archive's config row, committed with the statistics;
        an encrypted archive's tag, with the key). Otherwise a table that no longer
        matches is removed, since readers would ignore it anyway. ``lookup_table=False``
        opts out of building.
        """
        conn, path, fd = self.settled_conn(), self._trust.file, self._index_descriptor()
        analysed = False

        def last_steps(conn: sqlite3.Connection) -> None:  # (the row's commit is the
            nonlocal analysed  # statistics' too: no commit more than before)
            if optimize:
                conn.execute("PRAGMA optimize")
            analysed = True
            self._check_schema(conn)

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
        """Commit the index's open transaction, unless a schema object barecat did not
        make appeared since the last commit (it may have run inside the statements of
        this transaction: nothing of it is committed).

        Raises:
            NotEnoughSpaceBarecatError: the disk is full.
            ForeignSchemaBarecatError: such an object appeared; the transaction was
                rolled back.
            ArchiveLockedBarecatError: another program holds a lock on the index past
                the busy timeout (the transaction stays open: commit again later).
        """
        try:
            conn = self.settled_conn()
            try:
                self._check_schema(conn)
            except ForeignSchemaBarecatError:
                self.rollback()
                raise
            conn.commit()
        except sqlite3.OperationalError as e:
            if is_busy(e) and self._pool.get().in_transaction:
                raise ArchiveLockedBarecatError(
                    f"{self.path} is locked by another program ({e}); the changes are "
                    "not committed yet: commit again when it is done"
                ) from e
            raise self._edit_failed(e, say_lost=False) from e  # (the archive says what)

    def rollback(self) -> None:
        """Drop what was changed since the last commit."""
        self._transaction_lost(None)
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
