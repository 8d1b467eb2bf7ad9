"""An on-disk cache of one remote object's bytes, in fixed-size blocks.

The blocks live at their own offsets in a sparse local file of the object's size; a map
file beside it holds, per block, the CRC32C of the block as received (0: not cached).
Bytes are written before their map entry, and every block is checked against its entry
when read, so a half-written, torn or damaged cache costs a refetch, never wrong bytes.
Any number of threads and processes (DataLoader workers) may share one cache: writes are
positional and idempotent. Imports nothing from barecat but the CRC32C binding.
"""

from __future__ import annotations

import contextlib
import os
import struct

import crc32c as _crc32c

_ENTRY = struct.Struct("<I")


class BlockCache:
    """Blocks of ``size`` bytes' worth of one object version, kept at ``data_path``."""

    def __init__(self, data_path: str, size: int, block_size: int) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.data_path = data_path
        self.size = size
        self.block_size = block_size
        self.num_blocks = -(-size // block_size)
        os.makedirs(os.path.dirname(os.path.abspath(data_path)), exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self._data = os.open(data_path, flags, 0o644)
        self._map = os.open(data_path + ".map", flags, 0o644)
        # Sparse until filled; growing is safe when another process got here first.
        if os.fstat(self._data).st_size < size:
            os.ftruncate(self._data, size)
        if os.fstat(self._map).st_size < self.num_blocks * _ENTRY.size:
            os.ftruncate(self._map, self.num_blocks * _ENTRY.size)

    def close(self) -> None:
        for fd in (self._data, self._map):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._data = self._map = -1

    def blocks_of(self, start: int, end: int) -> range:
        """The blocks that hold bytes ``[start, end)``."""
        if end <= start:
            return range(start // self.block_size, start // self.block_size)
        return range(start // self.block_size, (end - 1) // self.block_size + 1)

    def _entries(self, blocks: range) -> tuple[int, ...]:
        raw = os.pread(self._map, len(blocks) * _ENTRY.size, blocks.start * _ENTRY.size)
        raw = raw.ljust(len(blocks) * _ENTRY.size, b"\0")
        return struct.unpack(f"<{len(blocks)}I", raw)

    def missing(self, blocks: range) -> list[int]:
        """Blocks of ``blocks`` that are not cached (as far as the map says)."""
        if not blocks:
            return []
        return [b for b, e in zip(blocks, self._entries(blocks), strict=True) if e == 0]

    def block_span(self, first: int, last: int) -> tuple[int, int]:
        """Byte range ``[start, end)`` of blocks ``first..last`` (the last may be short)."""
        return first * self.block_size, min((last + 1) * self.block_size, self.size)

    def store(self, first: int, data: bytes) -> None:
        """Cache ``data``, the bytes of consecutive whole blocks starting at ``first``."""
        os.pwrite(self._data, data, first * self.block_size)
        view = memoryview(data)
        crcs = [
            _crc32c.crc32c(view[i : i + self.block_size])
            for i in range(0, len(data), self.block_size)
        ]
        # A block whose CRC32C is 0 cannot be told from a missing one: it stays uncached.
        os.pwrite(self._map, struct.pack(f"<{len(crcs)}I", *crcs), first * _ENTRY.size)

    def read(self, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` if every block they touch is cached and intact; a block
        that fails its check is forgotten (so it is fetched again) and None returned."""
        blocks = self.blocks_of(start, end)
        if not blocks:
            return b""
        entries = self._entries(blocks)
        if 0 in entries:
            return None
        span_start, span_end = self.block_span(blocks.start, blocks.stop - 1)
        data = os.pread(self._data, span_end - span_start, span_start)
        view = memoryview(data)
        for i, expected in enumerate(entries):
            block = view[i * self.block_size : (i + 1) * self.block_size]
            if len(block) == 0 or _crc32c.crc32c(block) != expected:
                os.pwrite(self._map, bytes(_ENTRY.size), (blocks.start + i) * _ENTRY.size)
                return None
        return data[start - span_start : end - span_start]


__all__ = ["BlockCache"]
