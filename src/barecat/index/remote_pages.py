"""An index whose pages are fetched on demand: SQLite reads them through apsw's VFS.

A lazily opened remote index is never downloaded. SQLite asks for each page it needs
through a VFS registered with apsw (the SQLite library apsw bundles calls back into
Python for every read), and :class:`RemotePages` answers from, in order: the pages the
archive's sidecar delivered (the schema's, and every interior b-tree page), a bounded
cache of pages fetched before, and a ranged request for the page itself. The file is
opened immutable: SQLite takes no locks and looks for no journal.

Connections are apsw's, behind :class:`ApswConnection`, which speaks as much of
:mod:`sqlite3`'s interface as barecat's queries and barecat 0.3.1 users' own SQL on
``Index.conn`` use (``execute``, cursors with ``fetchone``/``fetchall``/iteration and
``description``, ``row_factory``, ``create_function``), and raises :mod:`sqlite3`'s
exception classes, so the rest of the index package runs unchanged on it. A failed
fetch surfaces as the fetch's own error (a ``RemoteStorageBarecatError`` naming the
URL), not as an SQLite I/O error. Imports only the standard library and apsw (lazily).
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

VFS_NAME = "barecat-remote"
MAX_READ_AHEAD = 64
"""Pages one request takes at most while SQLite reads in order (4 MiB of 64 KiB pages)."""


class PageSource(Protocol):
    """The index object's bytes, read by range (pinned to one version of the object)."""

    @property
    def size(self) -> int: ...

    def read(self, start: int, end: int) -> bytes: ...


class PageCache(Protocol):
    """A bounded cache of page bytes by key (``objectstore.page_cache.PageCache``)."""

    def get(self, key: Any) -> bytes | None: ...

    def put(self, key: Any, value: bytes) -> None: ...


class RemotePages:
    """The pages of one remote index: known copies first, then the cache, then a fetch.

    Args:
        source: reads the index object's bytes.
        page_size: the index's page size (its header's; 65,536 once published).
        known: pages delivered ahead (page number, from 1 -> bytes): the sidecar's.
        cache: keeps fetched pages, bounded.
        more_known: called once, the first time a page is neither known nor cached;
            returns more known pages (the sidecar's interior pages, fetched in one request).
    """

    def __init__(
        self,
        source: PageSource,
        page_size: int,
        known: Mapping[int, bytes],
        cache: PageCache,
        more_known: Callable[[], Mapping[int, bytes]] | None = None,
    ) -> None:
        self.source = source
        self.page_size = page_size
        self._known = dict(known)
        self.cache = cache
        """Pages fetched before (bounded; a remote archive's lookup buckets share it)."""
        self._more_known = more_known
        self._more_lock = threading.Lock()
        self.fetched = 0
        """Requests made to the source so far (a read-ahead request counts once)."""
        self._run_lock = threading.Lock()
        self._last = -1
        self._run = 0

    @property
    def size(self) -> int:
        return self.source.size

    def read(self, amount: int, offset: int) -> bytes:
        """``amount`` bytes at ``offset``, as SQLite asks: a page, or a part of page 1
        (its header). Short only past the end of the file."""
        page_size = self.page_size
        first, last = offset // page_size, (offset + amount - 1) // page_size
        if first == last:
            page = self.page(first + 1)
            start = offset - first * page_size
            return page[start : start + amount]
        return b"".join(self.page(n + 1) for n in range(first, last + 1))[
            offset - first * page_size : offset - first * page_size + amount
        ]

    def page(self, number: int) -> bytes:
        """Page ``number`` (from 1)."""
        data = self._known.get(number)
        if data is not None:
            return data
        if getattr(self.source, "local", False):  # (a hydrated copy: no cache needed)
            start = (number - 1) * self.page_size
            return self.source.read(start, min(start + self.page_size, self.size))
        key = (id(self), number)
        data = self.cache.get(key)
        if data is not None:
            return data
        if self._more_known is not None:
            self._take_more_known()
            data = self._known.get(number)
            if data is not None:
                return data
        return self._fetch(number)

    def _fetch(self, number: int) -> bytes:
        """Fetch page ``number``, and with it the pages after it when SQLite is reading
        in order (a scan: a run of consecutive pages doubles what each request takes, up
        to :data:`MAX_READ_AHEAD` pages)."""
        with self._run_lock:
            self._run = self._run + 1 if number == self._last + 1 else 0
            count = min(1 << self._run, MAX_READ_AHEAD) if self._run else 1
            self._last = number + count - 1
        page_size = self.page_size
        start = (number - 1) * page_size
        data = self.source.read(start, min(start + count * page_size, self.size))
        self.fetched += 1
        for i in range(1, -(-len(data) // page_size)):
            self.cache.put((id(self), number + i), data[i * page_size : (i + 1) * page_size])
        page = data[:page_size]
        self.cache.put((id(self), number), page)
        return page

    def close(self) -> None:
        """Close the source (a hydrating one stops its download)."""
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    def _take_more_known(self) -> None:
        with self._more_lock:
            more, self._more_known = self._more_known, None
            if more is not None:
                self._known.update(more())


_files: dict[str, RemotePages] = {}
_files_lock = threading.Lock()
_names = itertools.count()
_vfs: Any = None


class _File:
    """One open of a :class:`RemotePages` by SQLite (apsw calls these methods)."""

    def __init__(self, pages: RemotePages) -> None:
        self._pages = pages

    def xRead(self, amount: int, offset: int) -> bytes:  # noqa: N802 (apsw's names)
        return self._pages.read(amount, offset)

    def xFileSize(self) -> int:  # noqa: N802 (apsw's names)
        return self._pages.size

    def xClose(self) -> None:  # noqa: N802 (apsw's names)
        pass

    def xLock(self, level: int) -> None:  # noqa: N802 (apsw's names)
        pass

    def xUnlock(self, level: int) -> None:  # noqa: N802 (apsw's names)
        pass

    def xCheckReservedLock(self) -> bool:  # noqa: N802 (apsw's names)
        return False

    def xFileControl(self, op: int, pointer: int) -> bool:  # noqa: N802 (apsw's names)
        return False

    def xSectorSize(self) -> int:  # noqa: N802 (apsw's names)
        return 4096

    def xDeviceCharacteristics(self) -> int:  # noqa: N802 (apsw's names)
        return 0

    def xSync(self, flags: int) -> None:  # noqa: N802 (apsw's names)
        pass

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802 (apsw's names)
        import apsw

        raise apsw.ReadOnlyError("a remote index is read-only")

    def xTruncate(self, size: int) -> None:  # noqa: N802 (apsw's names)
        import apsw

        raise apsw.ReadOnlyError("a remote index is read-only")


def _registered_vfs() -> None:
    """Register barecat's VFS with apsw's SQLite (once per process)."""
    global _vfs
    if _vfs is not None:
        return
    import apsw

    class RemoteVFS(apsw.VFS):
        def __init__(self) -> None:
            super().__init__(VFS_NAME, "")

        def xOpen(self, name: Any, flags: Any) -> Any:  # noqa: N802 (apsw's names)
            key = name.filename() if hasattr(name, "filename") else str(name)
            with _files_lock:
                pages = _files.get(key)
            if pages is None:
                raise apsw.CantOpenError(f"no remote index is registered as {key}")
            return _File(pages)

        def xAccess(self, pathname: str, flags: int) -> bool:  # noqa: N802 (apsw's names)
            return False  # (no journal, no WAL: the file is read as immutable)

        def xFullPathname(self, name: str) -> str:  # noqa: N802 (apsw's names)
            return name

    _vfs = RemoteVFS()


def register(pages: RemotePages) -> str:
    """Make ``pages`` openable by :func:`connect`; returns its name. Forget it with
    :func:`unregister` when the index closes."""
    name = f"/barecat-remote/{next(_names)}"
    with _files_lock:
        _files[name] = pages
    return name


def unregister(name: str) -> None:
    """Forget the pages registered as ``name`` and close them."""
    with _files_lock:
        pages = _files.pop(name, None)
    if pages is not None:
        pages.close()


def connect(name: str) -> ApswConnection:
    """A read-only connection to the registered remote index ``name``.

    Raises:
        sqlite3.OperationalError: SQLite could not open it (not a database, say).
    """
    _registered_vfs()
    import apsw

    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    with _TranslatedErrors():
        conn = apsw.Connection(f"file:{name}?immutable=1", flags=flags, vfs=VFS_NAME)
    wrapped = ApswConnection(conn)
    wrapped.row_factory = sqlite3.Row  # (as ``connection.connect``'s, for 0.3.x users)
    return wrapped


class _TranslatedErrors:
    """apsw's exceptions as :mod:`sqlite3`'s (barecat's own errors pass through)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if error is None:
            return
        import apsw

        if not isinstance(error, apsw.Error):
            return
        if isinstance(error, apsw.ConstraintError):
            raise sqlite3.IntegrityError(str(error)) from error
        if isinstance(error, (apsw.CorruptError, apsw.NotADBError)):
            raise sqlite3.DatabaseError(str(error)) from error
        if isinstance(error, apsw.ReadOnlyError):
            raise sqlite3.OperationalError("attempt to write a readonly database") from error
        if isinstance(error, apsw.ExecutionCompleteError):
            raise sqlite3.ProgrammingError(str(error)) from error
        raise sqlite3.OperationalError(str(error)) from error


class _Row(tuple):  # type: ignore[type-arg]
    """A row addressable by index and by column name (as ``sqlite3.Row``)."""

    _names: tuple[str, ...] = ()

    def keys(self) -> list[str]:
        return list(self._names)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            lowered = key.lower()
            for i, name in enumerate(self._names):
                if name.lower() == lowered:
                    return tuple.__getitem__(self, i)
            raise IndexError("No item with that key")
        return tuple.__getitem__(self, key)


class ApswCursor:
    """A cursor of :class:`ApswConnection`, as a ``sqlite3.Cursor`` (read-only)."""

    rowcount = -1
    lastrowid = None
    arraysize = 1

    def __init__(self, connection: ApswConnection) -> None:
        self.connection = connection
        self.row_factory: Any = connection.row_factory
        self._cursor = connection.apsw.cursor()
        self._rows: Iterator[tuple[Any, ...]] = iter(())
        self.description: tuple[tuple[Any, ...], ...] | None = None

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ()) -> ApswCursor:
        with _TranslatedErrors():
            self._rows = iter(self._cursor.execute(sql, parameters))
            try:
                self.description = self._cursor.description
            except Exception:  # (a statement that returns no rows has none)
                self.description = None
        return self

    def executemany(self, sql: str, seq: Any) -> ApswCursor:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    def _made(self, row: tuple[Any, ...]) -> Any:
        factory = self.row_factory
        if factory is None:
            return row
        if factory is sqlite3.Row:
            made = _Row(row)
            made._names = tuple(d[0] for d in self.description or ())
            return made
        return factory(self, row)

    def fetchone(self) -> Any:
        with _TranslatedErrors():
            row = next(self._rows, None)
        return None if row is None else self._made(row)

    def fetchmany(self, size: int | None = None) -> list[Any]:
        with _TranslatedErrors():
            rows = list(itertools.islice(self._rows, size or self.arraysize))
        return [self._made(r) for r in rows]

    def fetchall(self) -> list[Any]:
        with _TranslatedErrors():
            rows = list(self._rows)
        return [self._made(r) for r in rows]

    def __iter__(self) -> Iterator[Any]:
        while True:
            with _TranslatedErrors():
                row = next(self._rows, None)
            if row is None:
                return
            yield self._made(row)

    def close(self) -> None:
        self._cursor.close()


class ApswConnection:
    """An apsw connection to a remote index, speaking :mod:`sqlite3`'s interface (the
    part barecat's queries and 0.3.1 users' own SQL use). Read-only: no transactions."""

    in_transaction = False
    total_changes = 0
    isolation_level = None

    def __init__(self, connection: Any) -> None:
        self.apsw = connection
        self.row_factory: Any = None

    def cursor(self) -> ApswCursor:
        return ApswCursor(self)

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ()) -> ApswCursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq: Any) -> ApswCursor:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    def executescript(self, script: str) -> ApswCursor:
        cursor = self.cursor()
        with _TranslatedErrors():
            for _ in self.apsw.execute(script):
                pass
        return cursor

    def create_function(
        self, name: str, narg: int, func: Callable[..., Any] | None, *, deterministic: bool = False
    ) -> None:
        with _TranslatedErrors():
            self.apsw.create_scalar_function(name, func, narg, deterministic=deterministic)

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        self.apsw.close()

    def __enter__(self) -> ApswConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


__all__ = [
    "VFS_NAME",
    "ApswConnection",
    "ApswCursor",
    "PageCache",
    "PageSource",
    "RemotePages",
    "connect",
    "register",
    "unregister",
]
