"""Positional writes that finish: ``pwritev`` (then ``pwrite``) repeated until every byte
is written (a short write goes on where it stopped), a full disk or quota raised as
``NotEnoughSpaceBarecatError`` naming the archive, and back-to-back buffers grouped
into few ``pwritev`` calls. On descriptors the caller opened and checked (``Sharder``);
decides nothing about where bytes go. Imports ``exceptions`` only.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence

from barecat.exceptions import NotEnoughSpaceBarecatError

Data = bytes | bytearray | memoryview

IOV_MAX = 1024
"""Buffers per ``pwritev`` call (Linux's ``IOV_MAX``)."""
WRITE_CHUNK = 4 << 20
"""Bytes per ``pwritev``: keeps early writeback steady."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
"""The errors of a full disk or quota."""


def disk_full(name: str) -> NotEnoughSpaceBarecatError:
    """The error for a write into ``name`` (the archive) that found the disk full."""
    return NotEnoughSpaceBarecatError(f"Disk full while writing {name}")


def pwritev_all(fd: int, buffers: Sequence[Data], offset: int, name: str) -> None:
    """Write ``buffers`` back to back at ``offset`` of ``fd`` (one buffer: a ``pwrite``),
    in one ``pwritev`` unless it comes back short, then the rest where it stopped.

    Raises:
        NotEnoughSpaceBarecatError: the disk (or quota) is full, naming ``name``.
    """
    try:
        done = os.pwritev(fd, buffers, offset)
        skip = done
        for buf in buffers:  # finish a short write buffer by buffer
            n = len(buf)
            if skip < n:
                view = memoryview(buf)[skip:]
                while view:
                    written = os.pwrite(fd, view, offset + done)
                    view = view[written:]
                    done += written
            skip = max(0, skip - n)
    except OSError as e:
        if e.errno in DISK_FULL:
            raise disk_full(name) from e
        raise


def back_to_back(
    places: Sequence[tuple[int, int]], datas: Sequence[Data]
) -> Iterator[tuple[int, int, int, int, int]]:
    """``(shard, start, end, i, j)``: ``datas[i:j]`` lie back to back at ``start`` of
    ``shard`` up to ``end``, few enough for one ``pwritev`` (at most :data:`IOV_MAX`
    buffers, :data:`WRITE_CHUNK` bytes but for a bigger first one)."""
    i, count = 0, len(datas)
    while i < count:
        shard, start = places[i]
        pos, j = start, i
        while (
            j < count
            and j - i < IOV_MAX
            and places[j] == (shard, pos)
            and (j == i or pos - start < WRITE_CHUNK)
        ):
            pos += len(datas[j])
            j += 1
        yield shard, start, pos, i, j
        i = j


__all__ = [
    "DISK_FULL",
    "IOV_MAX",
    "WRITE_CHUNK",
    "back_to_back",
    "disk_full",
    "pwritev_all",
]
