"""A read-write FUSE filesystem over an archive: the read-only one plus the operations
that change it.

create, write, truncate, rename, mkdir, rmdir, unlink, chmod, chown and utimens map onto
the archive. A file opened for writing is collected in a temporary spool (its old
content first, unless truncated) and stored when closed, as one new version: so no reader
sees half a file, and ``barecat verify`` passes after any session. The archive has one
writer, so libfuse serves a read-write mount on one thread. Errors become the errno the
archive's exception carries (ENOTEMPTY, EEXIST, ENOSPC, EROFS as well).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from typing import Any, cast

import mfusepy

from barecat.archive import Barecat
from barecat.entries import BarecatFileInfo
from barecat.exceptions import FileNotFoundBarecatError
from barecat.mount.filesystem import ArchiveFilesystem, inner_path, reported

SPOOL_IN_MEMORY = 8 << 20
"""A file being written stays in memory up to this size, then spills to a temporary file."""


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


class WritableArchiveFilesystem(ArchiveFilesystem):
    """The libfuse operations of an archive mounted read-write (see the module doc)."""

    writable = True

    @reported
    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        pending = self._pending_write(inner_path(path))
        if pending is not None:
            return pending
        return super().getattr(path, fh)

    @reported
    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR):
            return self._open_for_writing(inner_path(path), flags)
        return self._open_for_reading(inner_path(path))

    @reported
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        handle = self._handles.get(fh)
        if isinstance(handle, _Writing):
            handle.spool.seek(offset)
            return bytes(handle.spool.read(size))
        return super().read(path, size, offset, fh)

    def _finish(self, fh: int) -> Any:
        handle = super()._finish(fh)
        if isinstance(handle, _Writing):
            try:
                self._store(handle)
            finally:
                handle.spool.close()
        return handle

    def _pending_write(self, inner: str) -> dict[str, int] | None:
        """A file open for writing is seen at its new size, before it is stored."""
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

    @property
    def writer(self) -> Barecat:
        """The archive, which ``open_archive`` opened for writing.

        Raises:
            FuseOSError: EROFS, the archive is not one that can be written.
        """
        bc = self.archive
        if not isinstance(bc, Barecat):
            raise mfusepy.FuseOSError(errno.EROFS)
        return bc

    def _require_writable(self) -> Barecat:
        self._forget_listed()
        return self.writer

    def _open_for_writing(self, inner: str, flags: int, mode: int | None = None) -> int:
        """A handle collecting the file's new content (the old one first, unless
        truncated); ``mode`` for a file being created."""
        bc = self._require_writable()
        try:
            existing: BarecatFileInfo | None = bc.lookup_file(inner)
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
        return self._open_for_writing(inner_path(path), os.O_CREAT | os.O_TRUNC, mode)

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
        inner = inner_path(path)
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
            self.writer.commit()

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
            handle.existing = bc.lookup_file(handle.path)
        handle.dirty = False

    @reported
    def unlink(self, path: str) -> None:
        self._require_writable().remove(inner_path(path))

    @reported
    def mkdir(self, path: str, mode: int) -> None:
        bc = self._require_writable()
        inner = inner_path(path)
        bc.mkdir(inner, stat.S_IFDIR | stat.S_IMODE(mode))
        uid, gid, _ = mfusepy.fuse_get_context()
        bc.chown(inner, uid, gid)

    @reported
    def rmdir(self, path: str) -> None:
        self._require_writable().rmdir(inner_path(path))

    @reported
    def rename(self, old: str, new: str) -> None:
        bc = self._require_writable()
        source, target = inner_path(old), inner_path(new)
        if bc.isfile(target) and bc.isfile(source):
            bc.remove(target)  # rename(2) replaces a file
        elif bc.isdir(target) and bc.isdir(source) and not bc.listdir(target):
            bc.rmdir(target)  # and an empty directory
        bc.rename(source, target)

    @reported
    def chmod(self, path: str, mode: int) -> None:
        bc = self._require_writable()
        inner = inner_path(path)
        kind = stat.S_IFDIR if bc.isdir(inner) else stat.S_IFMT(mode) or stat.S_IFREG
        bc.chmod(inner, kind | stat.S_IMODE(mode))

    @reported
    def chown(self, path: str, uid: int, gid: int) -> None:
        bc = self._require_writable()
        inner = inner_path(path)
        info = bc.lookup(inner)
        keep = 0xFFFFFFFF  # (uid_t)-1: leave as it is
        old_uid = self._uid if info.uid is None else info.uid
        old_gid = self._gid if info.gid is None else info.gid
        bc.chown(inner, old_uid if uid == keep else uid, old_gid if gid == keep else gid)

    @reported
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        bc = self._require_writable()
        now = time.time_ns()
        bc.utime(inner_path(path), ns=times if times is not None else (now, now))


__all__ = ["WritableArchiveFilesystem"]
