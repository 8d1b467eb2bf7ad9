"""Directory listings handed to the kernel whole: names with offsets, and with every
entry's attributes (``READDIRPLUS``), packed straight into libfuse's ``struct stat``.

mfusepy fills listings with names and modes only, at offset 0, which libfuse 3 then
cannot turn into the kernel's name and attribute cache: every file read after a listing
costs a ``LOOKUP`` first. Filled with offsets and full attributes, the listing itself
creates those entries, so ``find DIR -type f | xargs cat`` through a read-only mount
sends one request per file (the read) instead of two. Because libfuse asks again for
each continuation of a listing (by offset), the operations keep the listings being read
(``ArchiveFilesystem.listing``). Directories report a block size that fits their
listing (``listing_block_size``, up to 1 MiB), so a directory of a few thousand entries
is one request.

Attributes are packed by one precompiled ``struct`` laid out from mfusepy's own
``c_stat`` (so the platform's layout is the binding's) into the bytes of a ``struct
stat``, which libfuse's filler takes as they are (its prototype is cast to take bytes):
about 1 µs an entry, where filling a ``c_stat`` object field by field from a dict
(mfusepy's ``set_st_attrs``) takes 5. A listing is the one place where a mount pays per
entry, and ``find`` or ``ls`` waits for it. Imports mfusepy (the ``mount`` extra) only.
"""

from __future__ import annotations

import ctypes
import operator
import struct
from collections.abc import Callable, Sequence
from typing import Any

import mfusepy

READDIR_PLUS = 1
"""libfuse's ``FUSE_READDIR_PLUS``: the kernel wants attributes with the names."""
CAP_READDIRPLUS = 1 << 13
CAP_READDIRPLUS_AUTO = 1 << 14
"""libfuse's ``FUSE_CAP_READDIRPLUS`` and ``_AUTO`` (which asks for attributes with the
first part of a listing only)."""
FILL_DIR_PLUS = 2
"""libfuse's ``FUSE_FILL_DIR_PLUS``: this entry carries its attributes."""

LISTING_BLOCK_SIZE = 1 << 20
"""The largest ``st_blksize`` of a directory. glibc's ``opendir`` sizes its buffer for
the kernel's listing by it (32 KiB at least, 1 MiB at most), and Linux sizes each
request for a FUSE listing by that buffer (up to ``max_pages``, 1 MiB as libfuse sets
it; kernels before 6.16 ask for one page at a time whatever the buffer): a directory of
5,000 files is listed in one request with attributes instead of 25."""
LISTING_ENTRY_BYTES = 256
"""Room for one entry of a listing with attributes (152 bytes, and the name, padded)."""
_GLIBC_LISTING_BUFFER = 32 << 10


def listing_block_size(entries: int) -> int:
    """``st_blksize`` for a directory of this many entries: room for its whole listing
    with attributes, a power of two up to ``LISTING_BLOCK_SIZE``; 0 (the kernel's
    default, glibc then reads 32 KiB at a time) for one that fits in 32 KiB. Not 1 MiB
    for every directory: the kernel makes a buffer of the reader's size for each
    request, which doubled ``find``'s system time over 20,000 directories of 5 files."""
    need = (entries + 2) * LISTING_ENTRY_BYTES
    if need <= _GLIBC_LISTING_BUFFER:
        return 0
    return min(1 << (need - 1).bit_length(), LISTING_BLOCK_SIZE)


Listing = Sequence[tuple[bytes, bytes]]
"""A directory's entries: encoded name and its attributes as made by ``packed_stat``."""

_FILLER = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, mfusepy.c_off_t, ctypes.c_int
)
"""libfuse's ``fuse_fill_dir_t`` taking the ``struct stat`` as bytes: packed attributes
go to libfuse as they are, with no ``c_stat`` object made for each entry."""

_PACKED = (
    "st_mode",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_size",
    "st_blocks",
    *(
        f"{when}.{part}"
        for when in ("st_atimespec", "st_mtimespec", "st_ctimespec")
        for part in ("tv_sec", "tv_nsec")
    ),
    "st_blksize",
)
"""The ``c_stat`` fields ``packed_stat`` sets, in its arguments' order (times as
seconds and nanoseconds)."""


def _field(name: str) -> tuple[int, str]:
    """Offset in ``c_stat`` and ``struct`` code of a (possibly nested) field."""
    offset, owner, code = 0, mfusepy.c_stat, ""
    for part in name.split("."):
        offset += getattr(owner, part).offset
        owner = dict(owner._fields_)[part]
        code = getattr(owner, "_type_", "")
    return offset, code


def _stat_packer() -> tuple[struct.Struct, Callable[[tuple[int, ...]], tuple[int, ...]]]:
    """A native-layout ``struct`` writing the packed fields at their offsets (zeros
    elsewhere), and the reordering of ``_PACKED`` values into its order."""
    fields = sorted((*_field(name), i) for i, name in enumerate(_PACKED))
    layout = "@"
    for offset, code, _ in fields:
        pad = offset - struct.calcsize(layout)
        layout += f"{pad}x{code}" if pad else code
    layout += f"{ctypes.sizeof(mfusepy.c_stat) - struct.calcsize(layout)}x"
    return struct.Struct(layout), operator.itemgetter(*(i for _, _, i in fields))


_STAT, _IN_LAYOUT_ORDER = _stat_packer()


def packed_stat(
    mode: int,
    nlink: int,
    uid: int,
    gid: int,
    size: int,
    blocks: int,
    mtime_ns: int,
    blksize: int = 0,
) -> bytes:
    """The bytes of a ``struct stat`` with these attributes (access and change times are
    the mtime; ``blksize`` 0: the kernel's default)."""
    sec, nsec = divmod(mtime_ns, 1_000_000_000)
    values = (mode, nlink, uid, gid, size, blocks, sec, nsec, sec, nsec, sec, nsec, blksize)
    return _STAT.pack(*_IN_LAYOUT_ORDER(values))


class ListingFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE, filling listings from ``operations.listing(path, offset)`` and
    attributes from ``operations.packed_attributes(path)`` (both required).

    ``operations.listing(path, offset, plus)`` gives, when ``plus`` is false, entries
    whose attributes carry the type only (all a plain listing reads of them).

    By default every part of a listing carries every entry's attributes (READDIRPLUS,
    not libfuse's "auto", where only the first part does), so a program that lists a big
    directory and then opens or stats its files (a data loader, ``ls -l``, ``du``) costs
    no request per file (a shuffled read of 10,000 files in one directory: 9,809
    LOOKUPs fewer, 1.4-1.6x faster); the price is that the kernel makes an inode for
    every entry listed, also for ``find``, which needs none (over 1,000,000 files: 855
    MiB of kernel memory instead of 174). ``plain_listings``: no attributes in any
    listing (READDIRPLUS off), for walks that read names and types only (``find``
    over 200,000 files in 200 directories: 3-4x faster; over the 8,700 small directories
    of the Python standard library only 1.2x, as each directory entered costs a LOOKUP;
    ``du`` and ``ls -l`` then cost a LOOKUP per entry).
    """

    def __init__(
        self, operations: Any, *args: Any, plain_listings: bool = False, **kwargs: Any
    ) -> None:
        for required in ("listing", "packed_attributes"):
            if not callable(getattr(operations, required, None)):
                raise TypeError(f"ListingFUSE needs operations.{required}")
        self.plain_listings = plain_listings
        super().__init__(operations, *args, **kwargs)

    def init_fuse_3(self, conn: Any, config: Any) -> None:
        if conn and conn.contents.capable & CAP_READDIRPLUS:
            info = conn.contents
            if self.plain_listings:
                info.want &= ~(CAP_READDIRPLUS | CAP_READDIRPLUS_AUTO)
            else:
                info.want = (info.want | CAP_READDIRPLUS) & ~CAP_READDIRPLUS_AUTO
        super().init_fuse_3(conn, config)

    def getattr_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        """Attributes packed as a listing packs them, copied into libfuse's ``struct
        stat`` at once (mfusepy fills it field by field from a dict)."""
        decoded = "/" if path is None else path.decode(self.encoding, self.errors)
        packed: bytes = self.operations.packed_attributes(decoded)
        ctypes.memmove(buf, packed, len(packed))
        return 0

    def readdir_fuse_3(
        self, path: bytes | None, buf: Any, filler: Any, offset: int, fip: Any, flags: int
    ) -> int:
        decoded = "/" if path is None else path.decode(self.encoding, self.errors)
        plus = bool(flags & READDIR_PLUS)
        entries: Listing = self.operations.listing(decoded, offset, plus)
        fill = FILL_DIR_PLUS if plus else 0  # (a plain one reads the type only)
        filler = ctypes.cast(filler, _FILLER)
        for position in range(offset, len(entries)):
            name, st = entries[position]
            if filler(buf, name, st, position + 1, fill) != 0:
                break  # the kernel's buffer is full: it asks again from this offset
        return 0


__all__ = ["ListingFUSE", "Listing", "listing_block_size", "packed_stat"]
