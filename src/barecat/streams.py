"""The position bookkeeping shared by barecat's read-only, seekable streams of a known
size (a stored file in a shard, a sealed file, a file on a server): ``seek``, ``tell``,
and ``readinto`` over the one thing each stream does its own way, ``_read_at`` (or
``_readinto_at``, to read in place). Imports nothing from barecat.
"""

from __future__ import annotations

import io
import os


class SeekableReader(io.RawIOBase):
    """A raw binary stream of ``size`` bytes with a position; subclasses say how to read
    ``n`` bytes at a position (``_read_at``), or into a buffer (``_readinto_at``)."""

    size: int

    def __init__(self) -> None:
        super().__init__()
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if whence == os.SEEK_SET:
            target = offset
        elif whence == os.SEEK_CUR:
            target = self._pos + offset
        elif whence == os.SEEK_END:
            target = self.size + offset
        else:
            raise ValueError(f"Invalid whence: {whence}")
        if target < 0:
            raise OSError(22, "Negative seek position")
        self._pos = target
        return target

    def _read_at(self, position: int, n: int) -> bytes:
        raise NotImplementedError

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed:
            raise ValueError("I/O operation on closed file")
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self.size - self._pos))
        if n == 0:
            return 0
        got = self._readinto_at(self._pos, view[:n])
        self._pos += got
        return got

    def _readinto_at(self, position: int, view: memoryview) -> int:
        """Read into ``view`` (no longer than what is left) from ``position``; returns
        how many bytes it holds now."""
        data = self._read_at(position, len(view))
        view[: len(data)] = data
        return len(data)


__all__ = ["SeekableReader"]
