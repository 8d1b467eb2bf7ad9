"""Traditional archives into barecat: tar streams (any compression) and zip files.

Members are taken in order and in constant memory: small files are gathered into atomic
``add_many`` batches, big ones are streamed with ``add(fileobj=)``. Metadata comes along:
the mode (with the file-type bits barecat keeps), the owner, and the mtime, to the
nanosecond where the archive has it (PAX headers; zip's extended-timestamp field). Tar's
own rules settle what tar allows: a later member of the same name replaces the earlier
one, as when extracting, and a hard link is stored once: its row points at its target's
bytes (in a sealed archive, whose bytes are bound to their path, it is a copy). What barecat must
not or cannot hold (names that climb out of the root, devices, FIFOs, encrypted zip
members) is skipped and reported. Uses only the public Barecat API; never prints.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import struct
import tarfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, BinaryIO, cast

from barecat.archive import Barecat
from barecat.entries import BarecatDirInfo, BarecatFileInfo
from barecat.exceptions import (
    FileExistsBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
)
from barecat.paths import check_depth, normalize
from barecat.transfer.convert.formats import (
    BoundedReads,
    open_tar_reader,
    reading_input,
    tar_members,
)

SMALL_FILE = 1 << 20
"""Members up to this size are read whole and batched; bigger ones are streamed."""
BATCH_FILES = 2048
BATCH_BYTES = 64 << 20

OnStored = Callable[[int, int], None]
"""Called with the number of files and bytes just stored."""

_CONFLICTS = (FileExistsBarecatError, IsADirectoryBarecatError, NotADirectoryBarecatError)


@dataclass(slots=True)
class ImportResult:
    """What a conversion stored, replaced and left out (member name, reason)."""

    files: int = 0
    dirs: int = 0
    bytes: int = 0
    replaced: int = 0
    """Members that replaced an earlier member of the same name (the later one wins)."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    """Members stored under a path other than their name (member name, path): absolute
    names and names with '..' inside that stays within the root (filled by wrap)."""


class _Importer:
    """Stores members in batches; settles duplicates and conflicts one by one."""

    def __init__(self, bc: Barecat, result: ImportResult, on_stored: OnStored | None) -> None:
        self.bc = bc
        self.result = result
        self.on_stored = on_stored
        self.files: list[tuple[BarecatFileInfo, bytes]] = []
        self.nbytes = 0
        self.dirs: list[BarecatDirInfo] = []

    def skip(self, name: str, reason: str) -> None:
        self.result.skipped.append((name, reason))

    def directory(self, info: BarecatDirInfo) -> None:
        self.dirs.append(info)
        if len(self.dirs) >= BATCH_FILES:
            self._flush_dirs()

    def small(self, info: BarecatFileInfo, data: bytes) -> None:
        self.files.append((info, data))
        self.nbytes += len(data)
        if len(self.files) >= BATCH_FILES or self.nbytes >= BATCH_BYTES:
            self.flush()

    def big(self, info: BarecatFileInfo, stream: IO[bytes], size: int) -> None:
        """Store a member of ``size`` bytes read from ``stream`` (counted at that size)."""
        self.flush()
        self._one(info, stream=stream, size=size)

    def hard_link(self, info: BarecatFileInfo, name: str, target: str) -> None:
        """An earlier member's file under another name: a row sharing its bytes (a copy in
        a sealed archive, or of a symbolic link, as extracting the link would make)."""
        self.flush()
        try:
            found = self.bc.lookup_file(normalize(target))
        except (InvalidPathBarecatError, *_CONFLICTS, FileNotFoundError):
            self.skip(name, f"hard link to {target!r}, which is not a file stored before it")
            return
        if not self.bc.sealed and not found.is_symlink_entry and (found.size or 0) > 0:
            self.bc.guard_shared_bytes()  # (0.3.1 must not write it now: shards.guard)
            info.shard, info.offset = found.shard, found.offset
            info.size, info.crc32c = found.size, found.crc32c
            self._one(info, placed=True)
            return
        if found.is_symlink_entry or (found.size or 0) <= SMALL_FILE:
            info.mode = found.mode if found.is_symlink_entry else info.mode
            self.small(info, self.bc.read(found))
            return
        with self.bc.open(found, "rb") as stream:
            self.big(info, stream, found.size or 0)

    def flush(self) -> None:
        self._flush_dirs()
        if not self.files:
            return
        batch, nbytes = self.files, self.nbytes
        self.files, self.nbytes = [], 0
        try:
            self.bc.add_many(batch, batch_size=len(batch))
        except _CONFLICTS:  # the batch left nothing behind: redo it one by one
            for info, data in batch:
                self._one(info, data=data)
            return
        self._stored(len(batch), nbytes)

    def _flush_dirs(self) -> None:
        if not self.dirs:
            return
        dirs, self.dirs = self.dirs, []
        try:
            self.bc.add_dirs(dirs)
        except _CONFLICTS:
            for info in dirs:
                try:
                    self.bc.add(info, dir_exist_ok=True)
                except _CONFLICTS as e:
                    self.skip(info.path, f"directory conflicts with a file: {e}")
                    continue
                self.result.dirs += 1
            return
        self.result.dirs += len(dirs)

    def _one(
        self,
        info: BarecatFileInfo,
        data: bytes | None = None,
        stream: IO[bytes] | None = None,
        size: int = 0,
        placed: bool = False,
    ) -> None:
        """Store one file (``placed``: a row for bytes stored already), replacing a file of
        its name, skipped if a directory has it."""
        if self.bc.isdir(info.path):
            self.skip(info.path, "a directory of the same name is stored")
            return
        if self.bc.isfile(info.path):
            self.bc.remove(info.path)
            self.result.replaced += 1
        try:
            if placed:
                self.bc.add_placed([info])
            else:
                self.bc.add(info, data=data, fileobj=cast(BinaryIO | None, stream))
        except _CONFLICTS as e:
            self.skip(info.path, str(e))
            return
        self._stored(1, len(data) if data is not None else (info.size or 0) if placed else size)

    def _stored(self, files: int, nbytes: int) -> None:
        self.result.files += files
        self.result.bytes += nbytes
        if self.on_stored is not None:
            self.on_stored(files, nbytes)


def input_name(stream: object, source: str | None = None) -> str:
    """What to call an input in messages: ``source`` if given, else the stream's file
    name, else ``the input``."""
    name = getattr(stream, "name", None) if source is None else source
    return name if isinstance(name, str) else "the input"


def _archive_path(name: str, importer: _Importer) -> str | None:
    """The member ``name`` as a path to store, or None (skipped, saying why): it climbs
    out of the root, or is deeper than an archive holds."""
    try:
        return check_depth(normalize(name))
    except InvalidPathBarecatError as e:
        importer.skip(name, str(e))
        return None


# -- tar ---------------------------------------------------------------------------------


def import_tar(
    bc: Barecat,
    stream: BinaryIO,
    on_stored: OnStored | None = None,
    *,
    source: str | None = None,
) -> ImportResult:
    """Store every member of the tar stream ``stream`` (plain, gzip, bzip2, xz or zstd:
    told from its first bytes) in ``bc``; one pass, no seeking, constant memory.

    Args:
        bc: The archive, open for writing.
        stream: The tar stream.
        on_stored: Called with the files and bytes of each batch stored.
        source: What to call the input in messages (default: the stream's name).

    Returns:
        What was stored, replaced and left out (member, reason).

    Raises:
        DamagedInputBarecatError: The input is corrupt or truncated (naming it and the
            member being read).
    """
    result = ImportResult()
    importer = _Importer(bc, result, on_stored)
    with reading_input("tar", input_name(stream, source)) as place, open_tar_reader(stream) as tar:
        for member in tar_members(tar):
            place.member = member.name
            _take_tar_member(tar, member, importer)
            place.done()
    importer.flush()
    return result


def _take_tar_member(tar: tarfile.TarFile, member: tarfile.TarInfo, importer: _Importer) -> None:
    path = _archive_path(member.name, importer)
    if path is None:
        return
    perm = member.mode & 0o7777
    owner = {"uid": member.uid, "gid": member.gid, "mtime_ns": tar_mtime_ns(member)}
    unfit = unfit_metadata(**owner)
    if unfit is not None:
        importer.skip(member.name, unfit)
        return
    if member.isdir():
        if path:
            importer.directory(BarecatDirInfo(path, stat.S_IFDIR | perm, **owner))
        return
    if not path:
        importer.skip(member.name, "a file cannot be the archive's root")
    elif member.isreg():
        info = BarecatFileInfo(path, stat.S_IFREG | perm, **owner)
        source = tar.extractfile(member)
        assert source is not None  # a regular member always has contents
        if member.size <= SMALL_FILE:
            importer.small(info, source.read())
        else:
            importer.big(info, source, member.size)
    elif member.issym():
        link = BarecatFileInfo(path, stat.S_IFLNK | 0o777, **owner)
        importer.small(link, os.fsencode(member.linkname))
    elif member.islnk():
        info = BarecatFileInfo(path, stat.S_IFREG | perm, **owner)
        importer.hard_link(info, path, member.linkname)
    else:
        kind = "device" if member.isdev() and not member.isfifo() else "FIFO"
        importer.skip(member.name, f"a {kind}: an archive of bytes cannot hold it")


def tar_mtime_ns(member: tarfile.TarInfo) -> int | None:
    """The mtime in nanoseconds: exact from a PAX header's decimal text when present;
    None if the member's mtime is no number (a PAX ``nan`` or ``inf``)."""
    text = member.pax_headers.get("mtime")
    if text:
        sign = -1 if text.startswith("-") else 1
        whole, _, fraction = text.lstrip("+-").partition(".")
        if whole.isdigit() and (not fraction or fraction.isdigit()):
            return sign * (int(whole) * 1_000_000_000 + int((fraction + "0" * 9)[:9]))
    if not math.isfinite(member.mtime):
        return None
    return int(member.mtime * 1_000_000_000)


_INT64 = 1 << 63


def unfit_metadata(uid: int | None, gid: int | None, mtime_ns: int | None) -> str | None:
    """Why a member whose owner or mtime the index cannot hold (SQLite keeps 64-bit
    integers; a damaged or hostile header may give any number) is left out, or None."""
    if (
        (uid is None or -_INT64 <= uid < _INT64)
        and (gid is None or -_INT64 <= gid < _INT64)
        and (mtime_ns is None or -_INT64 <= mtime_ns < _INT64)
    ):
        return None  # (the common case, without a loop)
    for name, value in (("uid", uid), ("gid", gid), ("mtime", mtime_ns)):
        if value is not None and not -_INT64 <= value < _INT64:
            return f"its {name} ({value}) is out of the range an archive holds"
    return None


# -- zip ---------------------------------------------------------------------------------

_EXTENDED_TIMESTAMP = 0x5455
_UNIX_OWNER = 0x7875
_UNICODE_PATH = 0x7075
_UTF8_FLAG = 0x800
_UNIX_SYSTEM = 3


def import_zip(
    bc: Barecat,
    source: str | BinaryIO,
    on_stored: OnStored | None = None,
    *,
    name: str | None = None,
) -> ImportResult:
    """Store every member of a zip file (a path or a seekable binary file) in ``bc``.

    Args:
        bc: The archive, open for writing.
        source: The zip file's path, or the file.
        on_stored: Called with the files and bytes of each batch stored.
        name: What to call the input in messages (default: its path or file name).

    Returns:
        What was stored, replaced and left out (member, reason).

    Raises:
        DamagedInputBarecatError: The input is corrupt or truncated (naming it and the
            member being read).
    """
    result = ImportResult()
    importer = _Importer(bc, result, on_stored)
    called = name if name is not None else source if isinstance(source, str) else None
    with contextlib.ExitStack() as stack:
        place = stack.enter_context(reading_input("zip", input_name(source, called)))
        raw = stack.enter_context(open(source, "rb")) if isinstance(source, str) else source
        zf = stack.enter_context(zipfile.ZipFile(cast(IO[bytes], BoundedReads(raw))))
        for member in zf.infolist():
            place.member = member.filename
            _take_zip_member(zf, member, importer)
            place.done()
    importer.flush()
    return result


def _take_zip_member(zf: zipfile.ZipFile, member: zipfile.ZipInfo, importer: _Importer) -> None:
    extra = zip_extra_fields(member.extra)
    path = _archive_path(zip_member_name(member, extra), importer)
    if path is None:
        return
    mode = member.external_attr >> 16 if member.create_system == _UNIX_SYSTEM else 0
    owner = {"mtime_ns": _zip_mtime_ns(member, extra)}
    if _UNIX_OWNER in extra:
        owner |= _unix_owner(extra[_UNIX_OWNER])
    unfit = unfit_metadata(owner.get("uid"), owner.get("gid"), owner["mtime_ns"])
    if unfit is not None:
        importer.skip(member.filename, unfit)
        return
    if zip_is_dir(member) or stat.S_ISDIR(mode):
        if path:
            perm = mode & 0o7777 or 0o755
            importer.directory(BarecatDirInfo(path, stat.S_IFDIR | perm, **owner))
        return
    if not path:
        importer.skip(member.filename, "a file cannot be the archive's root")
    elif member.flag_bits & 0x1:
        importer.skip(member.filename, "encrypted zip member (no password support)")
    elif stat.S_ISLNK(mode):
        importer.small(BarecatFileInfo(path, mode, **owner), zf.read(member))
    elif stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # no type bits: a file
        importer.skip(member.filename, "not a regular file, directory or link")
    else:
        info = BarecatFileInfo(path, stat.S_IFREG | (mode & 0o7777 or 0o644), **owner)
        if member.file_size <= SMALL_FILE:
            importer.small(info, zf.read(member))
        else:
            with zf.open(member) as stream:
                importer.big(info, stream, member.file_size)


def zip_is_dir(member: zipfile.ZipInfo) -> bool:
    """Whether a zip member is a directory (its name ends in ``/``): ``is_dir()``, which
    raises ``IndexError`` for a member with no name."""
    return member.filename.endswith("/")


def zip_extra_fields(extra: bytes) -> dict[int, bytes]:
    """A zip member's extra fields by header id (malformed tails are ignored)."""
    fields: dict[int, bytes] = {}
    pos = 0
    while pos + 4 <= len(extra):
        header, size = struct.unpack_from("<HH", extra, pos)
        fields[header] = extra[pos + 4 : pos + 4 + size]
        pos += 4 + size
    return fields


def zip_member_name(member: zipfile.ZipInfo, extra: dict[int, bytes]) -> str:
    """The member's name as its maker meant it.

    A name not flagged UTF-8 is taken from Info-ZIP's Unicode path field if there is one;
    else, from a Unix zip, its raw bytes are the maker's file-name bytes (``zip`` on Linux
    writes them as they are), which Python decoded as cp437: they are decoded again as
    UTF-8, as ``unzip`` and the file system would (invalid bytes surrogate-escaped).
    """
    if member.flag_bits & _UTF8_FLAG:
        return member.filename
    unicode_path = extra.get(_UNICODE_PATH, b"")
    if len(unicode_path) > 5 and unicode_path[0] == 1:
        with contextlib.suppress(UnicodeDecodeError):
            return unicode_path[5:].decode("utf-8")
    if member.create_system == _UNIX_SYSTEM:
        with contextlib.suppress(UnicodeEncodeError):
            return member.filename.encode("cp437").decode("utf-8", "surrogateescape")
    return member.filename


def _zip_mtime_ns(member: zipfile.ZipInfo, extra: dict[int, bytes]) -> int:
    stamp = extra.get(_EXTENDED_TIMESTAMP, b"")
    if len(stamp) >= 5 and stamp[0] & 0x1:  # flags, then the mtime as a signed 32-bit int
        return int(struct.unpack_from("<i", stamp, 1)[0]) * 1_000_000_000
    return int(time.mktime((*member.date_time, 0, 0, -1))) * 1_000_000_000  # local time


def _unix_owner(data: bytes) -> dict[str, int]:
    """uid and gid from Info-ZIP's 'ux' field: version, then (size, little-endian id) x2."""
    if len(data) < 2 or data[0] != 1:
        return {}
    ids = []
    pos = 1
    for _ in range(2):
        if pos >= len(data):
            return {}
        size = data[pos]
        ids.append(int.from_bytes(data[pos + 1 : pos + 1 + size], "little"))
        pos += 1 + size
    return {"uid": ids[0], "gid": ids[1]}


__all__ = [
    "ImportResult",
    "import_tar",
    "import_zip",
    "input_name",
    "tar_mtime_ns",
    "unfit_metadata",
    "zip_extra_fields",
    "zip_is_dir",
    "zip_member_name",
]
