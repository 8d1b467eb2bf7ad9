"""Answers about an archive that only read its index and shard sizes: the ``os.path``-
and ``os``-style queries, entry records, listings, globs, totals, fragmentation and
integrity, shared by every :class:`~barecat.archive.Barecat`. With the contents read
(``reading.py``) these make the facade a :class:`~barecat.archive.readable.ReadableArchive`;
front ends ask these methods, never the index.

The facade's part that asks the two halves of its
:class:`~barecat.archive.state.OpenArchive` (``index``, ``sharder``); it delegates and
keeps no state. The totals (``num_files``, ``total_size``, ...) are the facade's
properties.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from barecat.archive.state import ArchivePart, by_listing, reading, reading_steps
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.index.listing import IndexListing

if TYPE_CHECKING:  # the ops are imported when used: reading an archive loads none of them
    from barecat.glob import PathFilter
    from barecat.index.listing import PlannedRow
    from barecat.index.query import WalkStep
    from barecat.index.schema import ConfigValue
    from barecat.ops.defrag import Fragmentation
    from barecat.ops.subset import Selection
    from barecat.ops.verify import OnFile, VerifyReport
    from barecat.selection import FileSelection


class ArchiveInspection(ArchivePart):
    """Read-only queries of a :class:`~barecat.archive.Barecat` (see the module doc)."""

    @reading
    def exists(self, path: str) -> bool:
        """Whether a file or directory is at ``path`` (as ``os.path.exists``).

        Args:
            path: the path in the archive (``""``: the root).

        Returns:
            True if a file or directory is there.

        Raises:
            InvalidPathBarecatError: ``path`` escapes the archive root.
        """
        return self.archive.index.lookups.exists(path)

    @reading
    def isfile(self, path: str) -> bool:
        """Whether a file is at ``path`` (as ``os.path.isfile``).

        Args:
            path: the path in the archive (``""``: the root).

        Returns:
            True if a file is there.

        Raises:
            InvalidPathBarecatError: ``path`` escapes the archive root.
        """
        return self.archive.index.lookups.isfile(path)

    @reading
    def isdir(self, path: str) -> bool:
        """Whether a directory is at ``path`` (as ``os.path.isdir``).

        Args:
            path: the path in the archive (``""``: the root).

        Returns:
            True if a directory is there.

        Raises:
            InvalidPathBarecatError: ``path`` escapes the archive root.
        """
        return self.archive.index.lookups.isdir(path)

    @reading
    def stat(self, path: str) -> BarecatEntryInfo:
        """The file's or directory's info record (:meth:`lookup`).

        Args:
            path: the path in the archive.

        Returns:
            A :class:`BarecatFileInfo` or :class:`BarecatDirInfo`.

        Raises:
            FileNotFoundBarecatError: nothing is there.
        """
        return self.archive.index.lookups.lookup(path)

    @reading
    def lookup(self, path: str) -> BarecatEntryInfo:
        """The record of the file or directory at ``path``.

        Args:
            path: the path in the archive (``""``: the root).

        Returns:
            A :class:`BarecatFileInfo` or :class:`BarecatDirInfo`.

        Raises:
            FileNotFoundBarecatError: nothing is there.
        """
        return self.archive.index.lookups.lookup(path)

    @reading
    def lookup_file(self, path: str) -> BarecatFileInfo:
        """The record of the file at ``path``.

        Args:
            path: the path in the archive.

        Returns:
            Its path, metadata and address (shard, offset, size, crc32c).

        Raises:
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
        """
        return self.archive.index.lookups.lookup_file(path)

    @reading
    def lookup_dir(self, path: str) -> BarecatDirInfo:
        """The record of the directory at ``path`` (``""``: the root).

        Args:
            path: the path in the archive.

        Returns:
            Its path, metadata and statistics (subdirectories, files, bytes below).

        Raises:
            FileNotFoundBarecatError: no directory is there
                (``NotADirectoryLookupBarecatError``, also a ``NotADirectoryError``, when
                a file is).
        """
        return self.archive.index.lookups.lookup_dir(path)

    @reading
    def listdir_infos(self, path: str = "", order: Order = Order.ANY) -> list[BarecatEntryInfo]:
        """The records of a directory's entries: subdirectories first, then files, each
        group in ``order`` (``Order.ANY``: the order they were added).

        Args:
            path: the directory (``""``: the root).
            order: the order within each group.

        Returns:
            :class:`BarecatDirInfo` records, then :class:`BarecatFileInfo` records.

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return self.archive.index.listing.entry_list(path, order)

    @reading_steps
    def subdirs_of(self, path: str, order: Order = Order.ANY) -> Iterator[BarecatDirInfo]:
        """The records of the directories directly in ``path`` (none for a missing one).

        Args:
            path: the directory (``""``: the root).
            order: the order they come in.

        Returns:
            An iterator of :class:`BarecatDirInfo`.
        """
        return self.archive.index.listing.subdirs_of(path, order)

    @reading_steps
    def files_in(self, path: str, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        """The records of the files directly in ``path`` (none for a missing directory).

        Args:
            path: the directory (``""``: the root).
            order: the order they come in.

        Returns:
            An iterator of :class:`BarecatFileInfo`.
        """
        return self.archive.index.listing.files_in(path, order)

    @reading
    def files_page(self, path: str, offset: int, limit: int) -> list[BarecatFileInfo]:
        """Files directly in ``path``, in path order, ``limit`` of them from ``offset``:
        one page of a directory too big to list at once.

        Args:
            path: the directory (``""``: the root).
            offset: how many files of the path order to skip.
            limit: the most files to return.

        Returns:
            The page's file records (empty past the end or for a missing directory).
        """
        return self.archive.index.listing.page_of_files(path, offset, limit)

    @reading
    def files_after(self, path: str, limit: int) -> list[BarecatFileInfo]:
        """Up to ``limit`` files of ``path``'s directory that follow the file ``path`` in
        listing order: what a reader going through the directory wants next.

        Args:
            path: a file's path (it need not exist: the files after where it would be).
            limit: the most files to return.

        Returns:
            The file records that follow, in listing order.
        """
        return self.archive.index.listing.files_after(path, limit)

    @reading_steps
    def iter_fileinfos(self, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        """Every file's record, in ``order`` (``Order.ADDRESS``: storage order, the one
        that reads the shards front to back; ``Order.PATH``: sorted by path).

        Args:
            order: the order they come in.

        Returns:
            An iterator of :class:`BarecatFileInfo`.
        """
        return self.archive.index.listing.files(order)

    @reading_steps
    def iter_dirinfos(self, order: Order = Order.ANY) -> Iterator[BarecatDirInfo]:
        """Every directory's record (the root's too), in ``order``.

        Args:
            order: the order they come in.

        Returns:
            An iterator of :class:`BarecatDirInfo`.
        """
        return self.archive.index.listing.dirs(order)

    @reading_steps
    def files(self) -> Iterator[str]:
        """Every file's path, in the order they were added.

        Returns:
            An iterator of paths.
        """
        return self.archive.index.listing.file_paths()

    @reading_steps
    def dirs(self) -> Iterator[str]:
        """Every directory's path (the root as ``""``), in the order they were added.

        Returns:
            An iterator of paths.
        """
        return self.archive.index.listing.dir_paths()

    @reading
    def listdir(self, path: str = "") -> list[str]:
        """The names in a directory (as ``os.listdir``): subdirectories first, then files.

        Args:
            path: the directory (``""``: the root).

        Returns:
            The entries' names (not paths).

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return self.archive.index.listing.names(path)

    @reading
    def listdir_types(self, path: str = "") -> list[tuple[str, int]]:
        """The names in a directory with their file type (the type bits of ``st_mode``),
        subdirectories first, then files: three queries whatever the directory's size
        (its names joined by SQLite, and the few files whose mode gives another type
        than a regular file's).

        Args:
            path: the directory (``""``: the root).

        Returns:
            ``(name, type)`` pairs.

        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return self.archive.index.listing.typed_names(path)

    @reading_steps
    def scandir(self, path: str = "") -> Iterator[BarecatEntryInfo]:
        """The records of a directory's entries (in the spirit of ``os.scandir``):
        subdirectories first, then files.

        Args:
            path: the directory (``""``: the root).

        Returns:
            An iterator of :class:`BarecatDirInfo`, then :class:`BarecatFileInfo`, records.

        Raises (on the first ``next``):
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return self.archive.index.listing.entries(path)

    @reading_steps
    def walk(self, path: str = "") -> Iterator[tuple[str, list[str], list[str]]]:
        """Like ``os.walk`` over the subtree at ``path``: ``(directory, subdirectory
        names, file names)`` for each directory, top-down; the root is reported as
        ``'.'``. The subdirectory list may be pruned in place to skip subtrees.

        Args:
            path: the directory to start from (``""``: the root).

        Returns:
            An iterator of ``(dirpath, dirnames, filenames)``.

        Raises (on the first ``next``):
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: ``path`` is a file.
        """
        return self.archive.index.listing.walk_names(path)

    @reading_steps
    def walk_infos(self, path: str = "") -> Iterator[WalkStep]:
        """:meth:`walk` with records: ``(directory, subdirectories, files)`` for each
        directory of the subtree at ``path``, in path order.

        Args:
            path: the directory to start from (``""``: the root).

        Returns:
            An iterator of :class:`~barecat.index.query.WalkStep`.

        Raises:
            FileNotFoundBarecatError: no such directory.
        """
        return self.archive.index.listing.walk(path)

    @reading
    def glob(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        """Paths matching ``pattern``, sorted, as ``glob.glob`` yields them relative to the
        extracted tree (so ``'d/**'`` yields ``'d/'``; :meth:`glob_entries` gives plain
        archive paths).

        Args:
            pattern: a glob pattern relative to the root (``*``, ``?``, ``[...]``; ``**``
                with ``recursive``).
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.

        Returns:
            The matching paths of files and directories.
        """
        return self.archive.index.listing.glob(pattern, recursive, include_hidden)

    @reading_steps
    def iglob(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> Iterator[str]:
        """:meth:`glob` as an iterator (as ``glob.iglob``).

        Args:
            pattern: a glob pattern relative to the root (``*``, ``?``, ``[...]``; ``**``
                with ``recursive``).
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.

        Returns:
            An iterator of the matching paths.
        """
        yield from self.archive.index.listing.glob(pattern, recursive, include_hidden)

    @reading
    def globfiles(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        """:meth:`glob` keeping only files.

        Args:
            pattern: a glob pattern relative to the root (``*``, ``?``, ``[...]``; ``**``
                with ``recursive``).
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.

        Returns:
            The matching files' paths, sorted.
        """
        return self.archive.index.listing.glob(pattern, recursive, include_hidden, only_files=True)

    @reading_steps
    def iglobfiles(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> Iterator[str]:
        """:meth:`globfiles` as an iterator.

        Args:
            pattern: a glob pattern relative to the root (``*``, ``?``, ``[...]``; ``**``
                with ``recursive``).
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.

        Returns:
            An iterator of the matching files' paths.
        """
        yield from self.archive.index.listing.glob(
            pattern, recursive, include_hidden, only_files=True
        )

    glob_entries = reading(by_listing(IndexListing.glob_entries))

    @reading
    def select_entries(
        self, pattern: str | None = None, path_filter: PathFilter | None = None
    ) -> Selection | None:
        """The entries a subset takes: those a glob ``pattern`` (recursive, hidden names
        included, ``dir/`` meaning ``dir/**``) or include/exclude rules choose, with the
        directories they need.

        Returns:
            The files and directories; None when everything is chosen.

        Raises:
            ValueError: both a pattern and rules given.
        """
        from barecat.ops.subset import select_entries as select

        return select(self.archive.index, pattern, path_filter)

    @reading
    def plan_files(self, selection: FileSelection, by_path: bool = False) -> list[PlannedRow]:
        """Where the files ``selection`` chooses lie, in storage order (shard, offset):
        the plan that readers of the shards alone follow (``planned_reader``).

        Args:
            selection: the files (its ``pattern`` and ``where``/``params``; see
                :class:`~barecat.selection.FileSelection`).
            by_path: in path order instead (a sample's files next to each other).

        Returns:
            One typed row (path, shard, offset, stored size, crc32c, size, mtime_ns) per
            chosen file (``index.listing.PlannedRow``).

        Raises:
            DamagedEntryBarecatError: a chosen row cannot address bytes.
            sqlite3.Error: ``where`` is not a valid condition.
        """
        return self.archive.index.listing.planned(selection, by_path)

    @reading
    def logical_shard_end(self, shard_number: int) -> int:
        """Where the last indexed file of a shard ends.

        Args:
            shard_number: the shard.

        Returns:
            The end offset of the shard's last file; 0 for a shard without files.
        """
        return self.archive.index.lookups.logical_shard_end(shard_number)

    @reading
    def physical_shard_end(self, shard_number: int) -> int:
        """The size of a shard file on disk.

        Args:
            shard_number: the shard.

        Returns:
            The shard file's size in bytes; 0 for a shard that does not exist.
        """
        return self.archive.sharder.physical_shard_end(shard_number)

    @reading
    def fragmentation(self) -> Fragmentation:
        """How much of the shards no file uses: holes between files and slack past the
        last file of each shard (what ``defragment`` would reclaim).

        Returns:
            The fragmentation figures.
        """
        from barecat.ops.defrag import fragmentation

        return fragmentation(self.archive.index, self.archive.sharder)

    @reading
    def verify(
        self, quick: bool = False, on_file: OnFile | None = None, workers: int = 1
    ) -> VerifyReport:
        """Check the index's consistency and every file's bytes against its CRC32C.

        Args:
            quick: check only the last file's bytes (with the index and shard ends).
            on_file: called with each file's record once its bytes are checked.
            workers: threads computing checksums.

        Returns:
            The full report: files checked, the bad ones and why, index problems.
        """
        from barecat.ops.verify import verify_archive

        return verify_archive(
            self.archive.index, self.archive.sharder, quick, on_file=on_file, workers=workers
        )

    @reading
    def verify_integrity(self, quick: bool = False) -> bool:
        """True if the index is consistent and every file (or, ``quick``, the last) checks
        out (barecat 0.3.1's method; :meth:`verify` gives the full report).

        Args:
            quick: check only the last file's bytes (with the index and shard ends).

        Returns:
            True if no problem was found.
        """
        return self.verify(quick).ok

    # -- for transfer/ and legacy_api (so they need not reach into the index) -----------

    @reading
    def file_positions(self, paths: list[str]) -> list[int]:
        """Which of ``paths`` (normalized) are files here: their positions in ``paths``,
        found with one query.

        Args:
            paths: normalized paths.

        Returns:
            The positions of those that are files, in storage order.
        """
        return [row[0] for row in self.archive.index.lookups.locate_many(paths)]

    @reading
    def sealing_records(self) -> dict[str, ConfigValue] | None:
        """This archive's sealing as the config rows that make another, empty archive
        sealed the same way, its wrapped data key included (see
        :meth:`seal_with_records`); None for a plain archive."""
        archive = self.archive
        return archive.index.connection.sealing_config() if archive.sealing is not None else None
