"""The packing engine under ``defrag`` and ``reshard``.

Files are packed in storage order at a cursor that starts at the front of the archive
(or of its tail, for a quick defrag), into shards of a given capacity, in rounds that
never overwrite a byte a committed row points at (``rounds.py``). A file may go to:

- the cursor, if it fits in the *window* in front of it: from the cursor up to the
  first byte still referenced (the file itself, or the round's first planned source in
  that shard); every later round finds the window larger by the holes passed;
- past the end of the archive (a *relocation*), when it would overlap itself, when it
  lies past the capacity of its shard (a lowered limit), or to grow a window so small
  that the rest of the shard would take too many rounds (a tiny hole in front of
  gigabytes); it is packed again when the cursor reaches it there, so relocated files
  (at most a window's worth, plus those) lose their place in the storage order;
- the end of the previous shard, if it would open a shard but fits there: then whatever
  opens a shard does not fit at the end of the one before, so the result is a fixed
  point and a second run moves nothing.

A shard the cursor leaves is cut at its new end once the round that emptied its tail is
committed. Empty files have no bytes and are never moved here (``rounds.finish`` and
``rounds.cut_shard`` park those that would end up past the data). Works on (Index,
Sharder) through ``index.placement`` and ``ops.rounds``; no SQL and no file I/O.
"""

from __future__ import annotations

import time
from collections import deque

from barecat.index import Index
from barecat.index.placement import AddressKey, Placement, placements_after, shard_ends
from barecat.ops.rounds import OnProgress, Round, Tally, cut_shard
from barecat.ops.writing import WriteSession
from barecat.shards import Sharder
from barecat.shards.moving import COPY_BUFFER_BYTES

GROW_WINDOW = 64 << 20  # relocate files until the window in front of the cursor is this big
GROW_ROUNDS = 64  # ... or big enough to pack the rest of its shard in this many rounds
PAGE = 4096  # rows fetched per index query


class _Stream:
    """Files at or after a storage key, ascending, fetched a page at a time; files that
    share the same bytes come as one, the first carrying the others (``sharers``)."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._key: AddressKey = (0, 0, -1)
        self._buffer: deque[Placement] = deque()

    def restart(self, start: AddressKey) -> None:
        """Read again from ``start`` (after a commit moved rows past the end)."""
        self._key = start
        self._buffer.clear()

    def _fetch(self) -> bool:
        page = placements_after(self._index, self._key, PAGE)
        if page:
            self._key = page[-1].key
            self._buffer.extend(page)
        return bool(page)

    def peek(self) -> Placement | None:
        buffer = self._buffer
        if not buffer and not self._fetch():
            return None
        head = buffer[0]
        while head.size > 0 and (len(buffer) > 1 or self._fetch()):
            if not head.shares_with(buffer[1]):
                break
            head.sharers.append(buffer[1])
            del buffer[1]
        return head

    def pop(self) -> Placement:
        return self._buffer.popleft()


class Compactor:
    """Packs files from a starting address onward; see the module docstring.

    ``quick`` (for a quick defrag's last step) never copies a file past the end or to
    the end of the previous shard, and stays in the shard it starts in: a file that
    does not fit in front of itself stays where it is and the cursor jumps past it.
    ``deadline`` (a ``time.monotonic`` value) stops the packing after the current round.
    """

    def __init__(
        self,
        index: Index,
        sharder: Sharder,
        capacity: int,
        *,
        quick: bool = False,
        deadline: float | None = None,
        on_progress: OnProgress | None = None,
    ) -> None:
        self.index = index
        self.sharder = sharder
        self.capacity = capacity
        self.quick = quick
        self.deadline = deadline
        self.on_progress = on_progress
        self.tally = Tally()
        self.shard = self.offset = 0
        self.round = Round()
        self._ends = shard_ends(index)
        self._growing = False
        self._behind: tuple[int, int] | None = None  # end of the shard the cursor left
        self._cuts: dict[int, int] = {}  # shards to cut once the round is committed
        self._settled = 0  # files settled since the last progress report
        self._buffer = bytearray(COPY_BUFFER_BYTES)
        self._stream = _Stream(index)
        self._writes = WriteSession(index, sharder)
        self._writes.resync(self._ends)

    # -- rounds ------------------------------------------------------------------------

    def schedule(self, f: Placement, shard: int, offset: int) -> None:
        """Plan a move of ``f`` into free space; it happens at the next :meth:`flush`."""
        self.round.add(f, shard, offset)

    def flush(self) -> None:
        """Commit the round (copy, fsync, commit), then cut the shards it emptied."""
        copied = self.round.commit(self.index, self.sharder, self._buffer, self.tally)
        self.round = Round()
        self._growing = False
        cuts, self._cuts = self._cuts, {}
        for shard, end in cuts.items():
            cut_shard(self.index, self.sharder, shard, end)
        self._report(copied)
        self._stream.restart((self.shard, self.offset, -1))

    def note_settled(self, files: int) -> None:
        """Count files looked at by a caller that schedules moves itself (for progress)."""
        self._settled += files

    def _report(self, nbytes: int) -> None:
        if self.on_progress is not None and (self._settled or nbytes):
            self.on_progress(self._settled, nbytes)
        self._settled = 0

    # -- packing -----------------------------------------------------------------------

    def start_at(self, shard: int, offset: int) -> None:
        """Pack only the files at or after this address (no file at or after it may
        reference a byte below it)."""
        self.shard, self.offset = shard, offset
        self._stream.restart((shard, offset, -1))

    def run(self) -> bool:
        """Pack everything from the cursor on; False if the deadline stopped it first."""
        while True:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.flush()
                return False
            f = self._stream.peek()
            if f is None:
                if not self.round and not self._cuts:
                    self._report(0)
                    return True
                self.flush()
                continue
            if self.quick and f.shard != self.shard:
                self.flush()
                return True
            if f.size == 0:  # nothing to move (see the module docstring)
                self._stream.pop()
            else:
                self._step(f)
            if self.round and self.round.is_full():
                self.flush()
            elif self._settled >= PAGE:
                self._report(0)

    def _step(self, f: Placement) -> None:
        c, o = self.shard, self.offset
        if self._fits_behind(f):
            self._fill_behind(self._stream.pop())
            return
        if self._growing:
            if self._must_leave(f) or (f.shard == c and f.offset - o < self._wanted_window(f)):
                self._relocate(self._stream.pop())
                return
            self._growing = False
        if (f.shard, f.offset) == (c, o) and f.end <= self.capacity:
            self._place(self._stream.pop(), moved=False)
        elif o + f.size <= self._window_end(f) and not self._worth_growing(f):
            self._place(self._stream.pop(), moved=True)
        elif f.shard > c and o + f.size > self.capacity:
            self._leave_shard()  # f never fits in the rest of this shard
        elif self.round:
            self.flush()  # committing the round frees room in front of the cursor
        elif not self.quick:
            self._growing = True
            self._relocate(self._stream.pop())
        else:  # quick: f stays; pack after it
            self._stream.pop()
            self._settled += 1
            self.offset = f.end

    def _window_end(self, f: Placement) -> int:
        """Where the free space in front of the cursor ends: at the first byte there that
        a committed row still references (a planned source, else ``f`` itself)."""
        planned = self.round.first_source.get(self.shard)
        if planned is not None:
            return min(planned, self.capacity)
        return min(f.offset if f.shard == self.shard else self.capacity, self.capacity)

    def _place(self, f: Placement, moved: bool) -> None:
        if moved:
            self.schedule(f, self.shard, self.offset)
        self._settled += 1
        self.offset += f.size

    def _fits_behind(self, f: Placement) -> bool:
        """``f`` would open the cursor's shard but fits at the end of the previous one
        (whose tail no planned move still reads from)."""
        behind = self._behind
        return (
            not self.quick
            and self.offset == 0
            and behind is not None
            and behind[0] == self.shard - 1
            and behind[1] + f.size <= self.capacity
            and behind[0] not in self.round.first_source
        )

    def _fill_behind(self, f: Placement) -> None:
        assert self._behind is not None
        shard, offset = self._behind
        self.schedule(f, shard, offset)
        self._behind = (shard, offset + f.size)
        if shard in self._cuts:
            self._cuts[shard] = offset + f.size
        self._settled += 1

    def _leave_shard(self) -> None:
        """Go on to the next shard; this one is cut at the cursor after the round."""
        self._cuts[self.shard] = self.offset
        self._behind = (self.shard, self.offset)
        self.shard, self.offset = self.shard + 1, 0
        if not self.round:
            self.flush()

    def _must_leave(self, f: Placement) -> bool:
        """``f`` is in the cursor's shard but can never fit below its capacity there."""
        return f.shard == self.shard and self.offset + f.size > self.capacity

    def _wanted_window(self, f: Placement) -> int:
        """How big a window is worth relocating files for: at least ``f``; beyond that
        only as much as keeps the rounds for the rest of the shard under GROW_ROUNDS, and
        at most GROW_WINDOW (relocated files lose their place in the storage order)."""
        left = self._ends.get(f.shard, f.end) - f.offset
        return max(f.size, min(GROW_WINDOW, left // GROW_ROUNDS))

    def _worth_growing(self, f: Placement) -> bool:
        return (
            not self.quick
            and not self.round
            and f.shard == self.shard
            and f.offset - self.offset < self._wanted_window(f)
        )

    def _relocate(self, f: Placement) -> None:
        """Plan a copy of ``f`` past the end of the archive (new shards as needed)."""
        shard, offset = self._writes.claim(f.size)
        self._ends[shard] = max(self._ends.get(shard, 0), offset + f.size)
        self.schedule(f, shard, offset)
