"""The index's connection part: opening the SQLite file, the settled connection,
transactions, the blocks that change how a transaction behaves, and closing.

:class:`IndexConnection` is what every other part of an index holds (``index.connection``):
it opens (and for a new writable archive, creates) the SQLite index and keeps its
connections (``connection.py``'s pool, one per thread and process); it owes the statistics
of a run of files added one at a time (``deferred_stats.py``) and applies them in
:meth:`~IndexConnection.settled_conn`, which every query and edit but file rows by path
calls first; it commits and rolls back; writes config values; and opens the blocks that
change how the open transaction behaves: statistics triggers off (``no_triggers``, and
``bulk_mode``, which rebuilds the statistics once at its end with ``treestats.py``), foreign
keys off, another index attached (for merges). A read-only one refuses every write with
:class:`ReadOnlyBarecatError`. Imports ``entries``, ``exceptions``, ``layout`` and
``barecat.index``'s own modules.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Concatenate, ParamSpec, Protocol, TypeVar, cast

from barecat.entries import SHARD_SIZE_UNLIMITED
from barecat.exceptions import (
    ArchiveLockedBarecatError,
    BarecatError,
    ForeignSchemaBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import file_digest, merging, query, remote_pages, schema_check, treestats
from barecat.index.connection import (
    ConnectionPool,
    is_busy,
    map_pages,
    roll_back_crashed_transaction,
    select,
    sqlite_uri,
)
from barecat.index.deferred_stats import DeferredStats
from barecat.index.errors import (
    FAULTS,
    guard_public_methods,
    guards_itself,
    index_error,
    open_error,
    out_of_range,
)
from barecat.index.merging import MergeSource
from barecat.index.remote_pages import RemotePages
from barecat.index.schema import (
    SEALED_SCHEMA_VERSION_MAJOR,
    SEALING_KEY,
    ConfigValue,
    check_version_and_limit,
    config_int,
    make_schema_if_missing,
    read_config,
)
from barecat.layout import archive_not_found, base_path, shards_with_bytes


class _Edits(Protocol):
    @property
    def connection(self) -> IndexConnection: ...


_T = TypeVar("_T", bound=_Edits)
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
    :meth:`IndexConnection.edit_failed`); a number SQLite cannot hold raises
    ``OutOfRangeBarecatError`` naming the entry (the edit's first argument)."""

    @functools.wraps(method)
    def edit(self: _T, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as e:
            raise self.connection.edit_failed(e) from e
        except OverflowError as e:
            raise out_of_range(args[0] if args else None, e) from None

    return edit


class IndexConnection:
    """An index's SQLite file, its connections and its transactions (``index.connection``).

    ``path`` is the index file itself. ``readonly`` opens it with SQLite's read-only
    mode; ``immutable`` (read-only only) additionally tells SQLite nobody else changes the
    file (no locking at all: fastest for archives on read-only media). A writer makes the
    schema of an index that holds no archive yet (``created`` says it did), unless the
    archive's shard files exist: see :func:`~barecat.index.schema.make_schema_if_missing`;
    an explicit ``shard_size_limit`` given when opening an existing archive for writing is
    stored. ``wal`` puts a writer's journal in WAL mode.
    """

    _deferred: DeferredStats | None = None
    """Statistics owed for files added one by one (``add_file``), applied by
    :meth:`settled_conn`, which every query and edit but file rows by path calls first
    (see ``barecat.index.deferred_stats``)."""
    adds_in_a_row = 0
    """Files added one at a time since the connection was last settled."""
    rollbacks = 0
    """How many times the open transaction was rolled back (by :meth:`rollback`, or by
    SQLite after a statement failed, a full disk say): its changes are gone."""
    rolled_back_by: Exception | None = None
    """The error of the latest failure that rolled the transaction back."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        shard_size_limit: int | None = None,
        readonly: bool = True,
        wal: bool = False,
        immutable: bool = False,
        threadsafe: bool = False,
        pages: RemotePages | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.readonly = readonly = readonly or pages is not None
        self.immutable = readonly and (immutable or pages is not None)
        self.created = False
        self.remote = pages
        """The pages of a remote index read lazily (``remote_pages.py``), else None."""
        self._remote_name: str | None = None
        opener = None
        if pages is not None:
            self._remote_name = name = remote_pages.register(pages)
            # (an apsw connection that speaks sqlite3's interface: see remote_pages.py)
            opener = cast(
                Callable[[], sqlite3.Connection], functools.partial(remote_pages.connect, name)
            )
        elif readonly and not os.path.isfile(self.path):
            raise archive_not_found(self.path, "Archive index")
        self.pool = ConnectionPool(self.path, readonly, self.immutable, threadsafe, opener)
        self.file = self.pool.file
        """Where the index is opened and its sidecars found (see ``ConnectionPool.file``);
        ``path`` is what messages name."""
        self._settling = threading.Lock()
        """Applies owed statistics once: a writer's queries on its own thread and its
        background committer's commit may both settle."""
        try:
            if readonly and not self.immutable:
                roll_back_crashed_transaction(self.path)
            conn = self.pool.get()
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
            self.pool.set_up_each("mmap", map_pages)
            self.read_layout()
        except FAULTS as e:
            self._close_pool()
            raise open_error(self.path, e) from e
        except BaseException:
            self._close_pool()
            raise
        try:
            if shard_size_limit is not None and not self.created and not readonly:
                self.shard_size_limit = shard_size_limit
            if wal and not readonly:
                conn.execute("PRAGMA journal_mode = WAL")
        except BaseException:
            self._close_pool()
            raise

    def _close_pool(self) -> None:
        self.pool.close()
        if self._remote_name is not None:
            remote_pages.unregister(self._remote_name)

    def read_layout(self) -> None:
        """Which columns file records come from: a sealed archive's hold two sizes.
        (``check_version`` admits the sealed major only with its ``sealing`` row, and
        refuses that row under a plain version.)"""
        self.sealed = self.schema_version[0] == SEALED_SCHEMA_VERSION_MAJOR
        self.file_columns = query.SEALED_FILE_COLUMNS if self.sealed else query.FILE_COLUMNS

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's (and this process's) connection, as it is: no statistics are
        applied first (see :meth:`settled_conn`; ``barecat.Index`` hands that out under
        this name, as barecat 0.3.1 code expects)."""
        return self.pool.get()

    def settled_conn(self) -> sqlite3.Connection:
        """This thread's connection, with any statistics still owed applied first (the
        explicit step before every query or edit but file rows by path, and before SQL
        of one's own); it also ends a run of single adds. A reader never owes any.

        Returns:
            The connection.
        """
        conn = self.pool.get()
        self.adds_in_a_row = 0
        if self._deferred is not None:
            with self._settling:
                deferred = self._deferred
                if deferred is not None:
                    if deferred.conn is conn:
                        deferred.apply()
                    # else: a forked child's fresh connection, without the rows owed for
                    self._deferred = None
        return conn

    @guards_itself
    def statistics_owed(self) -> bool:
        """Whether directory statistics (and directory rows) of a run of single adds are
        still to be applied.

        Returns:
            True while some are owed.
        """
        return self._deferred is not None

    @guards_itself
    def owe_statistics(self, deferred: DeferredStats | None) -> None:
        """Owe (or, with None, stop owing) the statistics of a run of single adds, to be
        applied by :meth:`settled_conn`.

        Args:
            deferred: what is owed, on this thread's connection.
        """
        self._deferred = deferred

    @property
    @guards_itself
    def deferred(self) -> DeferredStats | None:
        """What is owed (see :meth:`owe_statistics`)."""
        return self._deferred

    @guards_itself
    def edit_failed(self, e: sqlite3.OperationalError, say_lost: bool = True) -> Exception:
        """What an edit's SQLite error becomes: barecat's error naming the index
        (``index_error``: a full disk is ``NotEnoughSpaceBarecatError``, a directory no
        longer writable ``ReadOnlyBarecatError``...). When SQLite rolled the whole
        transaction back (it may, on a full disk), the statistics owed for its rows are
        dropped and the rollback counted, so the writer knows its uncommitted changes are
        gone."""
        error: Exception = index_error(self.path, e)
        if not self.pool.get().in_transaction:
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

    def check_schema(self, conn: sqlite3.Connection) -> None:
        """Before a commit: refuse (the caller rolls back) if an object barecat did not
        make appeared since the schema was last checked (``schema_check.changed_since``).

        Args:
            conn: the connection about to commit.

        Raises:
            ForeignSchemaBarecatError: such an object appeared.
        """
        self._schema_checked = schema_check.changed_since(conn, self._schema_checked, self.path)

    def close(self, before_closing: Callable[[bool], None] | None = None) -> None:
        """Commit (a writer), run ``before_closing`` (the lookups part leaves the saved
        lookup table right for what was written), and close the connections. Errors while
        committing are swallowed: what was not committed is lost.

        Args:
            before_closing: called after a writer's commit, unless it was refused, with
                whether the commit changed anything (so SQLite's statistics are to be
                refreshed); its SQLite, file and barecat errors are swallowed.

        Raises:
            ForeignSchemaBarecatError: a schema object barecat did not make appeared
                while the index was open: nothing since the last commit was committed.
        """
        refused: ForeignSchemaBarecatError | None = None
        changed = False
        if not self.readonly:
            with contextlib.suppress(sqlite3.Error):
                conn = self.settled_conn()
                try:
                    self.check_schema(conn)
                except ForeignSchemaBarecatError as e:
                    refused = e
                    self.rollback()
                else:
                    conn.commit()
                    changed = conn.total_changes > 0  # (else the file stays byte for byte)
            if refused is None and before_closing is not None:  # (planted: rolled back)
                with contextlib.suppress(sqlite3.Error, OSError, BarecatError):
                    before_closing(changed)
        self._close_pool()
        if refused is not None:
            raise refused

    @property
    def shard_size_limit(self) -> int:
        """The largest size in bytes a shard may grow to, as stored in the index
        (settable on a writable index, committed at once)."""
        value = self._config_int("shard_size_limit")
        return SHARD_SIZE_UNLIMITED if value is None else value

    @shard_size_limit.setter
    def shard_size_limit(self, value: int) -> None:
        self.require_writable()
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
                self.check_schema(conn)
            except ForeignSchemaBarecatError:
                self.rollback()
                raise
            conn.commit()
        except sqlite3.OperationalError as e:
            if is_busy(e) and self.pool.get().in_transaction:
                raise ArchiveLockedBarecatError(
                    f"{self.path} is locked by another program ({e}); the changes are "
                    "not committed yet: commit again when it is done"
                ) from e
            raise self.edit_failed(e, say_lost=False) from e  # (the archive says what)

    def rollback(self) -> None:
        """Drop what was changed since the last commit."""
        self._transaction_lost(None)
        self.pool.get().rollback()

    @guards_itself
    def require_writable(self) -> None:
        """Refuse a write to a read-only index.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
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
        self.require_writable()
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
        self.require_writable()
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
        self.require_writable()
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

    def optimize(self) -> None:
        """Let SQLite refresh its query planner statistics (``PRAGMA optimize``)."""
        self.settled_conn().execute("PRAGMA optimize")

    def _config_int(self, key: str, default: int | None = None) -> int | None:
        row = select(
            self.settled_conn(), "SELECT value_int FROM config WHERE key = ?", (key,)
        ).fetchone()
        return default if row is None else config_int(row[0], key, self.path)


guard_public_methods(IndexConnection, lambda connection: connection.path)
