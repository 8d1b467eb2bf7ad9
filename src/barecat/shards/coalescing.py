"""Which reads of a batch go together, and in which order they are made: neighbours in
storage (at most ``max_gap`` bytes apart, spanning at most :data:`SPAN`) share one read,
and the reads are made in the order the caller asked for the files (see
``Sharder.read_many`` for why). Pure: plans over addresses, reads nothing. Imports
``entries`` and the kernels' read limit.
"""

from __future__ import annotations

from barecat.entries import Address
from barecat.kernels import SPAN  # (the largest single read: a run's, and the kernels')

Run = tuple[int, int, int]
"""``(i, j, end)``: ``located[i:j]`` read together, from the first one's offset to ``end``."""


def runs_of(located: list[tuple[int, Address]], max_gap: int) -> list[Run]:
    """``located`` (``(position, address)`` pairs sorted by address) cut into runs read
    together: neighbours at most ``max_gap`` apart in one shard, spanning at most
    :data:`SPAN`. One pass, each address unpacked once."""
    runs: list[Run] = []
    if not located:
        return runs
    i = 0
    shard, start, size, _ = located[0][1]
    end = start + size
    for j in range(1, len(located)):
        s2, o2, n2, _ = located[j][1]
        if s2 != shard or o2 - end > max_gap or o2 + n2 - start > SPAN:
            runs.append((i, j, end))
            i, shard, start, end = j, s2, o2, o2 + n2
        elif n2:  # (an empty file needs no bytes: its offset may even be past the end)
            end = max(end, o2 + n2)
    runs.append((i, len(located), end))
    return runs


def in_request_order(runs: list[Run], located: list[tuple[int, Address]]) -> list[Run]:
    """``runs`` by the first requested position each of them holds, when the positions
    of ``located`` are ``0`` to ``len(located) - 1``, each once (as a batch's are):
    each run placed at its first position, not sorted."""
    slots: list[Run | None] = [None] * len(located)
    for run in runs:
        i, j, _ = run
        slots[located[i][0] if j == i + 1 else min(pos for pos, _ in located[i:j])] = run
    return [run for run in slots if run is not None]


def by_position(located: list[tuple[int, Address]]) -> list[Address]:
    """The addresses of ``located`` in request order, when its positions are ``0`` to
    ``len(located) - 1``, each once (as a batch's are): placed, not sorted."""
    addresses = [located[0][1]] * len(located) if located else []
    for pos, address in located:
        addresses[pos] = address
    return addresses


__all__ = ["SPAN", "Run", "by_position", "in_request_order", "runs_of"]
