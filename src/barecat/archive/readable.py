"""``ReadableArchive``: what every archive that can be read offers, wherever it lives.

The protocol front ends (mounts, the HTTP server, the image viewer, fsspec, PyTorch)
type against. :class:`~barecat.archive.Barecat` satisfies it structurally (its index
answers each question in one query); the HTTP client, ``HttpBarecat``, subclasses it
and implements the primitives over requests, inheriting the derived methods written
here in terms of them.

Primitives: :attr:`~ReadableArchive.path` (where the archive is),
:attr:`~ReadableArchive.num_files`,
:meth:`~ReadableArchive.lookup` (one entry's record),
:meth:`~ReadableArchive.listdir_infos` (a directory's entries),
:meth:`~ReadableArchive.read` (a file's bytes or a range of them),
``archive[path]`` (a whole file, the mapping API's way),
:meth:`~ReadableArchive.open` (a seekable binary stream of a file),
:meth:`~ReadableArchive.read_many` (many files in request order),
:meth:`~ReadableArchive.iter_fileinfos` (every file in path or storage order),
:meth:`~ReadableArchive.glob` and :meth:`~ReadableArchive.close`.
Derived: ``stat``, ``lookup_file``, ``lookup_dir``, ``exists``, ``isfile``, ``isdir``,
``listdir``, ``listdir_types`` (names with their types), ``subdirs_of`` and ``files_in``
(a directory's subdirectories, its files), ``files_page`` (one page of a big directory),
``files_after`` (the files a reader going through a directory wants next), ``walk``,
``globfiles`` and ``glob_entries``; an implementation may answer them faster itself
(``Barecat`` answers each with one index query). Imports only ``entries`` and ``exceptions``.
"""

from __future__ import annotations

import heapq
import stat
from collections.abc import Iterable, Iterator
from typing import IO, Any, Protocol, runtime_checkable

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import (
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    NotADirectoryLookupBarecatError,
)


@runtime_checkable
class ReadableArchive(Protocol):
    """An archive's read API (see the module doc). Paths are archive paths (``a/b.txt``;
    ``""`` is the root), normalized by the implementation."""

    # -- primitives ----------------------------------------------------------------------

    @property
    def path(self) -> str:
        """Where the archive is: its file's path, or its URL (for titles and messages)."""
        ...

    @property
    def num_files(self) -> int:
        """How many files the archive holds."""
        ...

    def lookup(self, path: str) -> BarecatEntryInfo:
        """The record of the file or directory at ``path``.

        Args:
            path: the entry's path.

        Returns:
            A :class:`BarecatFileInfo` or a :class:`BarecatDirInfo`.

        Raises:
            FileNotFoundBarecatError: nothing is there.
        """
        ...

    def listdir_infos(self, path: str = "") -> list[BarecatEntryInfo]:
        """The records of a directory's entries: subdirectories first, then files.

        Args:
            path: the directory.

        Returns:
            The records, each group in the order the archive keeps it.

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        ...

    def read(self, item: BarecatFileInfo | str, offset: int = 0, size: int = -1) -> bytes:
        """A file's bytes, or ``size`` of them from ``offset`` (``-1``: to the end).

        Args:
            item: the file's path, or its record (from this archive's ``lookup``, which
                spares the implementation a lookup of its own).
            offset: where to start.
            size: how many bytes at most; ``-1`` for the rest.

        Returns:
            The bytes (fewer than ``size`` at the end of the file).

        Raises:
            FileNotFoundBarecatError: no such file.
            BarecatIntegrityError: the bytes are damaged.
        """
        ...

    def __getitem__(self, path: str) -> bytes:
        """A whole file's bytes (checked, as :meth:`read` checks them).

        Raises:
            KeyError: no file is at ``path``.
            BarecatIntegrityError: the bytes are damaged.
        """
        ...

    def open(self, item: BarecatFileInfo | str, mode: str) -> IO[Any]:
        """A seekable binary stream of a file, reading only what is asked.

        Args:
            item: the file's path or record.
            mode: ``"rb"``, the one mode every archive takes (given always: a
                ``Barecat`` opens in text mode by default, as ``builtins.open`` does, and
                takes writing modes too).

        Returns:
            The stream; close it when done.

        Raises:
            FileNotFoundBarecatError: no such file.
        """
        ...

    def read_many(self, paths: Iterable[str]) -> list[bytes]:
        """Many files' bytes, in request order.

        Args:
            paths: the files.

        Returns:
            One ``bytes`` per path.

        Raises:
            KeyError, FileNotFoundBarecatError: a path is not a file (which of the two
                depends on the implementation: the dict API raises ``KeyError``).
        """
        ...

    def iter_fileinfos(self, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        """Every file's record.

        Args:
            order: ``Order.PATH`` or ``Order.ADDRESS`` (storage order: the order in which
                reading every file touches the shards once, front to back); ``Order.ANY``
                for whatever is cheapest.

        Returns:
            An iterator of records.
        """
        ...

    def glob(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        """Paths matching ``pattern``, sorted, spelled as ``glob.glob`` spells them on the
        extracted tree (a directory matched as one ends in ``/``).

        Args:
            pattern: a glob relative to the archive's root.
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.

        Returns:
            The matches.
        """
        ...

    def close(self) -> None:
        """Let go of what the archive holds (files, connections); idempotent."""
        ...

    # -- derived -------------------------------------------------------------------------

    def stat(self, path: str) -> BarecatEntryInfo:
        """The record at ``path`` (:meth:`lookup`, under ``os.stat``'s name).

        Raises:
            FileNotFoundBarecatError: nothing is there.
        """
        return self.lookup(path)

    def exists(self, path: str) -> bool:
        """True if a file or directory is at ``path``."""
        try:
            self.lookup(path)
        except FileNotFoundBarecatError:
            return False
        return True

    def isfile(self, path: str) -> bool:
        """True if a file is at ``path``."""
        try:
            return isinstance(self.lookup(path), BarecatFileInfo)
        except FileNotFoundBarecatError:
            return False

    def isdir(self, path: str) -> bool:
        """True if a directory is at ``path``."""
        try:
            return isinstance(self.lookup(path), BarecatDirInfo)
        except FileNotFoundBarecatError:
            return False

    def listdir(self, path: str = "") -> list[str]:
        """Names in a directory, subdirectories first (as :meth:`listdir_infos`).

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return [info.name for info in self.listdir_infos(path)]

    def listdir_types(self, path: str = "") -> list[tuple[str, int]]:
        """Names in a directory with their file type (the type bits of ``st_mode``:
        ``stat.S_IFDIR``, ``stat.S_IFREG``, ``stat.S_IFLNK``, ...; a file whose mode
        has none is a regular file), subdirectories first (as :meth:`listdir_infos`):
        what a listing without attributes tells (``d_type``).

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return [(info.name, entry_type(info)) for info in self.listdir_infos(path)]

    def walk(self, path: str = "") -> Iterator[tuple[str, list[str], list[str]]]:
        """Like ``os.walk(top)`` on the extracted tree: ``(dirpath, dirnames, filenames)``
        for each directory, in path order, names sorted; the root is reported as ``'.'``.
        Pruning ``dirnames`` in place skips those subtrees.

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        top = self.lookup(path)
        if not isinstance(top, BarecatDirInfo):
            raise NotADirectoryBarecatError(f"Not a directory: {top.path}")
        pending = [top.path]  # a parent sorts before its children: popping the least
        while pending:  # path each time goes through the tree in path order
            directory = heapq.heappop(pending)
            entries = self.listdir_infos(directory)
            dirnames = sorted(e.name for e in entries if isinstance(e, BarecatDirInfo))
            filenames = sorted(e.name for e in entries if not isinstance(e, BarecatDirInfo))
            yield directory or ".", dirnames, filenames
            for name in dirnames:
                heapq.heappush(pending, f"{directory}/{name}" if directory else name)

    def lookup_file(self, path: str) -> BarecatFileInfo:
        """The record of the file at ``path``.

        Raises:
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
        """
        info = self.lookup(path)
        if not isinstance(info, BarecatFileInfo):
            raise IsADirectoryBarecatError(info.path)
        return info

    def lookup_dir(self, path: str) -> BarecatDirInfo:
        """The record of the directory at ``path`` (``""``: the root).

        Raises:
            FileNotFoundBarecatError: no directory is there
                (``NotADirectoryLookupBarecatError`` when a file is).
        """
        info = self.lookup(path)
        if not isinstance(info, BarecatDirInfo):
            raise NotADirectoryLookupBarecatError(f"Not a directory: {info.path}", info.path)
        return info

    def subdirs_of(self, path: str) -> Iterator[BarecatDirInfo]:
        """The records of the directories directly in ``path`` (none for a missing one):
        a directory's subdirectories without its files, however many files it holds.

        Args:
            path: the directory (``""``: the root).

        Returns:
            An iterator of :class:`BarecatDirInfo`.
        """
        return (e for e in _listed(self, path) if isinstance(e, BarecatDirInfo))

    def files_in(self, path: str) -> Iterator[BarecatFileInfo]:
        """The records of the files directly in ``path`` (none for a missing directory).

        Args:
            path: the directory (``""``: the root).

        Returns:
            An iterator of :class:`BarecatFileInfo`.
        """
        return iter(_files_in(self, path))

    def files_page(self, path: str, offset: int, limit: int) -> list[BarecatFileInfo]:
        """Files directly in ``path``, in path order, ``limit`` of them from ``offset``:
        one page of a directory too big to show at once.

        Args:
            path: the directory (``""``: the root).
            offset: how many files of the path order to skip.
            limit: the most files to return.

        Returns:
            The page's file records (empty past the end or for a missing directory).
        """
        files = sorted(_files_in(self, path), key=lambda f: f.path)
        return files[offset : offset + limit]

    def files_after(self, path: str, limit: int) -> list[BarecatFileInfo]:
        """Up to ``limit`` files of ``path``'s directory that follow the file ``path`` in
        listing order (:meth:`listdir_infos`'s): what a reader going through the
        directory wants next.

        Args:
            path: a file's path.
            limit: the most files to return.

        Returns:
            The file records that follow (none when no file is at ``path``).
        """
        try:
            here = self.lookup_file(path).path
        except (FileNotFoundBarecatError, IsADirectoryBarecatError):
            return []
        files = _files_in(self, here.rpartition("/")[0])
        start = [f.path for f in files].index(here) + 1
        return files[start : start + limit]

    def globfiles(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        """The files :meth:`glob` matches (same arguments), sorted.

        Returns:
            The matching files' paths.
        """
        return [p for p in self.glob(pattern, recursive, include_hidden) if self.isfile(p)]

    def glob_entries(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        """The entries :meth:`glob` matches, as archive paths: sorted, each once, without
        a trailing ``/`` and without the root (for callers that act on entries rather
        than mirror ``glob.glob``'s spelling). Same arguments as :meth:`glob`.

        Returns:
            The matching entries' paths.
        """
        return sorted({p.rstrip("/") for p in self.glob(pattern, recursive, include_hidden)} - {""})


def entry_type(info: BarecatEntryInfo) -> int:
    """The file type of an entry as the type bits of ``st_mode`` (a file whose mode has
    none, or no mode, is a regular file)."""
    if isinstance(info, BarecatDirInfo):
        return stat.S_IFDIR
    return stat.S_IFMT(info.mode or 0) or stat.S_IFREG


def _listed(archive: ReadableArchive, path: str) -> list[BarecatEntryInfo]:
    """The entries directly in the directory ``path``, in listing order; none when no
    directory is there."""
    try:
        return archive.listdir_infos(path)
    except (FileNotFoundBarecatError, NotADirectoryBarecatError):
        return []


def _files_in(archive: ReadableArchive, path: str) -> list[BarecatFileInfo]:
    """The files directly in the directory ``path``, in listing order (see ``_listed``)."""
    return [e for e in _listed(archive, path) if isinstance(e, BarecatFileInfo)]


__all__ = ["ReadableArchive"]
