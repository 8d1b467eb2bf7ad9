"""Extraction's fast path: the plain files of a whole plain archive written by the
compiled kernel (:func:`barecat.kernels.write_files`), a few thousand rows a call, straight
from the index's rows, with no record made per file.

The kernel writes only the plain case (a path surely in normal form, in a directory the
writer made safe, a file under :data:`~barecat.transfer.sparse.SPARSE_MIN` whose bytes
match their CRC32C, created where nothing was; the other names of a file stored once as
hard links of it) and hands every other row back, untouched (of rows at one place, all
or none); this module turns those into records for
:mod:`barecat.transfer.extraction`'s careful path, which owns every rule (links, hard
links that differ, holes, what is in the way, failures and how they are named). The same
rows give the same tree either way.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from itertools import compress
from operator import itemgetter, not_

from barecat import kernels
from barecat.archive import Barecat
from barecat.entries import BarecatFileInfo, Order
from barecat.exceptions import BarecatError
from barecat.index.query import file_from_row
from barecat.shards.reading import COPY_CHUNK
from barecat.shards.sharder import Sharder
from barecat.transfer.sparse import SPARSE_MIN

_KERNEL_BATCH = 8192
"""Rows a call of the kernel writes (progress is told and an interrupt taken between)."""


def kernel_rows(bc: Barecat) -> list[tuple[object, ...]] | None:
    """Every file's index row, in storage order, where the kernel can write the plain
    files of this archive: a plain archive with local shards, on a system whose file
    names are UTF-8 (the kernel names files with the path's UTF-8 bytes). Else None."""
    local = isinstance(bc.sharder, Sharder)  # (shards in files: descriptors to read)
    if bc.sealed or sys.getfilesystemencoding() != "utf-8" or not local:
        return None
    return bc.index.listing.file_rows(Order.ADDRESS)


def odd_paths(rows: list[tuple[object, ...]]) -> list[int]:
    """The rows whose path is not surely in normal form (the kernel hands those back)."""
    return list(
        compress(range(len(rows)), map(not_, map(kernels.canonical, map(itemgetter(0), rows))))
    )


def write_plain_files(
    bc: Barecat,
    root: str,
    dirs: dict[str, int],
    owner: tuple[int, int | None],
    rows: list[tuple[object, ...]],
    on_files: Callable[[int, int], None] | None,
) -> tuple[list[BarecatFileInfo], int, int]:
    """Write the plain files among ``rows`` (every file's, in storage order) below ``root``
    with the kernel (``barecat.kernels.write_files``).

    Args:
        bc: the archive (plain, its shards local).
        root: the target directory.
        dirs: the directories made safe to write in (archive paths), each with the group
            a file created there gets.
        owner: the process's umask, and its effective uid where owners are restored
            (else None).
        rows: every file's row (``bc.index.listing.file_rows(Order.ADDRESS)``).
        on_files: told the files and bytes written, a batch at a time.

    Returns:
        The records of the rows handed back, for the careful path, which owns every rule
        (links, hard links, what is in the way, failures); the count and bytes of the
        files written.
    """
    fds = _shard_descriptors(bc)
    buffer = bytearray(COPY_CHUNK)  # (the most bytes of neighbouring files read at once)
    umask, euid = owner
    left: list[int] = []
    files = written = 0
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        start = 0
        while start < len(rows):
            end = _batch_end(rows, start)
            back, count, size = kernels.write_files(
                root_fd, fds, rows[start:end], buffer, SPARSE_MIN, umask, dirs, euid
            )
            files, written = files + count, written + size
            left.extend(start + k for k in back)
            if on_files is not None and count:
                on_files(count, size)
            start = end
    finally:
        os.close(root_fd)
    return [file_from_row(rows[k]) for k in left], files, written


def _batch_end(rows: list[tuple[object, ...]], start: int) -> int:
    """Where the kernel's batch from ``start`` ends: after :data:`_KERNEL_BATCH` rows, moved
    on past rows at the place of the last (a file's names go in one batch, where the
    kernel sees them together)."""
    end = min(start + _KERNEL_BATCH, len(rows))
    while end < len(rows) and rows[end][1:3] == rows[end - 1][1:3]:
        end += 1
    return end


def _shard_descriptors(bc: Barecat) -> dict[int, int]:
    """An open descriptor of each shard there is (a missing one's rows are handed back, and
    the careful path names it)."""
    sharder = bc.sharder
    assert isinstance(sharder, Sharder)  # (kernel_rows gave rows only for local shards)
    fds: dict[int, int] = {}
    for shard in range(sharder.num_shards):
        with contextlib.suppress(BarecatError, OSError):
            fds[shard] = sharder.descriptor(shard)
    return fds
