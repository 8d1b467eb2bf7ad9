"""Reading byte ranges of remote object versions, with as few requests as sense allows.

Ranges asked for together are sorted and neighbours at most ``max_gap`` bytes apart
become one request; the requests of a batch, whatever objects they read
(:func:`read_together`: a batch's files in several shards), go out at once, one round
trip. With a block cache, only blocks not yet on local disk are fetched (whole blocks,
so the next read nearby is free) and every answer comes from the cache. An object read
through a :class:`~barecat.objectstore.pinned.PinnedObject` gets only bytes of the
version it was pinned to. Imports the ``objectstore`` package's own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from barecat.objectstore.block_cache import BlockCache
from barecat.objectstore.location import ObjectStore, ObjectVersion
from barecat.objectstore.pinned import PinnedObject, read_many

Span = tuple[int, int]


@dataclass(slots=True)
class _Plan:
    """The spans one object's read needs fetched, and how their bytes become the answer."""

    spans: list[Span]
    finish: Callable[[list[bytes]], list[bytes]]


class StoredObject:
    """Ranged, coalesced, optionally cached reads of ``version`` through ``store`` (or
    through ``pinned``, which refuses bytes of any other version)."""

    def __init__(
        self,
        store: ObjectStore,
        version: ObjectVersion,
        cache: BlockCache | None = None,
        pinned: PinnedObject | None = None,
    ) -> None:
        self.store = store
        self.version = version
        self.cache = cache
        self.pinned = pinned

    @property
    def size(self) -> int:
        return self.version.size

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    def read(self, start: int, end: int) -> bytes:
        return self.read_ranges([(start, end)])[0]

    def read_ranges(self, ranges: Sequence[Span], max_gap: int = 0) -> list[bytes]:
        """Bytes of each ``[start, end)`` range (clipped to the object), in order given."""
        return read_together([(self, ranges)], max_gap)[0]

    def plan(self, ranges: Sequence[Span], max_gap: int) -> _Plan:
        """What reading ``ranges`` takes: the spans to fetch, and the step that makes the
        answers of their bytes (see :func:`read_together`)."""
        clipped = [(min(max(s, 0), self.size), min(max(e, s, 0), self.size)) for s, e in ranges]
        if self.cache is None:
            return _coalesced(clipped, max_gap)
        cache = self.cache
        out: list[bytes | None] = [cache.read(s, e) for s, e in clipped]
        todo = [i for i, data in enumerate(out) if data is None]
        blocks = sorted({b for i in todo for b in cache.blocks_of(*clipped[i])})
        runs = _runs(blocks, max_gap // cache.block_size)

        def finish(datas: list[bytes]) -> list[bytes]:
            for (first, _), data in zip(runs, datas, strict=True):
                cache.store(first, data)
            for i in todo:
                out[i] = cache.read(*clipped[i])
            # A block damaged again at once (a full disk, a cache being deleted): read
            # past the cache rather than fail.
            lost = [i for i in todo if out[i] is None]
            if lost:
                again = read_together([(self.uncached(), [clipped[i] for i in lost])], 0)[0]
                for i, data in zip(lost, again, strict=True):
                    out[i] = data
            return [b"" if data is None else data for data in out]

        return _Plan([cache.block_span(first, last) for first, last in runs], finish)

    def uncached(self) -> StoredObject:
        """The same object, read past the block cache."""
        return StoredObject(self.store, self.version, None, self.pinned)


def _runs(blocks: list[int], gap_blocks: int) -> list[tuple[int, int]]:
    """Runs ``(first, last)`` of the sorted ``blocks``, neighbours at most ``gap_blocks``
    apart joined."""
    runs: list[tuple[int, int]] = []
    for b in blocks:
        if runs and b - runs[-1][1] - 1 <= gap_blocks:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    return runs


def _coalesced(ranges: list[Span], max_gap: int) -> _Plan:
    """The spans that cover ``ranges``, neighbours at most ``max_gap`` apart in one."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i])
    spans: list[list[int]] = []  # [start, end, first member, last member] in `order`
    for k, i in enumerate(order):
        start, end = ranges[i]
        if spans and start - spans[-1][1] <= max_gap:
            spans[-1][1] = max(spans[-1][1], end)
            spans[-1][3] = k
        else:
            spans.append([start, end, k, k])
    wanted = [(s[0], s[1]) for s in spans if s[1] > s[0]]

    def finish(datas: list[bytes]) -> list[bytes]:
        fetched = iter(datas)
        out = [b""] * len(ranges)
        for start, end, first, last in spans:
            data = next(fetched) if end > start else b""
            for k in range(first, last + 1):
                s, e = ranges[order[k]]
                out[order[k]] = data[s - start : e - start]
        return out

    return _Plan(wanted, finish)


def read_together(
    batches: Sequence[tuple[StoredObject, Sequence[Span]]], max_gap: int
) -> list[list[bytes]]:
    """The bytes of each object's ranges, every request of every object sent at once.

    Args:
        batches: (object, its ranges) pairs.
        max_gap: neighbours of one object this close are fetched by one request.

    Returns:
        Per pair, the bytes of each of its ranges in the order given.

    Raises:
        FileNotFoundBarecatError: an object is missing.
        RemoteStorageBarecatError: the store failed, or a pinned object changed.
    """
    plans = [obj.plan(ranges, max_gap) for obj, ranges in batches]
    reads = [
        (obj, span) for (obj, _), plan in zip(batches, plans, strict=True) for span in plan.spans
    ]
    fetched = iter(_fetch(reads))
    return [plan.finish([next(fetched) for _ in plan.spans]) for plan in plans]


def _fetch(reads: list[tuple[StoredObject, Span]]) -> list[bytes]:
    """One request per span, all at once: pinned objects' through ``read_many``, the
    others' through their store."""
    out: list[bytes] = [b""] * len(reads)
    pinned = [(i, obj.pinned, span) for i, (obj, span) in enumerate(reads) if obj.pinned]
    if pinned:
        datas = read_many([(p, start, end) for _, p, (start, end) in pinned])
        for (i, _, _), data in zip(pinned, datas, strict=True):
            out[i] = data
    plain = [i for i, (obj, _) in enumerate(reads) if obj.pinned is None]
    by_store: dict[int, list[int]] = {}
    for i in plain:
        by_store.setdefault(id(reads[i][0].store), []).append(i)
    for members in by_store.values():
        store = reads[members[0]][0].store
        datas = store.fetch_spans([(reads[i][0].version.url, *reads[i][1]) for i in members])
        for i, data in zip(members, datas, strict=True):
            out[i] = data
    return out


__all__ = ["StoredObject", "read_together"]
