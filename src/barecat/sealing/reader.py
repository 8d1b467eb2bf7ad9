"""A sealed file as a seekable binary stream that decodes only the blocks it is asked for.

``open()`` on a sealed archive returns this: reads and seeks work on the file's own
bytes, each block is authenticated (when encrypted) and decompressed when first touched,
and the block last decoded is kept, so sequential small reads decode each block once.
Knows nothing of shards: the caller passes a ``fetch(offset, size)`` over the stored
bytes.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from barecat.sealing.blocks import Sealer, layout_size_hint, read_layout

Fetch = Callable[[int, int], bytes]


class SealedFileReader(io.RawIOBase):
    """Read-only, seekable view of one sealed file (see the module doc)."""

    def __init__(self, sealer: Sealer, path: str, fetch: Fetch) -> None:
        super().__init__()
        self._sealer = sealer
        self._path = path
        self._fetch = fetch
        head = fetch(0, 32)
        need = layout_size_hint(head)
        if need > len(head):
            head += fetch(len(head), need - len(head))
        self._layout = read_layout(head[:need], path)
        self._bits = self._layout.block_size.bit_length() - 1
        self._pos = 0
        self._cached: tuple[int, bytes] = (-1, b"")
        self.name = path

    @property
    def size(self) -> int:
        return self._layout.logical_size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"Negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def _block(self, i: int) -> bytes:
        if self._cached[0] != i:
            offset, length, _ = self._layout.blocks[i]
            data = self._sealer.open_block(self._path, self._layout, i, self._fetch(offset, length))
            self._cached = (i, data)
        return self._cached[1]

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self.size:
            i = self._pos >> self._bits
            block = self._block(i)
            start = self._pos - (i << self._bits)
            n = min(len(view) - done, len(block) - start)
            view[done : done + n] = block[start : start + n]
            done += n
            self._pos += n
        return done

    def readall(self) -> bytes:
        if self._pos == 0:
            data = b"".join(self._block(i) for i in range(len(self._layout.blocks)))
        else:
            data = self.read(max(0, self.size - self._pos)) or b""
        self._pos = max(self._pos, self.size)
        return data


__all__ = ["SealedFileReader"]
