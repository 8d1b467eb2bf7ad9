"""Merges from paths: tar and zip inputs converted on the way, the output opened or built.

What ``barecat merge`` and barecat 0.3.1's module-level :func:`merge` and
:func:`merge_symlink` share. The merging itself is ``barecat.ops.merge``'s (each input
committed whole, conflicts checked before anything is written). A new or replaced output
is built under a hidden temporary name and renamed into place when complete
(``building_archive``); an existing output that is not replaced is added to in place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence

from barecat.archive import Barecat
from barecat.glob import PathFilter
from barecat.layout import archive_exists, is_sqlite_file
from barecat.ops.merge import MergeResult
from barecat.transfer.building import ArchiveOptions, building_archive
from barecat.transfer.convert.conversion import archive2barecat
from barecat.transfer.convert.formats import format_of_name

OnSkipped = Callable[[str, str, str], None]
"""Called with (input, member, reason) for a tar/zip member that could not be stored."""


def is_tar_or_zip(path: str) -> bool:
    """True if ``path`` is named like a tar or zip file and is not a barecat index."""
    return format_of_name(path) is not None and not is_sqlite_file(path)


@contextlib.contextmanager
def barecat_inputs(
    inputs: Sequence[str], beside: str, on_skipped: OnSkipped | None = None
) -> Iterator[list[str]]:
    """The inputs, tar and zip ones converted to temporary archives in a hidden folder
    beside ``beside`` (under their own file names, so ``as_subdirs`` names them the
    same), removed afterwards."""
    if not any(is_tar_or_zip(p) for p in inputs):
        yield list(inputs)
        return
    folder = tempfile.mkdtemp(prefix=".merge-inputs-", dir=os.path.dirname(os.path.abspath(beside)))
    try:
        converted = []
        for i, path in enumerate(inputs):
            if is_tar_or_zip(path):
                target = os.path.join(folder, str(i), os.path.basename(path))
                os.makedirs(os.path.dirname(target))
                result = archive2barecat(path, target)
                for name, reason in result.skipped:
                    if on_skipped is not None:
                        on_skipped(path, name, reason)
                path = target
            converted.append(path)
        yield converted
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def merge_output(
    output: str,
    replace: bool,
    shard_size_limit: int | str | None = None,
    archive_options: ArchiveOptions | None = None,
) -> contextlib.AbstractContextManager[Barecat]:
    """The output archive, for writing: an existing one is added to in place unless
    ``replace``; otherwise it is built under a temporary name and appears at ``output``
    (replacing the old one) only when the block completes."""
    if archive_exists(output) and not replace:
        return Barecat(
            output, readonly=False, shard_size_limit=shard_size_limit, **(archive_options or {})
        )
    return building_archive(output, replace, shard_size_limit, archive_options)


def merge(
    source_paths: Sequence[str],
    target_path: str,
    shard_size_limit: int | str | None = None,
    overwrite: bool = False,
    ignore_duplicates: bool = False,
    as_subdirs: bool = False,
    prefix: str | None = None,
    pattern: str | None = None,
    filter_rules: Sequence[tuple[str, str]] | None = None,
) -> MergeResult:
    """Merge archives (barecat, tar or zip) into ``target_path``, copying their bytes
    (barecat 0.3.1's function). An existing target is added to unless ``overwrite``.

    Args:
        source_paths: the inputs, in order; the first to have a path keeps it.
        target_path: the output archive.
        shard_size_limit: the output's shard size limit (bytes, or ``'1G'``).
        overwrite: replace an existing target (built aside, renamed when complete).
        ignore_duplicates: skip a file whose path is already in the output.
        as_subdirs: put each input in a directory named after it (minus its extension).
        prefix: put everything under this directory.
        pattern: only files matching this glob.
        filter_rules: ``('+'|'-', pattern)`` rules, the first that matches decides.

    Returns:
        What was merged, in total and per input.

    Raises:
        FileExistsBarecatError: a duplicate path (without ``ignore_duplicates``); the
            inputs before the one that has it stay merged.
        MergeConflictBarecatError: a file where the output has a directory, or the reverse.
    """
    path_filter = PathFilter.from_rules(filter_rules) if filter_rules else None
    with (
        barecat_inputs(source_paths, target_path) as inputs,
        merge_output(target_path, overwrite, shard_size_limit) as out,
    ):
        return out.merge(
            inputs,
            ignore_duplicates=ignore_duplicates,
            prefix=prefix or "",
            as_subdirs=as_subdirs,
            pattern=pattern,
            path_filter=path_filter,
        )


def merge_symlink(
    source_paths: Sequence[str],
    target_path: str,
    overwrite: bool = False,
    ignore_duplicates: bool = False,
    as_subdirs: bool = False,
    prefix: str | None = None,
    pattern: str | None = None,
    filter_rules: Sequence[tuple[str, str]] | None = None,
) -> MergeResult:
    """Merge barecat archives into ``target_path`` without copying: the target's shards
    are symlinks to the inputs' (barecat 0.3.1's function). The inputs must stay in place
    and unchanged; later writes to the target go to shards of its own.

    Args:
        source_paths, target_path, overwrite, ignore_duplicates, as_subdirs, prefix: as
            for :func:`merge`.
        pattern, filter_rules: not supported (a link takes a whole shard); must be None.

    Returns:
        What was merged, in total and per input.

    Raises:
        ValueError: ``pattern`` or ``filter_rules`` given.
        BarecatError: a tar or zip input (it has no shards to link).
    """
    if pattern or filter_rules:
        raise ValueError("pattern/filter_rules are not supported with symlink merges")
    with merge_output(target_path, overwrite) as out:
        return out.merge(
            source_paths,
            ignore_duplicates=ignore_duplicates,
            symlink=True,
            prefix=prefix or "",
            as_subdirs=as_subdirs,
        )
