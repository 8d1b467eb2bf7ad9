"""Answers about an archive that only read its index and shard sizes: the ``os.path``-
and ``os``-style queries, listings, globs, totals and integrity, shared by every
:class:`~barecat.archive.Barecat`.

A mixin over the two halves the facade holds (``index``, ``sharder``); it delegates and
owns no state, so the facade module keeps only what couples writing to the halves.
"""

from __future__ import annotations

from collections.abc import Iterator

from barecat.entries import BarecatEntryInfo
from barecat.index import Index
from barecat.shards import Sharder


class ArchiveInspection:
    """Read-only queries of a :class:`~barecat.archive.Barecat` (see the module doc)."""

    index: Index
    sharder: Sharder

    def exists(self, path: str) -> bool:
        return self.index.exists(path)

    def isfile(self, path: str) -> bool:
        return self.index.isfile(path)

    def isdir(self, path: str) -> bool:
        return self.index.isdir(path)

    def stat(self, path: str) -> BarecatEntryInfo:
        """The file's or directory's info record."""
        return self.index.lookup(path)

    def listdir(self, path: str = "") -> list[str]:
        return self.index.listdir_names(path)

    def scandir(self, path: str = "") -> Iterator[BarecatEntryInfo]:
        return self.index.iterdir_infos(path)

    def walk(self, path: str = "") -> Iterator[tuple[str, list[str], list[str]]]:
        return self.index.walk_names(path)

    def glob(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        return self.index.glob_paths(pattern, recursive, include_hidden)

    def iglob(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> Iterator[str]:
        return self.index.iterglob_paths(pattern, recursive, include_hidden)

    def globfiles(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        return self.index.glob_paths(pattern, recursive, include_hidden, only_files=True)

    def iglobfiles(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> Iterator[str]:
        return self.index.iterglob_paths(pattern, recursive, include_hidden, only_files=True)

    @property
    def num_files(self) -> int:
        return self.index.num_files

    @property
    def num_dirs(self) -> int:
        return self.index.num_dirs

    @property
    def total_size(self) -> int:
        return self.index.total_size

    @property
    def total_logical_size(self) -> int:
        """Bytes of all files by the index (as 0.3.1: the same as :attr:`total_size`);
        below :attr:`total_physical_size_seek` while deleted files leave gaps."""
        return self.index.total_size

    @property
    def total_physical_size_stat(self) -> int:
        """Bytes of all shard files on disk, by ``stat``."""
        return self.sharder.total_physical_size_stat

    @property
    def total_physical_size_seek(self) -> int:
        """Bytes of all shard files on disk (0.3.1's name; the same as
        :attr:`total_physical_size_stat` here, as writes reach the file at once)."""
        return self.sharder.total_physical_size_seek

    def logical_shard_end(self, shard_number: int) -> int:
        return self.index.logical_shard_end(shard_number)

    def physical_shard_end(self, shard_number: int) -> int:
        return self.sharder.physical_shard_end(shard_number)

    def verify_integrity(self, quick: bool = False) -> bool:
        """True if the index is consistent and every file (or, ``quick``, the last) checks out.

        ``barecat.ops.verify_archive(bc.index, bc.sharder)`` gives the full report.
        """
        from barecat.ops.verify import verify_archive  # when used: ops load lazily

        return verify_archive(self.index, self.sharder, quick).ok
