"""A lookup table that answers "where is this file?" without SQLite, kept beside the index.

A point query through Python's sqlite3 costs several microseconds, most of a warm
``bc[path]``. For archives opened read-only, the table holds every file's address in an
open-addressing hash table on the path's 64-bit xxh3 hash, 24 bytes a slot (hash; shard
and offset in one word; size; CRC) at a load factor of 3/4, so 32 bytes a file and one or
two probes per lookup at any archive size. It is built in one streaming pass over the
``files`` table and saved as ``INDEX-lookup`` (written to a temporary name, fsynced and
renamed into place, never changed in place), so the next reader of the same archive
memory-maps it instead of building it: no load time, and processes reading the same
archive share its pages.

It can never serve a stale location. The file records the index's identity when it was
built (inode, size, mtime and SQLite's file change counter, bytes 24-27 of the header,
which every commit bumps in rollback-journal mode) and is ignored unless all of them still
match; in memory, every answer first rereads the change counter, so a commit by any process
retires the table. WAL-mode indexes, whose counter does not move, are never accelerated.
The table only ever speeds up hits: a path it does not know, one whose hash collides with
another's, a file of 4 GiB or more, past 2**48 bytes into its shard or without a CRC is
left to SQLite. (A path that is *not* in the archive but shares a 64-bit hash with one that
is would be answered with that file: odds of about one in 2**64 / number of files per
lookup.) The file is a cache: deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sqlite3
import struct
import tempfile
from array import array
from typing import Union

import xxhash

from barecat.index.query import address_problem

Address = tuple[int, int, int, int]
_Section = Union["array[int]", memoryview]
_MAGIC = b"BCLOOKUP"
_VERSION = 1
# magic, version, index inode, index size, index mtime_ns, change counter, files, capacity,
# ambiguous hashes; padded to 64 bytes so the sections stay 8-byte aligned
_HEADER = struct.Struct("<8sIQQq4sQQQ")
_HEADER_SIZE = 64
_OFFSET_BITS = 48
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_MAX_SHARD = (1 << (64 - _OFFSET_BITS)) - 1
_MAX_U32 = (1 << 32) - 1
_EMPTY = 0
_hash64 = xxhash.xxh3_64_intdigest


def change_counter(index_fd: int) -> bytes | None:
    """The index header's change counter, or None where it cannot be trusted (WAL)."""
    header = os.pread(index_fd, 28, 0)
    if len(header) < 28 or header[18] == 2:  # write version 2 = WAL
        return None
    return header[24:28]


def _identity(index_fd: int, counter: bytes) -> tuple[int, int, int, bytes]:
    st = os.fstat(index_fd)
    return (st.st_ino, st.st_size, st.st_mtime_ns, counter)


def _slot_hash(path: str) -> int:
    return _hash64(path.encode("utf-8", "surrogateescape")) or 1  # 0 marks an empty slot


class LookupTable:
    """Immutable address table for one state of the index (see the module docstring)."""

    def __init__(
        self,
        index_fd: int,
        identity: tuple[int, int, int, bytes],
        count: int,
        sections: tuple[_Section, _Section, _Section, _Section],
        ambiguous: set[int],
        keep_alive: mmap.mmap | None = None,
    ) -> None:
        # the index header's first bytes, mapped: rereading the counter costs no system call
        # (SQLite never shortens an index below its first page)
        self._header = mmap.mmap(index_fd, 28, prot=mmap.PROT_READ)
        self.identity = identity
        self.counter = identity[3]
        self._count = count
        hashes, words, sizes, crcs = sections
        self._hashes = memoryview(hashes).cast("B").cast("Q")
        self._words = memoryview(words).cast("B").cast("Q")
        self._sizes = memoryview(sizes).cast("B").cast("I")
        self._crcs = memoryview(crcs).cast("B").cast("I")
        self._capacity = len(self._hashes)
        self._ambiguous = ambiguous
        self._mmap = keep_alive

    # -- building and saving ---------------------------------------------------------

    @classmethod
    def build(cls, conn: sqlite3.Connection, index_fd: int) -> LookupTable | None:
        """A table for the index's current state; None for WAL-mode indexes."""
        counter = change_counter(index_fd)
        if counter is None:
            return None
        identity = _identity(index_fd, counter)  # read before the rows: a commit in between
        # leaves an identity older than the rows, which only ever retires the table early
        (count,) = conn.execute("SELECT count(*) FROM files").fetchone()
        capacity = count * 4 // 3 + 1  # load factor <= 0.75; any size: slots by fastrange
        hashes, words = array("Q", [0]) * capacity, array("Q", [0]) * capacity
        sizes, crcs = array("I", [0]) * capacity, array("I", [0]) * capacity
        ambiguous: set[int] = set()
        stored = 0
        for path, shard, offset, size, crc in conn.execute(
            "SELECT path, shard, offset, size, crc32c FROM files"
        ):
            h = _slot_hash(path)
            if (
                crc is None
                or address_problem(shard, offset, size, crc) is not None  # damaged: SQLite
                or size > _MAX_U32  # says so
                or shard > _MAX_SHARD
                or offset > _OFFSET_MASK
            ):
                ambiguous.add(h)
                continue
            i = (h * capacity) >> 64
            while (current := hashes[i]) != _EMPTY:
                if current == h:
                    ambiguous.add(h)
                    break
                i = i + 1 if i + 1 < capacity else 0
            else:
                hashes[i] = h
                words[i] = (shard << _OFFSET_BITS) | offset
                sizes[i] = size
                crcs[i] = crc
                stored += 1
        return cls(index_fd, identity, stored, (hashes, words, sizes, crcs), ambiguous)

    def save(self, path: str) -> bool:
        """Write the table to ``path`` atomically; False (and nothing left behind) if the
        directory is not writable or the disk is full: the table is only a cache."""
        ino, size, mtime_ns, counter = self.identity
        ambiguous = array("Q", sorted(self._ambiguous))
        header = _HEADER.pack(
            _MAGIC,
            _VERSION,
            ino,
            size,
            mtime_ns,
            counter,
            self._count,
            self._capacity,
            len(ambiguous),
        ).ljust(_HEADER_SIZE, b"\0")
        directory = os.path.dirname(path) or "."
        try:
            fd, temp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=directory)
        except OSError:
            return False
        try:
            with open(fd, "wb") as f:
                f.write(header)
                for section in (self._hashes, self._words, self._sizes, self._crcs, ambiguous):
                    f.write(section)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(temp, 0o644)
            os.replace(temp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(temp)
            return False
        return True

    @classmethod
    def load(cls, path: str, index_fd: int) -> LookupTable | None:
        """The table saved at ``path`` if it was built for the index's current state, else
        None (missing, for another index or state, truncated, or of another version)."""
        counter = change_counter(index_fd)
        if counter is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            header = os.pread(fd, _HEADER.size, 0)
            if len(header) < _HEADER.size:
                return None
            magic, version, ino, size, mtime_ns, saved_counter, count, capacity, n_amb = (
                _HEADER.unpack(header)
            )
            identity = (ino, size, mtime_ns, saved_counter)
            if (magic, version) != (_MAGIC, _VERSION) or identity != _identity(index_fd, counter):
                return None
            expected = _HEADER_SIZE + 24 * capacity + 8 * n_amb
            if capacity < 1 or os.fstat(fd).st_size != expected:
                return None
            mapped = mmap.mmap(fd, expected, prot=mmap.PROT_READ)
        except (OSError, ValueError, struct.error):
            return None
        finally:
            os.close(fd)
        view = memoryview(mapped)
        starts = [_HEADER_SIZE]
        for width in (8, 8, 4, 4):
            starts.append(starts[-1] + width * capacity)
        a, b, c, d, e = starts
        sections = (view[a:b], view[b:c], view[c:d], view[d:e])
        ambiguous = set(view[e : e + 8 * n_amb].cast("Q"))
        return cls(index_fd, identity, count, sections, ambiguous, mapped)

    # -- answering -------------------------------------------------------------------

    def is_current(self) -> bool:
        """True while no commit has changed the index since the table was built."""
        return self._header[24:28] == self.counter

    def find(self, path: str) -> Address | None:
        """(shard, offset, size, crc32c) of ``path``, or None when SQLite must answer."""
        h = _slot_hash(path)
        hashes, capacity = self._hashes, self._capacity
        i = (h * capacity) >> 64
        while (current := hashes[i]) != h:
            if current == _EMPTY:
                return None
            i = i + 1 if i + 1 < capacity else 0
        if h in self._ambiguous:
            return None
        word = self._words[i]
        return (word >> _OFFSET_BITS, word & _OFFSET_MASK, self._sizes[i], self._crcs[i])

    def __len__(self) -> int:
        return self._count
