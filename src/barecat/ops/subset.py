"""A new archive from part of an existing one: files chosen by a glob or by include/exclude
rules, copied in address order.

Choosing is separate from copying so a front end can show the count first and so merges
can filter their inputs the same way (:func:`select_entries`). What to take is the
:class:`~barecat.selection.FileSelection` every reader of chosen files takes
(:func:`selected_entries`; :func:`select_entries` makes one of its ``pattern``): its glob
is answered by the index's glob (``recursive``, hidden names included, ``dir/`` meaning
``dir/**``), its SQL condition by the index's plan (``IndexListing.planned``, as the
engines' readers choose files); include/exclude rules are a
:class:`barecat.glob.PathFilter` (the first rule that covers a path decides).
Directories come along when chosen themselves (empty ones too, by a glob) or when a
chosen file needs them, with their metadata. The copying, and its crash ordering, is
``copy_files``'s. Imports ``index``, ``shards``, ``glob``, ``selection`` and ``paths``.
"""

from __future__ import annotations

from dataclasses import dataclass

from barecat.glob import PathFilter, directory_pattern
from barecat.index import Index, ReadOnlyIndex
from barecat.ops.copy_files import (
    CheckSource,
    CopyStats,
    ProgressCallback,
    SealLike,
    copy_files_from,
)
from barecat.paths import ancestors
from barecat.selection import FileSelection
from barecat.shards import Sharder
from barecat.shards.reading import ShardReader


@dataclass(slots=True)
class Selection:
    """Source paths to take: files, and directories (which bring their metadata)."""

    files: list[str]
    dirs: list[str]


def select_entries(
    index: ReadOnlyIndex, pattern: str | None = None, path_filter: PathFilter | None = None
) -> Selection | None:
    """The entries a glob ``pattern`` or a ``path_filter`` chooses; None: everything.

    Raises:
        ValueError: both a pattern and rules given.
    """
    chosen = None if pattern is None else FileSelection(directory_pattern(pattern))
    return selected_entries(index, chosen, path_filter)


def selected_entries(
    index: ReadOnlyIndex,
    selection: FileSelection | None,
    path_filter: PathFilter | None = None,
) -> Selection | None:
    """The entries ``selection`` or a ``path_filter`` chooses, with the directories they
    need; None: everything.

    Args:
        index: the source archive's index.
        selection: a glob ``pattern`` (recursive, hidden names included) choosing files
            and directories, and an SQL ``where`` (with ``params``) that files must also
            meet (their columns are ``IndexListing.planned``'s); its columns and
            grouping are no subset's. None: no choice by it.
        path_filter: include/exclude rules, instead of ``selection``.

    Returns:
        The files and directories; None when everything is chosen.

    Raises:
        ValueError: both a selection and rules given.
        sqlite3.Error: ``where`` is not a valid condition.
    """
    if selection is not None and path_filter is not None:
        raise ValueError("A glob pattern cannot be combined with include/exclude rules")
    if selection is not None and selection.where:
        files = [row.path for row in index.listing.planned(selection, by_path=True)]
        chosen_dirs: set[str] = set()
    elif selection is not None and selection.pattern is not None:
        pattern = selection.pattern
        matches = set(index.listing.glob_entries(pattern, recursive=True, include_hidden=True))
        files = index.listing.glob_entries(pattern, True, True, only_files=True)
        chosen_dirs = matches.difference(files)
    elif path_filter is not None and not path_filter.selects_everything:
        selects = path_filter.selector()
        files = [p for p in index.listing.file_paths() if selects(p, False)]
        chosen_dirs = {d for d in index.listing.dir_paths() if d and selects(d, True)}
    else:
        return None
    dirs = {""} | chosen_dirs
    for path in (*files, *chosen_dirs):
        for a in ancestors(path):
            if a in dirs:
                break
            dirs.add(a)
    return Selection(files, sorted(dirs))


def subset_archive(
    src_index: ReadOnlyIndex,
    src_sharder: ShardReader,
    index: Index,
    sharder: Sharder,
    selection: Selection | None,
    on_progress: ProgressCallback | None = None,
    *,
    skip_existing: bool = False,
    prefix: str = "",
    link: bool = False,
    seal_like: SealLike | None = None,
    check_source: CheckSource | None = None,
) -> CopyStats:
    """Copy the selected entries (None: all) of the source into the target archive (the
    keyword options are ``copy_files_from``'s)."""
    return copy_files_from(
        index,
        sharder,
        src_index,
        src_sharder,
        files=None if selection is None else selection.files,
        dirs=None if selection is None else selection.dirs,
        skip_existing=skip_existing,
        prefix=prefix,
        link=link,
        on_progress=on_progress,
        seal_like=seal_like,
        check_source=check_source,
    )
