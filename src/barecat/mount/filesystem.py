"""An archive as a read-only FUSE filesystem: the libfuse operations over the archive's
read protocol, :class:`~barecat.archive.ReadableArchive`, and the two storage totals
``statfs`` reports (``barecat.mount.writable`` adds the operations that change it).

Fast by construction: attributes and directory listings come from the index (a
directory's listing fetches every child's record in one query and keeps them, so the
``getattr`` calls that follow ``readdir`` are dictionary hits; listings carry every
entry's attributes to the kernel, see ``barecat.mount.listing``), the kernel keeps pages
and attributes (the archive cannot change under a read-only mount), and operations a
read-only filesystem does not need are left out, so the kernel does not ask for them; a
read-only mount even declines ``open``, so reading a file costs no open and release
requests, and reads ahead across the files of a directory read one after another
(``barecat.mount.readahead``), so most of them cost no request at all. Handlers are
thread-safe: libfuse may call them from its worker threads. A file read whole is
CRC32C-checked: small files in one verified read, bigger ones as they are read in order,
the read that completes them failing with EIO on a mismatch. Sealed archives
authenticate every block they read. Errors become the errno the archive's
exception carries (ENOENT, EISDIR, ENOTDIR; EIO for damaged bytes). Imports the archive
layer's read protocol, ``barecat.mount.listing`` and ``barecat.mount.readahead``.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, TypeVar, cast

import mfusepy

from barecat.archive.readable import ReadableArchive
from barecat.checksum import crc32c
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError, BarecatIntegrityError, InvalidPathBarecatError
from barecat.mount.listing import Listing, listing_block_size, packed_stat
from barecat.mount.readahead import ReadAhead, start_read_ahead

VERIFY_AT_OPEN = 4 << 20
"""Files up to this size are read and checked whole when opened (then served from memory)."""
ATTRIBUTE_CACHE = 100_000
"""Records kept from listings for the getattr and read calls that follow them (the kernel
keeps attributes itself; this saves the index lookups right after a readdir)."""
LISTINGS_KEPT = 8
"""Directories whose listing is kept while the kernel reads it in parts."""
LISTINGS_UNINDEXED = 64
"""Directories whose records are kept from their listings for the reads that follow."""
UNOPENED_READERS = 64
"""Files read in several reads without an open whose reading state is kept."""
REORDER_BYTES = 16 << 20
"""Out-of-order reads a handle keeps while checking a big file's CRC32C in order."""

T = TypeVar("T")

_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
"""How names become bytes for the kernel (``os.fsencode``'s, without its call per entry)."""
_FILE_MODE = stat.S_IFREG | 0o644
_TYPE_BITS, _PERMISSION_BITS = 0o170000, 0o7777
_TYPE_AND_PERMISSION_BITS = _TYPE_BITS | _PERMISSION_BITS


class MountedArchive(ReadableArchive, Protocol):
    """What a mount asks of its archive: the read protocol, and the totals ``statfs``
    reports (a :class:`~barecat.archive.Barecat` has them)."""

    @property
    def num_dirs(self) -> int:
        """How many directories the archive holds, the root included."""
        ...

    @property
    def total_physical_size_stat(self) -> int:
        """Bytes of the archive's shard files on disk."""
        ...


def _errno_of(e: BaseException) -> int:
    if isinstance(e, BarecatIntegrityError):
        return errno.EIO
    if isinstance(e, InvalidPathBarecatError):  # (a name no archive path can have)
        return errno.ENOENT
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


def _mode(info: BarecatEntryInfo) -> int:
    """``st_mode`` of an entry: its type and permission bits (defaults where missing)."""
    if isinstance(info, BarecatDirInfo):
        return stat.S_IFDIR | stat.S_IMODE(0o755 if info.mode is None else info.mode)
    mode = 0o100644 if info.mode is None else info.mode
    return (stat.S_IFMT(mode) or stat.S_IFREG) | stat.S_IMODE(mode)


@functools.cache
def _typed_stat(kind: int) -> bytes:
    """The attributes of a plain listing's entry of this type (``st_mode``'s type bits):
    the type and nothing else, which is all libfuse reads from them."""
    return packed_stat(kind, 0, 0, 0, 0, 0, 0)


def inner_path(fuse_path: str) -> str:
    """The archive path of a FUSE path (``/a/b`` -> ``a/b``, ``/`` -> the root ``''``)."""
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
    checking: bool = True
    """Whether reads are still being checked (not for sealed files, which authenticate
    their blocks, nor after random access)."""
    damaged: bool = False
    """The whole-file check failed: every later read of this handle fails too (the
    kernel retries a failed read-ahead page with a read of its own)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class ArchiveFilesystem(mfusepy.Operations):  # type: ignore[misc]
    """The libfuse operations of one mounted archive (see the module doc).

    ``open_archive`` is called in ``init``, once the filesystem is up, so the archive is
    opened in the process and threads that serve it. ``read_ahead_at``: the mount point,
    for a read-only mount that reads ahead across files (``barecat.mount.readahead``).
    """

    use_ns = True

    writable = False

    def __init__(
        self, open_archive: Callable[[], MountedArchive], read_ahead_at: str | None = None
    ) -> None:
        self._open_archive = open_archive
        self._read_ahead_at = read_ahead_at
        self._ahead: ReadAhead | None = None
        self.bc: MountedArchive | None = None
        self._listed: dict[str, BarecatEntryInfo] = {}
        self._unindexed: dict[str, list[BarecatEntryInfo] | None] = {}
        """Records of the latest listings not yet in ``_listed``, by directory: indexed
        by path when a request first asks for one (a walk never does); None for a
        listing made without them (names and types), fetched then."""
        self._unindexed_records = 0
        """How many records ``_unindexed`` holds (kept up to ``ATTRIBUTE_CACHE``)."""
        self._handles: dict[int, Any] = {}
        self._unopened: dict[str, _Reading] = {}
        self._listings: dict[tuple[str, bool], Listing] = {}
        self._next_handle = 1
        self._lock = threading.RLock()
        self._uid, self._gid = os.getuid(), os.getgid()

    # -- lifecycle --------------------------------------------------------------------------

    def init(self, path: str) -> None:
        self.bc = self._open_archive()
        if self._read_ahead_at is not None and not self.writable:
            self._ahead = start_read_ahead(self._read_ahead_at, self.bc)

    def destroy(self, path: str) -> None:
        """After the unmount: store what is still open and close the archive (commit).

        libfuse turns SIGINT and SIGTERM into an unmount while it serves, and puts back
        the default handlers before calling this; a second signal now would kill the
        process halfway through the commit, so they wait until the process ends.
        """
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        if self._ahead is not None:
            self._ahead.close()
        if self.bc is not None:
            for fh in list(self._handles):
                self._finish(fh)
            for reading in self._unopened.values():
                self._close_reading(reading)
            self._unopened.clear()
            self.bc.close()
            self.bc = None

    @property
    def archive(self) -> MountedArchive:
        if self.bc is None:
            raise mfusepy.FuseOSError(errno.EIO)
        return self.bc

    # -- attributes and listings ----------------------------------------------------------

    def _attributes(self, info: BarecatEntryInfo) -> tuple[int, int, int, int, int, int, int, int]:
        """mode, nlink, uid, gid, size, blocks, mtime (ns) and block size of an entry: the
        one place that says what an archive's entry looks like as a file. Directories
        report a block size that fits their listing, so programs read it in one part."""
        uid = self._uid if info.uid is None else info.uid
        gid = self._gid if info.gid is None else info.gid
        if isinstance(info, BarecatFileInfo):  # (most entries: one call each per listing)
            mode = info.mode
            if mode is None:
                mode = _FILE_MODE
            elif mode & _TYPE_BITS:
                mode &= _TYPE_AND_PERMISSION_BITS
            else:
                mode = stat.S_IFREG | mode & _PERMISSION_BITS
            size = info.size or 0
            stored = size if info.sealed_size is None else info.sealed_size
            return mode, 1, uid, gid, size, -(-stored // 512), info.mtime_ns or 0, 0
        assert isinstance(info, BarecatDirInfo)
        subdirs = info.num_subdirs or 0
        blksize = listing_block_size(subdirs + (info.num_files or 0))
        mtime = info.mtime_ns or 0
        return _mode(info), 2 + subdirs, uid, gid, 4096, 0, mtime, blksize

    def _stat(self, info: BarecatEntryInfo) -> dict[str, int]:
        mode, nlink, uid, gid, size, blocks, mtime, blksize = self._attributes(info)
        attrs = {"st_mode": mode, "st_nlink": nlink, "st_uid": uid, "st_gid": gid}
        attrs.update(st_size=size, st_blocks=blocks, st_blksize=blksize)
        attrs.update(st_mtime=mtime, st_ctime=mtime, st_atime=mtime)
        return attrs

    def _entry(self, inner: str) -> BarecatEntryInfo:
        """The record of an entry: from the latest listings, else from the index."""
        info = self._known(inner)
        if info is None:
            info = self.archive.lookup(inner)
            self._remember([info])
        return info

    def _known(self, inner: str) -> BarecatEntryInfo | None:
        """The record of an entry if a recent listing had it (None otherwise)."""
        info = self._listed.get(inner)
        if info is None and self._unindexed:
            folder = inner.rpartition("/")[0]
            with self._lock:
                listed = folder in self._unindexed
                infos = self._unindexed.pop(folder, None)
                self._unindexed_records -= len(infos or ())
            if listed:  # (one query for a directory listed by name only)
                self._remember(self.archive.listdir_infos(folder) if infos is None else infos)
                info = self._listed.get(inner)
        return info

    def _keep_listed(self, inner: str, infos: list[BarecatEntryInfo] | None) -> None:
        """Keep a listing's records for the requests that may follow it, unindexed
        (None: a listing without them, whose records are fetched when asked for)."""
        unindexed = self._unindexed
        with self._lock:
            self._unindexed_records -= len(unindexed.pop(inner, None) or ())
            unindexed[inner] = infos
            kept = self._unindexed_records + len(infos or ())
            while len(unindexed) > 1 and (
                len(unindexed) > LISTINGS_UNINDEXED or kept > ATTRIBUTE_CACHE
            ):  # (the latest is kept however big)
                kept -= len(unindexed.pop(next(iter(unindexed))) or ())
            self._unindexed_records = kept

    def _forget_listed(self) -> None:
        """Drop the records kept from listings (the archive is about to change)."""
        with self._lock:
            self._unindexed.clear()
            self._unindexed_records = 0
        self._listed.clear()

    def _remember(self, infos: Iterable[BarecatEntryInfo]) -> None:
        """Keep records for the getattr and read calls that follow a listing."""
        if len(self._listed) > ATTRIBUTE_CACHE:
            self._listed.clear()
        self._listed.update((info.path, info) for info in infos)

    @reported
    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        return self._stat(self._entry(inner_path(path)))

    @reported
    def packed_attributes(self, path: str) -> bytes:
        """``getattr`` as the bytes of a ``struct stat``, for ``ListingFUSE``."""
        return self._packed(inner_path(path))

    def _packed(self, inner: str) -> bytes:
        return packed_stat(*self._attributes(self._entry(inner)))

    @reported
    def readdir(self, path: str, fh: int) -> Iterator[str | tuple[str, dict[str, int], int]]:
        entries = self.archive.listdir_infos(inner_path(path))
        self._remember(entries)
        yield "."
        yield ".."
        for info in entries:
            yield info.name, {"st_mode": _mode(info)}, 0

    @reported
    def listing(self, path: str, offset: int, attributes: bool = True) -> Listing:
        """The entries of a directory for ``ListingFUSE``: with their attributes, or with
        their type only (``attributes`` False: what a plain listing reads). Made afresh
        when read from the start, and kept, for the latest ``LISTINGS_KEPT`` directories,
        for libfuse's requests to continue."""
        inner = inner_path(path)
        key = (inner, attributes)
        if offset:
            with self._lock:
                kept = self._listings.get(key)
            if kept is not None:
                return kept
        encoding, errors = _FS_ENCODING, _FS_ERRORS
        dot = _typed_stat(stat.S_IFDIR)  # (the kernel takes no attributes from . and ..)
        entries = [(b".", dot), (b"..", dot)]
        if attributes:
            infos = self.archive.listdir_infos(inner)
            self._keep_listed(inner, infos)
            cut = len(inner) + 1 if inner else 0
            attributes_of = self._attributes
            entries += [
                (info.path[cut:].encode(encoding, errors), packed_stat(*attributes_of(info)))
                for info in infos
            ]
        else:  # names and types: the records are fetched if an entry is asked for
            self._keep_listed(inner, None)
            typed = _typed_stat
            entries += [
                (name.encode(encoding, errors), typed(kind))
                for name, kind in self.archive.listdir_types(inner)
            ]
        with self._lock:
            self._listings.pop(key, None)
            self._listings[key] = entries
            while len(self._listings) > LISTINGS_KEPT:
                del self._listings[next(iter(self._listings))]
        return entries

    @reported
    def readlink(self, path: str) -> str:
        return os.fsdecode(self.archive.read(inner_path(path)))

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

    def _new_handle(self, handle: Any) -> int:
        with self._lock:
            fh = self._next_handle
            self._next_handle += 1
            self._handles[fh] = handle
        return fh

    @reported
    def open(self, path: str, flags: int) -> int:
        """Declined: a read-only mount answers ENOSYS, after which the kernel reads files
        without opening and releasing them (two requests fewer per file); reads then find
        their state by path (``_read_unopened``)."""
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise mfusepy.FuseOSError(errno.EROFS)
        raise mfusepy.FuseOSError(errno.ENOSYS)

    def _reading(self, inner: str) -> _Reading:
        info = self.archive.lookup_file(inner)
        reading = _Reading(info, checking=info.sealed_size is None)
        if (info.size or 0) <= VERIFY_AT_OPEN:
            reading.data = self.archive.read(info)  # checked whole
        else:
            reading.stream = cast(BinaryIO, self.archive.open(info, "rb"))
        return reading

    def _open_for_reading(self, inner: str) -> int:
        return self._new_handle(self._reading(inner))

    @reported
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        if not fh:
            return self._read_unopened(inner_path(path), size, offset)
        handle = self._handles.get(fh)
        if not isinstance(handle, _Reading):
            raise mfusepy.FuseOSError(errno.EBADF)
        return self._read_from(handle, size, offset)

    def _read_unopened(self, inner: str, size: int, offset: int) -> bytes:
        """A read with no open before it. One that covers a whole file (most files, in one
        read) is answered by a verified read of the file. Otherwise reading state is kept
        by path, for the latest ``UNOPENED_READERS`` files, until a read reaches the end;
        a read from the start begins a new pass (so a damaged file fails each pass that
        reads it whole, and other parts of it still read)."""
        if offset == 0 and self._ahead is not None:
            self._ahead.read_seen(inner)
        listed = self._known(inner)
        if offset == 0 and isinstance(listed, BarecatFileInfo) and (listed.size or 0) <= size:
            return self.archive.read(listed)  # (writes drop the records: never stale)
        with self._lock:
            handle = self._unopened.pop(inner, None)
            if handle is None or offset == 0:
                if handle is not None:
                    self._close_reading(handle)
                handle = self._reading(inner)
            self._unopened[inner] = handle  # the most recent last
            while len(self._unopened) > UNOPENED_READERS:
                self._close_reading(self._unopened.pop(next(iter(self._unopened))))
        data = self._read_from(handle, size, offset)
        total = handle.info.size or 0
        checked = handle.data is not None or not handle.checking or handle.checked_up_to >= total
        if checked and offset + len(data) >= total:  # (reads may come out of order)
            with self._lock:
                if self._unopened.get(inner) is handle:
                    self._close_reading(self._unopened.pop(inner))
        return data

    def _read_from(self, handle: _Reading, size: int, offset: int) -> bytes:
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
        if not handle.checking or offset < handle.checked_up_to or not data:
            return
        handle.ahead[offset] = data
        while handle.checked_up_to in handle.ahead:
            chunk = handle.ahead.pop(handle.checked_up_to)
            handle.crc = crc32c(chunk, value=handle.crc)
            handle.checked_up_to += len(chunk)
        if sum(map(len, handle.ahead.values())) > REORDER_BYTES:
            handle.ahead.clear()
            handle.checking = False  # random access: no whole-file check on this handle
            return
        at_end = handle.checked_up_to == info.size
        if at_end and info.crc32c is not None and handle.crc != info.crc32c:
            handle.damaged = True
            raise BarecatIntegrityError(f"{info.path}: CRC32C mismatch")

    @reported
    def release(self, path: str, fh: int) -> int:
        self._finish(fh)
        return 0

    def _finish(self, fh: int) -> Any:
        """Forget a handle; returns it."""
        with self._lock:
            handle = self._handles.pop(fh, None)
        if isinstance(handle, _Reading):
            self._close_reading(handle)
        return handle

    @staticmethod
    def _close_reading(handle: _Reading) -> None:
        if handle.stream is not None:
            handle.stream.close()


__all__ = ["ArchiveFilesystem", "MountedArchive", "inner_path", "reported"]
