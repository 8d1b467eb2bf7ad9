"""Extraction's fast path: the plain files of a whole plain archive written by the
compiled kernel (:func:`barecat.kernels.write_files`), a few thousand rows a call, straight
from the index's rows, with no record made per file.

The kernel writes only the plain case (a path surely in normal form, in a directory the
writer made safe, a file of at most the kernel's buffer (1 MiB) whose bytes match their
CRC32C, created where nothing was, its zero blocks left as holes by
:mod:`barecat.kernels.sparse`'s rule; the other names of a file stored once as hard
links of it) and hands every other row back, untouched (of rows at one place, all
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
from typing import Any

from barecat import kernels
from barecat.archive import Barecat
from barecat.entries import BarecatFileInfo, Order
from barecat.exceptions import BarecatError
from barecat.index.query import file_from_row
from barecat.kernels.python_writes import place
from barecat.shards.reading import COPY_CHUNK
from barecat.shards.sharder import Sharder

_KERNEL_BATCH = 8192
"""Rows a call of the kernel writes (progress is told and an interrupt taken between)."""


def kernel_rows(bc: Barecat) -> kernels.IndexRows | None:
    """Every file's index row, in storage order, where the kernel can write the plain
    files of this archive: a plain archive with local shards, on a system whose file
    names are UTF-8 (the kernel names files with the path's UTF-8 bytes). Else None.

    The rows are read by SQLite inside the core where it can (``kernels.read_rows``: no
    Python object made per row), else through ``sqlite3`` (:class:`ListedRows`): where
    the core cannot reach SQLite, on the pure-Python kernels, and where only this
    process's connection sees the rows (a writer's transaction not committed yet)."""
    local = isinstance(bc.sharder, Sharder)  # (shards in files: descriptors to read)
    if bc.sealed or sys.getfilesystemencoding() != "utf-8" or not local:
        return None
    source = bc.index.listing.file_rows_source(Order.ADDRESS)
    rows = None if source is None else kernels.read_rows(*source)
    return rows if rows is not None else ListedRows(bc.index.listing.file_rows(Order.ADDRESS))


class ListedRows:
    """Rows read through ``sqlite3``, doing what the core's ``IndexRows`` do (see
    ``kernels.python_writes.read_rows``) with :func:`barecat.kernels.write_files` over
    a batch of them at a time."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def odd(self) -> list[tuple[Any, ...]]:
        """The rows whose path is not surely in normal form (the kernel hands those back)."""
        canonical = map(kernels.canonical, map(itemgetter(0), self._rows))
        return list(compress(self._rows, map(not_, canonical)))

    def write(
        self,
        root: int,
        fds: dict[int, int],
        buffer: bytearray,
        limit: int,
        umask: int,
        dirs: dict[str, int],
        euid: int | None,
        on_files: Callable[[int, int], None] | None,
        batch: int,
    ) -> tuple[list[tuple[Any, ...]], int, int]:
        """``write_files`` over every row, ``batch`` at a time: the rows left, and the
        count and bytes of the files written."""
        rows = self._rows
        left: list[tuple[Any, ...]] = []
        files = written = 0
        start = 0
        while start < len(rows):
            end = _batch_end(rows, start, batch)
            back, count, size = kernels.write_files(
                root, fds, rows[start:end], buffer, limit, umask, dirs, euid
            )
            files, written = files + count, written + size
            left.extend(rows[start + k] for k in back)
            if on_files is not None and count:
                on_files(count, size)
            start = end
        return left, files, written


def write_plain_files(
    bc: Barecat,
    root: str,
    dirs: dict[str, int],
    owner: tuple[int, int | None],
    rows: kernels.IndexRows,
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
        rows: every file's row (:func:`kernel_rows`).
        on_files: told the files and bytes written, a batch at a time.

    Returns:
        The records of the rows handed back, for the careful path, which owns every rule
        (links, hard links, what is in the way, failures); the count and bytes of the
        files written.
    """
    fds = _shard_descriptors(bc)
    buffer = bytearray(COPY_CHUNK)  # (the most bytes of neighbouring files read at once)
    limit = len(buffer) + 1  # (a bigger file is streamed by the careful path)
    umask, euid = owner
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        left, files, written = rows.write(
            root_fd, fds, buffer, limit, umask, dirs, euid, on_files, _KERNEL_BATCH
        )
    finally:
        os.close(root_fd)
    return [file_from_row(row) for row in left], files, written


def _batch_end(rows: list[tuple[Any, ...]], start: int, batch: int) -> int:
    """Where the kernel's batch from ``start`` ends: after ``batch`` rows, moved on past
    rows at the place of the last (a file's names go in one batch, where the kernel sees
    them together; a place is a shard and offset that are ints, as for the kernel)."""
    end = min(start + batch, len(rows))
    while end < len(rows) and place(rows[end]) == place(rows[end - 1]) is not None:
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
