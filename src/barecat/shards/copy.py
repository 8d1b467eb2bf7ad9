"""Fast copies of byte ranges between open shard files.

``copy_range`` moves bytes from one descriptor to another inside the kernel with
``os.copy_file_range`` (no trip through user space; a reflink on filesystems that can),
and falls back to ``pread``/``pwrite`` through one buffer where the kernel cannot (other
filesystems, old kernels, non-Linux). Callers learn about every written piece through a
callback, so early writeback can follow the copy. Imports only ``exceptions``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from barecat.exceptions import BarecatIntegrityError, NotEnoughSpaceBarecatError

CHUNK = 8 << 20
_FALLBACK_ERRNOS = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}


def _disk_full(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT)


def _copy_in_kernel(
    src_fd: int, src_offset: int, dst_fd: int, dst_offset: int, size: int,
    on_written: Callable[[int, int], None],
) -> int:  # fmt: skip
    """Copy as much as the kernel will; returns how many bytes were copied."""
    done = 0
    copy = getattr(os, "copy_file_range", None)
    if copy is None:
        return 0
    while done < size:
        try:
            n = copy(src_fd, dst_fd, min(CHUNK, size - done), src_offset + done, dst_offset + done)
        except OSError as e:
            if _disk_full(e):
                raise NotEnoughSpaceBarecatError("Disk full while copying shard bytes") from e
            if e.errno in _FALLBACK_ERRNOS:
                return done
            raise
        if n == 0:  # the source ended early
            raise BarecatIntegrityError(
                f"Source shard is truncated: needed {size} bytes at offset {src_offset}"
            )
        on_written(dst_offset + done, n)
        done += n
    return done


def _copy_through_buffer(
    src_fd: int, src_offset: int, dst_fd: int, dst_offset: int, size: int,
    on_written: Callable[[int, int], None],
) -> None:  # fmt: skip
    buffer = memoryview(bytearray(min(CHUNK, max(size, 1))))
    done = 0
    while done < size:
        n = os.preadv(src_fd, [buffer[: min(len(buffer), size - done)]], src_offset + done)
        if n == 0:
            raise BarecatIntegrityError(
                f"Source shard is truncated: needed {size} bytes at offset {src_offset}"
            )
        view = buffer[:n]
        at = dst_offset + done
        while view:
            try:
                w = os.pwrite(dst_fd, view, at)
            except OSError as e:
                if _disk_full(e):
                    raise NotEnoughSpaceBarecatError("Disk full while copying shard bytes") from e
                raise
            on_written(at, w)
            view, at = view[w:], at + w
        done += n


def copy_range(
    src_fd: int,
    src_offset: int,
    dst_fd: int,
    dst_offset: int,
    size: int,
    on_written: Callable[[int, int], None] = lambda at, n: None,
) -> None:
    """Copy ``size`` bytes from ``src_fd`` at ``src_offset`` to ``dst_fd`` at ``dst_offset``.

    In the kernel where possible, else through a buffer; ``on_written(offset, n)`` is
    told about each piece written. Nothing is synced.
    """
    done = _copy_in_kernel(src_fd, src_offset, dst_fd, dst_offset, size, on_written)
    if done < size:
        _copy_through_buffer(
            src_fd, src_offset + done, dst_fd, dst_offset + done, size - done, on_written
        )
