"""Files written with their zero blocks left as holes, as ``tar -S`` and ``cp --sparse``
write them, so that a sparse file extracted takes the room it took before.

Owns the rule for what becomes a hole: each block of :data:`HOLE_BLOCK` bytes, aligned
in the file, whose bytes are all zero. Such blocks are skipped (``pwrite`` past them) and
the file's size set at the end (``ftruncate``) when it ends in one; every file system
reads a hole back as zeros, so the file's bytes are exactly the bytes given (one that
cannot make holes writes the zeros itself). Files under :data:`SPARSE_MIN` are written
whole, unlooked at; a bigger one is looked at one byte per block first (a microsecond
for 64 KiB), and written with plain ``write`` calls if it has no zero block. Works on a
descriptor the caller opened on an empty file; imports nothing of barecat.

This is also the reference of the compiled core's ``write_files``, which writes the
files of up to a buffer's size by the same rule (``_compiled.c``'s ``write_data``; the
tests compare the holes both leave).
"""

from __future__ import annotations

import errno
import os
import struct
from itertools import compress
from operator import not_

HOLE_BLOCK = 4096
"""The unit of a hole: a file system block (the size of a page; file systems with bigger
blocks keep the zeros of a hole smaller than theirs as data)."""

SPARSE_MIN = 16 * HOLE_BLOCK
"""The size from which :func:`write_all` looks for holes (64 KiB): a smaller file would
save little, and the look would cost each small file a few per cent of its extraction."""

_ZEROS = bytes(HOLE_BLOCK)
_GROUP = 64
"""Blocks whose first bytes one format of :data:`_HEADS` reads at most (256 KiB)."""
_HEADS = [struct.Struct("=" + f"?{HOLE_BLOCK - 1}x" * n) for n in range(_GROUP + 1)]
"""Per number of consecutive blocks, a format telling whether the first byte of each is
not zero. It reads bools, which Python does not allocate: a few nanoseconds a block."""


def zero_runs(data: memoryview, offset: int = 0) -> list[tuple[int, int]]:
    """The runs of whole zero blocks in ``data``, which is written at ``offset`` in its file.

    Args:
        data: bytes about to be written (format ``B``, contiguous).
        offset: where in the file ``data`` starts (blocks are aligned in the file).

    Returns:
        ``(start, end)`` positions in ``data``, in order, apart from each other, each run
        one or more whole blocks of zeros; empty for data without a zero block.
    """
    first = -offset % HOLE_BLOCK
    runs: list[tuple[int, int]] = []
    while len(data) - first >= HOLE_BLOCK:
        blocks = min((len(data) - first) // HOLE_BLOCK, _GROUP)
        heads = _HEADS[blocks].unpack_from(data, first)
        if not all(heads):  # (a block whose first byte is not zero is no hole)
            for k in compress(range(blocks), map(not_, heads)):
                start = first + k * HOLE_BLOCK
                if data[start : start + HOLE_BLOCK].tobytes() == _ZEROS:
                    if runs and runs[-1][1] == start:
                        runs[-1] = (runs[-1][0], start + HOLE_BLOCK)
                    else:
                        runs.append((start, start + HOLE_BLOCK))
        first += blocks * HOLE_BLOCK
    return runs


def write_all(fd: int, data: memoryview) -> None:
    """Write ``data`` from the start of the empty file ``fd``, its zero blocks as holes.

    Args:
        fd: a descriptor open for writing on an empty regular file, at its start.
        data: the file's bytes.

    Raises:
        OSError: a write failed (a full disk: ``ENOSPC``).
    """
    if len(data) < SPARSE_MIN or not (runs := zero_runs(data)):
        written = 0
        while written < len(data):  # (a short write: rare, at a full disk)
            written += _wrote(os.write(fd, data[written:]))
        return
    writer = SparseWriter(fd)
    writer.write(data, runs)
    writer.finish()


class SparseWriter:
    """One file written in consecutive pieces (a stream), zero blocks left as holes."""

    def __init__(self, fd: int) -> None:
        """Start writing at the beginning of the empty file ``fd``."""
        self.fd = fd
        self.size = 0
        """Bytes written (or left as holes) so far."""
        self.ends_in_hole = False

    def write(self, data: bytes | memoryview, runs: list[tuple[int, int]] | None = None) -> None:
        """Write the next piece of the file (its :func:`zero_runs`, if already known).

        Raises:
            OSError: a write failed.
        """
        view = memoryview(data)
        at = 0
        for start, end in zero_runs(view, self.size) if runs is None else runs:
            self._pwrite(view[at:start], self.size + at)
            at = end
        self._pwrite(view[at:], self.size + at)
        if len(view):
            self.ends_in_hole = at == len(view)
        self.size += len(view)

    def finish(self) -> None:
        """Give the file its size when it ends in a hole (nothing was written there).

        Raises:
            OSError: the size could not be set.
        """
        if self.ends_in_hole:
            os.ftruncate(self.fd, self.size)

    def _pwrite(self, data: memoryview, offset: int) -> None:
        written = 0
        while written < len(data):
            written += _wrote(os.pwrite(self.fd, data[written:], offset + written))


def _wrote(count: int) -> int:
    """What a write wrote; nothing is an error (a write that makes no headway would
    otherwise be retried for ever).

    Raises:
        OSError: nothing was written (``EIO``).
    """
    if count <= 0:
        raise OSError(errno.EIO, "nothing written")
    return count


__all__ = ["HOLE_BLOCK", "SPARSE_MIN", "SparseWriter", "write_all", "zero_runs"]
