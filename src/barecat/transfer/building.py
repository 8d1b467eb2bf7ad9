"""New outputs that appear whole or not at all: an archive (or a one-file output) is built
under a hidden name beside its target, named after the building process, and renamed into
place only when complete; a failed, interrupted or killed build leaves no output at the
target, and the next build of the same target removes what a dead one left. Every
transfer that makes a new archive from others builds it here (convert, merge, wrap,
ColdCrate import, parallel create).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from barecat.archive import Barecat
from barecat.exceptions import FileExistsBarecatError
from barecat.layout import abandoned_entries, archive_exists, move_archive, remove_archive

ArchiveOptions = dict[str, Any]
"""Options for ``Barecat()`` when an output archive is created (compression, passphrase)."""


@contextlib.contextmanager
def building_archive(
    target: str,
    overwrite: bool = False,
    shard_size_limit: int | str | None = None,
    archive_options: ArchiveOptions | None = None,
) -> Iterator[Barecat]:
    """A writable archive that appears at ``target`` only if the block completes (and
    did not :meth:`~barecat.Barecat.abandon` it holding nothing: then ``target`` stays).

    ``archive_options`` are more ``Barecat()`` options for it, such as ``compression``
    and ``passphrase`` for a sealed archive."""
    target = os.fspath(target)
    if not overwrite and (archive_exists(target) or os.path.lexists(target)):
        raise FileExistsBarecatError(target, "Output")
    staging = _staging_path(target)
    _remove_abandoned_stagings(*os.path.split(os.path.abspath(target)))
    remove_archive(staging)
    try:
        with Barecat(
            staging, readonly=False, shard_size_limit=shard_size_limit, **(archive_options or {})
        ) as bc:
            yield bc
    except BaseException:
        remove_archive(staging)
        raise
    if not archive_exists(staging):
        return  # abandoned holding nothing (``Barecat.abandon``): the target stays as it was
    remove_archive(target)  # the old archive (or file), or shards a cut-short rename left
    move_archive(staging, target)


def _staging_path(target: str) -> str:
    """Where an output is built before it is renamed to ``target``: hidden, beside it
    (so the rename stays on one filesystem), and named after this process."""
    folder, name = os.path.split(os.path.abspath(target))
    return os.path.join(folder, f".{name}.partial-{os.getpid()}")


def _remove_abandoned_stagings(folder: str, name: str) -> None:
    """Delete what killed builds of ``name`` left (their process is gone): the staged
    archive, its shards and journal, and the part-archives of a parallel create."""
    for entries in abandoned_entries(folder, f".{name}.partial-").values():
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, entry))


@contextlib.contextmanager
def building_file(target: str, overwrite: bool = True) -> Iterator[str]:
    """A temporary path to write a one-file output to; it becomes ``target`` only if the
    block completes (and is removed if it does not)."""
    if not overwrite and os.path.lexists(target):
        raise FileExistsBarecatError(target, "Output")
    staging = _staging_path(target)
    with contextlib.suppress(FileNotFoundError):
        os.remove(staging)
    try:
        yield staging
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(staging)
        raise
    os.replace(staging, target)


__all__ = ["ArchiveOptions", "building_archive", "building_file"]
