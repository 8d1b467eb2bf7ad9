"""Deterministic image-dataset-like file trees for the benchmarks.

``train/<class>/<id>.jpg`` with about a hundred class directories (ImageNet-style ``n########``
names) and file sizes drawn uniformly from 1-64 KiB; contents are random bytes, so nothing
compresses, like real JPEGs. Everything, names, sizes and bytes, follows from the seed, and a
small manifest next to the tree lets a ``--workdir`` run reuse a tree it already generated.
Imports only the standard library.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass

MIN_SIZE = 1024
MAX_SIZE = 64 * 1024
MANIFEST_NAME = "tree-manifest.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class TreeSpec:
    """What to generate; two equal specs give byte-identical trees."""

    num_files: int
    num_classes: int = 100
    seed: int = 0


@dataclass
class Tree:
    """A generated tree: its root, spec, and the layout the benchmarks need."""

    root: str
    spec: TreeSpec
    relpaths: list[str]  # every file, in sorted (walk) order
    class_dirs: list[str]  # 'train/<class>' for every class that has files, sorted
    total_bytes: int
    sizes: dict[str, int]  # relative path -> size in bytes


def class_names(num_classes: int, rng: random.Random) -> list[str]:
    """``num_classes`` distinct ImageNet-style WordNet ids, sorted."""
    names: set[str] = set()
    while len(names) < num_classes:
        names.add(f"n{rng.randrange(10**8):08d}")
    return sorted(names)


def plan(spec: TreeSpec) -> list[tuple[str, int]]:
    """(relative path, size) of every file, in generation order."""
    rng = random.Random(spec.seed)
    classes = class_names(max(1, spec.num_classes), rng)
    files = []
    for i in range(spec.num_files):
        cls = classes[rng.randrange(len(classes))]
        files.append((f"train/{cls}/{cls}_{i:07d}.jpg", rng.randint(MIN_SIZE, MAX_SIZE)))
    return files


def _manifest(spec: TreeSpec) -> dict[str, object]:
    return {"format": FORMAT_VERSION, **asdict(spec)}


def ensure_tree(root: str, spec: TreeSpec) -> Tree:
    """Generate the tree at ``root`` unless a matching one is already there."""
    files = plan(spec)
    manifest_path = os.path.join(os.path.dirname(os.path.abspath(root)), MANIFEST_NAME)
    if not _matches(manifest_path, spec, root):
        if os.path.exists(root):
            shutil.rmtree(root)
        _write(root, files, spec.seed)
        with open(manifest_path, "w") as f:
            json.dump(_manifest(spec), f)
    relpaths = sorted(p for p, _ in files)
    class_dirs = sorted({p.rsplit("/", 1)[0] for p in relpaths})
    return Tree(root, spec, relpaths, class_dirs, sum(s for _, s in files), dict(files))


def _matches(manifest_path: str, spec: TreeSpec, root: str) -> bool:
    if not os.path.isdir(root):
        return False
    try:
        with open(manifest_path) as f:
            return bool(json.load(f) == _manifest(spec))
    except (OSError, ValueError):
        return False


def _write(root: str, files: list[tuple[str, int]], seed: int) -> None:
    content_rng = random.Random(f"content-{seed}")
    made: set[str] = set()
    for rel, size in files:
        path = os.path.join(root, rel)
        directory = os.path.dirname(path)
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        with open(path, "wb") as f:
            f.write(content_rng.randbytes(size))
