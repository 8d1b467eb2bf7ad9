"""Choosing the files a zstd dictionary learns from: a spread of small files from a plan
(before a create) or from an archive (before a re-sealing copy).

A dictionary pays off for many small, similar files (JSON labels, captions, text), so
the sample takes small files only, evenly spaced through the list so every part of the
tree is represented, up to a file count and a byte budget. zstd wants about a hundred
times the dictionary's size to learn from.
"""

from __future__ import annotations

from barecat.archive import Barecat
from barecat.entries import Order
from barecat.transfer.ingest.sources import IngestPlan

SAMPLE_FILES = 20_000
SAMPLE_BYTES = 16 << 20
LARGEST_SAMPLE = 64 << 10
"""Files bigger than this are left out: a dictionary helps small files only."""


def _spread(count: int, wanted: int) -> range:
    return range(0, count, max(1, count // wanted))


def sample_plan(plan: IngestPlan) -> list[bytes]:
    """Contents of small files spread through ``plan`` (unreadable ones are passed over)."""
    samples: list[bytes] = []
    total = 0
    for i in _spread(len(plan.files), SAMPLE_FILES):
        source = plan.files[i]
        if source.as_link:
            continue
        try:
            with open(source.disk_path, "rb") as f:
                data = f.read(LARGEST_SAMPLE + 1)
        except OSError:
            continue
        if 0 < len(data) <= LARGEST_SAMPLE:
            samples.append(data)
            total += len(data)
            if total >= SAMPLE_BYTES:
                break
    return samples


def sample_archive(bc: Barecat) -> list[bytes]:
    """Contents of small files spread through an archive."""
    infos = [
        f
        for f in bc.iter_fileinfos(Order.ADDRESS)
        if 0 < (f.size or 0) <= LARGEST_SAMPLE and not f.is_symlink_entry
    ]
    samples: list[bytes] = []
    total = 0
    for i in _spread(len(infos), SAMPLE_FILES):
        data = bc.read(infos[i])
        samples.append(data)
        total += len(data)
        if total >= SAMPLE_BYTES:
            break
    return samples


__all__ = ["sample_archive", "sample_plan"]
