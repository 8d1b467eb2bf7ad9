"""An archive's SQLite index, composed of parts: :class:`ReadOnlyIndex` and :class:`Index`.

An index is its parts, each a module with one job: ``connection``
(:class:`~barecat.index.transactions.IndexConnection`: the SQLite file, the settled
connection, commit and rollback, bulk modes, close), ``lookups``
(:class:`~barecat.index.reading.IndexLookups`: point lookups, addresses, the lookup table
and, from its base in ``aggregates.py``, the totals), ``listing``
(:class:`~barecat.index.listing.IndexListing`: the queries that list many entries) and,
on a writable :class:`Index` only, ``edits``
(:class:`~barecat.index.tree_edits.IndexEdits`). A :class:`ReadOnlyIndex` has no
``edits``, so that mypy refuses a write through one; ``Index(path, readonly=True)``
(barecat 0.3.1's read-only index) has them, and each refuses at run time. barecat's own
code calls the parts (``index.edits.add_file(...)``). A name on the index itself
(``index.add_file``: the older names and barecat 0.3.1's, those of ``compat.py`` too) is one
line of the table below, forwarded to its part (``forwarding.py``): a new method of a part
that users should reach as ``index.NAME`` gets its line there. Imports ``entries`` and
``barecat.index``'s own modules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError, ReadOnlyBarecatError
from barecat.index import compat, query
from barecat.index.aggregates import IndexAggregates
from barecat.index.compat import Adapted
from barecat.index.forwarding import Forward, to
from barecat.index.listing import FileItem, IndexListing
from barecat.index.reading import IndexLookups
from barecat.index.remote_pages import RemotePages
from barecat.index.transactions import IndexConnection
from barecat.index.tree_edits import IndexEdits

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Index = TypeVar("_Index", bound="ReadOnlyIndex")

_DB, _LOOKUPS, _LISTING = "connection", "lookups", "listing"


def _edit(method: Callable[Concatenate[Any, _P], _R]) -> Forward[Index, Callable[_P, _R]]:
    """A table entry for an edit: typed for a writable :class:`Index` only."""
    return Forward("edits", method.__name__, method)


class ReadOnlyIndex:
    """An archive's SQLite index, read-only: its connection, lookups and listing.

    Args:
        path: the index file.
        shard_size_limit: a writer stores it (an existing archive's) or creates the
            archive with it.
        bufsize: accepted for compatibility (barecat 0.3.1's batch size; queries stream).
        readonly: open with SQLite's read-only mode (only :class:`Index` may be False).
        wal: put a writer's journal in WAL mode.
        readonly_is_immutable: also tell SQLite nobody else changes the file (no locking
            at all: fastest for archives on read-only media).
        threadsafe: one connection per thread (a reader), usable from any thread (a
            writer's).
        lookup_table: see :class:`~barecat.index.reading.IndexLookups`.
        pages: read the index lazily from these remote pages (``path`` is then its URL,
            for messages; see ``remote_pages.py``); read-only.

    Raises:
        FileNotFoundBarecatError: a read-only index's file does not exist.
        BarecatError: the file is not a barecat index, or has objects barecat did not make;
            or ``readonly=False`` for an index without edits.
    """

    editable = False
    """Whether this kind of index has edits (an :class:`Index`): only it opens writable."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        shard_size_limit: int | None = None,
        bufsize: int | None = None,
        readonly: bool = True,
        wal: bool = False,
        readonly_is_immutable: bool = False,
        threadsafe: bool = False,
        lookup_table: bool | None = None,
        pages: RemotePages | None = None,
    ) -> None:
        if not readonly and not self.editable:
            raise BarecatError(f"{path}: a ReadOnlyIndex opens read-only (an Index writes)")
        self.bufsize = bufsize or 1000
        self.connection = IndexConnection(
            path, shard_size_limit, readonly, wal, readonly_is_immutable, threadsafe, pages
        )
        try:
            self.lookups = IndexLookups(self.connection, lookup_table)
        except BaseException:
            self.connection.close()
            raise
        self.listing = IndexListing(self)
        """The listing queries (every file, a directory's entries, walk, glob)."""
        self._add_parts()

    def _add_parts(self) -> None:
        """The parts a kind of index adds to these three (a writable one: its edits)."""

    def close(self) -> None:
        """Commit (a writer), leave the saved lookup table right for what was written,
        and close the database. Errors while committing are swallowed: what was not
        committed is lost.

        Raises:
            ForeignSchemaBarecatError: a schema object barecat did not make appeared
                while the index was open: nothing since the last commit was committed.
        """
        try:
            self.connection.close(self.lookups.refresh_saved_table)
        finally:
            self.lookups.close()

    def __enter__(self: _Index) -> _Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.lookups.num_files

    def __iter__(self) -> Iterator[str]:
        return self.listing.file_paths()

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.lookups.isfile(path)

    # -- the table: each older name, forwarded to its part -----------------------------

    path: Forward[Any, str] = Forward(_DB)
    file: Forward[Any, str] = Forward(_DB)
    readonly: Forward[Any, bool] = Forward(_DB)
    created: Forward[Any, bool] = Forward(_DB)
    sealed: Forward[Any, bool] = Forward(_DB)
    remote: Forward[Any, RemotePages | None] = Forward(_DB)
    schema_version: Forward[Any, tuple[int, int]] = Forward(_DB)
    file_columns: Forward[Any, str] = Forward(_DB)
    rollbacks: Forward[Any, int] = Forward(_DB)
    rolled_back_by: Forward[Any, Exception | None] = Forward(_DB)
    shard_size_limit: Forward[Any, int] = Forward(_DB)
    settled_conn = to(_DB, IndexConnection.settled_conn)
    commit = to(_DB, IndexConnection.commit)
    rollback = to(_DB, IndexConnection.rollback)
    bulk_mode = to(_DB, IndexConnection.bulk_mode)
    no_triggers = to(_DB, IndexConnection.no_triggers)
    no_foreign_keys = to(_DB, IndexConnection.no_foreign_keys)
    attached_database = to(_DB, IndexConnection.attached_database)
    merge_source = to(_DB, IndexConnection.merge_source)
    shard_size_limit_at_open = to(_DB, IndexConnection.shard_size_limit_at_open)
    sealing_config = to(_DB, IndexConnection.sealing_config)
    stored_file_digest = to(_DB, IndexConnection.stored_file_digest)
    file_digest_rows = to(_DB, IndexConnection.file_digest_rows)
    optimize = to(_DB, IndexConnection.optimize)

    lookup_file = to(_LOOKUPS, IndexLookups.lookup_file)
    lookup_dir = to(_LOOKUPS, IndexLookups.lookup_dir)
    lookup = to(_LOOKUPS, IndexLookups.lookup)
    isfile = to(_LOOKUPS, IndexLookups.isfile)
    isdir = to(_LOOKUPS, IndexLookups.isdir)
    exists = to(_LOOKUPS, IndexLookups.exists)
    not_found_error = to(_LOOKUPS, IndexLookups.not_found_error)
    lookup_address = to(_LOOKUPS, IndexLookups.lookup_address)
    lookup_address_in_sqlite = to(_LOOKUPS, IndexLookups.lookup_address_in_sqlite)
    locate_many = to(_LOOKUPS, IndexLookups.locate_many)
    locate_many_in_sqlite = to(_LOOKUPS, IndexLookups.locate_many_in_sqlite)
    build_lookup_table = to(_LOOKUPS, IndexLookups.build_lookup_table)
    trust_lookup_tables_with = to(_LOOKUPS, IndexLookups.trust_lookup_tables_with)
    lookup_table_size: Forward[Any, int | None] = Forward(_LOOKUPS)
    num_files: Forward[Any, int] = Forward(_LOOKUPS)
    num_dirs: Forward[Any, int] = Forward(_LOOKUPS)
    total_size: Forward[Any, int] = Forward(_LOOKUPS)
    num_used_shards: Forward[Any, int] = Forward(_LOOKUPS)
    logical_shard_end = to(_LOOKUPS, IndexAggregates.logical_shard_end)
    used_shards = to(_LOOKUPS, IndexAggregates.used_shards)
    files_ending_beyond = to(_LOOKUPS, IndexAggregates.files_ending_beyond)
    find_overlaps = to(_LOOKUPS, IndexAggregates.find_overlaps)
    has_shared_ranges = to(_LOOKUPS, IndexAggregates.has_shared_ranges)
    get_last_file = to(_LOOKUPS, IndexAggregates.get_last_file)
    find_inconsistencies = to(_LOOKUPS, IndexAggregates.find_inconsistencies)

    add_file = _edit(IndexEdits.add_file)
    add_files_bulk = _edit(IndexEdits.add_files_bulk)
    upsert_dirs_bulk = _edit(IndexEdits.upsert_dirs_bulk)
    add_dir = _edit(IndexEdits.add_dir)
    add = _edit(IndexEdits.add)
    update_file = _edit(IndexEdits.update_file)
    chmod = _edit(IndexEdits.chmod)
    chown = _edit(IndexEdits.chown)
    update_mtime = _edit(IndexEdits.update_mtime)
    remove_file = _edit(IndexEdits.remove_file)
    remove_empty_dir = _edit(IndexEdits.remove_empty_dir)
    remove_recursively = _edit(IndexEdits.remove_recursively)
    rename = _edit(IndexEdits.rename)
    rename_file = _edit(IndexEdits.rename_file)
    rename_dir = _edit(IndexEdits.rename_dir)
    rename_with_new_bytes = _edit(IndexEdits.rename_with_new_bytes)
    enable_sealing = _edit(IndexEdits.enable_sealing)
    update_sealing_config = _edit(IndexEdits.update_sealing_config)
    keep_file_digest = _edit(IndexEdits.keep_file_digest)
    update_dirs = _edit(IndexEdits.update_dirs)
    update_treestats = _edit(IndexEdits.update_treestats)
    file_digest_kept: Forward[Index, bool] = Forward("edits")
    add_files: Forward[Index, Callable[[Iterable[BarecatFileInfo]], None]] = Adapted(
        "edits", "add_file", then=compat.nothing, each=True
    )
    remove_files: Forward[Index, Callable[[Iterable[FileItem]], None]] = Adapted(
        "edits", "remove_file", then=compat.nothing, each=True
    )

    # -- barecat 0.3.1's names that no part has (``compat.py``) ------------------------

    lookup_files: Forward[Any, Callable[[Iterable[str]], list[BarecatFileInfo]]] = Adapted(
        _LOOKUPS, "lookup_file", each=True
    )
    conn = property(compat.conn)
    cursor = property(compat.cursor)
    verify_integrity = compat.verify_integrity
    merge_from_other_barecat = compat.merge_from_other_barecat
    iterglob_infos = compat.iterglob_infos
    raw_iterglob_paths = compat.raw_iterglob_paths
    raw_glob_paths = compat.raw_glob_paths
    iter_all_fileinfos: Forward[Any, compat.Ordered[BarecatFileInfo]] = Adapted(
        _LISTING, "files", 1
    )
    iter_all_dirinfos: Forward[Any, compat.Ordered[BarecatDirInfo]] = Adapted(_LISTING, "dirs", 1)
    iter_all_filepaths: Forward[Any, compat.Ordered[str]] = Adapted(_LISTING, "file_paths", 1)
    iter_all_dirpaths: Forward[Any, compat.Ordered[str]] = Adapted(_LISTING, "dir_paths", 1)
    iter_all_infos: Forward[Any, compat.Ordered[BarecatEntryInfo]] = Adapted(
        _LISTING, "dirs", 1, and_then="files"
    )
    iter_all_paths: Forward[Any, compat.Ordered[str]] = Adapted(
        _LISTING, "dir_paths", 1, and_then="file_paths"
    )
    iter_direct_fileinfos: Forward[Any, compat.InDir[BarecatFileInfo]] = Adapted(
        _LISTING, "files_in", 2
    )
    iter_subdir_dirinfos: Forward[Any, compat.InDir[BarecatDirInfo]] = Adapted(
        _LISTING, "subdirs_of", 2
    )
    iterdir_infos: Forward[Any, compat.InDir[BarecatEntryInfo]] = Adapted(_LISTING, "entries", 2)
    iterdir_names: Forward[Any, compat.InDir[str]] = Adapted(_LISTING, "names", 2, iter)
    list_direct_fileinfos: Forward[Any, compat.ListedInDir[BarecatFileInfo]] = Adapted(
        _LISTING, "files_in", then=list
    )
    list_subdir_dirinfos: Forward[Any, compat.ListedInDir[BarecatDirInfo]] = Adapted(
        _LISTING, "subdirs_of", then=list
    )
    listdir_infos: Forward[Any, compat.ListedInDir[BarecatEntryInfo]] = Adapted(
        _LISTING, "entries", then=list
    )
    listdir_names = to(_LISTING, IndexListing.names)
    walk_infos: Forward[Any, compat.Walked[query.WalkStep]] = Adapted(_LISTING, "walk", 1)
    walk_names: Forward[Any, compat.Walked[tuple[str, list[str], list[str]]]] = Adapted(
        _LISTING, "walk_names", 1
    )
    glob_paths = to(_LISTING, IndexListing.glob)
    iterglob_paths: Forward[Any, compat.Globbed] = Adapted(_LISTING, "glob", 3, iter)
    raw_iterglob_paths_multi: Forward[Any, compat.RawGlobbed[str]] = Adapted(
        _LISTING, "raw_glob", 3
    )
    raw_iterglob_infos: Forward[Any, compat.RawGlobbedInfos] = Adapted(
        _LISTING, "raw_glob_infos", 2
    )


class Index(ReadOnlyIndex):
    """An archive's SQLite index, writable (unless opened with ``readonly=True``, as
    barecat 0.3.1's: then every edit raises :class:`ReadOnlyBarecatError`): a
    :class:`ReadOnlyIndex` with its ``edits``, taking the same arguments (``readonly``
    defaults to True, as 0.3.1's)."""

    editable = True

    def _add_parts(self) -> None:
        self.edits = IndexEdits(self.connection, self.lookups)
        """Every edit (refused when the index is open read-only)."""


def writable(index: ReadOnlyIndex) -> Index:
    """``index`` as a writable :class:`Index`, for code that is handed an archive's index
    and changes it (after the archive's own checks).

    Args:
        index: the index.

    Returns:
        The same index, typed as writable.

    Raises:
        ReadOnlyBarecatError: it is a :class:`ReadOnlyIndex`, or open read-only.
    """
    if isinstance(index, Index) and not index.connection.readonly:
        return index
    raise ReadOnlyBarecatError(f"Archive index {index.connection.path} is open read-only")


__all__ = ["Index", "ReadOnlyIndex", "writable"]
