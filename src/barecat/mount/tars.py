"""Tar and zip files mounted as they are: told by their first bytes, indexed once with
``convert --wrap``'s machinery (:func:`barecat.transfer.wrap_archive`: the files become
the shards of an archive over them, nothing is copied), the index kept in the cache
directory (or beside the first file) and used again while every file is unchanged.

Unchanged means the same size, modification time and checksum of a few blocks sampled
across the file; these are recorded in a stamp beside the index once it is complete, so
an index that a killed run left without its stamp is made again. Compressed tars and
zips with compressed members cannot be read in place: they are refused, before anything
is written, with the ``barecat convert`` command that makes an archive of them. Several
files make one tree; a path in two of them is the later file's (as when extracting them
in turn). Imports the transfer and objectstore layers; never prints.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shlex
import tarfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, cast

from barecat.exceptions import BarecatError, FileExistsBarecatError
from barecat.layout import archive_exists, is_sqlite_file
from barecat.objectstore import default_cache_root
from barecat.transfer.convert.formats import (
    BoundedReads,
    compression_of,
    format_of_name,
    reading_input,
)
from barecat.transfer.convert.tar_zip_import import zip_is_dir
from barecat.transfer.convert.wrapping import wrap_archive

MOUNTS_FOLDER = "mounts"
"""Under the cache directory: one folder of indexes per set of mounted files."""
SAMPLED_BLOCKS = 16
"""Blocks read from each file for its checksum: the first, the last, evenly between."""
SAMPLE_SIZE = 4096
STAMP_SUFFIX = ".mounted-from.json"
"""Beside an index: what it was made from (paths, sizes, times, checksums, members left
out or renamed)."""
_STAMP_VERSION = 2
"""2: members with names longer than ``LONGEST_NAME`` or clashing with earlier ones are
left out (an index of version 1 may hold them, and is made again)."""
LONGEST_NAME = 1024
"""Longest name (path component, in bytes) a mount shows, FUSE's limit on older kernels
(4,095 on newer ones): a listing holding a longer one fails whole, with EIO."""
_DIGEST_CHARS = 16
_COMPRESSED_TAR_FORMATS = {"gzip": "tar.gz", "bzip2": "tar.bz2", "xz": "tar.xz", "zstd": "tar.zst"}

log = logging.getLogger(__name__)


class NotMountableInPlaceError(BarecatError, ValueError):
    """A tar or zip whose bytes are compressed: it cannot be read in place (the message
    holds the ``barecat convert`` command that makes an archive of it)."""


@dataclass
class TarIndex:
    """The archive over mounted tar/zip files, and how it came to be."""

    archive: str
    """The index's path: a barecat archive whose shards link to the files."""
    reused: bool
    """True if the files were unchanged since the index was made (nothing was read)."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """Members left out: (member name, reason)."""
    renamed: list[tuple[str, str]] = field(default_factory=list)
    """Members stored under another path: (member name, path)."""


def input_kind(path: str) -> str | None:
    """What the file at ``path`` is, told by its first bytes: ``tar``, ``zip``, the name
    of its compression (``gzip``, ``bzip2``, ``xz``, ``zstd``), or None (not a file, or
    another kind, such as a barecat index)."""
    if not os.path.isfile(path) or is_sqlite_file(path):
        return None
    compression = compression_of(path)
    if compression is not None:
        return compression
    with open(path, "rb") as f:
        head = f.read(tarfile.BLOCKSIZE)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if len(head) == tarfile.BLOCKSIZE:
        with contextlib.suppress(tarfile.HeaderError):  # a bad checksum, or zeros
            tarfile.TarInfo.frombuf(head, "utf-8", "surrogateescape")
            return "tar"
    return "zip" if zipfile.is_zipfile(path) else None


def index_of_tars(
    paths: Sequence[str], *, beside: bool = False, cache_root: str | None = None
) -> TarIndex:
    """The archive over the tar/zip files ``paths`` (one tree, later files winning),
    made now or, if every file is unchanged since it was made, the one made before.

    Args:
        paths: Uncompressed tars and zips whose members are stored, in order.
        beside: Keep the index next to the first file, as ``FILE.barecat``, instead of
            under ``cache_root``'s ``mounts/`` folder.
        cache_root: The cache directory (default: :func:`default_cache_root`).

    Members that cannot be mounted are left out (listed in ``skipped``): those
    :func:`wrap_archive` leaves out, and those with a name longer than
    :data:`LONGEST_NAME` bytes.

    Returns:
        The index's path, whether it was reused, the members left out or renamed.

    Raises:
        NotMountableInPlaceError: A file is compressed or has compressed members (the
            message holds the ``barecat convert`` command for it).
        DamagedInputBarecatError: A file is corrupt or truncated (naming it, and the
            member if known); nothing is left in the cache.
        BarecatError: A file is neither a tar nor a zip; ``FileExistsBarecatError`` if
            ``beside`` and ``FILE.barecat`` exists but was not made by a mount.
    """
    if not paths:
        raise BarecatError("Nothing to mount: no tar or zip file given")
    for path in paths:
        _check_readable_in_place(path)
    real = [os.path.realpath(path) for path in paths]
    index = _index_path(real, beside, cache_root)
    stamp_path = index + STAMP_SUFFIX
    sources = [_fingerprint(path) for path in real]
    stamp = _read_stamp(stamp_path)
    if stamp is not None and stamp.get("sources") == sources and archive_exists(index):
        log.debug("index %s reused: %d file(s) unchanged", index, len(sources))
        skipped, renamed = _pairs(stamp.get("skipped")), _pairs(stamp.get("renamed"))
        return TarIndex(index, True, skipped, renamed)
    if beside and stamp is None and os.path.lexists(index):
        raise FileExistsBarecatError(index, "An archive not made by barecat mount")
    with contextlib.suppress(FileNotFoundError):
        os.remove(stamp_path)  # no stamp while the index is being made again
    folder = os.path.dirname(index)
    os.makedirs(folder, exist_ok=True)
    log.debug("indexing %d file(s) into %s", len(real), index)
    try:
        result = wrap_archive(real, index, overwrite=True, longest_name=LONGEST_NAME)
    except BaseException:
        if not beside:
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only if the failed build left it empty
        raise
    made = {"version": _STAMP_VERSION, "sources": sources, "skipped": result.skipped}
    made["renamed"] = result.renamed
    partial = f"{stamp_path}.part-{os.getpid()}"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(made, f)
    os.replace(partial, stamp_path)
    return TarIndex(index, False, list(result.skipped), list(result.renamed))


def _check_readable_in_place(path: str) -> None:
    kind = input_kind(path)
    if kind in ("tar", "zip"):
        if kind == "zip":
            _check_stored_zip(path)
        return
    if kind is None:
        raise BarecatError(
            f"{path} is not a tar or zip file (several files mount together only as "
            "uncompressed tars and zips)"
        )
    command = _convert_command(path, _COMPRESSED_TAR_FORMATS[kind])
    raise NotMountableInPlaceError(
        f"{path} is {kind}-compressed and cannot be mounted in place; make an archive of "
        f"it with: {command}"
    )


def _check_stored_zip(path: str) -> None:
    with (
        reading_input("zip", path),
        open(path, "rb") as raw,
        zipfile.ZipFile(cast(IO[bytes], BoundedReads(raw))) as zf,
    ):
        for member in zf.infolist():
            packed = member.compress_type != zipfile.ZIP_STORED or member.flag_bits & 0x1
            if packed and not zip_is_dir(member):
                raise NotMountableInPlaceError(
                    f"{path} has compressed or encrypted members ({member.filename!r}) and "
                    f"cannot be mounted in place; make an archive of it with: "
                    f"{_convert_command(path, 'zip')}"
                )


def _convert_command(path: str, fmt: str) -> str:
    """The ``barecat convert`` command that makes ``STEM.barecat`` of ``path``, beside it
    (``data.tar.gz``: ``data.barecat``); a file whose name says no format is piped in."""
    stem = path
    while format_of_name(stem) is not None:  # data.tar.gz -> data.tar -> data
        stem = os.path.splitext(stem)[0]
    output = shlex.quote(f"{stem}.barecat")
    if stem != path:
        return f"barecat convert {shlex.quote(path)} {output}"
    return f"barecat convert --stdin {fmt} {output} < {shlex.quote(path)}"


def _index_path(real: list[str], beside: bool, cache_root: str | None) -> str:
    first = real[0]
    if beside:
        return f"{first}.barecat"
    digest = hashlib.sha256("\0".join(real).encode("utf-8", "surrogateescape")).hexdigest()
    # Real, so the shards' relative links to the files hold through a symlinked ~/.cache.
    root = os.path.realpath(cache_root or default_cache_root())
    folder = os.path.join(root, MOUNTS_FOLDER, digest[:_DIGEST_CHARS])
    return os.path.join(folder, f"{os.path.basename(first)}.barecat")


def _fingerprint(path: str) -> dict[str, object]:
    """The file's size, modification time and a checksum of ``SAMPLED_BLOCKS`` blocks
    spread over it (which catches a rewrite that kept both)."""
    checksum = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        last = max(st.st_size - SAMPLE_SIZE, 0)
        offsets = sorted({last * i // (SAMPLED_BLOCKS - 1) for i in range(SAMPLED_BLOCKS)})
        for offset in offsets:
            checksum.update(os.pread(f.fileno(), SAMPLE_SIZE, offset))
    return {
        "path": path,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sample": checksum.hexdigest(),
    }


def _pairs(value: object) -> list[tuple[str, str]]:
    """A stamp's list of (name, text) pairs, as JSON gives them back (lists)."""
    pairs = value if isinstance(value, list) else []
    return [(str(pair[0]), str(pair[1])) for pair in pairs if len(pair) == 2]


def _read_stamp(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and stamp.get("version") == _STAMP_VERSION else None


__all__ = [
    "LONGEST_NAME",
    "MOUNTS_FOLDER",
    "NotMountableInPlaceError",
    "TarIndex",
    "index_of_tars",
    "input_kind",
]
