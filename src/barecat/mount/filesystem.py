"""An archive as a FUSE filesystem: the libfuse operations over the public Barecat API.

Read-only mounts are fast by construction: attributes and directory listings come from
the index (a directory's listing fetches every child's record in one query and keeps
them, so the ``getattr`` calls that follow ``readdir`` are dictionary hits), the kernel
keeps pages and attributes (the archive cannot change under a read-only mount), and reads
run on several threads. A file read whole is CRC32C-checked: small files at open,
bigger ones as they are read in order, the last read failing with EIO on a mismatch.
Sealed archives authenticate every block they read.

Read-write mounts (``writable=True``) map create, write, truncate, rename, mkdir, rmdir,
unlink, chmod, chown and utimens onto the archive. A file opened for writing is collected
in a temporary spool and stored when closed (``release``), as one new version: so a
reader never sees half a file, and ``barecat verify`` passes after any session. Errors
become the errno the archive's exception carries (ENOENT, EISDIR, ENOTDIR, ENOTEMPTY,
EEXIST, EROFS, ENOSPC; EIO for damaged bytes). Imports the archive layer only.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar, cast

import crc32c as _crc32c
import mfusepy

from barecat.archive import Barecat
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError, BarecatIntegrityError, FileNotFoundBarecatError

VERIFY_AT_OPEN = 4 << 20
"""Files up to this size are read and checked whole when opened (then served from memory)."""
REORDER_BYTES = 16 << 20
"""Out-of-order reads a handle keeps while checking a big file's CRC32C in order."""
SPOOL_IN_MEMORY = 8 << 20
"""A file being written stays in memory up to this size, then spills to a temporary file."""

T = TypeVar("T")


def _errno_of(e: BaseException) -> int:
    if isinstance(e, BarecatIntegrityError):
        return errno.EIO
    if isinstance(e, OSError) and e.errno:
        return int(e.errno)
    if isinstance(e, KeyError):
        return errno.ENOENT
    return errno.EIO


def reported(method: Callable[..., T]) -> Callable[..., T]:
    """Turn what an operation raises into the errno FUSE passes to the caller."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except mfusepy.FuseOSError:
            raise
        except (BarecatError, OSError, KeyError) as e:
            raise mfusepy.FuseOSError(_errno_of(e)) from e

    return call


def _path(fuse_path: str) -> str:
    return fuse_path.strip("/")


@dataclass
class _Reading:
    """An open file being read: its bytes once checked, or a stream checked as it goes."""

    info: BarecatFileInfo
    data: bytes | None = None
    stream: BinaryIO | None = None
    crc: int = 0
    checked_up_to: int = 0
    ahead: dict[int, bytes] = field(default_factory=dict)
    """Reads past ``checked_up_to`` (the kernel's read-ahead comes out of order), kept
    until the gap before them is read."""
    damaged: bool = False
    """The whole-file check failed: every later read of this handle fails too (the
    kernel retries a failed read-ahead page with a read of its own)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Writing:
    """An open file being written: the whole new content, stored at release."""

    path: str
    spool: Any
    existing: BarecatFileInfo | None
    mode: int
    owner: tuple[int, int]
    """uid and gid of the process that created the file (for a new file)."""
    dirty: bool = False


class ArchiveFilesystem(mfusepy.Operations):  # type: ignore[misc]
    """The libfuse operations of one mounted archive (see the module doc).

    ``open_archive`` is called in ``init``, once the filesystem is up, so the archive is
    opened in the process and threads that serve it.
    """

    use_ns = True

    def __init__(self, open_archive: Callable[[], Barecat], writable: bool = False) -> None:
        self._open_archive = open_archive
        self.writable = writable
        self.bc: Barecat | None = None
        self._attrs: dict[str, dict[str, int]] = {}
        self._handles: dict[int, _Reading | _Writing] = {}
        self._next_handle = 1
        self._lock = threading.RLock()
        self._uid, self._gid = os.getuid(), os.getgid()

    # -- lifecycle --------------------------------------------------------------------------

    def init(self, path: str) -> None:
        self.bc = self._open_archive()

    def destroy(self, path: str) -> None:
        """After the unmount: store what is still open and close the archive (commit).

        libfuse turns SIGINT and SIGTERM into an unmount while it serves, and puts back
        the default handlers before calling this; a second signal now would kill the
        process halfway through the commit, so they wait until the process ends.
        """
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        if self.bc is not None:
            for fh in list(self._handles):
                self._finish(fh)
            self.bc.close()
            self.bc = None

    @property
    def archive(self) -> Barecat:
        if self.bc is None:
            raise mfusepy.FuseOSError(errno.EIO)
        return self.bc

    # -- attributes and listings ----------------------------------------------------------

    def _stat(self, info: BarecatEntryInfo) -> dict[str, int]:
        mtime = info.mtime_ns or 0
        attrs = {
            "st_uid": self._uid if info.uid is None else info.uid,
            "st_gid": self._gid if info.gid is None else info.gid,
            "st_mtime": mtime,
            "st_ctime": mtime,
            "st_atime": mtime,
        }
        if isinstance(info, BarecatDirInfo):
            mode = info.mode if info.mode is not None else 0o755
            attrs.update(
                st_mode=stat.S_IFDIR | stat.S_IMODE(mode),
                st_nlink=2 + (info.num_subdirs or 0),
                st_size=4096,
            )
        else:
            assert isinstance(info, BarecatFileInfo)
            mode = info.mode if info.mode is not None else 0o100644
            kind = stat.S_IFMT(mode) or stat.S_IFREG
            attrs.update(
                st_mode=kind | stat.S_IMODE(mode),
                st_nlink=1,
                st_size=info.size or 0,
                st_blocks=-(-info.stored_size // 512),
            )
        return attrs

    @reported
    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        inner = _path(path)
        pending = self._pending_write(inner)
        if pending is not None:
            return pending
        found = self._attrs.get(inner)
        if found is None:
            found = self._stat(self.archive.index.lookup(inner))
            self._attrs[inner] = found
        return found

    def _pending_write(self, inner: str) -> dict[str, int] | None:
        """A file open for writing is seen at its new size, before it is stored."""
        if not self.writable:
            return None
        for handle in list(self._handles.values()):
            if isinstance(handle, _Writing) and handle.path == inner:
                size = handle.spool.seek(0, os.SEEK_END)
                now = time.time_ns()
                return {
                    "st_mode": stat.S_IFREG | stat.S_IMODE(handle.mode),
                    "st_nlink": 1,
                    "st_size": size,
                    "st_blocks": -(-size // 512),
                    "st_uid": self._uid,
                    "st_gid": self._gid,
                    "st_mtime": now,
                    "st_ctime": now,
                    "st_atime": now,
                }
        return None

    @reported
    def readdir(self, path: str, fh: int) -> Iterator[str | tuple[str, dict[str, int], int]]:
        inner = _path(path)
        entries = self.archive.index.listdir_infos(inner)
        yield "."
        yield ".."
        prefix = f"{inner}/" if inner else ""
        for info in entries:
            attrs = self._stat(info)
            self._attrs[prefix + info.name] = attrs  # the getattr calls that follow
            yield info.name, {"st_mode": attrs["st_mode"]}, 0

    @reported
    def readlink(self, path: str) -> str:
        return os.fsdecode(self.archive.read(_path(path)))

    @reported
    def statfs(self, path: str) -> dict[str, int]:
        bc = self.archive
        used = bc.total_physical_size_stat
        try:
            free = os.statvfs(os.path.dirname(os.path.abspath(bc.path)) or ".")
            avail = free.f_bavail * free.f_frsize if self.writable else 0
        except OSError:
            avail = 0
        block = 4096
        return {
            "f_bsize": block,
            "f_frsize": block,
            "f_blocks": (used + avail) // block,
            "f_bfree": avail // block,
            "f_bavail": avail // block,
            "f_files": bc.num_files + bc.num_dirs,
            "f_ffree": 0,
            "f_namemax": 255,
        }

    # -- reading ----------------------------------------------------------------------------

    def _new_handle(self, handle: _Reading | _Writing) -> int:
        with self._lock:
            fh = self._next_handle
            self._next_handle += 1
            self._handles[fh] = handle
        return fh

    @reported
    def open(self, path: str, flags: int) -> int:
        inner = _path(path)
        if flags & (os.O_WRONLY | os.O_RDWR):
            if not self.writable:
                raise mfusepy.FuseOSError(errno.EROFS)
            return self._open_for_writing(inner, flags)
        info = self.archive.index.lookup_file(inner)
        reading = _Reading(info)
        if (info.size or 0) <= VERIFY_AT_OPEN:
            reading.data = self.archive.read(info)  # checked whole
        else:
            reading.stream = cast(BinaryIO, self.archive.open(info, "rb"))
        return self._new_handle(reading)

    @reported
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        handle = self._handles.get(fh)
        if isinstance(handle, _Writing):
            handle.spool.seek(offset)
            return bytes(handle.spool.read(size))
        if handle is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        if handle.data is not None:
            return handle.data[offset : offset + size]
        assert handle.stream is not None
        with handle.lock:
            handle.stream.seek(offset)
            data = handle.stream.read(size)
            self._check_in_order(handle, offset, data)
        return data

    def _check_in_order(self, handle: _Reading, offset: int, data: bytes) -> None:
        """A plain file read from start to end is checked against its CRC32C: the read
        that completes it fails with EIO if the bytes do not match. Reads may arrive out
        of order (read-ahead on several threads); up to ``REORDER_BYTES`` of them wait for
        the gap before them, beyond that (random access) the handle stops checking.
        (Sealed files are authenticated block by block as they are read.)"""
        info = handle.info
        if handle.damaged:
            raise BarecatIntegrityError(f"{info.path}: CRC32C mismatch")
        if offset < handle.checked_up_to or info.sealed_size is not None or not data:
            return
        handle.ahead[offset] = data
        while handle.checked_up_to in handle.ahead:
            chunk = handle.ahead.pop(handle.checked_up_to)
            handle.crc = _crc32c.crc32c(chunk, value=handle.crc)
            handle.checked_up_to += len(chunk)
        if sum(map(len, handle.ahead.values())) > REORDER_BYTES:
            handle.ahead.clear()
            handle.checked_up_to = -1  # random access: no whole-file check on this handle
            return
        at_end = handle.checked_up_to == info.size
        if at_end and info.crc32c is not None and handle.crc != info.crc32c:
            handle.damaged = True
            raise BarecatIntegrityError(f"{info.path}: CRC32C mismatch")

    @reported
    def release(self, path: str, fh: int) -> int:
        self._finish(fh)
        return 0

    def _finish(self, fh: int) -> None:
        with self._lock:
            handle = self._handles.pop(fh, None)
        if isinstance(handle, _Reading) and handle.stream is not None:
            handle.stream.close()
        elif isinstance(handle, _Writing):
            try:
                self._store(handle)
            finally:
                handle.spool.close()

    # -- writing ----------------------------------------------------------------------------

    def _require_writable(self) -> Barecat:
        if not self.writable:
            raise mfusepy.FuseOSError(errno.EROFS)
        self._attrs.clear()
        return self.archive

    def _open_for_writing(self, inner: str, flags: int, mode: int | None = None) -> int:
        """A handle collecting the file's new content (the old one first, unless
        truncated); ``mode`` for a file being created."""
        bc = self._require_writable()
        try:
            existing: BarecatFileInfo | None = bc.index.lookup_file(inner)
        except FileNotFoundBarecatError:
            if not flags & os.O_CREAT:
                raise
            existing = None
        spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY)  # noqa: SIM115 (closed at release)
        keep = existing is not None and not flags & os.O_TRUNC
        if keep and existing is not None:
            with bc.open(existing, "rb") as source:
                while chunk := source.read(1 << 20):
                    spool.write(chunk)
        chosen = mode if mode is not None else (existing.mode if existing else None)
        uid, gid, _ = mfusepy.fuse_get_context()
        mode = chosen if chosen is not None else 0o100644
        handle = _Writing(inner, spool, existing, mode, (uid, gid))
        handle.dirty = existing is None or not keep
        return self._new_handle(handle)

    @reported
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        return self._open_for_writing(_path(path), os.O_CREAT | os.O_TRUNC, mode)

    @reported
    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        handle = self._handles.get(fh)
        if not isinstance(handle, _Writing):
            raise mfusepy.FuseOSError(errno.EBADF)
        handle.spool.seek(offset)
        handle.spool.write(data)
        handle.dirty = True
        return len(data)

    @reported
    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        inner = _path(path)
        handle = self._handles.get(fh) if fh is not None else None
        if not isinstance(handle, _Writing):
            handle = next(
                (h for h in self._handles.values() if isinstance(h, _Writing) and h.path == inner),
                None,
            )
        if isinstance(handle, _Writing):
            handle.spool.truncate(length)
            handle.dirty = True
            return
        writing = self._open_for_writing(inner, os.O_WRONLY)
        handle = cast(_Writing, self._handles[writing])
        handle.spool.truncate(length)
        handle.dirty = True
        self._finish(writing)

    @reported
    def flush(self, path: str, fh: int) -> None:
        handle = self._handles.get(fh)
        if isinstance(handle, _Writing):
            self._store(handle)

    @reported
    def fsync(self, path: str, datasync: int, fh: int) -> None:
        handle = self._handles.get(fh)
        if isinstance(handle, _Writing):
            self._store(handle)
        if self.writable:
            self.archive.commit()

    def _store(self, handle: _Writing) -> None:
        """The handle's content as the file's new version (nothing if unchanged)."""
        if not handle.dirty:
            return
        bc = self._require_writable()
        size = handle.spool.seek(0, os.SEEK_END)
        handle.spool.seek(0)
        stamp = BarecatFileInfo(handle.path, handle.mode, mtime_ns=time.time_ns())
        small = size <= SPOOL_IN_MEMORY
        data = handle.spool.read() if small else None
        source = None if small else handle.spool
        with self._lock:
            if handle.existing is not None and bc.isfile(handle.path):
                bc.update_file(handle.path, stamp, data=data, fileobj=source, size=size)
            else:
                stamp.uid, stamp.gid = handle.owner
                bc.add(stamp, data=data, fileobj=source)
            handle.existing = bc.index.lookup_file(handle.path)
        handle.dirty = False

    @reported
    def unlink(self, path: str) -> None:
        self._require_writable().remove(_path(path))

    @reported
    def mkdir(self, path: str, mode: int) -> None:
        bc = self._require_writable()
        inner = _path(path)
        bc.mkdir(inner, stat.S_IFDIR | stat.S_IMODE(mode))
        uid, gid, _ = mfusepy.fuse_get_context()
        bc.chown(inner, uid, gid)

    @reported
    def rmdir(self, path: str) -> None:
        self._require_writable().rmdir(_path(path))

    @reported
    def rename(self, old: str, new: str) -> None:
        bc = self._require_writable()
        source, target = _path(old), _path(new)
        if bc.isfile(target) and bc.isfile(source):
            bc.remove(target)  # rename(2) replaces a file
        elif bc.isdir(target) and bc.isdir(source) and not bc.listdir(target):
            bc.rmdir(target)  # and an empty directory
        bc.rename(source, target)

    @reported
    def chmod(self, path: str, mode: int) -> None:
        bc = self._require_writable()
        inner = _path(path)
        kind = stat.S_IFDIR if bc.isdir(inner) else stat.S_IFMT(mode) or stat.S_IFREG
        bc.chmod(inner, kind | stat.S_IMODE(mode))

    @reported
    def chown(self, path: str, uid: int, gid: int) -> None:
        bc = self._require_writable()
        inner = _path(path)
        info = bc.index.lookup(inner)
        keep = 0xFFFFFFFF  # (uid_t)-1: leave as it is
        old_uid = self._uid if info.uid is None else info.uid
        old_gid = self._gid if info.gid is None else info.gid
        bc.chown(inner, old_uid if uid == keep else uid, old_gid if gid == keep else gid)

    @reported
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        bc = self._require_writable()
        now = time.time_ns()
        bc.utime(_path(path), ns=times if times is not None else (now, now))


__all__ = ["ArchiveFilesystem"]
