"""ColdCrate chunks, read and written byte-compatibly with the ``coldcrate`` package.

A chunk is one file, little-endian throughout::

    header (128 bytes)
       0  8  magic b"COLDCRT\\0"          36  4  schema length
       8  2  format version (2; 1 read)  40  1  compression (0 none, 1 lz4, 2 zstd)
      10  2  flags (0)                   41  1  encryption (0 none, 1 AES-256-XTS)
      12 16  chunk id (UUID)             42 16  scrypt salt, 58-60 log2 N, r, p
      28  8  created at (Unix µs)        61  3  zero
      64  8  entry count                 72  8  tail offset (the commit marker)
      80 48  zero
    schema JSON, zero-padded to a multiple of 8
    entries, each starting at a multiple of 8:
       preamble: u32 0xE4E4E4E4 | u16 resource-id length (1..512) | u16 flags (1
       tombstone, 2 compressed, 4 encrypted) | u64 stored payload length | u64 XXH64 of
       resource id and stored payload; then the resource id, the payload, zero padding

A compressed payload is a u64 original length and then an LZ4 block or a zstd frame.
The two counters are rewritten by ``flush``; the tail offset last, so a reader trusts
them only when it equals the file's size (otherwise both read as None and a scan tells).
Encrypted chunks (``crypto.py``) store the schema, every resource id and, unless an
entry opts out, its payload (after compression) encrypted; ``scan_raw`` works without
the passphrase. Imports ``xxhash``, ``compression.py`` (``zstandard`` and, where used,
``lz4``) and, where used, ``cryptography``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import xxhash

from barecat.coldcrate import crypto
from barecat.coldcrate.compression import COMPRESSIONS, Codec
from barecat.coldcrate.errors import (
    ColdCrateError,
    CompressionError,
    EncryptionError,
    InvalidChunkError,
    InvalidEntryError,
)
from barecat.coldcrate.schema import Schema

MAGIC = b"COLDCRT\x00"
FORMAT_VERSION = 2
HEADER_SIZE = 128
MAX_SCHEMA_BYTES = 8 << 20
ENTRY_MAGIC = 0xE4E4E4E4
FLAG_TOMBSTONE, FLAG_COMPRESSED, FLAG_ENCRYPTED = 1, 2, 4
MAX_RID = 512
ENCRYPTIONS = {"none": 0, "aes-256-xts": 1}

_FIXED = struct.Struct("<8sHH16sQIBB16sBBB3s")
_COUNTERS = struct.Struct("<QQ")
_PREAMBLE = struct.Struct("<IHHQQ")
_U64 = struct.Struct("<Q")
_FIRST_READ = 8 << 10  # one pread reads a small entry whole
_SCAN_READ = 1 << 20  # a scan reads ahead in big steps
_WRITE_BUFFER = 1 << 20  # a writer writes in steps this big


def align8(n: int) -> int:
    return (n + 7) & ~7


@dataclass(frozen=True)
class ChunkHeader:
    version: int
    flags: int
    chunk_id: uuid.UUID
    created_at: int
    schema_size: int
    compression: int
    encryption: int
    kdf_salt: bytes
    kdf_log2n: int
    kdf_r: int
    kdf_p: int
    entry_count: int | None
    tail_offset: int | None

    @property
    def data_start(self) -> int:
        return HEADER_SIZE + align8(self.schema_size)


@dataclass(frozen=True)
class AppendResult:
    offset: int
    checksum: int


class _EntryFlags:
    """What an entry's flags say (shared by decoded and raw entries)."""

    flags: int

    @property
    def tombstone(self) -> bool:
        return bool(self.flags & FLAG_TOMBSTONE)

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & FLAG_ENCRYPTED)


@dataclass(frozen=True)
class RawEntry(_EntryFlags):
    offset: int
    resource_id: bytes
    payload: bytes
    checksum_ok: bool | None
    flags: int


@dataclass(frozen=True)
class Entry(_EntryFlags):
    offset: int
    resource_id: bytes
    fields: dict[str, Any] | None
    checksum_ok: bool | None
    flags: int


OnDamage = Callable[[int, int], None]
"""Told of a stretch of a chunk skipped as damaged: its start and end offsets."""


@dataclass(frozen=True)
class RepairResult:
    entry_count: int
    tail_offset: int
    truncated_bytes: int


def _parse_header(raw: bytes, file_size: int) -> ChunkHeader:
    if len(raw) < HEADER_SIZE:
        raise InvalidChunkError("The chunk header is truncated")
    fields = _FIXED.unpack_from(raw)
    magic, version, flags, chunk_id, created, schema_size, comp, enc, salt, n, r, p, _ = fields
    if magic != MAGIC:
        raise InvalidChunkError("Not a ColdCrate chunk (magic mismatch)")
    if not 1 <= version <= FORMAT_VERSION:
        raise InvalidChunkError(f"Unsupported ColdCrate format version {version}")
    if comp not in COMPRESSIONS.values() or enc not in (0, 1):
        raise InvalidChunkError(f"Unknown compression {comp} or encryption {enc}")
    count, tail = _COUNTERS.unpack_from(raw, _FIXED.size)
    trusted = tail == file_size
    return ChunkHeader(
        version, flags, uuid.UUID(bytes=chunk_id), created, schema_size, comp, enc, salt,
        n, r, p, count if trusted else None, tail if trusted else None,
    )  # fmt: skip


def _checksum(rid: bytes, stored: bytes) -> int:
    digest = xxhash.xxh64()
    digest.update(rid)
    digest.update(stored)
    return int(digest.intdigest())


# -- writing ---------------------------------------------------------------------------


class ChunkWriter:
    """Appends entries to one chunk; the only writer (an advisory ``flock``)."""

    def __init__(
        self,
        fd: int,
        header: ChunkHeader,
        schema: Schema,
        level: int | None,
        key: bytes | None,
    ) -> None:
        self._fd = fd
        self._header = header
        self.schema = schema
        self._codec = Codec(header.compression, level)
        self._key = key
        self.entry_count = header.entry_count or 0
        self.tail_offset = header.tail_offset or header.data_start
        self._pending = bytearray()
        self._pending_start = self.tail_offset

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        schema: Schema,
        *,
        compression: str = "none",
        compression_level: int | None = None,
        encryption: str = "none",
        passphrase: str | bytes | None = None,
        kdf: tuple[int, int, int] | None = None,
        chunk_id: uuid.UUID | None = None,
        created_at: int | None = None,
    ) -> ChunkWriter:
        if compression not in COMPRESSIONS:
            raise CompressionError(f"Unknown compression {compression!r}")
        if encryption not in ENCRYPTIONS:
            raise EncryptionError(f"Unknown encryption {encryption!r}")
        schema_json = schema.to_json_bytes()
        key, salt, (log2n, r, p) = None, bytes(16), (0, 0, 0)
        if encryption != "none":
            if passphrase is None:
                raise EncryptionError("An encrypted chunk needs a passphrase")
            salt, (log2n, r, p) = os.urandom(16), kdf or crypto.DEFAULT_KDF
            key = crypto.chunk_key(passphrase, salt, log2n, r, p)
            schema_json = crypto.encrypt_payload(key, HEADER_SIZE, schema_json)
        chunk_id = chunk_id or uuid.uuid4()
        created_at = created_at if created_at is not None else time.time_ns() // 1000
        fixed = _FIXED.pack(
            MAGIC, FORMAT_VERSION, 0, chunk_id.bytes, created_at, len(schema_json),
            COMPRESSIONS[compression], ENCRYPTIONS[encryption], salt, log2n, r, p, bytes(3),
        )  # fmt: skip
        data_start = HEADER_SIZE + align8(len(schema_json))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            _lock(fd)
            head = fixed + _COUNTERS.pack(0, data_start) + bytes(48)
            body = schema_json + bytes(data_start - HEADER_SIZE - len(schema_json))
            os.write(fd, head + body)
            header = _parse_header(head, data_start)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, header, schema, compression_level, key)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        passphrase: str | bytes | None = None,
        compression_level: int | None = None,
    ) -> ChunkWriter:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            with _naming(path):
                _lock(fd)
                header, schema, key = _read_start(fd, passphrase)
                if schema is None:
                    raise EncryptionError("appending to an encrypted chunk needs its passphrase")
                if header.tail_offset is None:
                    raise InvalidChunkError("the chunk is dirty (a crash?); repair() it")
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, header, schema, compression_level, key)

    @property
    def header(self) -> ChunkHeader:
        return self._header

    def append(
        self,
        resource_id: bytes,
        row: dict[str, Any],
        *,
        compress: bool | None = None,
        encrypt: bool | None = None,
    ) -> AppendResult:
        if encrypt and self._key is None:
            raise EncryptionError("This chunk is not encrypted; its entries cannot be")
        payload = self.schema.encode_row(row)
        flags = 0
        if compress is not False and self._header.compression:
            payload = self._codec.compress(payload)
            flags |= FLAG_COMPRESSED
        if encrypt is not False and self._key is not None:
            payload = crypto.encrypt_payload(self._key, self.tail_offset, payload)
            flags |= FLAG_ENCRYPTED
        return self._write(resource_id, payload, flags)

    def append_tombstone(self, resource_id: bytes) -> AppendResult:
        return self._write(resource_id, b"", FLAG_TOMBSTONE)

    def append_many(self, items: Iterable[tuple[bytes, dict[str, Any]]]) -> list[AppendResult]:
        return [self.append(rid, row) for rid, row in items]

    def _write(self, rid: bytes, stored: bytes, flags: int) -> AppendResult:
        if not isinstance(rid, bytes) or not 1 <= len(rid) <= MAX_RID:
            raise InvalidEntryError(f"resource_id must be 1..{MAX_RID} bytes")
        if self._key is not None:  # format 2: resource ids are encrypted too
            rid = crypto.encrypt_rid(self._key, self.tail_offset, rid)
        checksum = _checksum(rid, stored)
        entry = _PREAMBLE.pack(ENTRY_MAGIC, len(rid), flags, len(stored), checksum) + rid + stored
        entry += bytes(align8(len(entry)) - len(entry))
        offset = self.tail_offset
        if not self._pending:
            self._pending_start = offset
        self._pending += entry  # written in big steps; all of it by flush() and close()
        self.tail_offset += len(entry)
        self.entry_count += 1
        if len(self._pending) >= _WRITE_BUFFER:
            self._write_pending()
        return AppendResult(offset, checksum)

    def _write_pending(self) -> None:
        if self._pending:
            os.pwrite(self._fd, self._pending, self._pending_start)
            self._pending = bytearray()

    def flush(self, *, sync: bool = False) -> None:
        """Write what is buffered, then commit the counters: the entry count first, the
        tail offset (the commit marker) last."""
        self._write_pending()
        _commit_counters(self._fd, self.entry_count, self.tail_offset, sync)

    def close(self, *, sync: bool = False) -> None:
        if self._fd < 0:
            return
        try:
            self.flush(sync=sync)
        finally:
            os.close(self._fd)  # releases the lock
            self._fd = -1

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _commit_counters(fd: int, count: int, tail: int, sync: bool) -> None:
    """The entry count first, then the tail offset: the commit marker goes last."""
    os.pwrite(fd, _U64.pack(count), _FIXED.size)
    if sync:
        os.fsync(fd)
    os.pwrite(fd, _U64.pack(tail), _FIXED.size + 8)
    if sync:
        os.fsync(fd)


@contextlib.contextmanager
def _naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """ColdCrate errors raised inside name the chunk: ``PATH: what is wrong``."""
    try:
        yield
    except ColdCrateError as e:
        raise type(e)(f"{os.fspath(path)}: {e}") from None


def _lock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ColdCrateError("Another writer holds this chunk") from None


def _read_start(
    fd: int, passphrase: str | bytes | None
) -> tuple[ChunkHeader, Schema | None, bytes | None]:
    """Header, schema and key; an encrypted chunk opened without its passphrase has
    neither schema nor key, and a wrong passphrase fails here."""
    size = os.fstat(fd).st_size
    header = _parse_header(os.pread(fd, HEADER_SIZE, 0), size)
    if header.schema_size > MAX_SCHEMA_BYTES or HEADER_SIZE + header.schema_size > size:
        raise InvalidChunkError(f"Schema block of {header.schema_size} bytes does not fit")
    schema_bytes = os.pread(fd, header.schema_size, HEADER_SIZE)
    if not header.encryption:
        return header, Schema.from_json_bytes(schema_bytes), None
    if passphrase is None:
        return header, None, None
    key = crypto.chunk_key(
        passphrase, header.kdf_salt, header.kdf_log2n, header.kdf_r, header.kdf_p
    )
    try:
        schema = Schema.from_json_bytes(crypto.decrypt_payload(key, HEADER_SIZE, schema_bytes))
    except EncryptionError:
        raise
    except Exception:
        raise EncryptionError("Cannot decode the schema: wrong passphrase?") from None
    return header, schema, key


# -- reading ---------------------------------------------------------------------------


class ChunkReader:
    """Reads entries by offset or in order; takes no lock (positional reads)."""

    def __init__(
        self, fd: int, header: ChunkHeader, schema: Schema | None, key: bytes | None
    ) -> None:
        self._fd = fd
        self.header = header
        self.schema = schema
        self._key = key
        self._codec = Codec(header.compression)
        self._size = os.fstat(fd).st_size
        self._window: tuple[int, bytes] = (0, b"")

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        passphrase: str | bytes | None = None,
        mmap: bool = True,
    ) -> ChunkReader:
        """Open a chunk to read. ``mmap`` is accepted for coldcrate's signature, but reads
        are always positional: a memory map turns a chunk shortened by ``repair`` under a
        reader into a crash (SIGBUS) instead of an error."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            with _naming(path):
                header, schema, key = _read_start(fd, passphrase)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, header, schema, key)

    def read_at(self, offset: int) -> Entry:
        raw = self._raw_at(offset, verify=True)
        return self._decoded(raw)

    def scan(self, *, verify: bool = True, on_damage: OnDamage | None = None) -> Iterator[Entry]:
        """Decoded entries in file order (see ``scan_raw``)."""
        for raw in self.scan_raw(verify=verify, on_damage=on_damage):
            yield self._decoded(raw)

    def scan_raw(
        self, *, verify: bool = True, on_damage: OnDamage | None = None
    ) -> Iterator[RawEntry]:
        """Entries in file order. With ``verify`` a damaged stretch is skipped (the scan
        resyncs at the next entry whose checksum holds) and, with ``on_damage``, reported
        as ``on_damage(start, end)``; without, the first anomaly ends the scan."""
        pos, end, damaged = self.header.data_start, self.size, None
        while pos + _PREAMBLE.size <= end:
            try:
                raw = self._raw_at(pos, verify, ahead=_SCAN_READ)
            except InvalidEntryError:
                raw = None
                if not verify:
                    return
            if raw is None or (verify and not raw.checksum_ok):
                damaged = pos if damaged is None else damaged
                pos += 8
                continue
            if damaged is not None and on_damage is not None:
                on_damage(damaged, pos)
            damaged = None
            yield raw
            pos = self._end_of(raw)
        if verify and on_damage is not None and (damaged is not None or pos < end):
            on_damage(pos if damaged is None else damaged, end)

    def resource_id(self, raw: RawEntry) -> bytes:
        """A raw entry's resource id as written (decrypted: this needs the passphrase in an
        encrypted chunk of format 2)."""
        if self.header.encryption and self.header.version >= 2:
            return crypto.decrypt_rid(self._need_key(), raw.offset, raw.resource_id)
        return raw.resource_id

    def _raw_at(self, offset: int, verify: bool, ahead: int = _FIRST_READ) -> RawEntry:
        """The entry at ``offset``, read with one ``pread`` when it is small (``ahead``
        bytes are read at once, and kept for the entries after it during a scan)."""
        if offset < self.header.data_start or offset % 8:
            raise InvalidEntryError(f"No entry can start at offset {offset}")
        head = self._read(offset, _PREAMBLE.size, ahead)
        if len(head) < _PREAMBLE.size:
            raise InvalidEntryError(f"No entry can start at offset {offset}")
        magic, rid_len, flags, length, checksum = _PREAMBLE.unpack(head)
        body_start = offset + _PREAMBLE.size
        if magic != ENTRY_MAGIC or not 1 <= rid_len <= MAX_RID:
            raise InvalidEntryError(f"No valid entry at offset {offset}")
        if flags & FLAG_TOMBSTONE and length:  # (the flags are not checksummed)
            raise InvalidEntryError(f"A tombstone with a payload at offset {offset}")
        body = self._read(body_start, rid_len + length, ahead)
        if len(body) < rid_len + length:
            raise InvalidEntryError(f"The entry at offset {offset} is truncated")
        rid, payload = body[:rid_len], body[rid_len:]
        ok = _checksum(rid, payload) == checksum if verify else None
        return RawEntry(offset, rid, payload, ok, flags)

    def _read(self, offset: int, size: int, ahead: int) -> bytes:
        """``size`` bytes at ``offset`` (fewer at the end of the file), from the window
        of bytes read last when they are in it."""
        start, window = self._window
        if start <= offset and offset + size <= start + len(window):
            return window[offset - start : offset - start + size]
        if offset + size > self._size:
            self._size = os.fstat(self._fd).st_size  # a writer may have appended
            size = max(0, min(size, self._size - offset))
        window = os.pread(self._fd, max(size, ahead), offset)
        self._window = (offset, window)
        return window[:size]

    @property
    def size(self) -> int:
        self._size = os.fstat(self._fd).st_size
        return self._size

    def valid_run(self) -> tuple[int, int]:
        """Entries in the unbroken run of valid ones from the start, and where it ends."""
        size, count, pos = self.size, 0, self.header.data_start
        while pos + _PREAMBLE.size <= size:
            try:
                raw = self._raw_at(pos, verify=True, ahead=_SCAN_READ)
            except InvalidEntryError:
                break
            if not raw.checksum_ok:
                break
            count, pos = count + 1, self._end_of(raw)
        return count, pos

    @staticmethod
    def _end_of(raw: RawEntry) -> int:
        return align8(raw.offset + _PREAMBLE.size + len(raw.resource_id) + len(raw.payload))

    def _decoded(self, raw: RawEntry) -> Entry:
        rid = self.resource_id(raw)
        if raw.tombstone:
            return Entry(raw.offset, rid, None, raw.checksum_ok, raw.flags)
        payload = raw.payload
        if raw.encrypted:
            payload = crypto.decrypt_payload(self._need_key(), raw.offset, payload)
        if raw.compressed:
            payload = self._codec.decompress(payload)
        if self.schema is None:
            raise EncryptionError("The schema is encrypted: open with the passphrase")
        fields = self.schema.decode_row(payload)
        return Entry(raw.offset, rid, fields, raw.checksum_ok, raw.flags)

    def _need_key(self) -> bytes:
        if self._key is None:
            raise EncryptionError("This chunk is encrypted: open it with the passphrase")
        return self._key

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair(path: str | os.PathLike[str]) -> RepairResult:
    """After a crash: keep the longest run of valid entries from the start, cut what
    follows, and commit the counters. Needs no passphrase."""
    with ChunkReader.open(path) as reader:
        size, (count, end) = reader.size, reader.valid_run()
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        with _naming(path):
            _lock(fd)
        os.ftruncate(fd, end)
        _commit_counters(fd, count, end, sync=True)
    finally:
        os.close(fd)
    return RepairResult(count, end, size - end)


__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "AppendResult",
    "ChunkHeader",
    "ChunkReader",
    "ChunkWriter",
    "Entry",
    "RawEntry",
    "RepairResult",
    "repair",
]
