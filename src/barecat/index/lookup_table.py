"""An in-memory lookup table that answers "where is this file?" without SQLite.

A point query through Python's sqlite3 costs several microseconds, most of a warm
``bc[path]``. For archives opened read-only, the table keeps every file's address in
compact parallel arrays (28 bytes a slot: hash, offset, shard, size, CRC) forming an
open-addressing hash table on the path's 64-bit hash: one or two probes per lookup at any
archive size, built in one streaming pass with nothing sorted. It can never serve a
stale location: it remembers SQLite's file change counter (bytes 24-27 of the index
header, bumped by every commit in rollback-journal mode) and every answer first rereads
that counter, so any commit by another process retires the table. WAL-mode indexes, whose
counter does not move, are never accelerated. Paths whose hashes collide, files of 4 GiB
or more and files without a CRC are left to SQLite. (A path that is *not* in the archive
but shares a 64-bit hash with one that is would be answered with that file: odds of
about one in 2**64 / number of files per lookup.) Standard library only.
"""

from __future__ import annotations

import os
import sqlite3
from array import array

Address = tuple[int, int, int, int | None]
ABSENT = None
_EMPTY = 0
_MAX_U32 = (1 << 32) - 1


def change_counter(index_fd: int) -> bytes | None:
    """The index header's change counter, or None where it cannot be trusted (WAL)."""
    header = os.pread(index_fd, 28, 0)
    if len(header) < 28 or header[18] == 2:  # write version 2 = WAL
        return None
    return header[24:28]


def _slot_hash(path: str) -> int:
    return hash(path) or 1  # 0 marks an empty slot


class LookupTable:
    """Immutable address table for one state of the index (see the module docstring)."""

    def __init__(self, conn: sqlite3.Connection, index_fd: int) -> None:
        self._fd = index_fd
        self.counter = change_counter(index_fd)
        (count,) = conn.execute("SELECT count(*) FROM files").fetchone()
        capacity = 1 << max(4, (count * 4 // 3).bit_length())  # load factor <= 0.75
        self._mask = capacity - 1
        self._hashes = array("q", bytes(8 * capacity))
        self._offsets = array("Q", bytes(8 * capacity))
        self._shards = array("I", bytes(4 * capacity))
        self._sizes = array("I", bytes(4 * capacity))
        self._crcs = array("I", bytes(4 * capacity))
        self._ambiguous: set[int] = set()
        self._count = 0
        for path, shard, offset, size, crc in conn.execute(
            "SELECT path, shard, offset, size, crc32c FROM files"
        ):
            self._insert(_slot_hash(path), shard, offset, size, crc)

    def _insert(self, h: int, shard: int, offset: int, size: int, crc: int | None) -> None:
        if crc is None or size > _MAX_U32 or shard > _MAX_U32:
            self._ambiguous.add(h)
            return
        hashes, mask = self._hashes, self._mask
        i = h & mask
        while True:
            current = hashes[i]
            if current == _EMPTY:
                break
            if current == h:
                self._ambiguous.add(h)
                return
            i = (i + 1) & mask
        hashes[i] = h
        self._offsets[i] = offset
        self._shards[i] = shard
        self._sizes[i] = size
        self._crcs[i] = crc
        self._count += 1

    def is_current(self) -> bool:
        """True while no commit has changed the index since the table was built."""
        return self.counter is not None and change_counter(self._fd) == self.counter

    def find(self, path: str) -> Address | bool | None:
        """The address of ``path``; ``None`` if it is certainly not a file; ``False`` if
        the table cannot tell (see the module docstring) and SQLite must be asked."""
        h = _slot_hash(path)
        if h in self._ambiguous:
            return False
        hashes, mask = self._hashes, self._mask
        i = h & mask
        while True:
            current = hashes[i]
            if current == h:
                return (self._shards[i], self._offsets[i], self._sizes[i], self._crcs[i])
            if current == _EMPTY:
                return ABSENT
            i = (i + 1) & mask

    def __len__(self) -> int:
        return self._count
