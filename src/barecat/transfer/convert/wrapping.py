"""Zero-copy wrapping: a barecat index over tar or zip files that stay where they are.

Each input becomes one shard through a symbolic link (shard N -> the N-th input, so a set
of WebDataset-style tar shards becomes one archive), and each member's address is where
its bytes already lie inside it: nothing is copied. The bytes are read once to record
their CRC32C, so reads through the wrap are verified like any other archive's. Only
uncompressed tar and stored (uncompressed, unencrypted) zip members can be wrapped.
What is not file data inside the input (a symbolic link's target) is stored in a shard of
the archive's own; a hard link points at its target's bytes inside the input, as a row
sharing them (the archive then keeps a guard, ``barecat.shards.guard``). Barecat never
writes into a linked shard, so files added later go to new shards.
Uses the public Barecat API; never prints.
"""

from __future__ import annotations

import os
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from typing import IO, cast

from barecat.archive import Barecat
from barecat.checksum import crc32c
from barecat.entries import BarecatDirInfo, BarecatFileInfo
from barecat.exceptions import BarecatError, InvalidPathBarecatError
from barecat.paths import check_depth, normalize
from barecat.transfer.building import building_archive
from barecat.transfer.convert.formats import (
    BoundedReads,
    StrictTarInfo,
    compression_of,
    format_of_file,
    reading_input,
    tar_members,
)
from barecat.transfer.convert.tar_zip_import import (
    ImportResult,
    tar_mtime_ns,
    unfit_metadata,
    zip_extra_fields,
    zip_is_dir,
    zip_member_name,
)

_CHUNK = 1 << 20
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # a zip local file header's fixed part
_LOCAL_MAGIC = b"PK\x03\x04"


def wrap_archive(
    src_path: str | Sequence[str],
    target_path: str,
    overwrite: bool = False,
    *,
    longest_name: int | None = None,
) -> ImportResult:
    """Build the archive ``target_path`` over one tar/zip file, or over several (one shard
    each), without copying their bytes.

    Members are taken as extracting the files in turn would leave them: a later member
    of the same name wins, and one that clashes with what is stored before it (a file
    below a file, a file where a directory is, or the reverse) is left out, as are
    members that cannot be wrapped or stored (devices, names climbing out of the root or
    deeper than an archive holds); each is reported in ``skipped``.

    Args:
        src_path: The uncompressed tar or stored zip file(s).
        target_path: The archive to build (it appears whole, or not at all).
        overwrite: Replace an archive at ``target_path``.
        longest_name: Also leave out members with a name (a path component) longer than
            this many bytes (what a mount can show).

    Returns:
        What was stored, replaced, left out (member, reason) and renamed.

    Raises:
        DamagedInputBarecatError: An input is corrupt or truncated (naming it and the
            member); nothing is built.
        BarecatError: An input is compressed, or has compressed members.
    """
    sources = [src_path] if isinstance(src_path, str) else list(src_path)
    if not sources:
        raise BarecatError("Nothing to wrap: no input files given")
    for source in sources:
        _check_wrappable(source)
    result = ImportResult()
    with building_archive(target_path, overwrite) as bc:
        writer = bc.batch_writer()
        for source in sources:  # shard N links to input N; appends go past them
            writer.link_shard(source)
        tree = _Tree(result, longest_name)
        for number, source in enumerate(sources):
            zipped = format_of_file(source) == "zip"
            with reading_input("zip" if zipped else "tar", source) as place:
                members = _zip_members(source, number) if zipped else _tar_members(source)
                for name, entry, link_target, crc32 in members:
                    place.member = name
                    tree.collect(name, entry, link_target, number, crc32)
                    place.done()
        _store(bc, tree, result)
    return result


def _check_wrappable(path: str) -> None:
    compression = compression_of(path)
    if compression is not None:
        raise BarecatError(
            f"Cannot wrap {path}: it is {compression}-compressed, and wrapping needs the "
            "bytes as they are; decompress it first, or convert without --wrap"
        )


_Member = tuple[str, BarecatFileInfo | BarecatDirInfo | None, str | None, int | None]
"""Member name, its entry (None: cannot be wrapped), a tar link's target, and the CRC-32
a zip gives a stored member's bytes."""


def _tar_members(path: str) -> Iterator[_Member]:
    size = os.path.getsize(path)
    with (
        open(path, "rb") as raw,
        tarfile.open(fileobj=cast(IO[bytes], BoundedReads(raw)), tarinfo=StrictTarInfo) as tar,
    ):
        for m in tar_members(tar):
            owner = {"uid": m.uid, "gid": m.gid, "mtime_ns": tar_mtime_ns(m)}
            perm = m.mode & 0o7777
            if m.isdir():
                yield m.name, BarecatDirInfo("", stat.S_IFDIR | perm, **owner), None, None
            elif m.isreg() and not m.issparse():
                if not 0 <= m.size <= size - m.offset_data:
                    raise tarfile.ReadError(f"{m.name!r} has a size no file holds ({m.size})")
                info = BarecatFileInfo("", stat.S_IFREG | perm, **owner)
                info.offset, info.size = m.offset_data, m.size
                yield m.name, info, None, None
            elif m.issym():
                yield m.name, BarecatFileInfo("", stat.S_IFLNK | 0o777, **owner), m.linkname, None
            elif m.islnk():
                link = BarecatFileInfo("", stat.S_IFREG | perm, **owner)
                yield m.name, link, "\0" + m.linkname, None  # '\0': a hard link, by name
            else:
                yield m.name, None, None, None


def _zip_members(path: str, number: int) -> Iterator[_Member]:
    with open(path, "rb") as raw:
        reads = BoundedReads(raw)
        with zipfile.ZipFile(cast(IO[bytes], reads)) as zf:
            for m in zf.infolist():
                mode = m.external_attr >> 16 if m.create_system == 3 else 0
                name = zip_member_name(m, zip_extra_fields(m.extra))  # as import reads it
                if zip_is_dir(m):
                    perm = stat.S_IMODE(mode) or 0o755
                    yield name, BarecatDirInfo("", stat.S_IFDIR | perm), None, None
                    continue
                if m.compress_type != zipfile.ZIP_STORED or m.flag_bits & 0x1:
                    raise BarecatError(
                        f"Cannot wrap {path}: member {m.filename!r} is compressed or encrypted; "
                        "wrap needs a zip made with no compression (zip -0)"
                    )
                info = BarecatFileInfo(
                    "", (stat.S_IFMT(mode) or stat.S_IFREG) | (stat.S_IMODE(mode) or 0o644)
                )
                info.offset, info.size, info.shard = _data_start(reads, m), m.file_size, number
                if m.compress_size != m.file_size:  # (zipfile would read compress_size bytes)
                    raise zipfile.BadZipFile(
                        f"{m.filename!r} is stored, yet its sizes differ "
                        f"({m.compress_size} and {m.file_size})"
                    )
                if not 0 <= m.file_size <= reads.size - info.offset:
                    raise zipfile.BadZipFile(
                        f"{m.filename!r} has a size no file holds ({m.file_size})"
                    )
                yield name, info, None, m.CRC


def _data_start(raw: BoundedReads, m: zipfile.ZipInfo) -> int:
    """Where a stored zip member's bytes start: after its local header, read at the
    offset the central directory gives."""
    if m.header_offset < 0:
        raise zipfile.BadZipFile(f"bad offset of {m.filename!r}")
    raw.seek(m.header_offset)
    header = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
    if header[0] != _LOCAL_MAGIC:
        raise zipfile.BadZipFile(f"bad local header of {m.filename!r}")
    name_len, extra_len = int(header[-2]), int(header[-1])
    return int(m.header_offset) + _LOCAL_HEADER.size + name_len + extra_len


class _Tree:
    """The members taken so far, as extracting them in turn would leave them: files and
    links by path (a later one of a path wins), directories, and the directories their
    paths imply; what clashes with them is left out."""

    def __init__(self, result: ImportResult, longest_name: int | None) -> None:
        self.result = result
        self.longest_name = longest_name
        self.entries: dict[str, BarecatFileInfo | BarecatDirInfo] = {}
        self.links: dict[str, tuple[BarecatFileInfo, bytes]] = {}
        self.dirs: set[str] = set()
        """Every directory: stored ones and those a stored path goes through."""
        self.crc32: dict[str, tuple[int, str]] = {}
        """Files whose bytes a zip gives a CRC-32: path -> (CRC-32, member name)."""
        self.shared = False
        """A hard link shares its target's bytes."""

    def collect(
        self,
        name: str,
        entry: BarecatFileInfo | BarecatDirInfo | None,
        link_target: str | None,
        number: int,
        crc32: int | None = None,
    ) -> None:
        """Take the member ``name`` of input ``number``, or leave it out saying why;
        ``crc32``: what its bytes must give (a zip's), checked when they are stored."""
        path, why = self._path(name, entry)
        if why is not None:
            self.result.skipped.append((name, why))
            return
        if entry is None:
            return
        if not path:  # the root ('./') itself
            if isinstance(entry, BarecatFileInfo):
                self.result.skipped.append((name, "a file cannot be the archive's root"))
            return
        if name.startswith("/") or ".." in name.split("/"):
            self.result.renamed.append((name, path))
        entry.path = path
        if isinstance(entry, BarecatDirInfo):
            self.entries[path] = entry
            self._add_dirs(path)
            return
        own: bytes | None = None  # what goes in a shard of its own
        if link_target is not None and link_target.startswith("\0"):
            target = self.entries.get(_normalized_or_empty(link_target[1:]))
            if not isinstance(target, BarecatFileInfo):
                self.result.skipped.append((name, f"hard link to {link_target[1:]!r}, not stored"))
                return
            entry.shard, entry.offset, entry.size = target.shard, target.offset, target.size
            self.shared = True  # (the target's bytes, where they are in the input)
        elif link_target is not None:
            own = os.fsencode(link_target)
        if path in self.entries or path in self.links:
            self.result.replaced += 1
            self.entries.pop(path, None)
            self.links.pop(path, None)
            self.crc32.pop(path, None)
        self._add_dirs(path.rpartition("/")[0])
        if own is not None:
            self.links[path] = (entry, own)
            return
        if entry.shard is None:
            entry.shard = number
        self.entries[path] = entry
        if crc32 is not None:
            self.crc32[path] = (crc32, name)

    def _path(
        self, name: str, entry: BarecatFileInfo | BarecatDirInfo | None
    ) -> tuple[str, str | None]:
        """The member's path, and why it is left out (None: it is taken)."""
        try:
            path = check_depth(normalize(name))
        except InvalidPathBarecatError as e:
            return "", str(e)
        if entry is None:
            return path, "not a file, directory or link: cannot be wrapped"
        unfit = unfit_metadata(entry.uid, entry.gid, entry.mtime_ns)
        if unfit is not None:
            return path, unfit
        limit = self.longest_name
        if limit is not None:
            longest = max(len(part.encode("utf-8", "surrogateescape")) for part in path.split("/"))
            if longest > limit:
                return (
                    path,
                    f"a name of {longest:,} bytes, more than the {limit:,} a mount can show",
                )
        parent = path.rpartition("/")[0]
        if parent and parent not in self.dirs and self._file_above(parent):
            return path, f"A parent of {path!r} is a file"
        if isinstance(entry, BarecatDirInfo):
            if self._is_file(path):
                return path, "a file of the same name is stored"
        elif path in self.dirs:
            return path, "a directory of the same name is stored"
        return path, None

    def _is_file(self, path: str) -> bool:
        return path in self.links or isinstance(self.entries.get(path), BarecatFileInfo)

    def _file_above(self, parent: str) -> bool:
        """Whether ``parent`` or a directory above it is a stored file."""
        while parent:
            if parent in self.dirs:
                return False  # (a directory's own parents are all directories)
            if self._is_file(parent):
                return True
            parent = parent.rpartition("/")[0]
        return False

    def _add_dirs(self, path: str) -> None:
        while path and path not in self.dirs:
            self.dirs.add(path)
            path = path.rpartition("/")[0]


def _normalized_or_empty(name: str) -> str:
    try:
        return normalize(name)
    except InvalidPathBarecatError:
        return ""


def _store(bc: Barecat, tree: _Tree, result: ImportResult) -> None:
    """Store what the tree holds, once every input has been read."""
    dirs = [e for e in tree.entries.values() if isinstance(e, BarecatDirInfo)]
    files = []
    for info in tree.entries.values():
        if isinstance(info, BarecatFileInfo):
            zipped = tree.crc32.get(info.path)
            if zipped is None:
                info.crc32c = bc.sharder.crc_of_range(*info.address[:3])
            elif not _checked_crc32(bc, info, zipped[0]):
                result.skipped.append((zipped[1], "its bytes do not match the zip's CRC-32"))
                continue
            files.append(info)
    bc.add_dirs(dirs)
    if tree.shared:
        bc.guard_shared_bytes()
    for start in range(0, len(files), 4096):
        bc.add_placed(files[start : start + 4096])
    own = list(tree.links.values())
    bc.add_many(own)
    result.dirs = len(dirs)
    result.files = len(files) + len(own)
    result.bytes = sum(f.size or 0 for f in files) + sum(len(data) for _, data in own)


def _checked_crc32(bc: Barecat, info: BarecatFileInfo, crc32: int) -> bool:
    """Whether a zip member's bytes give its ``crc32``; their CRC32C is set on ``info``
    on the way (one read of the bytes for both)."""
    shard, offset, size = info.address[:3]
    crc32c_value, crc32_value, done = 0, 0, 0
    while done < size:
        chunk = bc.sharder.read_from_address(shard, offset + done, min(_CHUNK, size - done))
        crc32c_value = crc32c(chunk, crc32c_value)
        crc32_value = zlib.crc32(chunk, crc32_value)
        done += len(chunk)
    info.crc32c = crc32c_value
    return crc32_value == crc32


__all__ = ["wrap_archive"]
