"""New outputs that appear whole or not at all: an archive (or a one-file output) is built
under a hidden name beside its target, named after the building process, and put in place
only when complete (an archive by ``layout.replace_archive``, which replaces an old one
so that a kill leaves the old archive or the new one, whole); a failed, interrupted or
killed build leaves the target as it was, and the next build of the same target removes
what a dead one left. Every transfer that makes a new archive from others builds it here
(convert, merge, wrap, ColdCrate import, parallel create).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from barecat.archive import Barecat
from barecat.archive.writer_lock import WriterLock
from barecat.exceptions import FileExistsBarecatError
from barecat.layout import (
    archive_exists,
    remove_abandoned_builds,
    remove_archive,
    replace_archive,
    staging_path,
)

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
    did not :meth:`~barecat.Barecat.abandon` it holding nothing: then ``target`` stays);
    an archive there is replaced whole (``layout.replace_archive``), and no other writer
    may open it meanwhile.

    ``archive_options`` are more ``Barecat()`` options for it, such as ``compression``
    and ``passphrase`` for a sealed archive.

    Raises:
        FileExistsBarecatError: something is at ``target`` (without ``overwrite``).
        ArchiveLockedBarecatError: a writer holds the archive at ``target``.
    """
    target = os.fspath(target)
    if not overwrite and (archive_exists(target) or os.path.lexists(target)):
        raise FileExistsBarecatError(target, "Output")
    staging = staging_path(target)
    remove_abandoned_builds(target)
    # an archive replaced is held as its writers hold it, so none writes into it meanwhile
    old = WriterLock(target) if archive_exists(target) else None
    try:
        remove_archive(staging)
        try:
            with Barecat(
                staging,
                readonly=False,
                shard_size_limit=shard_size_limit,
                **(archive_options or {}),
            ) as bc:
                yield bc
        except BaseException:
            remove_archive(staging)
            raise
        if archive_exists(staging):  # (abandoned holding nothing: the target stays as it was)
            replace_archive(staging, target)  # the old archive (or file) goes as the new comes
    finally:
        if old is not None:
            old.release()


@contextlib.contextmanager
def building_file(target: str, overwrite: bool = True) -> Iterator[str]:
    """A temporary path to write a one-file output to; it becomes ``target`` only if the
    block completes (and is removed if it does not)."""
    if not overwrite and os.path.lexists(target):
        raise FileExistsBarecatError(target, "Output")
    staging = staging_path(target)
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
