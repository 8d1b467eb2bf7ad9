"""Opening SQLite connections to an index, and keeping them safe across threads and fork.
Rows come as ``sqlite3.Row`` to whoever uses a connection directly, and as tuples to
barecat's own queries (``select``).

An index may be shared by threads (a reader's: one connection per thread when asked; a
writer's: always its one connection, since a writer is one transaction) and is often
inherited by forked DataLoader workers. A connection must never be used, or even closed,
in a process other than the one that opened it: closing it in a child could roll back
the parent's open transaction. So after ``fork`` the child drops its references to the
parent's connections into a keep-alive list and opens fresh ones lazily. Also
:func:`writers_locked_out`, barecat's writer lock held by a step that rewrites the index
outside a writer (upgrade, repair's schema clean-up). Imports only the standard library
and ``exceptions``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from barecat.exceptions import ArchiveLockedBarecatError


class _ForkAware(Protocol):
    def _forget_connections_after_fork(self) -> None: ...


_live: weakref.WeakSet[_ForkAware] = weakref.WeakSet()
_inherited: list[object] = []  # connections from the parent process, never touched again


def _after_fork_in_child() -> None:
    for owner in list(_live):
        owner._forget_connections_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def keep_alive_forever(obj: object) -> None:
    """Hold an inherited connection so its finalizer never runs in this process."""
    _inherited.append(obj)


def register_fork_aware(owner: _ForkAware) -> None:
    """Have ``owner`` told to drop its connections in every forked child."""
    _live.add(owner)


def sqlite_uri(path: str, mode: str, immutable: bool = False) -> str:
    """An SQLite URI for ``path`` (mode ro, rw or rwc); safe for any characters in the path."""
    query = f"mode={mode}" + ("&immutable=1" if immutable else "")
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{query}"


def connect(
    path: str, readonly: bool, immutable: bool = False, threadsafe: bool = False
) -> sqlite3.Connection:
    """Open ``path`` with the pragmas barecat relies on (recursive triggers above all).

    Always through a URI, so that ``ATTACH`` of other indexes can use URIs too.
    """
    uri = sqlite_uri(path, "ro" if readonly else "rwc", immutable and readonly)
    # A writer's one connection may be used from any thread: its threads' (threadsafe)
    # and its background committer's, which take turns under the archive's write lock.
    conn = sqlite3.connect(uri, uri=True, check_same_thread=readonly and not threadsafe)
    conn.row_factory = sqlite3.Row  # for users of ``Index.conn``, as 0.3.x: see select
    if not readonly:  # (triggers fire only on writes)
        conn.execute("PRAGMA recursive_triggers = ON")
    conn.execute("PRAGMA cache_size = -65536")
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def map_pages(conn: sqlite3.Connection) -> None:
    """Have SQLite read the index's pages through a memory map (up to 1 GiB) from the
    next statement on: a statement then checks and reads pages without a system call.
    Set after the open's own query, so an open that is closed unused maps nothing (the
    map and unmap are a quarter of such an open)."""
    conn.execute("PRAGMA mmap_size = 1073741824")


def select(
    conn: sqlite3.Connection, sql: str, args: Sequence[object] | Mapping[str, object] = ()
) -> sqlite3.Cursor:
    """``conn.execute(sql, args)`` with rows as plain tuples, whatever ``conn.row_factory``.

    Index connections give ``sqlite3.Row`` rows (addressable by column name and by
    index), as barecat 0.3.x's did, to code that runs its own SQL on ``Index.conn``.
    barecat's own queries run here instead: a tuple costs less than a ``Row`` per row,
    and compares equal to other tuples.

    Returns:
        The cursor, its statement executed.
    """
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, args)


def is_busy(e: sqlite3.Error) -> bool:
    """True for SQLite's "database is locked": another connection holds a lock on the
    index (SQLITE_BUSY or SQLITE_LOCKED) past the busy timeout. Nothing is wrong with
    the file; trying again later may succeed."""
    code = getattr(e, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
    return "locked" in str(e) or "busy" in str(e)


def open_savepoint(conn: sqlite3.Connection, name: str) -> None:
    """Start a savepoint inside the connection's transaction, beginning one if needed.

    A SAVEPOINT outside a transaction starts one that its RELEASE commits; that would
    commit index rows before the shard bytes they point at are made durable (the archive
    commits both, in that order), and pay three fsyncs per batch.
    """
    if not conn.in_transaction:
        conn.execute("BEGIN")
    conn.execute(f"SAVEPOINT {name}")


@contextlib.contextmanager
def writers_locked_out(path: str, until: str = "first") -> Iterator[None]:
    """Hold barecat's writer lock (an exclusive ``flock`` on the index at ``path``, which
    every writable ``Barecat`` takes) for the block, so no writer of ours opens meanwhile.

    Args:
        path: the index file.
        until: how the error ends "close it ..." (``"first"``, ``"before upgrading"``).

    Raises:
        ArchiveLockedBarecatError: a writer has the archive open.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArchiveLockedBarecatError(
                f"Archive index {path} is open for writing elsewhere; close it {until}"
            ) from None
        yield
    finally:
        os.close(fd)


def roll_back_crashed_transaction(path: str) -> None:
    """Let SQLite roll back a crashed writer's hot journal before read-only use.

    A read-only connection cannot undo the half-finished commit of a writer killed
    mid-commit, and refuses to read at all ("attempt to write a readonly database"). A
    brief read-write connection performs the rollback; SQLite itself decides whether the
    journal is hot, so a live writer's journal is left alone.
    """
    journal = path + "-journal"
    try:
        if os.path.getsize(journal) == 0:
            return
    except OSError:
        return
    conn = sqlite3.connect(path)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        conn.close()


class ConnectionPool:
    """One connection per process; for a reader shared by threads (``threadsafe``), one
    per thread. Opened lazily.

    A writer keeps one connection even when ``threadsafe``: its uncommitted rows live in
    that connection's transaction, so every thread must see them there, and a second
    connection would be a second SQLite writer of the same file, refused with "database
    is locked" while the first holds its transaction (and whose own uncommitted rows
    another thread's commit would never include). A writer's connection may be used from
    any thread (its background committer's too); the archive serialises the writes.

    Reader threads are told apart by their native identity, not by thread-local storage:
    callbacks from threads Python did not start (libfuse's workers calling a mounted
    archive through ctypes) get a fresh thread state, and so empty thread-locals, on every
    call. A thread that ends leaves its connection to the next thread given its identity
    (connections are made with ``check_same_thread=False`` for this)."""

    def __init__(
        self,
        path: str,
        readonly: bool,
        immutable: bool,
        threadsafe: bool,
        opener: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        self.path = path
        """The index file as given (what messages name)."""
        self.file = path if opener is not None else os.path.abspath(path)
        """Where it is opened (again in a thread or after a fork) and its sidecars are
        found: a local one's absolute name, taken at open (a change of the working
        directory since changes nothing)."""
        self._opener = opener
        """Opens a connection instead of :func:`connect` (a remote index's, through
        ``remote_pages.py``)."""
        self.readonly = readonly
        self.immutable = immutable
        self.threadsafe = threadsafe
        self._per_thread = threadsafe and readonly
        self._conn: sqlite3.Connection | None = None
        self._by_thread: dict[int, sqlite3.Connection] = {}
        self._all: list[sqlite3.Connection] = []
        self._row_cursors: dict[sqlite3.Connection, sqlite3.Cursor] = {}
        self._setups: dict[str, Callable[[sqlite3.Connection], None]] = {}
        self._lock = threading.Lock()
        self._opening = threading.Lock()
        register_fork_aware(self)

    def set_up_each(self, name: str, setup: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``setup`` on every connection, those open now and those opened later
        (temporary triggers, SQL functions); replaces an earlier setup of that name."""
        with self._lock:
            self._setups[name] = setup
            conns = list(self._all)
        for conn in conns:
            setup(conn)

    def get(self) -> sqlite3.Connection:
        if not self._per_thread:
            conn = self._conn
            if conn is None:
                with self._opening:  # two threads of a threadsafe writer open it once
                    if self._conn is None:
                        self._conn = self._open()
                    conn = self._conn
            return conn
        thread = threading.get_ident()
        conn = self._by_thread.get(thread)
        if conn is None:
            conn = self._by_thread[thread] = self._open()
        return conn

    def one_row(
        self, conn: sqlite3.Connection, sql: str, args: Sequence[object] = ()
    ) -> tuple[Any, ...] | None:
        """The row of a query that yields at most one (a lookup by unique key, a total),
        as a tuple, or None: ``select(conn, sql, args).fetchone()`` on a cursor kept
        for ``conn`` rather than a new one (a third of a microsecond of each lookup).

        Fetching the only row finishes the statement, so the kept cursor holds no lock
        between calls. A connection that threads may share (a writer's, which its
        background committer uses too) gets a new cursor each time: two threads may not
        run one cursor at once.

        Args:
            conn: one of this pool's connections (from :meth:`get`).
            sql: a query yielding at most one row.
            args: its parameters.

        Returns:
            The row, or None.
        """
        cursor = self._row_cursors.get(conn)
        if cursor is None:
            if not self.readonly:
                return select(conn, sql, args).fetchone()  # type: ignore[no-any-return]
            cursor = self._row_cursors[conn] = conn.cursor()
            cursor.row_factory = None
        return cursor.execute(sql, args).fetchone()  # type: ignore[no-any-return]

    def _open(self) -> sqlite3.Connection:
        if self._opener is not None:
            conn = self._opener()
        else:
            conn = connect(self.file, self.readonly, self.immutable, self.threadsafe)
        with self._lock:
            self._all.append(conn)
            setups = list(self._setups.values())
        for setup in setups:
            setup(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        self._row_cursors = {}
        for conn in conns:
            conn.close()
        self._conn = None
        self._by_thread = {}

    def _forget_connections_after_fork(self) -> None:
        for conn in self._all:
            keep_alive_forever(conn)
        self._all = []
        self._conn = None
        self._by_thread = {}
        self._row_cursors = {}
        self._lock = threading.Lock()
        self._opening = threading.Lock()
