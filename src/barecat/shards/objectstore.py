"""The :class:`ObjectStoreSharder`: read-only shards that live on object storage (or any
fsspec filesystem), read by ranged requests through a local block cache.

It is a :class:`~barecat.shards.reading.ShardReader` whose reads fetch byte ranges
instead of calling ``pread``, so everything above it that reads (verified reads,
batches, streams, sealed files, verify) works unchanged; it has no writing side at all,
an archive on object storage being opened read-only. Batches are coalesced harder than
on a local disk (``max_gap``): one request that carries a few kilobytes more is cheaper
than two. Each shard is looked up (one metadata request, for its size and version) the
first time it is read. Imports ``objectstore``, ``entries`` and ``exceptions``.
"""

from __future__ import annotations

from collections.abc import Callable

from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import BarecatIntegrityError, FileNotFoundBarecatError
from barecat.objectstore import ArchiveCache, ObjectStore, StoredObject
from barecat.objectstore.objects import read_together
from barecat.shards.reading import ShardReader

DEFAULT_BLOCK_SIZE = 64 << 10
"""Unit of the local cache: a small file costs at most two blocks of transfer."""
DEFAULT_MAX_GAP = 256 << 10
"""Neighbours this close in a batch are fetched by one request."""


class ObjectStoreSharder(ShardReader):
    """Shards ``0 .. num_shards-1`` of the archive at ``url`` (read-only)."""

    readonly = True

    def __init__(
        self,
        url: str,
        store: ObjectStore,
        num_shards: int,
        cache: ArchiveCache | None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_gap: int = DEFAULT_MAX_GAP,
        shard_objects: Callable[[int], StoredObject] | None = None,
    ) -> None:
        self.store = store
        self._shard_objects = shard_objects
        """Makes shard ``i``'s object without asking the store (a published archive's
        sizes are in its sidecar); None: each is looked up the first time it is read."""
        self.cache = cache
        self.block_size = block_size
        self.max_gap = max_gap
        self._num_shards = num_shards
        self._objects: dict[int, StoredObject] = {}
        super().__init__(url)

    @property
    def num_shards(self) -> int:
        return self._num_shards

    def _object(self, shard: int) -> StoredObject:
        return self._per_shard(self._objects, shard, self._open_object)

    def _open_object(self, shard: int) -> StoredObject:
        if self._shard_objects is not None:
            if shard >= self._num_shards:
                raise self.missing_shard_error(shard)
            return self._shard_objects(shard)
        try:
            version = self.store.describe(self.get_shard_path(shard))
        except FileNotFoundBarecatError:
            raise self.missing_shard_error(shard) from None
        blocks = None if self.cache is None else self.cache.blocks_of(version, self.block_size)
        return StoredObject(self.store, version, blocks)

    def close(self) -> None:
        with self._lock:
            objects, self._objects = self._objects, {}
        for obj in objects.values():
            obj.close()

    # -- what the store can tell ---------------------------------------------------------

    def shard_exists(self, shard_number: int) -> bool:
        try:
            self._object(shard_number)
        except BarecatIntegrityError:
            return False
        return True

    def physical_shard_end(self, shard_number: int) -> int:
        try:
            return self._object(shard_number).size
        except BarecatIntegrityError:
            return 0

    # -- reading -------------------------------------------------------------------------

    def _checked(self, shard: int, offset: int, data: bytes, expected: int | None) -> bytes:
        if expected is not None and crc32c(data) != expected:
            raise self.crc_mismatch_error(shard, offset, len(data))
        return data

    def read_from_address(
        self, shard: int, offset: int, size: int, expected_crc32c: int | None = None
    ) -> bytes:
        obj = self._within(shard, offset, size)
        return self._checked(shard, offset, obj.read(offset, offset + size), expected_crc32c)

    def require_range(self, shard: int, offset: int, size: int) -> None:
        self._within(shard, offset, size)

    def _within(self, shard: int, offset: int, size: int) -> StoredObject:
        """The shard's object, if it holds ``size`` bytes at ``offset`` (else: truncated)."""
        obj = self._object(shard)
        if offset + size > obj.size:
            raise self.truncated_error(shard, offset, size, max(0, obj.size - offset))
        return obj

    def read_many(self, located: list[tuple[int, Address]], max_gap: int = 0) -> list[bytes]:
        """As :meth:`Sharder.read_many`: every shard's ranges in one round of requests."""
        out: list[bytes] = [b""] * len(located)
        by_shard: dict[int, list[tuple[int, int, int, int | None]]] = {}
        for pos, (shard, offset, size, crc) in located:
            by_shard.setdefault(shard, []).append((pos, offset, size, crc))
        batches = []
        for shard, entries in by_shard.items():
            last = max(entries, key=lambda e: e[1] + e[2])
            obj = self._within(shard, last[1], last[2])
            batches.append((obj, [(offset, offset + size) for _, offset, size, _ in entries]))
        datas = read_together(batches, max(max_gap, self.max_gap))
        for (shard, entries), shard_datas in zip(by_shard.items(), datas, strict=True):
            for (pos, offset, _, crc), data in zip(entries, shard_datas, strict=True):
                out[pos] = self._checked(shard, offset, data, crc)
        return out

    def pread(self, shard: int, offset: int, size: int) -> bytes:
        obj = self._object(shard)
        return obj.read(offset, min(offset + size, obj.size))

    def preadinto(self, shard: int, offset: int, view: memoryview) -> int:
        data = self.pread(shard, offset, len(view))
        view[: len(data)] = data
        return len(data)


__all__ = ["DEFAULT_BLOCK_SIZE", "DEFAULT_MAX_GAP", "ObjectStoreSharder"]
