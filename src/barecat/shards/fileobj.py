"""File objects over one stored file's byte range: seekable readers and writers.

Readers use positional reads, so many can be open on one shard at once and across
threads. The writer owns a region at the logical end of the current shard (the archive
places it there, copying an existing file first, so committed bytes are never changed in
place) and grows it freely; the archive records the result when the writer closes. A
writer of an archive shared by threads writes, truncates and closes under the archive's
lock, so a close from another thread (the archive's) records every write that returned,
and a write after it raises.
A reader whose shard ends inside its window raises (the shard's truncation error), never
returns the file cut short. Imports ``exceptions`` and ``streams`` only; the shard
access it needs is described by ``ShardRanges`` (reading) and ``ShardIO`` (writing too).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Protocol

from barecat.exceptions import BarecatError, BarecatIntegrityError, FileTooLargeBarecatError
from barecat.streams import SeekableReader


class ShardRanges(Protocol):
    """The positional shard reads a file object needs (every ``ShardReader`` has them)."""

    def pread(self, shard: int, offset: int, size: int) -> bytes: ...
    def preadinto(self, shard: int, offset: int, view: memoryview) -> int: ...
    def truncated_error(
        self, shard: int, offset: int, size: int, got: int
    ) -> BarecatIntegrityError: ...


class ShardIO(ShardRanges, Protocol):
    """The positional shard operations a writable file object needs (``Sharder``'s)."""

    shard_size_limit: int

    def write_at(self, shard: int, offset: int, data: bytes | bytearray | memoryview) -> None: ...


class BarecatFileObject(SeekableReader):
    """Common base: a window ``[offset, offset + size)`` of one shard, with a position."""

    def __init__(self, shards: ShardRanges, shard: int, offset: int, size: int) -> None:
        super().__init__()
        self._shards = shards
        self.shard = shard
        self.offset = offset
        self.size = size

    def __len__(self) -> int:
        return self.size

    def _readinto_at(self, position: int, view: memoryview) -> int:
        got = self._shards.preadinto(self.shard, self.offset + position, view)
        if got == 0:
            raise self._cut_short()
        return got

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        remaining = max(0, self.size - self._pos)
        n = remaining if size is None or size < 0 else min(size, remaining)
        if n == 0:
            return b""
        parts = []
        while n > 0:  # (a shard ending early gives short reads, then none)
            data = self._shards.pread(self.shard, self.offset + self._pos, n)
            if not data:
                raise self._cut_short()
            parts.append(data)
            self._pos += len(data)
            n -= len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _cut_short(self) -> BarecatIntegrityError:
        """The error for a shard that ends at ``self._pos``, inside this file."""
        return self._shards.truncated_error(self.shard, self.offset, self.size, self._pos)

    def readall(self) -> bytes:
        return self.read(-1)


class BarecatReadOnlyFileObject(BarecatFileObject):
    """A read-only view of a stored file."""

    def writable(self) -> bool:
        return False


class BarecatReadWriteFileObject(BarecatFileObject):
    """A growable file at the logical end of the write shard; see the module docstring.

    Opened on a stored file (``relocate`` given), it reads the stored bytes in place
    until the first write or truncate, which first calls ``relocate`` to copy them to
    the write end and returns their new ``(shard, offset)``; closed before any change,
    it leaves the archive as it was (:attr:`in_place` stays True). A file that outgrows
    its shard calls ``move_to_new_shard`` with its ``(shard, offset, size)``, which copies
    it to the start of a fresh shard and returns that place. ``lock`` (the archive's,
    when threads share it) is held by each write, truncate and close.
    """

    def __init__(
        self,
        shards: ShardIO,
        shard: int,
        offset: int,
        size: int,
        on_close_callback: Callable[[BarecatReadWriteFileObject], None],
        mode: str = "r+b",
        relocate: Callable[[], tuple[int, int]] | None = None,
        *,
        move_to_new_shard: Callable[[tuple[int, int, int]], tuple[int, int]],
        lock: contextlib.AbstractContextManager[object] | None = None,
    ) -> None:
        super().__init__(shards, shard, offset, size)
        self._lock = contextlib.nullcontext() if lock is None else lock
        self._io = shards
        self._move_to_new_shard = move_to_new_shard
        self.mode = mode
        self._on_close = on_close_callback
        self._relocate = relocate
        self._append = "a" in mode
        self._can_read = "r" in mode or "+" in mode
        if self._append:
            self._pos = size

    @property
    def in_place(self) -> bool:
        """True while this is a stored file read where it is, nothing changed."""
        return self._relocate is not None

    def _before_change(self) -> None:
        if self._relocate is not None:
            self.shard, self.offset = self._relocate()
            self._relocate = None

    def readable(self) -> bool:
        return self._can_read

    def writable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if not self._can_read:
            raise io.UnsupportedOperation("File not open for reading")
        return super().readinto(buffer)

    def read(self, size: int | None = -1) -> bytes:
        if not self._can_read:
            raise io.UnsupportedOperation("File not open for reading")
        return super().read(size)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        with self._lock:
            return self._write(data)

    def _write(self, data: bytes | bytearray | memoryview) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        view = memoryview(data).cast("B")
        self._before_change()
        if self._append:
            self._pos = self.size
        end = self._pos + len(view)
        self._ensure_capacity(end)
        if self._pos > self.size:  # writing past the end leaves a hole of zeros, as on disk
            self._io.write_at(self.shard, self.offset + self.size, bytes(self._pos - self.size))
        self._io.write_at(self.shard, self.offset + self._pos, view)
        self._pos = end
        self.size = max(self.size, end)
        return len(view)

    def _ensure_capacity(self, end: int) -> None:
        limit = self._io.shard_size_limit
        if self.offset + end <= limit:
            return
        if end > limit:
            raise FileTooLargeBarecatError(
                f"File would grow past the shard size limit of {limit} bytes"
            )
        self.shard, self.offset = self._move_to_new_shard((self.shard, self.offset, self.size))

    def truncate(self, size: int | None = None) -> int:
        with self._lock:
            return self._truncate(size)

    def _truncate(self, size: int | None) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        size = self._pos if size is None else size
        if size < 0:
            raise BarecatError("Negative truncate size")
        self._before_change()
        if size > self.size:
            self._ensure_capacity(size)
            self._io.write_at(self.shard, self.offset + self.size, bytes(size - self.size))
        self.size = size
        return size

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                try:
                    self._on_close(self)
                finally:
                    super().close()
