"""An in-memory lookup table that answers "where is this file?" without SQLite.

A point query through Python's sqlite3 costs several microseconds, most of a warm
``bc[path]``. For archives opened read-only, the table keeps every file's address in
compact parallel arrays (about 36 bytes per file) sorted by the path's 64-bit hash, and
answers with one binary search. It can never serve a stale location: it remembers
SQLite's file change counter (bytes 24-27 of the index header, bumped by every commit in
rollback-journal mode) and every answer first rereads that counter, so any commit by
another process retires the table. WAL-mode indexes, whose counter does not move, are
never accelerated. Paths whose hashes collide are left to SQLite. Standard library only.
"""

from __future__ import annotations

import os
import sqlite3
from array import array
from bisect import bisect_left

Address = tuple[int, int, int, int | None]
ABSENT = None
_NO_CRC = -1


def change_counter(index_fd: int) -> bytes | None:
    """The index header's change counter, or None where it cannot be trusted (WAL)."""
    header = os.pread(index_fd, 28, 0)
    if len(header) < 28 or header[18] == 2:  # write version 2 = WAL
        return None
    return header[24:28]


class LookupTable:
    """Immutable address table for one state of the index (see the module docstring)."""

    def __init__(self, conn: sqlite3.Connection, index_fd: int) -> None:
        self._fd = index_fd
        self.counter = change_counter(index_fd)
        hashes, shards, offsets, sizes, crcs = (array("q") for _ in range(5))
        for path, shard, offset, size, crc in conn.execute(
            "SELECT path, shard, offset, size, crc32c FROM files"
        ):
            hashes.append(hash(path))
            shards.append(shard)
            offsets.append(offset)
            sizes.append(size)
            crcs.append(_NO_CRC if crc is None else crc)
        # Sort all columns by hash through one permutation: far less memory than tuples.
        order = sorted(range(len(hashes)), key=hashes.__getitem__)
        self._hashes = array("q", (hashes[i] for i in order))
        del hashes
        self._shards = array("q", (shards[i] for i in order))
        self._offsets = array("q", (offsets[i] for i in order))
        self._sizes = array("q", (sizes[i] for i in order))
        self._crcs = array("q", (crcs[i] for i in order))
        del order, shards, offsets, sizes, crcs
        hashes = self._hashes
        self._ambiguous = {hashes[i] for i in range(1, len(hashes)) if hashes[i] == hashes[i - 1]}

    def is_current(self) -> bool:
        """True while no commit has changed the index since the table was built."""
        return self.counter is not None and change_counter(self._fd) == self.counter

    def find(self, path: str) -> Address | bool | None:
        """The address of ``path``; ``None`` if it is certainly not a file; ``False`` if
        the table cannot tell (hash collision) and SQLite must be asked."""
        h = hash(path)
        if h in self._ambiguous:
            return False
        i = bisect_left(self._hashes, h)
        if i == len(self._hashes) or self._hashes[i] != h:
            return ABSENT
        crc = self._crcs[i]
        return (self._shards[i], self._offsets[i], self._sizes[i], None if crc == _NO_CRC else crc)

    def __len__(self) -> int:
        return len(self._hashes)
