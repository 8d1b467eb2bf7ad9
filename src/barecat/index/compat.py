"""barecat 0.3.1's own names on the index: the shapes of their signatures, and the few that
do more than hand a call to a part.

barecat 0.3.1 code calls its index directly (``bc.index.iter_all_fileinfos()``,
``bc.index.conn.execute(...)``), so every name it had still works: most are lines of the
index's table (``index.py``) that hand the call to a part, ``bufsize`` arguments
accepted and ignored (queries stream from SQLite) by :class:`Adapted`, typed with the
0.3.1 signature by one of the protocols here; the functions here are the names that
combine parts (every directory, then every file; a glob's records), convert (a list of
a listing), or check (``verify_integrity``); so is its merge by hand
(``merge_from_other_barecat``, in ``placed_merge.py``). barecat's own code uses the
parts, never these. Imports ``entries``, ``exceptions`` and ``barecat.index``'s own
modules.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from barecat.entries import BarecatEntryInfo, Order
from barecat.index.forwarding import Forward
from barecat.index.listing import DirItem
from barecat.index.placed_merge import merge_placed

if TYPE_CHECKING:
    from barecat.index.listing import IndexListing
    from barecat.index.reading import IndexLookups
    from barecat.index.transactions import IndexConnection

_T_co = TypeVar("_T_co", covariant=True)


class IndexParts(Protocol):
    """What these names use of an index: its parts (``index.py``'s classes are such)."""

    @property
    def connection(self) -> IndexConnection: ...
    @property
    def lookups(self) -> IndexLookups: ...
    @property
    def listing(self) -> IndexListing: ...


_T = TypeVar("_T")


class Ordered(Protocol[_T_co]):
    """0.3.1's ``iter_all_*``: every entry, in ``order``."""

    def __call__(self, order: Order = Order.ANY, bufsize: int | None = None) -> Iterator[_T_co]:
        """Every entry's record or path, in ``order`` (``bufsize`` ignored)."""
        ...


class InDir(Protocol[_T_co]):
    """0.3.1's ``iter_direct_*``, ``iterdir_*``: the entries directly in a directory."""

    def __call__(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[_T_co]:
        """The entries of ``diritem`` (``""``: the root), in ``order`` (``bufsize``
        ignored)."""
        ...


class ListedInDir(Protocol[_T]):
    """0.3.1's ``list_*``, ``listdir_*``: the entries directly in a directory, a list."""

    def __call__(self, diritem: DirItem, order: Order = Order.ANY) -> list[_T]:
        """The entries of ``diritem`` (``""``: the root), in ``order``."""
        ...


class Walked(Protocol[_T_co]):
    """0.3.1's ``walk_*``: a subtree, top-down."""

    def __call__(self, rootitem: DirItem, bufsize: int = 32) -> Iterator[_T_co]:
        """Each directory of the subtree of ``rootitem`` (``bufsize`` ignored)."""
        ...


class Globbed(Protocol):
    """0.3.1's ``iterglob_paths``: ``glob_paths`` one by one."""

    def __call__(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        bufsize: int | None = None,
        only_files: bool = False,
    ) -> Iterator[str]:
        """The paths ``glob_paths`` gives (``bufsize`` ignored)."""
        ...


class RawGlobbed(Protocol[_T_co]):
    """0.3.1's ``raw_iterglob_paths_multi``: paths matching any SQLite GLOB pattern."""

    def __call__(
        self,
        patterns: list[str],
        order: Order = Order.ANY,
        only_files: bool = False,
        bufsize: int | None = None,
    ) -> Iterator[_T_co]:
        """Paths matching any of ``patterns``, directories first (``bufsize`` ignored)."""
        ...


class RawGlobbedInfos(Protocol):
    """0.3.1's ``raw_iterglob_infos``: records matching an SQLite GLOB pattern."""

    def __call__(
        self, pattern: str, only_files: bool = False, bufsize: int | None = None
    ) -> Iterator[BarecatEntryInfo]:
        """Records of the entries matching ``pattern``, directories first (``bufsize``
        ignored)."""
        ...


class Adapted(Forward[Any, Any]):
    """A table entry for a 0.3.1 name whose signature has a ``bufsize`` the part has not:
    the part's method, called without it (at position ``bufsize_at``, or by keyword),
    its result passed through ``then`` (``list``, ``iter``) when given. With ``and_then``,
    another method of the part, called with the same arguments, follows (0.3.1's
    ``iter_all_infos``: every directory, then every file). With ``each``, the method is
    called on each item of the one argument, in order, and the results are a list
    (``lookup_files``; an edit, ``add_files``, stops at the first item it refuses, and
    returns :func:`nothing`).

    Args:
        part: the attribute of the index that holds the part.
        name: the part's method.
        bufsize_at: the position of ``bufsize`` among the 0.3.1 arguments (None: none).
        then: applied to the result.
        and_then: the part's method whose results follow.
        each: call the method on each item of the argument.
    """

    __slots__ = ("and_then", "bufsize_at", "each", "then")

    def __init__(
        self,
        part: str,
        name: str,
        bufsize_at: int | None = None,
        then: Callable[[Any], Any] | None = None,
        and_then: str | None = None,
        each: bool = False,
    ) -> None:
        super().__init__(part, name)
        self.each = each
        self.bufsize_at = bufsize_at
        self.then = then
        self.and_then = and_then

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        method = super().__get__(obj, owner)
        at, then = self.bufsize_at, self.then
        if self.each:
            return lambda items: _then([method(item) for item in items], then)
        following = (
            None if self.and_then is None else getattr(getattr(obj, self.part), self.and_then)
        )

        def call(*args: Any, **kwargs: Any) -> Any:
            if at is not None:
                kwargs.pop("bufsize", None)
                args = args[:at] + args[at + 1 :]
            result = method(*args, **kwargs)
            if following is not None:
                result = itertools.chain(result, following(*args, **kwargs))
            return _then(result, then)

        return call


def _then(result: Any, then: Callable[[Any], Any] | None) -> Any:
    return result if then is None else then(result)


def nothing(result: object) -> None:
    """What an edit applied to each item returns (0.3.1's ``add_files``): nothing.

    Args:
        result: the list of each edit's result, dropped.
    """


def conn(index: IndexParts) -> sqlite3.Connection:
    """0.3.1's raw connection, for SQL of one's own: the settled connection, so the
    statistics of a run of single adds are applied when it is handed out and the SQL sees
    them as 0.3.1's triggers would have left them. Rows are ``sqlite3.Row``.

    Args:
        index: the index.

    Returns:
        The connection.
    """
    return index.connection.settled_conn()


def cursor(index: IndexParts) -> sqlite3.Cursor:
    """A new cursor on :func:`conn`.

    Args:
        index: the index.

    Returns:
        The cursor.
    """
    return index.connection.settled_conn().cursor()


def verify_integrity(index: IndexParts) -> bool:
    """True if SQLite's integrity check passes and all directory statistics are right
    (``find_inconsistencies`` lists what is not).

    Args:
        index: the index.

    Returns:
        True if no inconsistency is found.
    """
    return not index.lookups.find_inconsistencies()


def merge_from_other_barecat(
    index: IndexParts,
    source_path: str,
    ignore_duplicates: bool = False,
    prefix: str | None = None,
    update_treestats: bool = True,
) -> None:
    """Add another archive's files and directories, its shards already placed after this
    archive's shards (symlinked or copied, in order): barecat 0.3.1's zero-copy merge by
    hand. The rows' shard numbers are shifted to where the shards were put.

    Args:
        index: the index.
        source_path: the other archive (base path or index file).
        ignore_duplicates: skip a file whose path this index has (default: raise).
        prefix: put everything under this directory.
        update_treestats: accepted for compatibility; statistics are always kept right.

    Raises:
        ReadOnlyBarecatError: the index is open read-only.
        BarecatError: the shards are not in place (nothing is written), or an archive is
            sealed (use :meth:`barecat.Barecat.merge_from_other_barecat`).
        FileExistsBarecatError: a path is taken (without ``ignore_duplicates``).
        MergeConflictBarecatError: a file where this index has a directory, or the
            reverse (a ``ValueError``, as in barecat 0.3.1).
    """
    del update_treestats
    index.connection.require_writable()
    merge_placed(index.connection, index.lookups, source_path, prefix or "", ignore_duplicates)


def iterglob_infos(
    index: IndexParts,
    pattern: str,
    recursive: bool = False,
    include_hidden: bool = False,
    bufsize: int | None = None,
    only_files: bool = False,
) -> Iterator[BarecatEntryInfo]:
    """Like ``iterglob_paths``, with each match's info record.

    Args:
        index: the index.
        pattern: a ``glob.glob``-style pattern relative to the root.
        recursive: let ``**`` match any number of directories.
        include_hidden: let wildcards match names starting with ``.``.
        bufsize: ignored (0.3.1's batch size).
        only_files: match files only.

    Returns:
        An iterator of records.
    """
    for path in index.listing.glob(pattern, recursive, include_hidden, only_files):
        yield index.lookups.lookup(path)


def raw_iterglob_paths(
    index: IndexParts,
    pattern: str,
    order: Order = Order.ANY,
    only_files: bool = False,
    bufsize: int | None = None,
) -> Iterator[str]:
    """``listing.raw_glob([pattern], order, only_files)``: paths matching under SQLite's
    GLOB, directories first.

    Args:
        index: the index.
        pattern: an SQLite GLOB pattern over whole paths (``*`` crosses ``/``).
        order: the order they come in.
        only_files: match files only.
        bufsize: ignored (0.3.1's batch size).

    Returns:
        An iterator of paths.
    """
    return index.listing.raw_glob([pattern], order, only_files)


def raw_glob_paths(index: IndexParts, pattern: str, order: Order = Order.ANY) -> list[str]:
    """``listing.raw_glob([pattern], order)`` as a list.

    Args:
        index: the index.
        pattern: an SQLite GLOB pattern over whole paths (``*`` crosses ``/``).
        order: the order they come in.

    Returns:
        The matching paths, directories first.
    """
    return list(index.listing.raw_glob([pattern], order))


__all__ = [
    "Adapted",
    "IndexParts",
    "Globbed",
    "InDir",
    "ListedInDir",
    "Ordered",
    "RawGlobbed",
    "RawGlobbedInfos",
    "Walked",
]
