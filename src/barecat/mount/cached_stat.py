"""A file's attributes from the kernel's caches only, never asking the filesystem.

The read-ahead worker (``barecat.mount.readahead``) needs the kernel's node id of each
file it stores, and gets it as the file's inode number through the mount. A path walk
holds the mount while it runs, and ``fusermount3 -u`` fails with EBUSY while any does. A
plain ``stat`` of a name the kernel dropped (memory pressure shrinks its name cache, and
``--plain-listings`` never gives it the names from a listing) sends a
LOOKUP to the server, so the walk holds the mount for a whole round trip through this
process: an unmount right after a reader finished failed whenever it came then. Here the
walk is ``openat2`` with ``RESOLVE_CACHED`` (it fails with EAGAIN instead of asking
anyone) and the attributes are ``statx`` with ``AT_STATX_DONT_SYNC`` (the ones the
kernel holds), so the mount is held for a few microseconds of the kernel's own work and
never waits for a request. Still, ``umount`` fails with EBUSY while any walk is under
way, however short, so the read-ahead worker walks only while a reader holds the mount
anyway (see ``barecat.mount.readahead``). The three calls (open, statx, close) are made
holding the interpreter lock: none of them can wait for anything, and a thread switch
between them (another thread serving a request) would hold the walk's descriptor for
milliseconds, and with it the serving thread that waits for the walk.

Linux 5.12 or newer and glibc's ``statx``; elsewhere :func:`cached_stat` raises
``OSError`` (ENOSYS), and read-ahead turns itself off. Imports only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass

SYS_OPENAT2 = 437
"""``openat2``'s number, the same on every architecture (a system call after 5.1)."""
AT_FDCWD = -100
O_PATH = 0o10000000
RESOLVE_NO_MAGICLINKS, RESOLVE_CACHED = 0x02, 0x20
AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH, AT_STATX_DONT_SYNC = 0x100, 0x1000, 0x4000
STATX_BASIC_STATS = 0x7FF


class _OpenHow(ctypes.Structure):
    """The kernel's ``struct open_how``."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Statx(ctypes.Structure):
    """The kernel's ``struct statx`` up to the device numbers (and room for the rest)."""

    _fields_ = [
        ("mask", ctypes.c_uint32),
        ("blksize", ctypes.c_uint32),
        ("attributes", ctypes.c_uint64),
        ("nlink", ctypes.c_uint32),
        ("uid", ctypes.c_uint32),
        ("gid", ctypes.c_uint32),
        ("mode", ctypes.c_uint16),
        ("spare0", ctypes.c_uint16),
        ("ino", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("blocks", ctypes.c_uint64),
        ("attributes_mask", ctypes.c_uint64),
        ("times", ctypes.c_uint8 * 64),
        ("rdev_major", ctypes.c_uint32),
        ("rdev_minor", ctypes.c_uint32),
        ("dev_major", ctypes.c_uint32),
        ("dev_minor", ctypes.c_uint32),
        ("rest", ctypes.c_uint8 * 112),
    ]


@dataclass(frozen=True, slots=True)
class CachedStat:
    """What the kernel holds of a file: type and permission bits, inode number (a FUSE
    mount's node id unless it uses ``use_ino``), size and device."""

    mode: int
    ino: int
    size: int
    dev: int


_libc = ctypes.PyDLL(None, use_errno=True)  # (calls keep the interpreter lock: see above)
_libc.syscall.restype = ctypes.c_long
_statx = getattr(_libc, "statx", None)
_close = _libc.close
_HOW = _OpenHow(O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, 0, RESOLVE_CACHED | RESOLVE_NO_MAGICLINKS)
_OPEN_ARGS = (ctypes.c_long(SYS_OPENAT2), ctypes.c_int(AT_FDCWD))
_HOW_ARGS = (ctypes.byref(_HOW), ctypes.c_size_t(ctypes.sizeof(_HOW)))
"""The arguments of every walk but its path, made once (read only by the calls: a walk
costs 5 µs instead of 10)."""
_STATX_FLAGS = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC


def cached_stat(path: str) -> CachedStat | None:
    """The attributes the kernel holds of ``path`` (not following a final symbolic link),
    or None where it would have to ask the filesystem for a name on the way.

    Args:
        path: An absolute path, or one relative to the working directory.

    Returns:
        The cached attributes, or None if a name on the way is not in the kernel's cache
        (or its entry there expired).

    Raises:
        OSError: The path does not resolve (ENOENT, ENOTDIR, ...), or this system cannot
            walk from the cache only (ENOSYS before Linux 5.6 or without glibc's
            ``statx``; EINVAL before 5.12).
    """
    if _statx is None:
        raise OSError(errno.ENOSYS, "statx is not available")
    encoded = os.fsencode(path)
    buf = _Statx()
    # from here to the close, nothing but the three calls (the descriptor holds the mount)
    fd = _libc.syscall(*_OPEN_ARGS, encoded, *_HOW_ARGS)
    if fd < 0:
        code = ctypes.get_errno()
        if code == errno.EAGAIN:
            return None
        raise OSError(code, os.strerror(code), path)
    failed = _statx(fd, b"", _STATX_FLAGS, STATX_BASIC_STATS, ctypes.byref(buf)) != 0
    code = ctypes.get_errno() if failed else 0
    _close(fd)
    if failed:
        raise OSError(code, os.strerror(code), path)
    return CachedStat(buf.mode, buf.ino, buf.size, os.makedev(buf.dev_major, buf.dev_minor))


__all__ = ["CachedStat", "cached_stat"]
