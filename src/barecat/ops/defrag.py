"""Defragmentation: giving back the space of deleted and replaced files, crash-safely.

A full defrag packs every file in storage order from the front of the archive, so no
shard has a hole, every shard but the last is filled up to the shard size limit, and
emptied trailing shards are deleted (see ``compaction.py`` for where files go, and
``rounds.py`` for the order that keeps every file verifiable at every moment: copy to
unreferenced space, fsync, commit, only then reuse the old space).

A quick defrag works from the end: each file, last first, goes into the smallest hole
in front of it that can take it (best fit), until the time budget runs out, no hole is
left in front, or too many files found none; the few that found none are then slid down
into the room freed in front of them, and the shards are cut after their last files.
Holes filled this way were unreferenced before the round and the moved files' old
places are never reused in the same run, so every round is safe on its own.

Works on (Index, Sharder): no SQL and no shard I/O of its own.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from barecat.index import Index, ReadOnlyIndex
from barecat.index.placement import (
    Placement,
    end_before,
    holes,
    largest_file_size,
    placements_before,
    shard_ends,
)
from barecat.ops.compaction import PAGE, Compactor
from barecat.ops.rounds import (
    OnProgress,
    Tally,
    finish,
    require_movable,
    resync_after_failure,
)
from barecat.shards import Sharder
from barecat.shards.reading import ShardReader

MAX_STUCK = 10
"""Files from the end that found no hole before a quick defrag gives up filling holes."""

_LAST = (1 << 63) - 1
_AFTER_EVERYTHING = (_LAST, _LAST, _LAST)


@dataclass(slots=True)
class DefragResult:
    """What a defrag did. ``files_moved`` counts moves (a file that went past the end
    to make room and came back counts twice). ``rounds``: index commits, each after an
    fsync of the copied bytes. ``timed_out``: a quick defrag stopped at its time
    budget. ``corrupt_files``: files whose bytes already failed their CRC32C (moved
    unchanged)."""

    files_moved: int = 0
    bytes_moved: int = 0
    rounds: int = 0
    bytes_reclaimed: int = 0
    physical_size_before: int = 0
    physical_size_after: int = 0
    shards_before: int = 0
    shards_after: int = 0
    timed_out: bool = False
    corrupt_files: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(slots=True)
class Fragmentation:
    """Where the space in the shards goes (for ``defrag --dry-run``)."""

    physical_size: int
    data_size: int
    shards: int
    holes: int
    hole_bytes: int
    largest_hole: int
    slack_bytes: int  # past each shard's last file, and all of unused shards

    @property
    def reclaimable(self) -> int:
        return max(0, self.physical_size - self.data_size)


def fragmentation(index: ReadOnlyIndex, sharder: ShardReader) -> Fragmentation:
    """Measure holes and slack without changing anything."""
    gaps = [size for _, _, size in holes(index)]
    ends = shard_ends(index)
    slack = sum(
        max(0, sharder.physical_shard_end(s) - ends.get(s, 0)) for s in range(sharder.num_shards)
    )
    return Fragmentation(
        physical_size=sharder.total_physical_size_stat,
        data_size=index.lookups.total_size,
        shards=sharder.num_shards,
        holes=len(gaps),
        hole_bytes=sum(gaps),
        largest_hole=max(gaps, default=0),
        slack_bytes=slack,
    )


def defrag(
    index: Index,
    sharder: Sharder,
    *,
    quick: bool = False,
    time_budget: float = 5.0,
    on_progress: OnProgress | None = None,
) -> DefragResult:
    """Reclaim the space no file uses; ``quick`` works from the end within ``time_budget``
    seconds and may leave holes. ``on_progress(files, nbytes)`` is told of progress."""
    require_movable(index, sharder, "defragment")
    started = time.monotonic()
    result = DefragResult(
        physical_size_before=sharder.total_physical_size_stat, shards_before=sharder.num_shards
    )
    limit = sharder.shard_size_limit
    # a file above the limit (set lower by hand) keeps its own shard rather than failing
    capacity = max(index.connection.shard_size_limit, largest_file_size(index))
    sharder.shard_size_limit = capacity
    try:
        if quick:
            tally, finished = _quick(index, sharder, capacity, started + time_budget, on_progress)
        else:
            compactor = Compactor(index, sharder, capacity, on_progress=on_progress)
            finished = compactor.run()
            tally = compactor.tally
        finish(index, sharder, on_progress)
    except BaseException:
        resync_after_failure(index, sharder)
        raise
    finally:
        sharder.shard_size_limit = limit
    result.timed_out = not finished
    record_outcome(result, tally, sharder, started)
    return result


def record_outcome(result: DefragResult, tally: Tally, sharder: Sharder, started: float) -> None:
    """Fill in what the moves did and what the shards look like now."""
    result.files_moved, result.bytes_moved = tally.files_moved, tally.bytes_moved
    result.rounds, result.corrupt_files = tally.rounds, tally.corrupt_files
    result.physical_size_after = sharder.total_physical_size_stat
    result.shards_after = sharder.num_shards
    result.bytes_reclaimed = result.physical_size_before - result.physical_size_after
    result.seconds = time.monotonic() - started


def _quick(
    index: Index,
    sharder: Sharder,
    capacity: int,
    deadline: float,
    on_progress: OnProgress | None,
) -> tuple[Tally, bool]:
    """Best fit from the end, then slide the files that found no hole; False on timeout."""
    compactor = Compactor(
        index, sharder, capacity, quick=True, deadline=deadline, on_progress=on_progress
    )
    stuck = _fill_holes_from_the_end(index, compactor, _FreeSpace(holes(index)))
    compactor.flush()
    if time.monotonic() >= deadline:
        return compactor.tally, False
    if stuck.files:
        low = stuck.files[-1]
        start = stuck.slide_from
        if start is None:
            start = end_before(index, low.shard, low.offset)
        compactor.start_at(low.shard, start)
        return compactor.tally, compactor.run()
    return compactor.tally, True


class _FreeSpace:
    """Free stretches, by size for best fit and by place to drop those behind the walk."""

    def __init__(self, spaces: list[tuple[int, int, int]]) -> None:
        self._by_size = sorted((n, s, o) for s, o, n in spaces if n > 0)
        self._by_place = sorted((s, o, n) for s, o, n in spaces if n > 0)

    def __bool__(self) -> bool:
        return bool(self._by_place)

    def forget_from(self, shard: int, offset: int) -> None:
        """Drop the stretches at or after (shard, offset): no longer in front of the walk."""
        while self._by_place and self._by_place[-1][:2] >= (shard, offset):
            s, o, n = self._by_place.pop()
            del self._by_size[bisect.bisect_left(self._by_size, (n, s, o))]

    def take(self, size: int) -> tuple[int, int] | None:
        """The start of the smallest stretch that holds ``size`` bytes, used up front."""
        i = bisect.bisect_left(self._by_size, (size, -1, -1))
        if i == len(self._by_size):
            return None
        n, s, o = self._by_size.pop(i)
        del self._by_place[bisect.bisect_left(self._by_place, (s, o, n))]
        if n > size:
            bisect.insort(self._by_size, (n - size, s, o + size))
            bisect.insort(self._by_place, (s, o + size, n - size))
        return s, o


def _fill_holes_from_the_end(index: Index, compactor: Compactor, free: _FreeSpace) -> _Stuck:
    """Move files, last first, into the best-fitting earlier hole; returns the files
    that found none (lowest last) and where the slide that follows may start.

    Past a file that found no hole, moves only make room right below it for the slide
    that follows: they are held back, and made only if that room comes to suffice (the
    walk then stops), so a quick defrag never moves a file for nothing. The walk also
    stops at the deadline, when no hole is left in front, or after MAX_STUCK files found
    none.
    """
    stuck = _Stuck()
    moved: set[int] = set()
    deadline = compactor.deadline
    for f in _from_the_end(index):
        if f.rowid in moved or f.size == 0:  # moved further up; or nothing to move
            continue
        if stuck.files and stuck.ends_walk(f, compactor):
            return stuck
        free.forget_from(f.shard, f.offset)
        if not free or (deadline is not None and time.monotonic() >= deadline):
            return stuck
        compactor.note_settled(1)
        place = free.take(f.size)
        if place is None:
            stuck.add(f)
            free.forget_from(f.shard, max(0, f.offset - stuck.need))
            if len(stuck.files) > MAX_STUCK:
                return stuck
        elif stuck.files:
            stuck.held.append((f, place))
        else:
            compactor.schedule(f, *place)
            moved.update(f.rowids)
            if compactor.round.is_full():
                compactor.flush()
    return stuck


def _from_the_end(index: Index) -> Iterator[Placement]:
    """Files from the last to the first, a page at a time; files that share the same bytes
    come as one, the first carrying the others (``sharers``), so they move together."""
    key = _AFTER_EVERYTHING
    group: Placement | None = None
    while page := placements_before(index, key, PAGE):
        key = page[-1].key
        for f in page:
            if group is not None and group.shares_with(f):
                f.sharers = [group, *group.sharers]
            elif group is not None:
                yield group
            group = f
    if group is not None:
        yield group


class _Stuck:
    """Files that found no hole, and the moves held back to make room below them."""

    def __init__(self) -> None:
        self.files: list[Placement] = []
        self.held: list[tuple[Placement, tuple[int, int]]] = []
        self.need = 0  # the largest stuck file: room below them all must take it
        self.slide_from: int | None = None  # where the room made for them starts

    @property
    def shard(self) -> int:
        return self.files[-1].shard

    def add(self, f: Placement) -> None:
        self.files.append(f)
        self.need = max(self.need, f.size)

    def ends_walk(self, f: Placement, compactor: Compactor) -> bool:
        """Whether the walk stops before ``f``: the room below the stuck files suffices
        (the held moves are made) or ``f`` is in another shard (they are dropped)."""
        if self.room_above(f) >= self.need:
            for g, (shard, offset) in self.held:
                compactor.schedule(g, shard, offset)
            self.slide_from = f.end if f.shard == self.shard else 0
            return True
        return f.shard != self.shard

    def room_above(self, f: Placement) -> int:
        """Free bytes between ``f`` and the lowest stuck file if the held moves are made
        (files between them have moved away; held moves that land there take room)."""
        low = self.files[-1]
        start = f.end if f.shard == low.shard else 0
        taken = sum(g.size for g, (s, o) in self.held if s == low.shard and o >= start)
        return low.offset - start - taken
