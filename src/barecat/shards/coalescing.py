"""Which reads of a batch go together, and in which order they are made: neighbours in
storage (at most ``max_gap`` bytes apart, spanning at most :data:`SPAN`) share one read,
and the reads are made in the order the caller asked for the files (see
``Sharder.read_many`` for why). Pure: plans over addresses, reads nothing. Imports
``entries`` only.
"""

from __future__ import annotations

from barecat.entries import Address

SPAN = 16 << 20
"""The largest single read when coalescing neighbours."""

Run = tuple[int, int, int]
"""``(i, j, end)``: ``located[i:j]`` read together, from the first one's offset to ``end``."""


def runs_of(located: list[tuple[int, Address]], max_gap: int) -> list[Run]:
    """``located`` (``(position, address)`` pairs sorted by address) cut into runs read
    together: neighbours at most ``max_gap`` apart in one shard, spanning at most
    :data:`SPAN`."""
    runs = []
    i, count = 0, len(located)
    while i < count:
        shard, start, size, _ = located[i][1]
        end = start + size
        j = i + 1
        while j < count:
            s2, o2, n2, _ = located[j][1]
            if s2 != shard or o2 - end > max_gap or o2 + n2 - start > SPAN:
                break
            if n2:  # (an empty file needs no bytes: its offset may even be past the end)
                end = max(end, o2 + n2)
            j += 1
        runs.append((i, j, end))
        i = j
    return runs


def in_request_order(runs: list[Run], located: list[tuple[int, Address]]) -> list[Run]:
    """``runs`` by the first requested position each of them holds."""
    if len(runs) == len(located):  # (no neighbours: each run is one file)
        return [runs[k] for _, k in sorted((pos, k) for k, (pos, _) in enumerate(located))]
    return sorted(runs, key=lambda run: min(pos for pos, _ in located[run[0] : run[1]]))


__all__ = ["SPAN", "Run", "in_request_order", "runs_of"]
