"""Barecat out to traditional archives: tar (any compression, streamable) and zip.

Entries go out in path order, every directory before what it holds, each file's bytes
CRC32C-checked on the way (a damaged file stops the export rather than being passed on).
Metadata goes with them: tar gets PAX headers (long and non-ASCII names, nanosecond
mtimes, owners); zip gets the Unix mode in its external attributes and Info-ZIP's
extended-timestamp and owner fields, which is what ``unzip`` and our import read back.
Stored links become tar symlinks and zip link entries; files that share their bytes and
metadata (``BarecatFileInfo.hard_link_key``: a hard link stored once) become tar hard
links to the first of them in path order (zip has none: each is a copy). Member names are canonical
archive paths: an index written by another tool (barecat 0.3.1 stores '../x' as it is
given) may hold '/abs', './x' or 'a/../b', which go out normalized, and names that climb
out of the root ('../x'), which are left out, both reported, so that extracting the
output with any tool writes nothing outside its target. Uses only the public Barecat API;
never prints.
"""

from __future__ import annotations

import heapq
import posixpath
import stat
import struct
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from barecat.archive import Barecat
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import InvalidPathBarecatError
from barecat.paths import normalize
from barecat.transfer.convert.formats import open_tar_writer
from barecat.transfer.extraction import open_verified

OnExported = Callable[[BarecatEntryInfo], None]

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_ZIP_LAST = (2107, 12, 31, 23, 59, 58)
_MSDOS_DIRECTORY = 0x10
_ZIP64_LIMIT = (1 << 31) - 1


@dataclass(slots=True)
class ExportResult:
    """What went out, and the index paths that did not go out as they are."""

    files: int = 0
    dirs: int = 0
    bytes: int = 0
    renamed: list[tuple[str, str]] = field(default_factory=list)
    """Paths not in canonical form ('/abs', './x', 'a/../b') and the names they went out as."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """Paths left out (climbing out of the root: '../x'), with the reason."""


def entries_in_path_order(bc: Barecat) -> Iterator[BarecatEntryInfo]:
    """Directories and files merged by path: a directory always comes before its contents."""
    dirs = bc.iter_dirinfos(Order.PATH)
    files = bc.iter_fileinfos(Order.PATH)
    return heapq.merge(dirs, files, key=lambda e: e.path)


def _members(
    bc: Barecat, root_dir: str, result: ExportResult
) -> Iterator[tuple[BarecatEntryInfo, str]]:
    """Entries in path order with their member names (under ``root_dir`` if not empty):
    canonical, or the entry left out, each change recorded in ``result``."""
    for entry in entries_in_path_order(bc):
        try:
            path = normalize(entry.path)
        except InvalidPathBarecatError as e:
            result.skipped.append((entry.path, str(e)))
            continue
        if not path and entry.path:
            result.skipped.append((entry.path, "names the archive's root, which is there"))
        elif path != entry.path:
            result.renamed.append((entry.path, path))
        if path or (root_dir and not entry.path):
            yield entry, (posixpath.join(root_dir, path) if path else root_dir)


# -- tar ---------------------------------------------------------------------------------


def export_tar(
    bc: Barecat,
    stream: BinaryIO,
    fmt: str = "tar",
    root_dir: str | None = None,
    on_entry: OnExported | None = None,
) -> ExportResult:
    """Write the whole archive to ``stream`` as a tar of format ``fmt`` (``tar``,
    ``tar.gz``, ``tar.bz2``, ``tar.xz``, ``tar.zst``), under ``root_dir`` if given."""
    root = normalize(root_dir) if root_dir else ""
    result = ExportResult()
    linked: dict[object, str] = {}  # per hard-link key, the member that holds the bytes
    with open_tar_writer(stream, fmt) as tar:
        for entry, name in _members(bc, root, result):
            member = _tar_info(entry, name)
            key = entry.hard_link_key if isinstance(entry, BarecatFileInfo) else None
            if key is not None and key in linked:
                member.type, member.linkname = tarfile.LNKTYPE, linked[key]
                tar.addfile(member)
                result.files += 1
            elif isinstance(entry, BarecatFileInfo) and entry.is_symlink_entry:
                member.type, member.linkname = (
                    tarfile.SYMTYPE,
                    bc.read(entry).decode("utf-8", "surrogateescape"),
                )
                tar.addfile(member)
                result.files += 1
            elif isinstance(entry, BarecatFileInfo):
                member.size = entry.size or 0
                with open_verified(bc, entry) as source:
                    tar.addfile(member, source)
                if key is not None:
                    linked[key] = name
                result.files += 1
                result.bytes += member.size
            else:
                member.type = tarfile.DIRTYPE
                tar.addfile(member)
                result.dirs += 1
            if on_entry is not None:
                on_entry(entry)
    return result


def _tar_info(entry: BarecatEntryInfo, name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    default = 0o755 if isinstance(entry, BarecatDirInfo) else 0o644
    member.mode = default if entry.mode is None else stat.S_IMODE(entry.mode)
    member.uid, member.gid = entry.uid or 0, entry.gid or 0
    if entry.mtime_ns is not None:
        seconds, nanos = divmod(entry.mtime_ns, 1_000_000_000)
        member.mtime = seconds
        if nanos:
            member.pax_headers = {"mtime": f"{seconds}.{nanos:09d}"}
    return member


# -- zip ---------------------------------------------------------------------------------


def export_zip(
    bc: Barecat,
    stream: BinaryIO,
    root_dir: str | None = None,
    on_entry: OnExported | None = None,
) -> ExportResult:
    """Write the whole archive to ``stream`` as a zip with stored (uncompressed) members;
    ``stream`` need not be seekable."""
    root = normalize(root_dir) if root_dir else ""
    result = ExportResult()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED) as zf:
        for entry, name in _members(bc, root, result):
            if isinstance(entry, BarecatFileInfo):
                member = _zip_info(entry, name, stat.S_IFREG | 0o644)
                member.file_size = entry.size or 0
                with (
                    open_verified(bc, entry) as source,
                    zf.open(member, "w", force_zip64=member.file_size > _ZIP64_LIMIT) as out,
                ):
                    while chunk := source.read(1 << 20):
                        out.write(chunk)
                result.files += 1
                result.bytes += member.file_size
            else:
                member = _zip_info(entry, name + "/", stat.S_IFDIR | 0o755)
                member.external_attr |= _MSDOS_DIRECTORY
                zf.writestr(member, b"")
                result.dirs += 1
            if on_entry is not None:
                on_entry(entry)
    return result


def _zip_info(entry: BarecatEntryInfo, name: str, default_mode: int) -> zipfile.ZipInfo:
    member = zipfile.ZipInfo(name)
    member.create_system = 3  # Unix: external_attr carries the mode
    member.external_attr = (default_mode if entry.mode is None else entry.mode) << 16
    member.compress_type = zipfile.ZIP_STORED
    extra = b""
    if entry.mtime_ns is not None:
        seconds = entry.mtime_ns // 1_000_000_000
        local = time.localtime(seconds)[:6]
        member.date_time = min(max(local, _ZIP_EPOCH), _ZIP_LAST)
        if -(1 << 31) <= seconds < (1 << 31):
            extra += struct.pack("<HHBi", 0x5455, 5, 1, seconds)
    if entry.uid is not None and entry.gid is not None:
        extra += struct.pack("<HHBBIBI", 0x7875, 11, 1, 4, entry.uid, 4, entry.gid)
    member.extra = extra
    return member


__all__ = ["ExportResult", "entries_in_path_order", "export_tar", "export_zip"]
