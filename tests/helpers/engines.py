"""Archives the engine tests (Ray Data, Dask) read and write."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import barecat


def make_files(count: int = 300, seed: int = 1) -> dict[str, bytes]:
    """``count`` files in three folders (empty to 3,000 bytes, ``.jpg`` and ``.json``),
    plus ``meta/labels.csv`` and the hidden ``meta/.hidden.txt``."""
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
    """A new archive of ``files`` in shards of 64 KiB (``options``: more of ``Barecat``'s)."""
    with barecat.Barecat(path, readonly=False, shard_size_limit="64K", **options) as bc:
        for i, (name, data) in enumerate(files.items()):
            bc.add(name, data=data, mtime_ns=1_000_000 * i, mode=0o644)


def leftovers(folder: Path) -> list[str]:
    """The hidden entries of ``folder`` (a writer's parts' folders)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
