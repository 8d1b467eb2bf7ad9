"""An on-disk cache of one remote object's bytes, fetched in fixed-size blocks.

The bytes live at their own offsets in a sparse local file of the object's size; a map
file beside it holds, per 4 KiB page, the CRC32C of the page as received (0: not
cached). Bytes are written before their map entries, and every page is checked against
its entry when read, so a half-written, torn or damaged cache costs a refetch, never
wrong bytes; checking by page (not by fetched block) keeps a cached read to about the
bytes asked for. Any number of threads and processes (DataLoader workers) may share one
cache: writes are positional and idempotent. Imports nothing from barecat but the
CRC32C binding.
"""

from __future__ import annotations

import contextlib
import os
import struct

from barecat.checksum import crc32c

PAGE = 4096
"""The unit that is checked: a read touches at most two pages it does not need."""
_ENTRY = struct.Struct("<I")


class BlockCache:
    """Blocks of one object version (``size`` bytes), kept at ``data_path``."""

    def __init__(self, data_path: str, size: int, block_size: int) -> None:
        if block_size <= 0 or block_size % PAGE:
            raise ValueError(f"block_size must be a positive multiple of {PAGE}")
        self.data_path = data_path
        self.size = size
        self.block_size = block_size
        pages = -(-size // PAGE)
        os.makedirs(os.path.dirname(os.path.abspath(data_path)), exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self._data = os.open(data_path, flags, 0o644)
        self._map = os.open(data_path + ".map", flags, 0o644)
        # Sparse until filled; growing is safe when another process got here first.
        if os.fstat(self._data).st_size < size:
            os.ftruncate(self._data, size)
        if os.fstat(self._map).st_size < pages * _ENTRY.size:
            os.ftruncate(self._map, pages * _ENTRY.size)

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

    def block_span(self, first: int, last: int) -> tuple[int, int]:
        """Byte range ``[start, end)`` of blocks ``first..last`` (the last may be short)."""
        return first * self.block_size, min((last + 1) * self.block_size, self.size)

    def store(self, first: int, data: bytes) -> None:
        """Cache ``data``, the bytes of consecutive whole blocks starting at ``first``."""
        start = first * self.block_size
        os.pwrite(self._data, data, start)
        view = memoryview(data)
        crcs = [crc32c(view[i : i + PAGE]) for i in range(0, len(data), PAGE)]
        # A page whose CRC32C is 0 cannot be told from a missing one: it stays uncached.
        os.pwrite(self._map, struct.pack(f"<{len(crcs)}I", *crcs), start // PAGE * _ENTRY.size)

    def read(self, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` if every page they touch is cached and intact; a page
        that fails its check is forgotten (so it is fetched again) and None returned."""
        if end <= start:
            return b""
        first, count = start // PAGE, (end - 1) // PAGE - start // PAGE + 1
        raw = os.pread(self._map, count * _ENTRY.size, first * _ENTRY.size)
        entries = struct.unpack(f"<{count}I", raw.ljust(count * _ENTRY.size, b"\0"))
        if 0 in entries:
            return None
        span_start = first * PAGE
        data = os.pread(self._data, min((first + count) * PAGE, self.size) - span_start, span_start)
        view = memoryview(data)
        for i, expected in enumerate(entries):
            page = view[i * PAGE : (i + 1) * PAGE]
            if len(page) == 0 or crc32c(page) != expected:
                os.pwrite(self._map, bytes(_ENTRY.size), (first + i) * _ENTRY.size)
                return None
        return data[start - span_start : end - span_start]


__all__ = ["PAGE", "BlockCache"]
