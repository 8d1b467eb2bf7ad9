"""Info records for archive entries, the iteration ``Order`` flag, and format constants:
the unlimited shard size, and byte sizes written by humans (``'1G'``, as the reference's
``-s 1G``: binary multiples) for shard size limits and the like.

These are the values the index hands out and accepts: plain slotted dataclasses with the
reference's names and constructor keywords, so user code that builds or inspects
``BarecatFileInfo``/``BarecatDirInfo`` keeps working; and :class:`Address`, where a
file's bytes are, the one value the index hands the shards. Imports only ``paths``.
"""

from __future__ import annotations

import datetime
import enum
import os
import re
import stat
import time
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from barecat.paths import basename, normalize

SHARD_SIZE_UNLIMITED = (1 << 63) - 1
"""Shard size limit meaning 'never rotate' (the reference's value, 2**63 - 1)."""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """``'500M'`` -> 524288000; integers pass through; anything else is a ValueError."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"Not a size: {text!r} (expected e.g. 4096, 500M, 1.5G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


class Address(NamedTuple):
    """Where a file's stored bytes are, and their checksum: what the index answers for a
    path and what the shards read and write. Immutable, and a tuple: it unpacks as
    ``shard, offset, size, crc32c``.
    """

    shard: int
    offset: int
    size: int
    """Bytes in the shard (a sealed file's sealed length)."""
    crc32c: int | None
    """CRC32C of those bytes; None for a row stored without one (never for new bytes)."""


class Order(enum.Flag):
    """Iteration order for index listings; ``DESC`` combines with ``PATH`` or ``ADDRESS``."""

    ANY = 1
    RANDOM = 2
    ADDRESS = 4
    PATH = 8
    DESC = 16


def _mtime_to_ns(value: int | datetime.datetime | None) -> int | None:
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1_000_000_000)
    return value


@dataclass(slots=True, repr=False)
class BarecatEntryInfo:
    """Metadata shared by files and directories; ``path`` is normalized on construction."""

    path: str = ""
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    mtime_ns: int | None = None

    def __post_init__(self) -> None:
        self.path = normalize(self.path) if self.path else ""
        self.mtime_ns = _mtime_to_ns(self.mtime_ns)

    @property
    def name(self) -> str:
        """Last path component, as ``os.DirEntry.name``."""
        return basename(self.path)

    @property
    def mtime_dt(self) -> datetime.datetime | None:
        """Modification time as an aware UTC datetime, or None if unknown."""
        if self.mtime_ns is None:
            return None
        return datetime.datetime.fromtimestamp(self.mtime_ns / 1e9, tz=datetime.timezone.utc)

    def isfile(self) -> bool:
        return False

    def isdir(self) -> bool:
        return False

    def is_file(self) -> bool:
        """``os.DirEntry``-style spelling, so scandir results drop into os-based code."""
        return self.isfile()

    def is_dir(self) -> bool:
        return self.isdir()

    def update_mtime(self) -> None:
        """Stamp the entry with the current time."""
        self.mtime_ns = time.time_ns()

    def fill_from_statresult(self, s: os.stat_result) -> None:
        """Copy mode, owner and mtime from an ``os.stat`` result."""
        self.mode = s.st_mode
        self.uid = s.st_uid
        self.gid = s.st_gid
        self.mtime_ns = s.st_mtime_ns

    def asdict(self) -> dict[str, Any]:
        """The record's fields; ``sealed_size`` only for sealed files (so a plain file's
        dict is the reference's)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if d.get("sealed_size", 0) is None:
            del d["sealed_size"]
        return d


@dataclass(slots=True, repr=False)
class BarecatFileInfo(BarecatEntryInfo):
    """A file: where its bytes live (shard, offset, size) and their CRC32C.

    ``size`` is always the file's own length. In a sealed archive (compressed or
    encrypted files) the shard holds the sealed form instead, ``sealed_size`` bytes long,
    and the CRC32C is that of the sealed bytes; ``stored_size`` is the length in the
    shard either way, the one that operations moving bytes need.
    """

    shard: int | None = None
    offset: int | None = None
    size: int | None = None
    crc32c: int | None = None
    sealed_size: int | None = None

    def isfile(self) -> bool:
        return True

    @property
    def address(self) -> Address:
        """Where the file's stored bytes are (``stored_size`` of them) and their CRC32C.

        Every file the index holds has a place (its row's shard and offset are never
        NULL, an empty file's too); only a record made by hand before it is added has
        none.

        Raises:
            ValueError: the record has no place (``shard`` or ``offset`` is None).
        """
        shard, offset = self.shard, self.offset
        if shard is None or offset is None:
            raise ValueError(f"{self.path!r}: the record has no place in an archive's shards")
        return Address(shard, offset, self.stored_size, self.crc32c)

    @property
    def stored_size(self) -> int:
        """Bytes this file takes in its shard."""
        return (self.size or 0) if self.sealed_size is None else self.sealed_size

    @property
    def end(self) -> int:
        """Offset one past the file's last stored byte in its shard."""
        return (self.offset or 0) + self.stored_size

    @property
    def is_symlink_entry(self) -> bool:
        """True if the stored mode marks this entry as a symbolic link (bytes = target)."""
        return self.mode is not None and stat.S_ISLNK(self.mode)

    @property
    def hard_link_key(self) -> tuple[object, ...] | None:
        """What files restored as hard links of one another have in common, or None.

        Rows that share bytes (``create`` and tar conversion store a hard link once:
        its later names point at the first name's bytes) are one file on disk again
        when they agree on all of it: the same place and CRC32C of at least one byte,
        and the same mode, owner and mtime, which one inode cannot hold two of. Rows
        that share bytes but differ in metadata, links, empty files and damaged rows
        are written each on its own.
        """
        size, mode = self.size, self.mode
        if type(size) is not int or size <= 0 or (mode is not None and stat.S_ISLNK(mode)):
            return None
        if type(self.shard) is not int or type(self.offset) is not int:
            return None
        return (
            self.shard,
            self.offset,
            size,
            self.sealed_size,
            self.crc32c,
            mode,
            self.uid,
            self.gid,
            self.mtime_ns,
        )

    def __repr__(self) -> str:
        return f"BarecatFileInfo({self.path!r}, {self.size} bytes, shard={self.shard})"


@dataclass(slots=True, repr=False)
class BarecatDirInfo(BarecatEntryInfo):
    """A directory with the statistics the index triggers maintain."""

    num_subdirs: int | None = None
    num_files: int | None = None
    size_tree: int | None = None
    num_files_tree: int | None = None

    def isdir(self) -> bool:
        return True

    @property
    def num_entries(self) -> int:
        """Immediate children: subdirectories plus files."""
        return (self.num_subdirs or 0) + (self.num_files or 0)

    def __repr__(self) -> str:
        return f"BarecatDirInfo({self.path!r}, {self.num_files_tree} files, {self.size_tree} B)"
