"""Archives the engine integrations read (Ray Data, Hugging Face datasets): dataset-like
files of a few sizes, built with a small shard limit so that reads cross shards."""

from __future__ import annotations

import random
from typing import Any

import barecat


def make_files(count: int = 300, seed: int = 1) -> dict[str, bytes]:
    """``train/cN/IIII.jpg|json`` files of 0-3000 random bytes, a CSV and a hidden file."""
    rng = random.Random(seed)
    sizes = [0, 90, 700, 3000]
    files = {
        f"train/c{i % 3}/{i:04d}.{'jpg' if i % 2 else 'json'}": rng.randbytes(rng.choice(sizes))
        for i in range(count)
    }
    files["meta/labels.csv"] = b"path,label\n"
    files["meta/.hidden.txt"] = b"hidden"
    return files


def build(path: str, files: dict[str, bytes], **options: Any) -> None:
    """An archive of ``files`` in 64 KiB shards (``options``: more of ``Barecat``'s)."""
    with barecat.Barecat(path, readonly=False, shard_size_limit="64K", **options) as bc:
        for i, (name, data) in enumerate(files.items()):
            bc.add(name, data=data, mtime_ns=1_000_000 * i, mode=0o644)
