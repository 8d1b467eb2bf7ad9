"""A published archive of many small files, and where to put copies of it: what the
lazy-read tests share (tests/objectstore/test_lazy_*.py)."""

from __future__ import annotations

import os

import barecat

FILES = 100_000


def content(i: int) -> bytes:
    return f"file {i}\n".encode() * (1 + i % 7)


def path_of(i: int) -> str:
    return f"train/c{i % 100:03d}/img_{i:06d}.jpg"


def make_published(path: str, files: int = FILES) -> str:
    """An archive of ``files`` small files at ``path`` (in shards of 400 KB), published
    for lazy reads; returns ``path``."""
    with barecat.Barecat(path, readonly=False, shard_size_limit="400K") as bc:
        bc.add_many((path_of(i), content(i)) for i in range(files))
    barecat.publish(path)
    return path


def archive_files(base: str) -> list[str]:
    """The names of the files to upload: index, shards and sidecar (never the local
    lookup table)."""
    folder, name = os.path.split(base)
    return sorted(n for n in os.listdir(folder) if n.startswith(name) and not n.endswith("-lookup"))


def put_in_folder(base: str, folder: str, name: str | None = None) -> str:
    """Hard-link the archive at ``base`` into ``folder`` (as a web server's), as ``name``
    (default: its own); returns the new base path."""
    own = os.path.basename(base)
    target = os.path.join(folder, name or own)
    for entry in archive_files(base):
        os.link(os.path.join(os.path.dirname(base), entry), target + entry[len(own) :])
    return target
