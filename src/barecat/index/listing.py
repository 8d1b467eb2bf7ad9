"""Listing queries: every file or directory, a directory's entries, walk and glob.

:class:`IndexListing` is the object an index holds as ``index.listing``: it answers the
questions that return many entries, each through one index-assisted query (see
``query.py``), on the index's settled connection (statistics owed by a run of single adds
applied first, ``IndexConnection.settled_conn``). barecat 0.3.1's names for these queries
(``iter_all_fileinfos``, ``listdir_names``, ``glob_paths``, ...) are in ``compat.py``.
Imports ``entries``, ``glob``, ``paths``, ``exceptions`` and ``barecat.index.query``.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import stat
from collections.abc import Iterator
from typing import Protocol

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import InvalidPathBarecatError
from barecat.glob import compile_glob, matching_entries
from barecat.index import query
from barecat.index.connection import select
from barecat.index.errors import guard_public_methods
from barecat.paths import normalize, parent

DirItem = BarecatDirInfo | str
FileItem = BarecatFileInfo | str


def path_of(item: BarecatEntryInfo | str) -> str:
    """The normalized path of an info record or a user-given path."""
    return item.path if isinstance(item, BarecatEntryInfo) else normalize(item)


class ListedIndex(Protocol):
    """What the listing asks of its index (``ReadOnlyIndex`` is one; it imports this
    module, so the listing names only what it uses)."""

    path: str
    """The index file's path (named in errors)."""
    sealed: bool
    """Whether the index is a sealed one (its file rows have other columns)."""
    file_columns: str
    """The columns a file's info record is read from."""

    def settled_conn(self) -> sqlite3.Connection:
        """The connection to query, with the statistics it owes applied."""
        ...

    def isfile(self, path: str) -> bool:
        """Whether a file is at the normalized ``path``."""
        ...

    def isdir(self, path: str) -> bool:
        """Whether a directory is at the normalized ``path``."""
        ...

    def lookup_dir(self, dirpath: str) -> BarecatDirInfo:
        """A directory's info record; raises the precise error if there is none."""
        ...


class IndexListing:
    """The listing queries of one index (``index.listing``).

    Args:
        index: the index whose rows are listed; its settled connection is asked for on
            every query, so the listing follows the index through forks and threads.
    """

    def __init__(self, index: ListedIndex) -> None:
        self._index = index

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._index.settled_conn()

    @property
    def _file_columns(self) -> str:
        return self._index.file_columns

    # -- the whole archive -------------------------------------------------------------

    def files(self, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        """Every file's info record, in ``order``."""
        return query.iter_files(self._conn, self._file_columns, order)

    def dirs(self, order: Order = Order.ANY) -> Iterator[BarecatDirInfo]:
        """Every directory's info record (the root's included), in ``order``."""
        return query.iter_dirs(self._conn, order)

    def file_paths(self, order: Order = Order.ANY) -> Iterator[str]:
        """Every file's path, in ``order``."""
        sql = "SELECT path FROM files" + query.order_clause(order, True)
        return (row[0] for row in select(self._conn, sql))

    def dir_paths(self, order: Order = Order.ANY) -> Iterator[str]:
        """Every directory's path (the root as ``''``), in ``order``."""
        sql = "SELECT path FROM dirs" + query.order_clause(order, False)
        return (row[0] for row in select(self._conn, sql))

    def files_below(self, dirpath: str) -> Iterator[BarecatFileInfo]:
        """Every file in the subtree of the directory ``dirpath`` (normalized), in storage
        order."""
        where, args = query.subtree_where(dirpath)
        return query.iter_files(self._conn, self._file_columns, Order.ADDRESS, where, args)

    # -- one directory -----------------------------------------------------------------

    def existing_dir(self, diritem: DirItem) -> str:
        """The normalized path of ``diritem``, which must be a directory.

        Raises:
            FileNotFoundBarecatError: no such directory (ENOTDIR if an ancestor is a file).
            NotADirectoryBarecatError: ``diritem`` is a file.
        """
        path = path_of(diritem)
        if not self._index.isdir(path):
            self._index.lookup_dir(path)  # raises the precise error
        return path

    def files_in(self, diritem: DirItem, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        """The files directly in a directory (nothing, for a missing one), in ``order``."""
        return query.iter_files(
            self._conn, self._file_columns, order, " WHERE parent = ?", (path_of(diritem),)
        )

    def subdirs_of(self, diritem: DirItem, order: Order = Order.ANY) -> Iterator[BarecatDirInfo]:
        """The directories directly in a directory (nothing, for a missing one)."""
        return query.iter_dirs(self._conn, order, " WHERE parent = ?", (path_of(diritem),))

    def entries(self, diritem: DirItem, order: Order = Order.ANY) -> Iterator[BarecatEntryInfo]:
        """A directory's entries: subdirectories first, then files (each in ``order``).

        Raises (on the first ``next``):
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``diritem`` is a file.
        """
        path = self.existing_dir(diritem)
        yield from self.subdirs_of(path, order)
        yield from self.files_in(path, order)

    def entry_list(self, diritem: DirItem, order: Order = Order.ANY) -> list[BarecatEntryInfo]:
        """``entries`` as a list, in two queries: the directory's existence is only
        checked when it has no entries (a mount lists every directory a walk enters).

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``diritem`` is a file.
        """
        path = path_of(diritem)
        conn, where, args = self._conn, " WHERE parent = ?", (path,)
        found: list[BarecatEntryInfo] = [*query.iter_dirs(conn, order, where, args)]
        found += query.iter_files(conn, self._file_columns, order, where, args)
        if not found:
            self.existing_dir(path)
        return found

    def names(self, diritem: DirItem, order: Order = Order.ANY) -> list[str]:
        """Names in a directory: subdirectories first, then files (each in ``order``).

        One query; the directory's existence is only checked when it comes back empty.

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``diritem`` is a file.
        """
        path = path_of(diritem)
        cut = len(path) + 1 if path else 0
        conn = self._conn
        if order == Order.ANY:
            names = query.concatenated_children(conn, path)
        else:
            by = query.order_clause(order, False)
            sql = (
                f"SELECT * FROM (SELECT path FROM dirs WHERE parent = ?1{by}) "
                f"UNION ALL SELECT * FROM (SELECT path FROM files WHERE parent = ?1{by})"
            )
            names = [row[0] for row in select(conn, sql, (path,))]
        if not names:
            self.existing_dir(path)
        return [name[cut:] for name in names]

    def typed_names(self, diritem: DirItem) -> list[tuple[str, int]]:
        """Names in a directory with their file type (``st_mode``'s type bits; a file
        whose mode has none is a regular file): subdirectories first, then files.

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``diritem`` is a file.
        """
        path = path_of(diritem)
        cut = len(path) + 1 if path else 0
        dirs, files, types = query.typed_children(self._conn, path)
        if not dirs and not files:
            self.existing_dir(path)
        typed = [(name[cut:], stat.S_IFDIR) for name in dirs]
        regular = stat.S_IFREG
        typed += [(name[cut:], types.get(name, regular)) for name in files]
        return typed

    def page_of_files(self, dirpath: str, offset: int, limit: int) -> list[BarecatFileInfo]:
        """Files directly in ``dirpath``, in path order, ``limit`` of them from ``offset``:
        one page of a directory too big to list at once."""
        where = " WHERE parent = ? ORDER BY path LIMIT ? OFFSET ?"
        args = (normalize(dirpath), limit, offset)
        return list(query.iter_files(self._conn, self._file_columns, Order.ANY, where, args))

    def files_after(self, path: str, limit: int) -> list[BarecatFileInfo]:
        """Up to ``limit`` files of ``path``'s directory that follow it in listing order
        (the order they were added, which :meth:`names` gives): what a reader going
        through the directory wants next. One index seek, whatever the directory's size."""
        path = normalize(path)
        where = (
            " WHERE parent = ?1 AND rowid > (SELECT rowid FROM files WHERE path = ?2) "
            "ORDER BY rowid LIMIT ?3"
        )
        args = (parent(path), path, limit)
        return list(query.iter_files(self._conn, self._file_columns, Order.ANY, where, args))

    # -- trees -------------------------------------------------------------------------

    def walk(self, rootitem: DirItem) -> Iterator[query.WalkStep]:
        """Like ``os.walk`` with info records: (directory, its subdirectories, its files)
        for the directory ``rootitem`` and every one below it, top-down in path order."""
        infos = query.SEALED_WALK_INFOS if self._index.sealed else query.WALK_INFOS
        return query.walk(self._conn, self.existing_dir(rootitem), infos)

    def walk_names(self, rootitem: DirItem) -> Iterator[tuple[str, list[str], list[str]]]:
        """Like ``os.walk(top)`` on the extracted tree; the root is reported as '.'.

        The yielded ``dirnames`` list may be pruned in place to skip subtrees.
        """
        top = self.existing_dir(rootitem)
        for d, subdirs, files in query.walk(self._conn, top, query.WALK_NAMES):
            yield (d or "."), subdirs, files

    def glob(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        only_files: bool = False,
    ) -> list[str]:
        """Paths matching ``pattern``, sorted: what ``glob.glob(tree + '/' + pattern)``
        yields on the extracted tree, with the ``tree + '/'`` prefix removed.

        So a directory matched as one is spelled with a trailing '/' (``'d/'`` for
        ``'d/**'``, ``'*/'`` or ``'*/**'``) and the root so matched is ``''`` (``'**'``
        yields ``''`` first, an empty archive ``['']``). Unlike CPython, ``'f/**'`` for a
        file or missing ``f`` matches nothing (python/cpython#79382).

        Args:
            pattern: archive-relative glob (``*``, ``?``, ``[seq]``, ``[!seq]``, and
                ``**`` across directories when ``recursive``).
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with '.'.
            only_files: leave out directories.

        Returns:
            The matches; SQLite joins them into one string, then they are checked and
            sorted at once.
        """
        compiled = compile_glob(pattern, recursive, include_hidden)
        try:
            base = normalize(compiled.base)
        except InvalidPathBarecatError:
            return []
        if compiled.is_literal:
            if not pattern.strip("/"):
                return []
            is_dir = self._index.isdir(base)
            if is_dir and not only_files:
                return [compiled.shown(base, compiled.dirs_only)]
            if not compiled.dirs_only and self._index.isfile(base):
                return [base]
            return []
        if not self._index.isdir(base):
            return []
        compiled = dataclasses.replace(compiled, base=base)
        matches = query.glob_matches(self._conn, compiled, only_files)
        if compiled.includes_base and not only_files:
            matches.insert(0, compiled.shown(base, True))
        return matches

    glob_entries = matching_entries(glob)

    # -- raw SQLite GLOB (the reference's raw_* family) --------------------------------

    def raw_glob(
        self, patterns: list[str], order: Order = Order.ANY, only_files: bool = False
    ) -> Iterator[str]:
        """Paths matching any of ``patterns`` under SQLite's GLOB, where ``*`` crosses '/'.

        Faster than :meth:`glob` and deliberately not ``glob.glob``-compatible: for
        filters such as ``'*.jpg'`` over the whole archive. Directories come first.
        """
        if not patterns:
            return
        where = " WHERE " + " OR ".join(["path GLOB ?"] * len(patterns))
        tables = ("files",) if only_files else ("dirs", "files")
        for table in tables:
            sql = f"SELECT path FROM {table}{where}" + query.order_clause(order, table == "files")
            for (path,) in select(self._conn, sql, patterns):
                yield path

    def raw_glob_infos(self, pattern: str, only_files: bool = False) -> Iterator[BarecatEntryInfo]:
        """Info records of the entries matching ``pattern`` under SQLite's GLOB
        (directories first)."""
        if not only_files:
            yield from query.iter_dirs(self._conn, Order.ANY, " WHERE path GLOB ?", (pattern,))
        yield from query.iter_files(
            self._conn, self._file_columns, Order.ANY, " WHERE path GLOB ?", (pattern,)
        )


guard_public_methods(IndexListing, lambda listing: listing._index.path)
