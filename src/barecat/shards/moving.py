"""Moving stored files inside one archive's shards, computing each file's CRC32C.

Maintenance operations (defrag, reshard) move many files at once: the sources may be
scattered, the destination is one back-to-back run, and every file's CRC32C is computed
from the source bytes on the way, so the caller can check each move against the index.
Adjacent sources are merged into spans. A large span is checksummed straight from a
read-only memory map of the source (no copy into Python) and copied inside the kernel
(``Sharder.copy_within``); small spans are read into one reusable buffer, checksummed
there and written with few large ``pwrite`` calls. Imports ``exceptions`` and the
:class:`Sharder`.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

from barecat.checksum import crc32c
from barecat.exceptions import BarecatIntegrityError
from barecat.shards.sharder import Sharder

COPY_BUFFER_BYTES = 8 << 20
BIG_SPAN = 64 << 10  # spans this large are mapped and copied in the kernel (measured best)
_MAP_PIECE = 8 << 20  # checksum a mapping in pieces of this size

Source = tuple[int, int, int]
"""A stored file's bytes: (shard, offset, size)."""


def _spans(sources: Sequence[Source]) -> list[tuple[int, int, int]]:
    """Adjacent sources merged into (shard, offset, size) runs, each read as one."""
    spans: list[tuple[int, int, int]] = []
    for shard, offset, size in sources:
        if not size:
            continue
        if spans and spans[-1][0] == shard and spans[-1][1] + spans[-1][2] == offset:
            spans[-1] = (shard, spans[-1][1], spans[-1][2] + size)
        else:
            spans.append((shard, offset, size))
    return spans


def _read_exactly(sharder: Sharder, shard: int, offset: int, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sharder.preadinto(shard, offset + got, view[got:])
        if n == 0:
            raise BarecatIntegrityError(
                f"Shard {sharder.get_shard_path(shard)} is truncated at offset {offset + got}: "
                "cannot move a file whose bytes are missing"
            )
        got += n


class _Checksums:
    """Per-file CRC32C over a byte stream that arrives in arbitrary pieces."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.values = [0] * len(sizes)
        self._file = 0
        self._done = 0  # bytes of the current file seen so far

    def feed(self, piece: memoryview) -> None:
        pos = 0
        while pos < len(piece):
            while self.sizes[self._file] == self._done:  # finished (or empty) files
                self._file += 1
                self._done = 0
            i = self._file
            take = min(len(piece) - pos, self.sizes[i] - self._done)
            self.values[i] = crc32c(piece[pos : pos + take], value=self.values[i])
            self._done += take
            pos += take


def _checksum_mapped(sharder: Sharder, span: tuple[int, int, int], sums: _Checksums) -> None:
    """Feed a span's bytes to ``sums`` from a read-only mapping of its shard."""
    shard, offset, size = span
    if sharder.physical_shard_end(shard) < offset + size:  # a mapping past EOF faults
        raise BarecatIntegrityError(
            f"Shard {sharder.get_shard_path(shard)} is truncated: needed {size} bytes at "
            f"offset {offset}; cannot move a file whose bytes are missing"
        )
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    mapping = mmap.mmap(
        sharder.descriptor(shard), offset + size - start, prot=mmap.PROT_READ, offset=start
    )
    view = memoryview(mapping)
    try:
        for pos in range(offset - start, offset - start + size, _MAP_PIECE):
            sums.feed(view[pos : min(pos + _MAP_PIECE, offset - start + size)])
    finally:
        view.release()
        mapping.close()


def copy_files(
    sharder: Sharder,
    sources: Sequence[Source],
    dst_shard: int,
    dst_offset: int,
    buffer: bytearray | None = None,
) -> list[int]:
    """Copy files to lie back to back from ``(dst_shard, dst_offset)``; their CRC32C each.

    The destination range must not overlap any source: the caller guarantees it, and
    that is what keeps a crash mid-copy harmless. Nothing is synced: call
    ``Sharder.sync`` before an index commit refers to the copies. ``buffer`` (reused
    across calls when given) bounds the memory used for small spans.
    """
    if not buffer:
        total = sum(size for _, _, size in sources)
        buffer = bytearray(min(max(total, 1), COPY_BUFFER_BYTES))
    view = memoryview(buffer)
    sums = _Checksums([size for _, _, size in sources])
    fill = written = 0  # bytes waiting in the buffer; bytes already at the destination
    for span in _spans(sources):
        shard, offset, size = span
        if size >= BIG_SPAN:
            if fill:
                sharder.write_at(dst_shard, dst_offset + written, view[:fill])
                written, fill = written + fill, 0
            _checksum_mapped(sharder, span, sums)
            sharder.copy_within(span, dst_shard, dst_offset + written)
            written += size
            continue
        done = 0
        while done < size:
            if fill == len(view):
                sharder.write_at(dst_shard, dst_offset + written, view[:fill])
                written, fill = written + fill, 0
            n = min(size - done, len(view) - fill)
            piece = view[fill : fill + n]
            _read_exactly(sharder, shard, offset + done, piece)
            sums.feed(piece)
            fill += n
            done += n
    if fill:
        sharder.write_at(dst_shard, dst_offset + written, view[:fill])
    return sums.values
