"""The viewer's listings: a directory's entries in name, size or date order, narrowed by a
filter on their names, one page of files at a time.

The plain listing (by name, ascending, no filter) pages straight from the archive's index
(``files_page``), so a directory of a million files opens at once. Any other order or a
filter reads the directory's file records once and keeps the sorted result for the next
pages (the ``KEPT`` most recent listings), so scrolling and stepping through a sorted
directory costs one read of its records, not one per page.
"""

from __future__ import annotations

import fnmatch
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from barecat.archive.readable import ReadableArchive
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo

SORTS = ("name", "size", "date")
KEPT = 2
"""Sorted or filtered listings kept (each holds one directory's file records)."""
GLOB_CHARACTERS = "*?["
E = TypeVar("E", bound=BarecatEntryInfo)


@dataclass(frozen=True, slots=True)
class ListingQuery:
    """Which listing: a directory, an order and a filter on names.

    Attributes:
        path: the directory (``""``: the root).
        sort: ``name``, ``size`` or ``date`` (the modification time).
        reverse: largest, newest or last name first.
        pattern: a part of a name (any case), or a glob when it holds ``*``, ``?`` or
            ``[`` (matched against the whole name, any case); empty: every name.
    """

    path: str
    sort: str = "name"
    reverse: bool = False
    pattern: str = ""

    @property
    def is_plain(self) -> bool:
        """The index's own order: by name, ascending, unfiltered."""
        return self.sort == "name" and not self.reverse and not self.pattern


def name_filter(pattern: str) -> Callable[[str], bool]:
    """Whether a name passes ``pattern`` (see :class:`ListingQuery`).

    Args:
        pattern: a substring or a glob; empty passes every name.

    Returns:
        A predicate on names.
    """
    wanted = pattern.casefold()
    if not wanted:
        return lambda name: True
    if any(c in wanted for c in GLOB_CHARACTERS):
        matches = re.compile(fnmatch.translate(wanted)).match
        return lambda name: matches(name.casefold()) is not None
    return lambda name: wanted in name.casefold()


def _size(info: BarecatEntryInfo) -> int:
    if isinstance(info, BarecatDirInfo):
        return info.size_tree or 0
    assert isinstance(info, BarecatFileInfo)
    return info.size or 0


def ordered(entries: Sequence[E], query: ListingQuery) -> list[E]:
    """``entries`` that pass the query's filter, in its order (ties by name).

    Args:
        entries: file or directory records.
        query: the order and filter.

    Returns:
        The records kept, sorted.
    """
    keep = name_filter(query.pattern)
    kept = [e for e in entries if keep(e.name)]
    kept.sort(key=lambda e: e.name)  # the tie-break, kept by the stable sort below
    if query.sort == "size":
        kept.sort(key=_size)
    elif query.sort == "date":
        kept.sort(key=lambda e: e.mtime_ns or 0)
    if query.reverse:
        kept.reverse()
    return kept


class Listings:
    """Pages of one archive's listings (used from the event loop's thread only)."""

    def __init__(self, bc: ReadableArchive) -> None:
        self.bc = bc
        self._kept: OrderedDict[ListingQuery, list[BarecatFileInfo]] = OrderedDict()

    def dirs(self, query: ListingQuery) -> list[BarecatDirInfo]:
        """The directory's subdirectories that pass the filter, in the query's order."""
        return ordered(list(self.bc.subdirs_of(query.path)), query)

    def files(
        self, query: ListingQuery, offset: int, limit: int
    ) -> tuple[list[BarecatFileInfo], int]:
        """One page of the directory's files and how many pass the filter in all.

        Args:
            query: the listing.
            offset: files of the listing to skip.
            limit: the most files to return.

        Returns:
            The page, and the listing's length.

        Raises:
            FileNotFoundBarecatError: no directory at the query's path.
        """
        if query.is_plain:
            total = self.bc.lookup_dir(query.path).num_files or 0
            return self.bc.files_page(query.path, offset, limit), total
        listing = self._listing(query)
        return listing[offset : offset + limit], len(listing)

    def position(self, query: ListingQuery, path: str, hint: int | None = None) -> int | None:
        """Where the file ``path`` is in the listing (None: the filter leaves it out).

        Args:
            query: the listing of the file's directory.
            path: the file's path.
            hint: where the caller believes it is; checked with a one-file page before
                the whole listing is read.

        Returns:
            The file's index in the listing, or None.
        """
        if hint is not None and hint >= 0:
            page, _ = self.files(query, hint, 1)
            if page and page[0].path == path:
                return hint
        if query.is_plain:
            names = sorted(f.path for f in self.bc.files_in(query.path))
        else:
            names = [f.path for f in self._listing(query)]
        try:
            return names.index(path)
        except ValueError:
            return None

    def _listing(self, query: ListingQuery) -> list[BarecatFileInfo]:
        found = self._kept.pop(query, None)
        if found is None:
            self.bc.lookup_dir(query.path)  # 404 for a missing directory
            found = ordered(list(self.bc.files_in(query.path)), query)
        self._kept[query] = found
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return found


__all__ = ["SORTS", "ListingQuery", "Listings", "name_filter", "ordered"]
