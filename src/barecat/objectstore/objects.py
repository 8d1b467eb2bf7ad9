"""Reading byte ranges of one remote object version, with as few requests as sense allows.

Ranges asked for together are sorted and neighbours at most ``max_gap`` bytes apart
become one request; all requests of a batch go out at once. With a block cache, only
blocks not yet on local disk are fetched (whole blocks, so the next read nearby is free)
and every answer comes from the cache. Imports the ``remote`` package's own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from barecat.objectstore.block_cache import BlockCache
from barecat.objectstore.location import ObjectStore, ObjectVersion


class StoredObject:
    """Ranged, coalesced, optionally cached reads of ``version`` through ``store``."""

    def __init__(
        self,
        store: ObjectStore,
        version: ObjectVersion,
        cache: BlockCache | None = None,
        fetch: Callable[[Sequence[tuple[int, int]]], list[bytes]] | None = None,
    ) -> None:
        self.store = store
        self.version = version
        self.cache = cache
        self._fetch = fetch or (lambda spans: store.fetch_ranges(version.url, spans))
        """Fetches byte ranges, one request each, sent together: the store's, or a
        pinned object's (``pinned.py``), which refuses bytes of another version."""

    @property
    def size(self) -> int:
        return self.version.size

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()

    def read(self, start: int, end: int) -> bytes:
        return self.read_ranges([(start, end)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]], max_gap: int = 0) -> list[bytes]:
        """Bytes of each ``[start, end)`` range (clipped to the object), in order given."""
        clipped = [(min(max(s, 0), self.size), min(max(e, s, 0), self.size)) for s, e in ranges]
        if self.cache is None:
            return self._fetch_coalesced(clipped, max_gap)
        cache = self.cache
        out: list[bytes | None] = [cache.read(s, e) for s, e in clipped]
        todo = [i for i, data in enumerate(out) if data is None]
        if todo:
            self._fill(sorted({b for i in todo for b in cache.blocks_of(*clipped[i])}), max_gap)
            for i in todo:
                out[i] = cache.read(*clipped[i])
            # A block damaged again at once (a full disk, a cache being deleted): read
            # past the cache rather than fail.
            lost = [i for i in todo if out[i] is None]
            refetched = self._fetch_coalesced([clipped[i] for i in lost], 0)
            for i, data in zip(lost, refetched, strict=True):
                out[i] = data
        return [b"" if data is None else data for data in out]

    def _fill(self, blocks: list[int], max_gap: int) -> None:
        """Fetch the given blocks into the cache, runs of neighbours in one request."""
        assert self.cache is not None
        cache = self.cache
        gap_blocks = max_gap // cache.block_size
        runs: list[tuple[int, int]] = []
        for b in blocks:
            if runs and b - runs[-1][1] - 1 <= gap_blocks:
                runs[-1] = (runs[-1][0], b)
            else:
                runs.append((b, b))
        spans = [cache.block_span(first, last) for first, last in runs]
        datas = self._fetch(spans)
        for (first, _), data in zip(runs, datas, strict=True):
            cache.store(first, data)

    def _fetch_coalesced(self, ranges: list[tuple[int, int]], max_gap: int) -> list[bytes]:
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
        fetched = iter(self._fetch(wanted))
        out = [b""] * len(ranges)
        for start, end, first, last in spans:
            data = next(fetched) if end > start else b""
            for k in range(first, last + 1):
                s, e = ranges[order[k]]
                out[order[k]] = data[s - start : e - start]
        return out


__all__ = ["StoredObject"]
