"""Early writeback of freshly written shard bytes (Linux ``sync_file_range``).

Durability needs the shard bytes on disk before the index commit that references them,
and an ``fsync`` of everything at commit time stalls the writer for as long as the disk
needs. Asking the kernel to start writing each few megabytes as soon as they are written
(without waiting) overlaps that work with ingest, so the fsync before a commit finds
almost nothing left. Where the call does not exist this is a no-op. Standard library only.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable

_SYNC_FILE_RANGE_WRITE = 2
KICK_BYTES = 4 << 20  # start writeback once this much is pending on a descriptor


def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The symbols already loaded into this process, libc's among them: no search for
        # the library (ctypes.util.find_library runs ldconfig, several milliseconds).
        func = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


_sync_file_range = _load_sync_file_range()


class EarlyWriteback:
    """Tracks bytes written per descriptor and starts their writeback in large steps.

    Thread-safe: a parallel ingest writes from several threads at once.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[int, int]] = {}  # fd -> (start, end)
        self._lock = threading.Lock()

    def wrote(self, fd: int, offset: int, size: int) -> None:
        if _sync_file_range is None or size <= 0:
            return
        with self._lock:
            start, end = self._pending.get(fd, (offset, offset))
            start, end = min(start, offset), max(end, offset + size)
            if end - start < KICK_BYTES:
                self._pending[fd] = (start, end)
                return
            self._pending.pop(fd, None)
        _sync_file_range(fd, start, end - start, _SYNC_FILE_RANGE_WRITE)

    def forget(self) -> None:
        """Drop the bookkeeping (after an fsync made everything durable anyway)."""
        with self._lock:
            self._pending.clear()
