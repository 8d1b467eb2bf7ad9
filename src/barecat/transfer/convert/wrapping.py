"""Zero-copy wrapping: a barecat index over tar or zip files that stay where they are.

Each input becomes one shard through a symbolic link (shard N -> the N-th input, so a set
of WebDataset-style tar shards becomes one archive), and each member's address is where
its bytes already lie inside it: nothing is copied. The bytes are read once to record
their CRC32C, so reads through the wrap are verified like any other archive's. Only
uncompressed tar and stored (uncompressed, unencrypted) zip members can be wrapped.
What is not file data inside the input (a symbolic link's target) or would make two files
share bytes (a hard link: a copy of its target) is stored in a shard of the archive's
own. Barecat never writes into a linked shard, so files added later go to new shards.
Uses the public Barecat API; never prints.
"""

from __future__ import annotations

import os
import stat
import struct
import tarfile
import zipfile
from collections.abc import Iterator, Sequence

from barecat.archive import Barecat
from barecat.entries import BarecatDirInfo, BarecatFileInfo
from barecat.exceptions import BarecatError, InvalidPathBarecatError
from barecat.paths import normalize
from barecat.transfer.building import building_archive
from barecat.transfer.convert.formats import compression_of, format_of_file
from barecat.transfer.convert.tar_zip_import import (
    ImportResult,
    tar_mtime_ns,
    zip_extra_fields,
    zip_member_name,
)

_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # a zip local file header's fixed part
_LOCAL_MAGIC = b"PK\x03\x04"


def wrap_archive(
    src_path: str | Sequence[str], target_path: str, overwrite: bool = False
) -> ImportResult:
    """Build the archive ``target_path`` over one tar/zip file, or over several (one shard
    each), without copying their bytes. A later member of the same name wins, as when
    extracting; members that cannot be wrapped are reported in ``skipped``."""
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
        entries: dict[str, BarecatFileInfo | BarecatDirInfo] = {}
        links: dict[str, tuple[BarecatFileInfo, bytes | tuple[int, int, int]]] = {}
        for number, source in enumerate(sources):
            zipped = format_of_file(source) == "zip"
            members = _zip_members(source, number) if zipped else _tar_members(source)
            for name, entry, link_target in members:
                _collect(name, entry, link_target, number, entries, links, result)
        _store(bc, entries, links, result)
    return result


def _check_wrappable(path: str) -> None:
    compression = compression_of(path)
    if compression is not None:
        raise BarecatError(
            f"Cannot wrap {path}: it is {compression}-compressed, and wrapping needs the "
            "bytes as they are; decompress it first, or convert without --wrap"
        )


_Member = tuple[str, BarecatFileInfo | BarecatDirInfo | None, str | None]
"""Member name, its entry (None: cannot be wrapped), and a tar link's target."""


def _tar_members(path: str) -> Iterator[_Member]:
    with tarfile.open(path, "r:") as tar:
        for m in tar:
            owner = {"uid": m.uid, "gid": m.gid, "mtime_ns": tar_mtime_ns(m)}
            perm = m.mode & 0o7777
            if m.isdir():
                yield m.name, BarecatDirInfo("", stat.S_IFDIR | perm, **owner), None
            elif m.isreg() and not m.issparse():
                info = BarecatFileInfo("", stat.S_IFREG | perm, **owner)
                info.offset, info.size = m.offset_data, m.size
                yield m.name, info, None
            elif m.issym():
                yield m.name, BarecatFileInfo("", stat.S_IFLNK | 0o777, **owner), m.linkname
            elif m.islnk():
                link = BarecatFileInfo("", stat.S_IFREG | perm, **owner)
                yield m.name, link, "\0" + m.linkname  # '\0': a hard link, by member name
            else:
                yield m.name, None, None


def _zip_members(path: str, number: int) -> Iterator[_Member]:
    with open(path, "rb") as raw, zipfile.ZipFile(raw) as zf:
        for m in zf.infolist():
            mode = m.external_attr >> 16 if m.create_system == 3 else 0
            name = zip_member_name(m, zip_extra_fields(m.extra))  # as import reads it
            if m.is_dir():
                perm = stat.S_IMODE(mode) or 0o755
                yield name, BarecatDirInfo("", stat.S_IFDIR | perm), None
                continue
            if m.compress_type != zipfile.ZIP_STORED or m.flag_bits & 0x1:
                raise BarecatError(
                    f"Cannot wrap {path}: member {m.filename!r} is compressed or encrypted; "
                    "wrap needs a zip made with no compression (zip -0)"
                )
            raw.seek(m.header_offset)
            header = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
            if header[0] != _LOCAL_MAGIC:
                raise BarecatError(f"Cannot wrap {path}: bad local header of {m.filename!r}")
            name_len, extra_len = header[-2], header[-1]
            kind = stat.S_IFMT(mode) or stat.S_IFREG
            info = BarecatFileInfo("", kind | (stat.S_IMODE(mode) or 0o644))
            info.offset = m.header_offset + _LOCAL_HEADER.size + name_len + extra_len
            info.size, info.shard = m.file_size, number
            yield name, info, None


def _collect(
    name: str,
    entry: BarecatFileInfo | BarecatDirInfo | None,
    link_target: str | None,
    number: int,
    entries: dict[str, BarecatFileInfo | BarecatDirInfo],
    links: dict[str, tuple[BarecatFileInfo, bytes | tuple[int, int, int]]],
    result: ImportResult,
) -> None:
    try:
        path = normalize(name)
    except InvalidPathBarecatError as e:
        result.skipped.append((name, str(e)))
        return
    if entry is None:
        result.skipped.append((name, "not a file, directory or link: cannot be wrapped"))
        return
    if not path:
        return  # the root ('./') itself
    if name.startswith("/") or ".." in name.split("/"):
        result.renamed.append((name, path))
    entry.path = path
    if isinstance(entry, BarecatFileInfo):
        if path in entries or path in links:
            result.replaced += 1
            entries.pop(path, None)
            links.pop(path, None)
        if link_target is not None and link_target.startswith("\0"):
            target = entries.get(_normalized_or_empty(link_target[1:]))
            if not isinstance(target, BarecatFileInfo):
                result.skipped.append((name, f"hard link to {link_target[1:]!r}, not stored"))
                return
            # A copy of the target's bytes: files in a barecat never share a byte range.
            address = target.address[:3]  # (shard, offset, size)
            links[path] = (entry, address)
            return
        if link_target is not None:
            links[path] = (entry, os.fsencode(link_target))
            return
        elif entry.shard is None:
            entry.shard = number
    entries[path] = entry


def _normalized_or_empty(name: str) -> str:
    try:
        return normalize(name)
    except InvalidPathBarecatError:
        return ""


def _store(
    bc: Barecat,
    entries: dict[str, BarecatFileInfo | BarecatDirInfo],
    links: dict[str, tuple[BarecatFileInfo, bytes | tuple[int, int, int]]],
    result: ImportResult,
) -> None:
    dirs = [e for e in entries.values() if isinstance(e, BarecatDirInfo)]
    files = [e for e in entries.values() if isinstance(e, BarecatFileInfo)]
    for info in files:
        info.crc32c = bc.sharder.crc_of_range(*info.address[:3])
    bc.add_dirs(dirs)
    for start in range(0, len(files), 4096):
        bc.add_placed(files[start : start + 4096])
    own = [
        (info, data if isinstance(data, bytes) else bc.sharder.read_from_address(*data))
        for info, data in links.values()
    ]
    bc.add_many(own)
    result.dirs = len(dirs)
    result.files = len(files) + len(own)
    result.bytes = sum(f.size or 0 for f in files) + sum(len(data) for _, data in own)


__all__ = ["wrap_archive"]
