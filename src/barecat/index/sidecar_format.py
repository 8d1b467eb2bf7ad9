"""The format of a published archive's sidecar (``ARCHIVE-sidecar``): its byte layout,
reading its parts, and finding a file's address in its lookup buckets.

A reader of an archive on object storage or a web server reads the index's SQLite pages
by ranged requests. The sidecar saves it the requests that every open and every lookup
would otherwise make: its head holds the pages every open needs (page 1, the schema, the
small ``config`` and ``sqlite_stat1`` tables and their indexes), then come copies of every
interior b-tree page, then a hash table of every file row, in buckets of about 32 KiB,
so that finding a file (or learning that it is not there) takes one request for its
bucket. ``docs/format.md`` ("The sidecar of a published archive") gives the layout byte
by byte; in short (little-endian throughout):

- the fixed header (:data:`FIXED_HEADER`): magic ``BCSIDECR``, version, the index's size,
  page size and first 100 bytes when it was published, the file and shard counts, where
  each part is;
- the shard sizes (one u64 each), then the bucket directory (``2**k + 1`` u64 offsets in
  the sidecar: bucket ``b`` is ``[dir[b], dir[b + 1])``);
- the eager pages, a zlib stream of a page list (u32 count, u32 page numbers ascending,
  the pages' bytes), then the CRC32C of every head byte before it: the head ends there;
- the interior pages, a zlib stream laid out as the eager one (its CRC32C in the header);
- the buckets. A file is in bucket ``xxh3_64(path) >> (64 - k)`` (the path's UTF-8 bytes,
  undecodable bytes kept by ``surrogateescape``, as the lookup table hashes them), every
  file row in one, so a path its bucket lacks is not in the archive. A bucket: u32 count,
  u32 length of the paths, one byte each for the widths of the shard, offset, size and
  CRC32C columns, the paths (each followed by a NUL byte: no stored path has one), the
  columns of each entry (little-endian, of those widths; a CRC32C 5 bytes wide stores
  CRC32C + 1, and 0 for a row without one), then the CRC32C of the bucket's bytes before it.
  Entries run in the order of their paths' hash, then path.

Every part is checked before it is used: the head and the interior pages against their
CRC32C, each bucket against its own, and every length and count against the others, so
damaged bytes raise :class:`~barecat.exceptions.BarecatIntegrityError` naming where they
came from, never a wrong answer. A sidecar belongs to one state of its index:
:meth:`SidecarHead.matches` compares the index's first 100 bytes (SQLite's change counter
and page count among them) and size with those recorded; a sidecar that does not match is
stale and must not be used. Building one reads SQL (``sidecar.py``, which re-exports this
module's public names: readers import them from there). This module imports ``entries``,
``exceptions``, ``checksum`` and xxhash only.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import xxhash

from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import BarecatIntegrityError

MAGIC = b"BCSIDECR"
VERSION = 1
HEAD_GUESS = 256 << 10
"""A reader's first request for a sidecar is ``[0, HEAD_GUESS)``: the whole head of an
archive of up to about 1 GiB of rows (some 15 million files; ``sidecar.py`` keeps the
directory at 2**14 buckets until then), the rest of a larger head in a second request."""
INDEX_HEADER_SIZE = 100
"""SQLite's database header: the bytes of the index a sidecar records and compares."""
FIXED_HEADER = struct.Struct("<8sIIQQIIQQQQQQQQI4x100s4x")
"""magic, version (u32), bucket bits k (u32), head size, index size (u64), page size,
shard count (u32), file count, directory offset, eager offset, eager length, interior
offset, interior length, buckets offset, buckets length (u64), the interior pages'
CRC32C (u32, 4 bytes of padding), the index's first 100 bytes, 4 bytes of padding:
216 bytes, so the shard sizes and the directory after it stay 8-byte aligned."""
BUCKET_HEADER = struct.Struct("<IIBBBB")
"""A bucket's count, length of its paths, widths of shard, offset, size and CRC32C."""
_U32 = struct.Struct("<I")
_PAGES_HEADER = _U32
_MAX_BUCKET_BITS = 40
path_hash = xxhash.xxh3_64_intdigest
"""The 64-bit hash of a path's bytes (:func:`encode_path`) that places it in a bucket."""


def encode_path(path: str) -> bytes:
    """A path's bytes as the sidecar stores and hashes them."""
    return path.encode("utf-8", "surrogateescape")


def bucket_of(key: bytes, bits: int) -> int:
    """The bucket (of ``2**bits``) that holds the path whose bytes are ``key``."""
    return path_hash(key) >> (64 - bits) if bits else 0


@dataclass(frozen=True, slots=True)
class SidecarHead:
    """A sidecar's head, parsed and checked (:meth:`parse`): what a reader keeps in memory.

    ``eager_pages`` maps a page number of the index to its bytes; ``buckets`` is the
    bucket directory (``2**bucket_bits + 1`` offsets into the sidecar).
    """

    where: str
    head_size: int
    index_size: int
    page_size: int
    index_header: bytes
    num_files: int
    shard_sizes: list[int]
    eager_pages: dict[int, bytes]
    interior_span: tuple[int, int]
    interior_crc: int
    bucket_bits: int
    buckets: array[int]
    buckets_span: tuple[int, int]

    @staticmethod
    def needed(data: bytes, where: str = "sidecar") -> int:
        """How many bytes from the start of the sidecar :meth:`parse` needs (the head).

        Args:
            data: the sidecar's first bytes, at least :data:`FIXED_HEADER`'s size (a
                reader fetches :data:`HEAD_GUESS` of them).
            where: what to name in an error (the sidecar's URL or path).

        Returns:
            The head's size; fetch the rest when ``data`` is shorter.

        Raises:
            BarecatIntegrityError: not a sidecar of this version, or cut short.
        """
        return int(_fixed(data, where)[3])

    @classmethod
    def parse(cls, data: bytes, where: str = "sidecar") -> SidecarHead:
        """Parse and check a sidecar's head: the complete head is needed (see
        :meth:`needed`); bytes after it are ignored.

        Args:
            data: the sidecar's first :meth:`needed` bytes or more.
            where: what to name in an error (the sidecar's URL or path).

        Returns:
            The head.

        Raises:
            BarecatIntegrityError: a wrong magic or version, a head cut short, damaged
                (its CRC32C) or inconsistent.
        """
        fixed = _fixed(data, where)
        (_, _, bits, head_size, index_size, page_size, num_shards, num_files) = fixed[:8]
        (directory, eager_at, eager_len, interior_at, interior_len) = fixed[8:13]
        (buckets_at, buckets_len, interior_crc, index_header) = fixed[13:]
        if len(data) < head_size:
            raise _damaged(where, f"its head is {head_size} bytes, only {len(data)} given")
        view = memoryview(data)[:head_size]
        if crc32c(view[:-4]) != _U32.unpack_from(view, head_size - 4)[0]:
            raise _damaged(where, "its head fails its CRC32C")
        if not _consistent(fixed):
            raise _damaged(where, "its head is inconsistent")
        num_buckets = 1 << bits
        shard_sizes = list(struct.unpack_from(f"<{num_shards}Q", view, FIXED_HEADER.size))
        buckets = array("Q")
        buckets.frombytes(view[directory:eager_at])
        if sys.byteorder == "big":
            buckets.byteswap()
        if buckets[0] != buckets_at or buckets[num_buckets] != buckets_at + buckets_len:
            raise _damaged(where, "its bucket directory is inconsistent")
        eager = _pages(bytes(view[eager_at : eager_at + eager_len]), page_size, index_size, where)
        return cls(
            where=where,
            head_size=head_size,
            index_size=index_size,
            page_size=page_size,
            index_header=bytes(index_header),
            num_files=num_files,
            shard_sizes=shard_sizes,
            eager_pages=eager,
            interior_span=(interior_at, interior_at + interior_len),
            interior_crc=interior_crc,
            bucket_bits=bits,
            buckets=buckets,
            buckets_span=(buckets_at, buckets_at + buckets_len),
        )

    def matches(self, index_header: bytes, index_size: int) -> bool:
        """Whether this sidecar was made from the index as it is now.

        Args:
            index_header: the index's first 100 bytes now.
            index_size: the index's size now.

        Returns:
            False when the index changed since (anyone wrote to it): the sidecar is
            stale and must not be used.
        """
        return index_size == self.index_size and bytes(index_header[:100]) == self.index_header

    def parse_interior(self, blob: bytes) -> dict[int, bytes]:
        """The interior pages: page number -> bytes.

        Args:
            blob: the sidecar's bytes at :attr:`interior_span`.

        Raises:
            BarecatIntegrityError: the bytes are damaged or cut short.
        """
        start, end = self.interior_span
        if len(blob) != end - start or crc32c(blob) != self.interior_crc:
            raise _damaged(self.where, "its interior pages fail their CRC32C")
        return _pages(bytes(blob), self.page_size, self.index_size, self.where)

    def bucket_span(self, path: str) -> tuple[int, int]:
        """The byte range ``[start, end)`` of the sidecar that holds ``path``'s bucket."""
        b = bucket_of(encode_path(path), self.bucket_bits)
        return self.buckets[b], self.buckets[b + 1]

    def bucket_spans(self, paths: Iterable[str]) -> dict[tuple[int, int], list[str]]:
        """``paths`` grouped by the bucket that holds each, buckets in sidecar order: one
        request per bucket serves every path of a batch (``get_many``)."""
        grouped: dict[tuple[int, int], list[str]] = {}
        for path in paths:
            grouped.setdefault(self.bucket_span(path), []).append(path)
        return dict(sorted(grouped.items()))

    def find(self, path: str, bucket: bytes) -> Address | None:
        """Where ``path`` is stored, from its bucket (the sidecar's :meth:`bucket_span`).

        Args:
            path: a normalized path.
            bucket: the bytes of its bucket.

        Returns:
            Its address, or None: no file of the archive has that path.

        Raises:
            BarecatIntegrityError: the bucket is damaged (or not ``path``'s).
        """
        return self.find_many([path], bucket)[0]

    def find_many(self, paths: list[str], bucket: bytes) -> list[Address | None]:
        """:meth:`find` for paths that share one bucket, which is parsed once.

        Raises:
            BarecatIntegrityError: the bucket is damaged or not every path's.
        """
        if not paths:
            return []
        spans = {self.bucket_span(path) for path in paths}
        if len(spans) != 1:
            raise ValueError("find_many takes paths of one bucket (see bucket_spans)")
        ((start, end),) = spans
        parsed = Bucket(bucket, end - start, f"{self.where} (bytes {start}-{end})")
        return [parsed.find(encode_path(path)) for path in paths]


class Bucket:
    """One lookup bucket, checked (length, CRC32C, counts) and split into its paths."""

    __slots__ = ("_data", "_keys", "_records", "_where", "_widths")

    def __init__(self, data: bytes, expected_size: int, where: str) -> None:
        self._where = where
        size = len(data)
        if size != expected_size or size < BUCKET_HEADER.size + 4:
            raise _damaged(where, f"a bucket of {size} bytes, expected {expected_size}")
        view = memoryview(data)
        if crc32c(view[:-4]) != _U32.unpack_from(view, size - 4)[0]:
            raise _damaged(where, "a lookup bucket fails its CRC32C")
        count, paths_len, *widths = BUCKET_HEADER.unpack_from(view)
        record = sum(widths)
        paths_end = BUCKET_HEADER.size + paths_len
        if (
            paths_end + count * record + 4 != size
            or not all(1 <= w <= 8 for w in widths[:3])
            or widths[3] not in (4, 5)
        ):
            raise _damaged(where, "a lookup bucket is inconsistent")
        names = bytes(view[BUCKET_HEADER.size : paths_end])
        keys = names.split(b"\0")
        if keys.pop() != b"" or len(keys) != count:
            raise _damaged(where, "a lookup bucket's paths are inconsistent")
        self._data, self._keys, self._widths = view, keys, tuple(widths)
        self._records = paths_end

    def entries(self) -> list[tuple[bytes, Address]]:
        """Every entry: (the path's bytes, its address), in stored order."""
        return [(key, self._address(i)) for i, key in enumerate(self._keys)]

    def find(self, key: bytes) -> Address | None:
        """The address of the path whose bytes are ``key``, or None."""
        try:
            i = self._keys.index(key)
        except ValueError:
            return None
        return self._address(i)

    def _address(self, i: int) -> Address:
        shard_w, offset_w, size_w, crc_w = self._widths
        at = self._records + i * (shard_w + offset_w + size_w + crc_w)
        data = self._data
        shard = int.from_bytes(data[at : at + shard_w], "little")
        at += shard_w
        offset = int.from_bytes(data[at : at + offset_w], "little")
        at += offset_w
        size = int.from_bytes(data[at : at + size_w], "little")
        at += size_w
        stored = int.from_bytes(data[at : at + crc_w], "little")
        if crc_w == 4:
            return Address(shard, offset, size, stored)
        if stored > 1 << 32:
            raise _damaged(self._where, "a lookup bucket holds a CRC32C out of range")
        return Address(shard, offset, size, stored - 1 if stored else None)


def encode_bucket(entries: list[tuple[bytes, int, int, int, int | None]]) -> bytes:
    """One bucket's bytes: ``entries`` are (path bytes, shard, offset, size, crc32c),
    in the order to store them (hash, then path)."""
    count = len(entries)
    if count:
        shard_w = _width(max(e[1] for e in entries))
        offset_w = _width(max(e[2] for e in entries))
        size_w = _width(max(e[3] for e in entries))
        crc_w = 5 if any(e[4] is None for e in entries) else 4
    else:
        shard_w = offset_w = size_w = 1
        crc_w = 4
    names = b"".join(key + b"\0" for key, *_ in entries)
    parts = [BUCKET_HEADER.pack(count, len(names), shard_w, offset_w, size_w, crc_w), names]
    for _, shard, offset, size, crc in entries:
        stored_crc = 0 if crc is None else crc + (crc_w == 5)
        parts.append(shard.to_bytes(shard_w, "little"))
        parts.append(offset.to_bytes(offset_w, "little"))
        parts.append(size.to_bytes(size_w, "little"))
        parts.append(stored_crc.to_bytes(crc_w, "little"))
    body = b"".join(parts)
    return body + _U32.pack(crc32c(body))


def encode_pages(pages: dict[int, bytes]) -> bytes:
    """A page list as the sidecar stores it (zlib of count, page numbers, bytes)."""
    numbers = sorted(pages)
    raw = b"".join(
        [_PAGES_HEADER.pack(len(numbers)), struct.pack(f"<{len(numbers)}I", *numbers)]
        + [pages[n] for n in numbers]
    )
    return zlib.compress(raw, 6)


def pack_fixed_header(**fields: int | bytes) -> bytes:
    """The fixed header's bytes from its named fields (see :data:`FIXED_HEADER`)."""
    return FIXED_HEADER.pack(
        MAGIC,
        VERSION,
        fields["bucket_bits"],
        fields["head_size"],
        fields["index_size"],
        fields["page_size"],
        fields["num_shards"],
        fields["num_files"],
        fields["directory_at"],
        fields["eager_at"],
        fields["eager_len"],
        fields["interior_at"],
        fields["interior_len"],
        fields["buckets_at"],
        fields["buckets_len"],
        fields["interior_crc"],
        fields["index_header"],
    )


def _width(value: int) -> int:
    return max(1, (value.bit_length() + 7) // 8)


def _fixed(data: bytes, where: str) -> tuple[Any, ...]:
    if len(data) < FIXED_HEADER.size:
        raise _damaged(where, f"{len(data)} bytes, shorter than a sidecar's header")
    fields = FIXED_HEADER.unpack_from(data)
    if fields[0] != MAGIC:
        raise _damaged(where, "not a barecat sidecar (wrong magic)")
    if fields[1] != VERSION:
        raise _damaged(where, f"sidecar version {fields[1]}, this barecat reads {VERSION}")
    if fields[3] < FIXED_HEADER.size + 4:
        raise _damaged(where, "its head is inconsistent")
    return fields


def _consistent(fixed: tuple[Any, ...]) -> bool:
    """Whether the fixed header's sizes and offsets agree (parts back to back, in order)."""
    (_, _, bits, head_size, index_size, page_size, num_shards, _) = fixed[:8]
    (directory, eager_at, eager_len, interior_at, interior_len, buckets_at) = fixed[8:14]
    return (
        bits <= _MAX_BUCKET_BITS
        and 512 <= page_size <= 65536
        and not page_size & (page_size - 1)
        and not index_size % page_size
        and directory == FIXED_HEADER.size + 8 * num_shards
        and eager_at == directory + 8 * ((1 << bits) + 1)
        and head_size == eager_at + eager_len + 4
        and interior_at == head_size
        and buckets_at == interior_at + interior_len
    )


def _pages(blob: bytes, page_size: int, index_size: int, where: str) -> dict[int, bytes]:
    """A page list (:func:`encode_pages`) back, checked against the index's size."""
    last_page = index_size // page_size
    most = 4 + (4 + page_size) * last_page  # every page of the index, and no more
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(blob, most + 1)
    except zlib.error as e:
        raise _damaged(where, f"a page list does not decompress: {e}") from None
    if not inflater.eof or inflater.unused_data or len(raw) < 4 or len(raw) > most:
        raise _damaged(where, "a page list is cut short or too long")
    (count,) = _PAGES_HEADER.unpack_from(raw)
    body = 4 + 4 * count
    if len(raw) != body + count * page_size:
        raise _damaged(where, "a page list is inconsistent")
    numbers = struct.unpack_from(f"<{count}I", raw, 4)
    if any(not 0 < n <= last_page for n in numbers) or list(numbers) != sorted(set(numbers)):
        raise _damaged(where, "a page list names pages the index does not have")
    return {
        n: raw[body + i * page_size : body + (i + 1) * page_size] for i, n in enumerate(numbers)
    }


def _damaged(where: str, what: str) -> BarecatIntegrityError:
    return BarecatIntegrityError(f"{where}: damaged sidecar: {what}")
