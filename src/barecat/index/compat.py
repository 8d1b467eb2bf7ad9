"""barecat 0.3.1's names on the index: what ``barecat.Index`` (and so ``bc.index``) adds.

barecat 0.3.1 code calls its index directly (``bc.index.iter_all_fileinfos()``,
``bc.index.conn.execute(...)``), so every name it had still works here, each one
handing over to :class:`~barecat.index.index.CoreIndex` or its ``listing``
(:class:`~barecat.index.listing.IndexListing`); so does its merge by hand
(``merge_from_other_barecat``, in ``placed_merge.py``). ``bufsize`` arguments are
accepted and ignored (queries stream from SQLite). barecat's own code uses the core
names and the listing object, never these. Imports ``entries`` and ``barecat.index``'s
own modules.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.index import query
from barecat.index.index import CoreIndex
from barecat.index.listing import DirItem, FileItem
from barecat.index.placed_merge import merge_placed


class Index(CoreIndex):
    """An archive's SQLite index (:class:`CoreIndex`) under barecat 0.3.1's names too."""

    # -- the raw connection ------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        """0.3.1's raw connection, for SQL of one's own: :meth:`settled_conn`, so the
        statistics of a run of single adds are applied when it is handed out and the SQL
        sees them as 0.3.1's triggers would have left them. Rows are ``sqlite3.Row``."""
        return self.settled_conn()

    @property
    def cursor(self) -> sqlite3.Cursor:
        """A new cursor on :attr:`conn`."""
        return self.settled_conn().cursor()

    # -- lookups and edits of several entries ------------------------------------------

    def lookup_files(self, paths: list[str]) -> list[BarecatFileInfo]:
        """:meth:`lookup_file` of each path, in order (raises at the first missing one).

        Args:
            paths: the files' paths.

        Returns:
            Their records, in the order of ``paths``.

        Raises:
            FileNotFoundBarecatError: a path has no file.
            IsADirectoryBarecatError: a path is a directory.
        """
        return [self.lookup_file(p) for p in paths]

    def add_files(self, finfos: Iterable[BarecatFileInfo]) -> None:
        """:meth:`add_file` of each record, in order (``add_files_bulk`` is all or nothing).

        Args:
            finfos: the files' records, with paths, metadata and addresses.

        Raises:
            BarecatError: what :meth:`add_file` raises, at the first refused file (the
                ones before it stay added).
        """
        for f in finfos:
            self.add_file(f)

    def remove_files(self, items: Iterable[FileItem]) -> None:
        """:meth:`remove_file` of each item, in order.

        Args:
            items: the files' paths or records.

        Raises:
            BarecatError: what :meth:`remove_file` raises, at the first missing file
                (the ones before it stay removed).
        """
        for item in items:
            self.remove_file(item)

    def verify_integrity(self) -> bool:
        """True if SQLite's integrity check passes and all directory statistics are right
        (:meth:`find_inconsistencies` lists what is not).

        Returns:
            True if no inconsistency is found.
        """
        return not self.find_inconsistencies()

    # -- the merge by hand -------------------------------------------------------------

    def merge_from_other_barecat(
        self,
        source_path: str,
        ignore_duplicates: bool = False,
        prefix: str | None = None,
        update_treestats: bool = True,
    ) -> None:
        """Add another archive's files and directories, its shards already placed after
        this archive's shards (symlinked or copied, in order): barecat 0.3.1's zero-copy
        merge by hand. The rows' shard numbers are shifted to where the shards were put.

        Args:
            source_path: the other archive (base path or index file).
            ignore_duplicates: skip a file whose path this index has (default: raise).
            prefix: put everything under this directory.
            update_treestats: accepted for compatibility; statistics are always kept right.

        Raises:
            BarecatError: the shards are not in place (nothing is written), or an archive
                is sealed (use :meth:`barecat.Barecat.merge_from_other_barecat`).
            FileExistsBarecatError: a path is taken (without ``ignore_duplicates``).
            MergeConflictBarecatError: a file where this index has a directory, or the
                reverse (a ``ValueError``, as in barecat 0.3.1).
        """
        del update_treestats
        self._require_writable()
        merge_placed(self, source_path, prefix or "", ignore_duplicates)

    # -- the whole archive: listing.files, dirs, file_paths, dir_paths -----------------

    def iter_all_fileinfos(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatFileInfo]:
        """``listing.files(order)``: every file's record.

        Args:
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of :class:`BarecatFileInfo`.
        """
        return self.listing.files(order)

    def iter_all_dirinfos(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatDirInfo]:
        """``listing.dirs(order)``: every directory's record, the root's included.

        Args:
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of :class:`BarecatDirInfo`.
        """
        return self.listing.dirs(order)

    def iter_all_infos(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatEntryInfo]:
        """Every directory's info record, then every file's.

        Args:
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of records.
        """
        yield from self.listing.dirs(order)
        yield from self.listing.files(order)

    def iter_all_filepaths(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[str]:
        """``listing.file_paths(order)``: every file's path.

        Args:
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of paths.
        """
        return self.listing.file_paths(order)

    def iter_all_dirpaths(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[str]:
        """``listing.dir_paths(order)``: every directory's path (the root as ``""``).

        Args:
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of paths.
        """
        return self.listing.dir_paths(order)

    def iter_all_paths(self, order: Order = Order.ANY, bufsize: int | None = None) -> Iterator[str]:
        """Every directory's path, then every file's.

        Args:
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of paths.
        """
        yield from self.listing.dir_paths(order)
        yield from self.listing.file_paths(order)

    # -- one directory: listing.files_in, subdirs_of, entries, names -------------------

    def iter_direct_fileinfos(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatFileInfo]:
        """``listing.files_in(diritem, order)``: the files directly in a directory
        (nothing, for a missing one).

        Args:
            diritem: the directory's path or record (``""``: the root).
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of :class:`BarecatFileInfo`.
        """
        return self.listing.files_in(diritem, order)

    def iter_subdir_dirinfos(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatDirInfo]:
        """``listing.subdirs_of(diritem, order)``: the directories directly in a
        directory (nothing, for a missing one).

        Args:
            diritem: the directory's path or record (``""``: the root).
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of :class:`BarecatDirInfo`.
        """
        return self.listing.subdirs_of(diritem, order)

    def list_direct_fileinfos(
        self, dirpath: str, order: Order = Order.ANY
    ) -> list[BarecatFileInfo]:
        """``listing.files_in(dirpath, order)`` as a list (empty for a missing directory).

        Args:
            dirpath: the directory's path (``""``: the root).
            order: the order they come in.

        Returns:
            The file records.
        """
        return list(self.listing.files_in(dirpath, order))

    def list_subdir_dirinfos(self, dirpath: str, order: Order = Order.ANY) -> list[BarecatDirInfo]:
        """``listing.subdirs_of(dirpath, order)`` as a list (empty for a missing directory).

        Args:
            dirpath: the directory's path (``""``: the root).
            order: the order they come in.

        Returns:
            The directory records.
        """
        return list(self.listing.subdirs_of(dirpath, order))

    def iterdir_infos(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatEntryInfo]:
        """``listing.entries(diritem, order)``: subdirectories first, then files.

        Args:
            diritem: the directory's path or record (``""``: the root).
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of records.
        Raises (on the first ``next``):
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: it is a file.
        """
        return self.listing.entries(diritem, order)

    def listdir_infos(self, diritem: DirItem, order: Order = Order.ANY) -> list[BarecatEntryInfo]:
        """``listing.entries(diritem, order)`` as a list (a missing directory raises here).

        Args:
            diritem: the directory's path or record (``""``: the root).
            order: the order they come in.

        Returns:
            Subdirectory records, then file records.
        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: it is a file.
        """
        return list(self.listing.entries(diritem, order))

    def iterdir_names(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[str]:
        """An iterator over ``listing.names(diritem, order)``: subdirectories first.

        Args:
            diritem: the directory's path or record (``""``: the root).
            order: the order they come in.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of names.
        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: it is a file.
        """
        return iter(self.listing.names(diritem, order))

    def listdir_names(self, diritem: DirItem, order: Order = Order.ANY) -> list[str]:
        """``listing.names(diritem, order)``: subdirectories first, then files.

        Args:
            diritem: the directory's path or record (``""``: the root).
            order: the order they come in.

        Returns:
            The entries' names.
        Raises:
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: it is a file.
        """
        return self.listing.names(diritem, order)

    # -- trees: listing.walk, walk_names, glob, raw_glob -------------------------------

    def walk_infos(self, rootitem: DirItem, bufsize: int = 32) -> Iterator[query.WalkStep]:
        """``listing.walk(rootitem)``: (directory, its subdirectories, its files) records
        for each directory of the subtree, top-down in path order.

        Args:
            rootitem: the directory to start from (``""``: the root).
            bufsize: ignored.

        Returns:
            An iterator of :class:`~barecat.index.query.WalkStep`.
        Raises (on the first ``next``):
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: it is a file.
        """
        return self.listing.walk(rootitem)

    def walk_names(
        self, rootitem: DirItem, bufsize: int = 32
    ) -> Iterator[tuple[str, list[str], list[str]]]:
        """``listing.walk_names(rootitem)``: ``os.walk``-style names; the root as ``'.'``.

        Args:
            rootitem: the directory to start from (``""``: the root).
            bufsize: ignored.

        Returns:
            An iterator of ``(dirpath, dirnames, filenames)``.
        Raises (on the first ``next``):
            FileNotFoundBarecatError: no such directory.
            NotADirectoryBarecatError: it is a file.
        """
        return self.listing.walk_names(rootitem)

    def glob_paths(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        only_files: bool = False,
    ) -> list[str]:
        """``listing.glob(pattern, recursive, include_hidden, only_files)``: the paths
        ``glob.glob`` would give on the extracted tree, sorted.

        Args:
            pattern: a ``glob.glob``-style pattern relative to the root.
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.
            only_files: match files only.

        Returns:
            The matching paths.
        """
        return self.listing.glob(pattern, recursive, include_hidden, only_files)

    def iterglob_paths(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        bufsize: int | None = None,
        only_files: bool = False,
    ) -> Iterator[str]:
        """The paths :meth:`glob_paths` returns, one by one.

        Args:
            pattern: a ``glob.glob``-style pattern relative to the root.
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.
            bufsize: ignored (0.3.1's batch size).
            only_files: match files only.

        Returns:
            An iterator of paths.
        """
        yield from self.listing.glob(pattern, recursive, include_hidden, only_files)

    def iterglob_infos(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        bufsize: int | None = None,
        only_files: bool = False,
    ) -> Iterator[BarecatEntryInfo]:
        """Like :meth:`iterglob_paths`, with each match's info record.

        Args:
            pattern: a ``glob.glob``-style pattern relative to the root.
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.
            bufsize: ignored (0.3.1's batch size).
            only_files: match files only.

        Returns:
            An iterator of records.
        """
        for path in self.listing.glob(pattern, recursive, include_hidden, only_files):
            yield self.lookup(path)

    def raw_iterglob_paths_multi(
        self,
        patterns: list[str],
        order: Order = Order.ANY,
        only_files: bool = False,
        bufsize: int | None = None,
    ) -> Iterator[str]:
        """``listing.raw_glob(patterns, order, only_files)``: paths matching any pattern
        under SQLite's GLOB, directories first.

        Args:
            patterns: SQLite GLOB patterns over whole paths (``*`` crosses ``/``).
            order: the order they come in.
            only_files: match files only.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of paths.
        """
        return self.listing.raw_glob(patterns, order, only_files)

    def raw_iterglob_paths(
        self,
        pattern: str,
        order: Order = Order.ANY,
        only_files: bool = False,
        bufsize: int | None = None,
    ) -> Iterator[str]:
        """``listing.raw_glob([pattern], order, only_files)``: paths matching under
        SQLite's GLOB, directories first.

        Args:
            pattern: an SQLite GLOB pattern over whole paths (``*`` crosses ``/``).
            order: the order they come in.
            only_files: match files only.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of paths.
        """
        return self.listing.raw_glob([pattern], order, only_files)

    def raw_glob_paths(self, pattern: str, order: Order = Order.ANY) -> list[str]:
        """``listing.raw_glob([pattern], order)`` as a list.

        Args:
            pattern: an SQLite GLOB pattern over whole paths (``*`` crosses ``/``).
            order: the order they come in.

        Returns:
            The matching paths, directories first.
        """
        return list(self.listing.raw_glob([pattern], order))

    def raw_iterglob_infos(
        self, pattern: str, only_files: bool = False, bufsize: int | None = None
    ) -> Iterator[BarecatEntryInfo]:
        """``listing.raw_glob_infos(pattern, only_files)``: records of the entries matching
        under SQLite's GLOB, directories first.

        Args:
            pattern: an SQLite GLOB pattern over whole paths (``*`` crosses ``/``).
            only_files: match files only.
            bufsize: ignored (0.3.1's batch size).

        Returns:
            An iterator of records.
        """
        return self.listing.raw_glob_infos(pattern, only_files)


__all__ = ["Index"]
