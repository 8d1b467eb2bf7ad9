"""``ReadableArchive``: what every archive that can be read offers, wherever it lives.

The protocol front ends (mounts, the HTTP server, the image viewer, fsspec, PyTorch)
type against. :class:`~barecat.archive.Barecat` satisfies it structurally (its index
answers each question in one query); the HTTP client, ``HttpBarecat``, subclasses it
and implements the primitives over requests, inheriting the derived methods written
here in terms of them.

Primitives: :meth:`~ReadableArchive.lookup` (one entry's record),
:meth:`~ReadableArchive.listdir_infos` (a directory's entries),
:meth:`~ReadableArchive.read` (a file's bytes or a range of them),
:meth:`~ReadableArchive.read_many` (many files in request order) and
:meth:`~ReadableArchive.iter_fileinfos` (every file in path or storage order).
Derived: ``exists``, ``isfile``, ``isdir``, ``listdir``, ``walk``, ``glob``, ``stat``.
Imports only ``entries`` and ``exceptions``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import FileNotFoundBarecatError, NotADirectoryBarecatError


@runtime_checkable
class ReadableArchive(Protocol):
    """An archive's read API (see the module doc). Paths are archive paths (``a/b.txt``;
    ``""`` is the root), normalized by the implementation."""

    # -- primitives ----------------------------------------------------------------------

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

    def read(self, path: str, offset: int = 0, size: int = -1) -> bytes:
        """A file's bytes, or ``size`` of them from ``offset`` (``-1``: to the end).

        Args:
            path: the file.
            offset: where to start.
            size: how many bytes at most; ``-1`` for the rest.

        Returns:
            The bytes (fewer than ``size`` at the end of the file).

        Raises:
            FileNotFoundBarecatError: no such file.
            BarecatIntegrityError: the bytes are damaged.
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


__all__ = ["ReadableArchive"]
