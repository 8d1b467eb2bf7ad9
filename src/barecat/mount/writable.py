"""A read-write FUSE filesystem over an archive: the read-only one plus the operations
that change it.

create, write, truncate, rename, mkdir, rmdir, unlink, chmod, chown and utimens map onto
the archive. A file opened for writing is collected in a temporary spool (its old
content first, unless truncated) and stored when closed, as one new version: so no reader
sees half a file, and ``barecat verify`` passes after any session. The archive has one
writer, so libfuse serves a read-write mount on one thread.

What an operation acknowledged is durable: each change is committed before its answer
(``Barecat.commit_transaction``), and a file is stored and committed by ``flush``, whose
answer is what ``close(2)`` returns (``release`` comes later and its answer reaches no
one). So a failed commit, which rolls
the archive's transaction back, can only drop changes not yet acknowledged, and their
callers get the error. Errors become the errno the archive's exception carries
(ENOTEMPTY, EEXIST, ENOSPC, EROFS as well); a write that would make a file bigger than
the free space of the archive's filesystem fails with ENOSPC at once. Files that could not
be stored are kept in :attr:`WritableArchiveFilesystem.not_stored`, for the mount's exit
status.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import mfusepy

from barecat.archive import Barecat
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError, FileNotFoundBarecatError, NotEnoughSpaceBarecatError
from barecat.mount.filesystem import ArchiveFilesystem, inner_path, reported

T = TypeVar("T")

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
    """uid and gid of the process that created the file (for a new file), or as a
    ``chown`` while it is open set them."""
    mtime_ns: int | None = None
    """The modification time a ``utimens`` while it is open set (``cp -a`` sets it
    before it closes the file), kept until the next write; None: the time it is stored."""
    dirty: bool = False
    """Written since it was last stored."""
    failed: bool = False
    """The last store failed (its close got the error) and nothing was written since:
    ``release`` drops it rather than store it unasked."""
    incomplete: bool = False
    """A write failed (the disk was full): stored, it holds only what was written."""


class WritableArchiveFilesystem(ArchiveFilesystem):
    """The libfuse operations of an archive mounted read-write (see the module doc)."""

    writable = True

    def __init__(self, open_archive: Callable[[], Barecat]) -> None:
        super().__init__(open_archive)
        self.not_stored: dict[str, BaseException] = {}
        """Files whose last store or a write failed (the caller got the error), and why."""
        self.close_error: BaseException | None = None
        """Why closing the archive at the unmount failed, if it did."""

    def destroy(self, path: str) -> None:
        """After the unmount: as the read-only mount's, a failure kept for the exit
        status (there is no caller left to tell)."""
        try:
            super().destroy(path)
        except (BarecatError, OSError) as e:
            self.close_error = e
            self.bc = None

    def failures(self) -> list[str]:
        """What was not stored, or not in full, a line each (empty when all was)."""
        lines = [f"{path}: {e}" for path, e in sorted(self.not_stored.items())]
        if self.close_error is not None:
            lines.append(f"closing the archive failed: {self.close_error}")
        return lines

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
        """Forget a handle (``release``, or the unmount): a file written after its last
        close (through a shared mapping) is stored now; a store that fails here has no
        caller to tell, so it is noted in :attr:`not_stored`."""
        handle = super()._finish(fh)
        if isinstance(handle, _Writing):
            try:
                if handle.dirty and not handle.failed:
                    self._store(handle)
            except (BarecatError, OSError, mfusepy.FuseOSError):
                pass  # (noted by _store)
            finally:
                handle.spool.close()
        return handle

    def _pending_write(self, inner: str) -> dict[str, int] | None:
        """A file open for writing is seen at its new size, before it is stored."""
        handle = self._writing(inner)
        if handle is None:
            return None
        size = handle.spool.seek(0, os.SEEK_END)
        now = time.time_ns()
        uid, gid = handle.owner if handle.existing is None else (self._uid, self._gid)
        return {
            "st_mode": stat.S_IFREG | stat.S_IMODE(handle.mode),
            "st_nlink": 1,
            "st_size": size,
            "st_blocks": -(-size // 512),
            "st_uid": uid,
            "st_gid": gid,
            "st_mtime": now if handle.mtime_ns is None else handle.mtime_ns,
            "st_ctime": now,
            "st_atime": now,
        }

    def _writing(self, inner: str) -> _Writing | None:
        """The handle of the file at ``inner`` open for writing, if it is."""
        return next(
            (h for h in self._handles.values() if isinstance(h, _Writing) and h.path == inner),
            None,
        )

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
        end = offset + len(data)
        if end > handle.spool.seek(0, os.SEEK_END) and end > self._free_bytes():
            handle.incomplete = True
            error = NotEnoughSpaceBarecatError(
                f"a write failed: the archive's disk has no room for {end} bytes"
            )
            self.not_stored[handle.path] = error
            raise error
        handle.spool.seek(offset)
        handle.spool.write(data)
        handle.dirty = True
        handle.failed = False
        handle.mtime_ns = None
        return len(data)

    def _free_bytes(self) -> int:
        """Bytes free on the archive's filesystem (for this user: root may use all)."""
        try:
            free = os.statvfs(os.path.dirname(os.path.abspath(self.writer.path)) or ".")
        except OSError:
            return 1 << 62  # (unknown: the store will tell)
        blocks = free.f_bfree if os.geteuid() == 0 else free.f_bavail
        return blocks * free.f_frsize

    @reported
    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        inner = inner_path(path)
        handle = self._handles.get(fh) if fh is not None else None
        if not isinstance(handle, _Writing):
            handle = self._writing(inner)
        if isinstance(handle, _Writing):
            handle.spool.truncate(length)
            handle.dirty = True
            handle.failed = False
            handle.mtime_ns = None
            return
        writing = self._open_for_writing(inner, os.O_WRONLY)
        handle = cast(_Writing, self._handles[writing])
        try:
            handle.spool.truncate(length)
            handle.dirty = True
            self._store(handle)
        finally:
            handle.failed = True  # (told to the caller: nothing left to store at release)
            self._finish(writing)

    @reported
    def flush(self, path: str, fh: int) -> None:
        """Every ``close(2)`` of a descriptor (several for a ``dup``'ed one) asks this;
        its answer is what ``close`` returns: the file is stored and committed first."""
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
        """The handle's content as the file's new version, committed (nothing if
        unchanged); a failure is noted in :attr:`not_stored` and raised."""
        if not handle.dirty:
            return
        try:
            self._changed(lambda bc: self._store_in(bc, handle))
        except BaseException as e:
            handle.failed = True
            self.not_stored[handle.path] = e
            raise
        if not handle.incomplete:
            self.not_stored.pop(handle.path, None)
        handle.dirty = handle.failed = False

    def _store_in(self, bc: Barecat, handle: _Writing) -> None:
        size = handle.spool.seek(0, os.SEEK_END)
        handle.spool.seek(0)
        mtime_ns = time.time_ns() if handle.mtime_ns is None else handle.mtime_ns
        stamp = BarecatFileInfo(handle.path, handle.mode, mtime_ns=mtime_ns)
        small = size <= SPOOL_IN_MEMORY
        data = handle.spool.read() if small else None
        source = None if small else handle.spool
        if handle.existing is not None and bc.isfile(handle.path):
            bc.update_file(handle.path, stamp, data=data, fileobj=source, size=size)
        else:
            stamp.uid, stamp.gid = handle.owner
            bc.add(stamp, data=data, fileobj=source)
        handle.existing = bc.lookup_file(handle.path)

    def _changed(self, change: Callable[[Barecat], T]) -> T:
        """Make a change and commit it before answering: the change's steps run as one
        (the archive's write lock held), then the transaction holding them is committed
        (or found committed already, by the background committer say)."""
        bc = self._require_writable()
        with bc.exclusive():
            result = change(bc)
            transaction = bc.transaction
        bc.commit_transaction(transaction)
        return result

    @reported
    def unlink(self, path: str) -> None:
        self._changed(lambda bc: bc.remove(inner_path(path)))

    @reported
    def mkdir(self, path: str, mode: int) -> None:
        inner = inner_path(path)
        uid, gid, _ = mfusepy.fuse_get_context()

        def make(bc: Barecat) -> None:
            bc.mkdir(inner, stat.S_IFDIR | stat.S_IMODE(mode))
            bc.chown(inner, uid, gid)

        self._changed(make)

    @reported
    def rmdir(self, path: str) -> None:
        self._changed(lambda bc: bc.rmdir(inner_path(path)))

    @reported
    def rename(self, old: str, new: str) -> None:
        source, target = inner_path(old), inner_path(new)

        def move(bc: Barecat) -> None:
            if bc.isfile(target) and bc.isfile(source):
                bc.remove(target)  # rename(2) replaces a file
            elif bc.isdir(target) and bc.isdir(source) and not bc.listdir(target):
                bc.rmdir(target)  # and an empty directory
            bc.rename(source, target)

        self._changed(move)

    def _meta_changed(self, inner: str, note: Callable[[_Writing], None],
                      change: Callable[[Barecat], None]) -> None:  # fmt: skip
        """A metadata change: noted on the file's open handle, if it is being written
        (stored with it at its close, as ``cp -a`` expects of ``fchmod``, ``fchown`` and
        ``futimens`` before ``close``), and made in the archive, committed, if the file
        or directory is there."""
        handle = self._writing(inner)
        if handle is not None:
            note(handle)
            if not self.writer.exists(inner):
                handle.dirty = True  # (a new file: stored, with this, when it is closed)
                return
        self._changed(change)

    @reported
    def chmod(self, path: str, mode: int) -> None:
        inner = inner_path(path)

        def note(handle: _Writing) -> None:
            handle.mode = stat.S_IFREG | stat.S_IMODE(mode)

        def change_mode(bc: Barecat) -> None:
            kind = stat.S_IFDIR if bc.isdir(inner) else stat.S_IFMT(mode) or stat.S_IFREG
            bc.chmod(inner, kind | stat.S_IMODE(mode))

        self._meta_changed(inner, note, change_mode)

    @reported
    def chown(self, path: str, uid: int, gid: int) -> None:
        inner = inner_path(path)
        keep = 0xFFFFFFFF  # (uid_t)-1: leave as it is

        def note(handle: _Writing) -> None:
            old_uid, old_gid = handle.owner
            handle.owner = (old_uid if uid == keep else uid, old_gid if gid == keep else gid)

        def change_owner(bc: Barecat) -> None:
            info = bc.lookup(inner)
            old_uid = self._uid if info.uid is None else info.uid
            old_gid = self._gid if info.gid is None else info.gid
            bc.chown(inner, old_uid if uid == keep else uid, old_gid if gid == keep else gid)

        self._meta_changed(inner, note, change_owner)

    @reported
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        inner = inner_path(path)
        now = time.time_ns()
        atime_mtime = times if times is not None else (now, now)

        def note(handle: _Writing) -> None:
            handle.mtime_ns = atime_mtime[1]

        self._meta_changed(inner, note, lambda bc: bc.utime(inner, ns=atime_mtime))


__all__ = ["WritableArchiveFilesystem"]
