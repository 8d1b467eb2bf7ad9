"""A sealed file as a seekable binary stream that decodes only the blocks it is asked for.

``open()`` on a sealed archive returns this: reads and seeks work on the file's own
bytes, each block is authenticated (when encrypted) and decompressed when first touched,
and the block last decoded is kept, so sequential small reads decode each block once.
Knows nothing of shards: the caller passes a ``fetch(offset, size)`` over the stored
bytes and the stored length.
"""

from __future__ import annotations

from collections.abc import Callable

from barecat.sealing.blocks import Sealer, layout_size_hint
from barecat.streams import SeekableReader

Fetch = Callable[[int, int], bytes]


class SealedFileReader(SeekableReader):
    """Read-only, seekable view of one sealed file (see the module doc)."""

    def __init__(self, sealer: Sealer, path: str, fetch: Fetch, stored_size: int) -> None:
        super().__init__()
        self._sealer = sealer
        self._path = path
        self._fetch = fetch
        head = fetch(0, 32)
        need = layout_size_hint(head, path)
        if need > len(head):  # (a table longer than the stored file comes back short)
            head += fetch(len(head), need - len(head))
        self._layout = sealer.layout(head[:need], path, stored_size)
        self._bits = self._layout.block_size.bit_length() - 1
        self._cached: tuple[int, bytes] = (-1, b"")
        self.size = self._layout.logical_size
        self.name = path

    def _block(self, i: int) -> bytes:
        if self._cached[0] != i:
            offset, length, _ = self._layout.blocks[i]
            data = self._sealer.open_block(self._path, self._layout, i, self._fetch(offset, length))
            self._cached = (i, data)
        return self._cached[1]

    def _read_at(self, position: int, n: int) -> bytes:
        parts, end = [], position + n
        while position < end:
            i = position >> self._bits
            block = self._block(i)
            start = position - (i << self._bits)
            part = block[start : start + end - position]
            if not part:  # past the file's end
                break
            parts.append(part)
            position += len(part)
        return b"".join(parts)

    def readall(self) -> bytes:
        if self._pos == 0:
            data = b"".join(self._block(i) for i in range(len(self._layout.blocks)))
        else:
            data = self.read(max(0, self.size - self._pos)) or b""
        self._pos = max(self._pos, self.size)
        return data


__all__ = ["SealedFileReader"]
