"""Merging several archives into one: by copying their bytes, or by linking their shards.

Inputs are archive paths, taken in order, each opened read-only here; the first archive
to have a path keeps it. A later duplicate raises ``FileExistsBarecatError`` naming the
path before anything of that input is written, unless ``ignore_duplicates`` (then it is
skipped and counted). Directories are merged: one named by several inputs keeps the
metadata it got first, unknown fields filled in by later ones. ``symlink`` mode copies no
bytes: each input's shards become symlinks in the output under new numbers, and the
output's own appends go to a real shard after them (see ``WriteSession.skip_shards_from``),
so the inputs are never written through.

Crash safety, per input: conflicts are checked first; then the bytes are appended past
the output's logical end (or the links created); then ``Sharder.sync`` (or a directory
fsync) makes them durable; only then does one index transaction add the input's rows and
commit. A SIGKILL at any moment leaves a valid output that holds each input either
completely or not at all, and everything it held before (see ``copy_files``). Imports
``index``, ``shards``, ``layout``, ``glob``, ``paths`` and its sibling ops; never the
facade.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from barecat.exceptions import BarecatError
from barecat.glob import PathFilter
from barecat.index import Index
from barecat.layout import archive_exists, archive_not_found, base_path, index_path, is_sqlite_file
from barecat.ops.copy_files import CheckSource, CopyStats, ProgressCallback, SealLike
from barecat.ops.subset import select_entries, subset_archive
from barecat.paths import join, normalize
from barecat.shards import Sharder

SUBDIR_SUFFIXES = (
    *(".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip"),
    ".barecat",
)


@dataclass(slots=True)
class MergeResult:
    """Totals over all inputs, and each input's own numbers."""

    total: CopyStats = field(default_factory=CopyStats)
    per_input: list[tuple[str, CopyStats]] = field(default_factory=list)


def merge_archives(
    index: Index,
    sharder: Sharder,
    sources: Sequence[str],
    *,
    ignore_duplicates: bool = False,
    symlink: bool = False,
    prefix: str = "",
    as_subdirs: bool = False,
    pattern: str | None = None,
    path_filter: PathFilter | None = None,
    on_progress: ProgressCallback | None = None,
    on_input: Callable[[str, int], None] | None = None,
    seal_like: SealLike | None = None,
    check_source: CheckSource | None = None,
) -> MergeResult:
    """Add every input archive's files to the output (``index``, ``sharder``).

    ``prefix`` puts everything under a directory; ``as_subdirs`` puts each input under
    its own name (extension removed; after ``prefix``). ``pattern`` or ``path_filter``
    takes only some files of each input. ``on_input(path, num_files)`` is called before
    each input is merged. Stops at the first failing input; the ones before it stay.
    ``seal_like`` and ``check_source`` are ``copy_files_from``'s.
    """
    prefix = normalize(prefix)
    result = MergeResult()
    for source in sources:
        src_index, src_sharder = open_source(source)
        try:
            if on_input is not None:
                on_input(source, src_index.lookups.num_files)
            selection = select_entries(src_index, pattern, path_filter)
            stats = subset_archive(
                src_index,
                src_sharder,
                index,
                sharder,
                selection,
                skip_existing=ignore_duplicates,
                prefix=join(prefix, subdir_name(source)) if as_subdirs else prefix,
                link=symlink,
                on_progress=on_progress,
                seal_like=seal_like,
                check_source=check_source,
            )
        finally:
            src_index.close()
            src_sharder.close()
        result.total.add(stats)
        result.per_input.append((source, stats))
    return result


def check_source(path: str) -> None:
    """Raise unless ``path`` looks like an input this merge can read (checked before the
    output is created)."""
    tar_like = path.lower().endswith(SUBDIR_SUFFIXES[:-1]) and os.path.isfile(path)
    if tar_like and not is_sqlite_file(path):
        raise BarecatError(
            f"{path}: a tar or zip file, which this function cannot read; convert it first "
            "(barecat.archive2barecat), as the barecat merge command does"
        )
    if not archive_exists(base_path(path)):
        raise archive_not_found(path)


def open_source(path: str) -> tuple[Index, Sharder]:
    """A barecat input, read-only."""
    check_source(path)
    base = base_path(path)
    src_index = Index(index_path(base), readonly=True, lookup_table=False)
    try:
        return src_index, Sharder(base, readonly=True)
    except BaseException:
        src_index.close()
        raise


def subdir_name(path: str) -> str:
    """The directory an input goes to with ``as_subdirs``: its file name minus the
    archive extension (``train.barecat`` -> ``train``)."""
    name = os.path.basename(base_path(path).rstrip("/"))
    lower = name.lower()
    for suffix in SUBDIR_SUFFIXES:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
