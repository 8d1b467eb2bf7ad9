"""A published archive's sidecar (``ARCHIVE-sidecar``): building it from the index,
checking one against it, and (re-exported from ``sidecar_format.py``, which owns the
byte layout and its parsing) reading it: :class:`SidecarHead`, :data:`HEAD_GUESS`.

The layout is ``sidecar_format.py``'s; this module reads what goes into it from SQLite, in one
read transaction (so no writer commits meanwhile): which pages are which from the
``dbstat`` virtual table (SQLite's own account of its b-trees: none is parsed here), the
pages' bytes from the index file, and every file row in the order of the buckets
(``ORDER BY`` the path's hash, then path: SQLite sorts, in bounded memory, so a bucket at
a time is held here). The sidecar is written under a temporary name, fsynced and renamed
into place. Imports ``index.connection``, ``index.publishing``, ``index.sidecar_format``,
``layout``, ``checksum`` and ``exceptions``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import sqlite3
import struct
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from barecat.checksum import crc32c
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    DamagedIndexBarecatError,
    NotEnoughSpaceBarecatError,
)
from barecat.index.connection import roll_back_crashed_transaction, select
from barecat.index.publishing import plain_connection
from barecat.index.sidecar_format import (
    FIXED_HEADER,
    HEAD_GUESS,
    INDEX_HEADER_SIZE,
    Bucket,
    SidecarHead,
    encode_bucket,
    encode_pages,
    encode_path,
    pack_fixed_header,
    path_hash,
)
from barecat.layout import (
    base_path,
    existing_shard_numbers,
    remove_abandoned_builds,
    shard_path,
    staging_path,
)

BUCKET_TARGET = 32 << 10
"""The average bucket size aimed at (a bucket is one ranged request)..."""
HEAD_BUCKET_BITS = 14
"""... unless that takes more than 2**14 buckets, whose directory (128 KiB) and the eager
pages fill most of a reader's first request (``HEAD_GUESS``): then buckets of up to
twice the size, before the directory grows again."""
_ENTRY_OVERHEAD = 14  # a NUL and the columns of a typical entry, for choosing k
_EAGER_TABLES = ("config", "sqlite_stat1")
_SCHEMA_NAMES = ("sqlite_schema", "sqlite_master")
_KEY_FUNCTION = "barecat_sidecar_key"
_ROWS = (  # (a path as its bytes, as stored: no decoding and encoding again, row by row)
    f"SELECT {_KEY_FUNCTION}(CAST(path AS BLOB)) AS k, "
    "CASE WHEN typeof(path) = 'text' THEN CAST(path AS BLOB) END, shard, offset, size, crc32c "
    "FROM files ORDER BY k, path"
)
_SAMPLED = 97  # the checker looks up every 97th path (and one a bucket) through find
Entry = tuple[bytes, int, int, int, int | None]
__all__ = [
    "HEAD_GUESS",
    "SidecarHead",
    "SidecarSummary",
    "build_sidecar",
    "check_sidecar",
    "is_fresh",
    "read_head",
]


@dataclass(frozen=True, slots=True)
class SidecarSummary:
    """What a sidecar holds: its parts' sizes in bytes and their counts."""

    path: str
    num_files: int
    bucket_bits: int
    head_bytes: int
    directory_bytes: int
    eager_pages: int
    eager_bytes: int
    interior_pages: int
    interior_bytes: int
    bucket_bytes: int
    total_bytes: int
    index_size: int
    page_size: int
    num_shards: int

    @property
    def num_buckets(self) -> int:
        return 1 << self.bucket_bits


@dataclass(frozen=True, slots=True)
class _Snapshot:
    header: bytes
    size: int
    page_size: int
    eager: dict[int, bytes]
    interior: dict[int, bytes]


def build_sidecar(index_path: str, sidecar_path: str) -> SidecarSummary:
    """Build the sidecar of the index at ``index_path`` and put it at ``sidecar_path``.

    Args:
        index_path: a barecat index in rollback-journal mode (``barecat publish``
            prepares it: 64 KiB pages, vacuumed).
        sidecar_path: where the sidecar goes (written to a temporary name beside it,
            fsynced, renamed).

    Returns:
        The sizes and counts of its parts.

    Raises:
        BarecatError: the index is in WAL mode.
        NotEnoughSpaceBarecatError: the disk filled up (no sidecar is left, nor a
            temporary file).
        DamagedIndexBarecatError: a file row no sidecar can hold (not a path, a negative
            or non-integer place, a CRC32C out of range, a NUL byte in its path).
    """
    remove_abandoned_builds(sidecar_path)
    temp = staging_path(sidecar_path)
    try:
        with _reading(index_path) as (conn, fd):
            summary = _write(conn, fd, index_path, temp, sidecar_path)
        os.replace(temp, sidecar_path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temp)
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise NotEnoughSpaceBarecatError(f"Disk full while writing {sidecar_path}") from e
        raise
    _sync_folder(sidecar_path)
    return summary


@contextlib.contextmanager
def _reading(index_path: str) -> Iterator[tuple[sqlite3.Connection, int]]:
    """A read transaction on the index (its SHARED lock keeps every writer's commit out)
    and a descriptor to read its pages with."""
    roll_back_crashed_transaction(index_path)
    with plain_connection(index_path, "ro") as conn:
        conn.create_function(_KEY_FUNCTION, 1, _sort_key, deterministic=True)
        fd = os.open(index_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            conn.execute("BEGIN")
            select(conn, "SELECT count(*) FROM sqlite_master").fetchone()  # takes SHARED
            yield conn, fd
        finally:
            os.close(fd)


def _write(
    conn: sqlite3.Connection, fd: int, index_path: str, temp: str, sidecar_path: str
) -> SidecarSummary:
    snap = _snapshot(conn, fd, index_path)
    num_files, path_bytes = select(
        conn, "SELECT count(*), total(length(CAST(path AS BLOB))) FROM files"
    ).fetchone()
    bits = _bucket_bits(num_files + int(path_bytes) + num_files * _ENTRY_OVERHEAD)
    shards = _shard_sizes(index_path)
    eager, interior = encode_pages(snap.eager), encode_pages(snap.interior)
    directory_at = FIXED_HEADER.size + 8 * len(shards)
    eager_at = directory_at + 8 * ((1 << bits) + 1)
    head_size = eager_at + len(eager) + 4
    buckets_at = head_size + len(interior)
    with open(temp, "wb") as out:
        out.seek(buckets_at)
        directory = _write_buckets(conn, out, bits, buckets_at, index_path)
        buckets_len = directory[-1] - buckets_at
        fixed = pack_fixed_header(
            bucket_bits=bits,
            head_size=head_size,
            index_size=snap.size,
            page_size=snap.page_size,
            num_shards=len(shards),
            num_files=num_files,
            directory_at=directory_at,
            eager_at=eager_at,
            eager_len=len(eager),
            interior_at=head_size,
            interior_len=len(interior),
            buckets_at=buckets_at,
            buckets_len=buckets_len,
            interior_crc=crc32c(interior),
            index_header=snap.header,
        )
        if sys.byteorder == "big":
            directory.byteswap()
        head = b"".join([fixed, struct.pack(f"<{len(shards)}Q", *shards), bytes(directory), eager])
        out.seek(0)
        out.write(head + struct.pack("<I", crc32c(head)) + interior)
        out.flush()
        os.fsync(out.fileno())
    return SidecarSummary(
        path=sidecar_path,
        num_files=num_files,
        bucket_bits=bits,
        head_bytes=head_size,
        directory_bytes=eager_at - directory_at,
        eager_pages=len(snap.eager),
        eager_bytes=len(eager),
        interior_pages=len(snap.interior),
        interior_bytes=len(interior),
        bucket_bytes=buckets_len,
        total_bytes=buckets_at + buckets_len,
        index_size=snap.size,
        page_size=snap.page_size,
        num_shards=len(shards),
    )


def _shard_sizes(index_path: str) -> list[int]:
    """The sizes of the archive's shards, by number (0 for a number with no file)."""
    base = base_path(index_path)
    numbers = existing_shard_numbers(base)
    sizes = [0] * (numbers[-1] + 1 if numbers else 0)
    for n in numbers:
        sizes[n] = os.path.getsize(shard_path(base, n))
    return sizes


def _snapshot(conn: sqlite3.Connection, fd: int, where: str) -> _Snapshot:
    """The index's header, size and the pages the sidecar copies, as of this transaction."""
    header = os.pread(fd, INDEX_HEADER_SIZE, 0)
    wal = os.path.exists(where + "-wal") and os.path.getsize(where + "-wal") > 0
    if len(header) < INDEX_HEADER_SIZE or header[18] == 2 or wal:
        raise BarecatError(
            f"{where} is in WAL mode (or has a write-ahead log); 'barecat publish' turns it "
            "into a rollback-journal index first"
        )
    (page_size,) = select(conn, "PRAGMA page_size").fetchone()
    size = os.fstat(fd).st_size
    eager_names = set(_SCHEMA_NAMES) | {
        name
        for (name,) in select(
            conn,
            f"SELECT name FROM sqlite_master WHERE tbl_name IN {_EAGER_TABLES!r}",
        )
    }
    eager_numbers, interior_numbers = {1}, set()
    for name, pageno, pagetype in select(conn, "SELECT name, pageno, pagetype FROM dbstat"):
        if name in eager_names:
            eager_numbers.add(pageno)
        elif pagetype == "internal":
            interior_numbers.add(pageno)
    return _Snapshot(
        header=header,
        size=size,
        page_size=page_size,
        eager={n: _page(fd, n, page_size, where) for n in sorted(eager_numbers)},
        interior={n: _page(fd, n, page_size, where) for n in sorted(interior_numbers)},
    )


def _page(fd: int, number: int, page_size: int, where: str) -> bytes:
    data = os.pread(fd, page_size, (number - 1) * page_size)
    if len(data) != page_size:
        raise DamagedIndexBarecatError(where, f"page {number} is cut short")
    return data


def _bucket_bits(total_bytes: int) -> int:
    """k such that 2**k buckets hold ``total_bytes`` in buckets of 32 KiB or less on
    average, or of 64 KiB or less where 32 KiB would take more than 2**14 buckets."""
    bits = _bits_for(total_bytes, BUCKET_TARGET)
    if bits > HEAD_BUCKET_BITS:
        bits = max(HEAD_BUCKET_BITS, _bits_for(total_bytes, 2 * BUCKET_TARGET))
    return bits


def _bits_for(total_bytes: int, bucket_size: int) -> int:
    return max(0, -(-total_bytes // bucket_size) - 1).bit_length()


def _write_buckets(
    conn: sqlite3.Connection, out: BinaryIO, bits: int, start: int, where: str
) -> array[int]:
    """Stream every file row into its bucket; returns the directory (2**k + 1 offsets)."""
    write = out.write
    directory = array("Q")
    position = start
    current = 0
    pending: list[Entry] = []
    shift = 64 - bits
    for key, path, shard, offset, size, crc in select(conn, _ROWS):
        entry = _entry(where, path, shard, offset, size, crc)
        bucket = (key + (1 << 63)) >> shift if bits else 0
        while current < bucket:
            directory.append(position)
            position += write(encode_bucket(pending))
            pending = []
            current += 1
        pending.append(entry)
    while current < 1 << bits:
        directory.append(position)
        position += write(encode_bucket(pending))
        pending = []
        current += 1
    directory.append(position)
    return directory


def _entry(
    where: str, path: object, shard: object, offset: object, size: object, crc: object
) -> Entry:
    """A file row as a bucket entry, or the error naming it when no sidecar can hold it."""
    if (
        type(path) is bytes
        and b"\0" not in path
        and type(shard) is int
        and type(offset) is int
        and type(size) is int
        and (crc is None or type(crc) is int)
        and min(shard, offset, size) >= 0
        and (crc is None or 0 <= crc < 1 << 32)
    ):
        return path, shard, offset, size, crc
    shown = path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else path
    raise DamagedIndexBarecatError(
        where,
        f"file row {shown!r} (shard {shard!r}, offset {offset!r}, size {size!r}, crc32c "
        f"{crc!r}) cannot be published; see 'barecat verify' and 'barecat repair'",
    )


def _sort_key(key: object) -> int:
    """The hash of a path's bytes (given as a blob: bytes that are not UTF-8 reach no
    decoder), as SQLite's signed 64-bit integer in the same order."""
    if not isinstance(key, bytes):
        return 0  # (a NULL path: refused by _entry)
    return path_hash(key) - (1 << 63)


def _sync_folder(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_sidecar(index_path: str, sidecar_path: str) -> int:
    """Check the sidecar at ``sidecar_path`` against the index, as ``barecat publish``
    does after building it: it matches the index as it is, its eager and interior pages
    are the index's pages of those kinds byte for byte, its shard sizes are the shards',
    every bucket holds exactly the file rows that hash to it with SQLite's addresses, and
    a sample of present and absent paths are answered right by :meth:`SidecarHead.find`.

    Returns:
        The number of file rows checked.

    Raises:
        BarecatIntegrityError: the first disagreement, named.
    """
    head = read_head(sidecar_path)
    with _reading(index_path) as (conn, fd), open(sidecar_path, "rb") as sidecar:
        snap = _snapshot(conn, fd, index_path)
        if not head.matches(snap.header, snap.size):
            raise _disagrees(sidecar_path, "it is stale: the index changed since it was built")
        start, end = head.interior_span
        interior = head.parse_interior(os.pread(sidecar.fileno(), end - start, start))
        if head.eager_pages != snap.eager or interior != snap.interior:
            raise _disagrees(sidecar_path, "its pages differ from the index's")
        if head.shard_sizes != _shard_sizes(index_path):
            raise _disagrees(sidecar_path, "its shard sizes are not the shards' sizes")
        return _check_rows(conn, head, sidecar.fileno(), index_path)


def _check_rows(
    conn: sqlite3.Connection, head: SidecarHead, sidecar_fd: int, index_path: str
) -> int:
    bits, where = head.bucket_bits, head.where
    shift = 64 - bits
    rows = select(conn, _ROWS)
    pending = next(rows, None)
    checked = 0
    chosen = random.Random(0)
    for b in range(1 << bits):
        start, end = head.buckets[b], head.buckets[b + 1]
        bucket = os.pread(sidecar_fd, end - start, start)
        stored = Bucket(bucket, end - start, where)
        expected = []
        while pending is not None and ((pending[0] + (1 << 63)) >> shift if bits else 0) == b:
            entry = _entry(index_path, *pending[1:])
            expected.append((entry[0], entry[1:]))
            pending = next(rows, None)
        if [(key, tuple(address)) for key, address in stored.entries()] != expected:
            raise _disagrees(where, f"bucket {b} does not hold the index's rows that hash to it")
        first = chosen.randrange(min(_SAMPLED, len(expected))) if expected else 0
        for key, address in expected[first::_SAMPLED]:  # (one a bucket at least)
            _check_lookups(conn, head, sidecar_fd, key, address, bucket)
        checked += len(expected)
    if pending is not None or checked != head.num_files:
        raise _disagrees(where, f"it holds {checked} file rows of {head.num_files}")
    return checked


def _check_lookups(
    conn: sqlite3.Connection,
    head: SidecarHead,
    sidecar_fd: int,
    key: bytes,
    address: tuple[object, ...],
    bucket: bytes,
) -> None:
    """``find`` answers a present path with its address, and a path beside it that the
    index does not have (in its own bucket) with None."""
    path = key.decode("utf-8", "surrogateescape")
    if head.find(path, bucket) != address:
        raise _disagrees(head.where, f"{path!r} is not found where the index has it")
    absent = path + "~"
    while select(
        conn, "SELECT 1 FROM files WHERE path = CAST(? AS TEXT)", (encode_path(absent),)
    ).fetchone():  # (bound as bytes: a path that is no UTF-8 is asked as stored)
        absent += "~"
    start, end = head.bucket_span(absent)
    if head.find(absent, os.pread(sidecar_fd, end - start, start)) is not None:
        raise _disagrees(head.where, f"{absent!r} is found but the index does not have it")


def _disagrees(where: str, what: str) -> BarecatIntegrityError:
    return BarecatIntegrityError(f"{where}: the sidecar disagrees with its index: {what}")


def read_head(sidecar_path: str) -> SidecarHead:
    """The head of the sidecar at ``sidecar_path``, parsed and checked.

    Raises:
        BarecatIntegrityError: it is damaged, or no sidecar.
        OSError: it cannot be read (FileNotFoundError: there is none).
    """
    with open(sidecar_path, "rb") as sidecar:
        first = sidecar.read(FIXED_HEADER.size)
        rest = SidecarHead.needed(first, sidecar_path) - len(first)
        return SidecarHead.parse(first + sidecar.read(rest), sidecar_path)


def is_fresh(index_path: str, sidecar_path: str) -> bool:
    """Whether a sidecar is at ``sidecar_path``, undamaged, and made from the index as
    it is now (:meth:`SidecarHead.matches`); reads the heads of both files only."""
    try:
        head = read_head(sidecar_path)
        with open(index_path, "rb") as index:
            header = index.read(INDEX_HEADER_SIZE)
            size = os.fstat(index.fileno()).st_size
    except (OSError, BarecatIntegrityError):
        return False
    return head.matches(header, size)
