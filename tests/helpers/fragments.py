"""Fragmented archives (holes from deletions and replacements) and the check they are packed."""

from __future__ import annotations

import random

import barecat
from barecat.index.placement import holes

Files = dict[str, bytes]


def fragmented(path: str, n: int = 300, limit: int | None = None, seed: int = 0) -> Files:
    """An archive with holes from deletions and replacements; returns what it holds."""
    rng = random.Random(seed)
    expected: Files = {}
    with barecat.Barecat(path, readonly=False, shard_size_limit=limit) as bc:
        for i in range(n):
            p = f"d{i % 7}/sub{i % 3}/f{i:05d}.bin"
            expected[p] = bc_data = rng.randbytes(rng.choice([0, 1, 10, 100, 1000, 4000]))
            bc[p] = bc_data
        for p in sorted(expected)[::3]:
            del bc[p]
            del expected[p]
        for p in sorted(expected)[::5]:
            expected[p] = rng.randbytes(rng.randint(0, 3000))
            bc.update_file(p, data=expected[p])
    return expected


def assert_packed(path: str, limit: int | None = None) -> None:
    """No hole anywhere, every shard within the limit, no shard past the last file."""
    with barecat.Barecat(path) as bc:
        assert holes(bc.index) == []
        sizes = [bc.sharder.physical_shard_end(i) for i in range(bc.sharder.num_shards)]
        assert sum(sizes) == bc.total_size
        if limit is not None:
            assert max(sizes, default=0) <= limit
