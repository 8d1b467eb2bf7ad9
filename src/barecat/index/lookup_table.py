"""A lookup table that answers "where is this file?" without SQLite, kept beside the index.

A point query through Python's sqlite3 costs several microseconds, most of a warm
``bc[path]``. For archives opened read-only, the table holds every file's address in an
open-addressing hash table on the path's 64-bit xxh3 hash, 32 bytes a slot (hash; shard
and offset in one word; where the path's bytes are; size and CRC in one word: a slot is
one cache line) at a load factor of 3/4, plus the paths themselves, so 43 bytes a file
and its path's length, and one or two probes per lookup at any archive size. It is built
in one streaming pass over the ``files`` table and saved as ``INDEX-lookup`` (written to
a temporary name, fsynced and renamed into place, never changed in place), so the next
reader of the same archive memory-maps it instead of building it: no load time, and
processes reading the same archive share its pages.

It can never give a wrong answer. A slot whose hash matches answers only if the path
stored with it is the one asked for, byte for byte: a path that is not in the archive but
shares its 64-bit hash with one that is goes on probing and ends at an empty slot, so
SQLite answers it (a probe visits each slot at most once, so even a table without an
empty slot, which is damaged and never used, ends every probe). It can never serve a
stale location either. The file records the
index's identity when it was built (inode, size, mtime and SQLite's file change counter,
bytes 24-27 of the header, which every commit bumps in rollback-journal mode) and is
ignored unless all of them still match; in memory, every answer first rereads the change
counter, so a commit by any process retires the table. WAL-mode indexes, whose counter
does not move, are never accelerated. The table only ever speeds up hits: a path it does
not hold (a file of 4 GiB or more, past 2**48 bytes into its shard, without a CRC, or
whose row is damaged) is left to SQLite. The file is a cache: deleting it is always safe.

Nor can a forged file answer. Its identity can be copied from the index, so the file
also holds the SHA-256 of its contents (:meth:`LookupTable.content_hash`), which a
reader checks (:meth:`LookupTable.verify`) before the table answers anything, and which
must be vouched for by what only a writer of the index or the holder of the archive's
key can make: the index's ``lookup_table`` config row (:data:`CONFIG_KEY`: the hash and
the change counter of the commit that wrote it, in the same transaction), or a tag under
the key (``tag``, made and checked by the caller). Which one a reader asks for is
``index/reading.py``'s choice. It knows the ``files`` table's columns, nothing else; it
answers with ``entries.Address``.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sqlite3
import struct
from array import array
from typing import Union

import xxhash

from barecat.entries import Address
from barecat.index.connection import select
from barecat.kernels import AddressTable, fill_table
from barecat.kernels import python as python_kernels

_Slots = Union["array[int]", memoryview]
_Paths = bytearray | mmap.mmap
_MAGIC = b"BCLOOKUP"
_VERSION = 3
# magic, version, index inode, index size, index mtime_ns, change counter, files, capacity,
# bytes of paths, SHA-256 of the contents, the tag of the key (zeros: none): 128 bytes,
# so the sections stay 8-byte aligned
_HEADER = struct.Struct("<8sIQQq4sQQQ32s32s")
_HEADER_SIZE = _HEADER.size
_TAGGED = _HEADER_SIZE - 32  # the tag covers every header byte before it
_SIZES = struct.Struct("<QQQ")  # files, capacity, bytes of paths: hashed with the contents
_NO_TAG = bytes(32)
CONFIG_KEY = "lookup_table"
"""The config row that vouches for a saved table: the hex SHA-256 of its contents
(``value_text``) and the index's change counter after the commit that wrote the row
(``value_int``)."""
_WORDS = python_kernels.SLOT_WORDS  # (the slot's layout: barecat/kernels/python.py)
_SLOT_SIZE = 8 * _WORDS
_BUILD_ROWS = 1 << 14  # rows handed to the kernel at a time while building
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


def identity_now(index_fd: int) -> tuple[int, int, int, bytes] | None:
    """The index's identity as a table records it (inode, size, mtime, change counter),
    or None where the counter cannot be trusted (WAL)."""
    counter = change_counter(index_fd)
    return None if counter is None else _identity(index_fd, counter)


class LookupTable:
    """Immutable address table for one state of the index (see the module docstring)."""

    def __init__(
        self,
        index_fd: int,
        identity: tuple[int, int, int, bytes],
        count: int,
        slots: _Slots,
        paths: _Paths,
        paths_start: int = 0,
        content: bytes | None = None,
        tag: bytes = _NO_TAG,
    ) -> None:
        # the index header's first bytes, mapped: rereading the counter costs no system call
        # (SQLite never shortens an index below its first page)
        self._header = mmap.mmap(index_fd, 28, prot=mmap.PROT_READ)
        self.identity = identity
        self.counter = identity[3]
        self._count = count
        self._slots = memoryview(slots).cast("B").cast("Q")  # 4 words a slot, see _store
        self._capacity = len(self._slots) // _WORDS
        self._paths = paths
        self._paths_start = paths_start
        self._kernel = self._probe()
        self.content = content
        """The SHA-256 of the contents the file says it holds (None: a table built here)."""
        self.tag = tag
        """What the file says the key makes of its header (zeros: no tag)."""

    # -- building and saving ---------------------------------------------------------

    @classmethod
    def build(cls, conn: sqlite3.Connection, index_fd: int) -> LookupTable | None:
        """A table for the index's current state; None for WAL-mode indexes."""
        counter = change_counter(index_fd)
        if counter is None:
            return None
        identity = _identity(index_fd, counter)  # read before the rows: a commit in between
        # leaves an identity older than the rows, which only ever retires the table early
        (count,) = select(conn, "SELECT count(*) FROM files").fetchone()
        capacity = count * 4 // 3 + 1  # load factor <= 0.75; any size: slots by fastrange
        slots = array("Q", [0]) * (_WORDS * capacity)
        paths = bytearray()
        stored = 0
        rows = select(conn, "SELECT path, shard, offset, size, crc32c FROM files")
        while chunk := rows.fetchmany(_BUILD_ROWS):  # (the kernel stores what a slot can hold)
            stored = fill_table(slots, paths, chunk, _hash64, stored)
            if stored < 0:  # more rows than counted: a damaged index, no table
                return None
        return cls(index_fd, identity, stored, slots, paths)

    def content_hash(self) -> bytes:
        """The SHA-256 of the table's contents: its sizes, slots and paths (reading every
        page: about 1 ns a byte, 80 ms for a million files).

        Returns:
            The 32-byte digest.
        """
        import hashlib  # (3 ms to import: only when a table is saved or checked)

        digest = hashlib.sha256(_SIZES.pack(self._count, self._capacity, self._paths_len()))
        digest.update(self._slots)
        digest.update(memoryview(self._paths)[self._paths_start :])
        return digest.digest()

    def set_identity(self, identity: tuple[int, int, int, bytes]) -> None:
        """Say the table is for the index as ``identity`` describes it (a writer that
        committed the row vouching for it after building it)."""
        self.identity = identity
        self.counter = identity[3]
        self._kernel = self._probe()

    def _probe(self) -> python_kernels.AddressTable:
        """The kernel that answers from the slots, while the index's change counter is
        this table's."""
        return AddressTable(self._slots, self._paths, self._paths_start, _hash64, Address,
                            self._header, self.counter)  # fmt: skip

    @property
    def nbytes(self) -> int:
        """The size of the contents (what :meth:`content_hash` reads)."""
        return _SIZES.size + len(self._slots) * 8 + self._paths_len()

    def _paths_len(self) -> int:
        return len(self._paths) - self._paths_start

    def verify(self) -> bool:
        """Whether the contents are those the file's header says (a table built here
        always is).

        Returns:
            True if they hash to the stated SHA-256.
        """
        return self.content is None or self.content_hash() == self.content

    def tagged_header(self, content: bytes | None = None) -> bytes:
        """The header bytes a tag covers: the index's identity, the sizes and the SHA-256
        of the contents (``content``, else the stated or computed one).

        Returns:
            The bytes.
        """
        ino, size, mtime_ns, counter = self.identity
        digest = content or self.content or self.content_hash()
        header = _HEADER.pack(_MAGIC, _VERSION, ino, size, mtime_ns, counter, self._count,
                              self._capacity, self._paths_len(), digest, _NO_TAG)  # fmt: skip
        return header[:_TAGGED]

    def save(self, path: str, content: bytes, tag: bytes = _NO_TAG) -> bool:
        """Write the table to ``path`` atomically; False (and nothing left behind) if the
        directory is not writable or the disk is full: the table is only a cache.

        Args:
            path: where (``INDEX-lookup``).
            content: the table's :meth:`content_hash`.
            tag: the key's tag of :meth:`tagged_header`, if any.

        Returns:
            Whether it was saved.
        """
        header = self.tagged_header(content) + tag
        paths = memoryview(self._paths)[self._paths_start :]
        directory = os.path.dirname(path) or "."
        try:
            import tempfile  # (random, bisect...) only when a table is built

            fd, temp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=directory)
        except OSError:
            return False
        try:
            with open(fd, "wb") as f:
                f.write(header)
                f.write(self._slots)
                f.write(paths)
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
        """The table saved at ``path`` if it says it was built for the index's current
        state, else None (missing, for another index or state, truncated, or of another
        version). Its contents are not checked yet (:meth:`verify`)."""
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
            (magic, version, ino, size, mtime_ns, saved_counter, count, capacity, n_paths,
             content, tag) = _HEADER.unpack(header)  # fmt: skip
            identity = (ino, size, mtime_ns, saved_counter)
            if (magic, version) != (_MAGIC, _VERSION) or identity != _identity(index_fd, counter):
                return None
            expected = _HEADER_SIZE + _SLOT_SIZE * capacity + n_paths
            if capacity < 1 or os.fstat(fd).st_size != expected:
                return None
            mapped = mmap.mmap(fd, expected, prot=mmap.PROT_READ)
        except (OSError, ValueError, struct.error):
            return None
        finally:
            os.close(fd)
        slots_end = _HEADER_SIZE + _SLOT_SIZE * capacity
        slots = memoryview(mapped)[_HEADER_SIZE:slots_end]
        return cls(index_fd, identity, count, slots, mapped, slots_end, content, tag)

    # -- answering -------------------------------------------------------------------

    def is_current(self) -> bool:
        """True while no commit has changed the index since the table was built."""
        return self._header[24:28] == self.counter

    def find(self, path: str) -> Address | None:
        """(shard, offset, size, crc32c) of ``path``, or None when SQLite must answer."""
        return self._kernel.find(path)  # type: ignore[no-any-return]

    def get(self, path: str, fds: dict[int, int]) -> bytes | None:
        """The CRC-checked bytes of the file at ``path``, read from ``fds[shard]`` in one
        kernel call (the whole of a warm ``bc[path]``), or None when the caller's careful
        path must answer: a commit since the table was made, a path not surely normal,
        one the table does not hold, no descriptor open for its shard, or a read that is
        short, fails or does not match its CRC (``barecat.kernels``)."""
        return self._kernel.get(path, fds)

    def has_empty_slot(self) -> bool:
        """Whether some slot is empty, as in every table built here (a table without one is
        damaged: each path it lacks would be probed across the whole table).

        Returns:
            True if one is.
        """
        step = 4096 * _WORDS  # (a quarter of the slots are empty: the first chunk has one)
        for first in range(0, len(self._slots), step):
            hashes = self._slots[first : first + step : _WORDS].tobytes()  # 8 bytes each
            at = hashes.find(bytes(8))
            while at > 0 and at % 8:  # (zero bytes across two words)
                at = hashes.find(bytes(8), at + 1)
            if at >= 0:
                return True
        return False

    def get_many(self, paths: list[str], fds: dict[int, int]) -> list[bytes | None]:
        """:meth:`get` of each path in one kernel call, the reads in request order and
        stopped at one that would wait for its storage (where ``RWF_NOWAIT`` tells, or
        that took over 100 µs and slept): it and the rest are None, for the caller's
        careful path, which reads them on its threads."""
        return self._kernel.get_many(paths, fds)

    def find_many(self, paths: list[str]) -> list[tuple[int, Address]] | None:
        """(position in ``paths``, address) of every path, sorted by address (ties in
        request order); None as soon as one path is not in the table (SQLite must answer
        for the batch)."""
        return self._kernel.find_many(paths)

    def __len__(self) -> int:
        return self._count
