"""Storing a plan with several processes: each writes a part-archive of its share of the
files, and the parts are joined without copying a byte.

The plan's files are cut into ``processes`` contiguous shares (in plan order, so the
joined archive keeps the plan's layout). Each share is ingested by its own process into a
part-archive beside the target (``ingest``, with its reader threads). The join then
renames each part's shards into the output under new numbers and inserts its index rows
with one statement per part (``copy_files_from(..., move=True)``): bytes are written once.
The output is built under a temporary name (``building_archive``), so a failure or a kill
leaves no archive at the target, and the parts go with it. This is also the recipe for
many machines: each writes a part, ``barecat merge --symlink`` joins them.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from barecat.archive import Barecat
from barecat.layout import remove_archive
from barecat.ops.copy_files import copy_files_from
from barecat.transfer.conversion import ArchiveOptions, building_archive
from barecat.transfer.ingest import DEFAULT_WORKERS, IngestResult, OnAdded, ingest
from barecat.transfer.sources import IngestPlan


@dataclass(frozen=True, slots=True)
class _Share:
    part: str
    plan: IngestPlan
    shard_size_limit: int | None
    threads: int


def _ingest_part(share: _Share) -> IngestResult:
    """One process's work: its share into its own part-archive."""
    with Barecat(share.part, readonly=False, shard_size_limit=share.shard_size_limit) as bc:
        return ingest(bc, share.plan, workers=share.threads)


def ingest_in_processes(
    target: str,
    plan: IngestPlan,
    processes: int,
    *,
    shard_size_limit: int | str | None = None,
    overwrite: bool = False,
    threads: int = DEFAULT_WORKERS,
    on_added: OnAdded | None = None,
    archive_options: ArchiveOptions | None = None,
) -> IngestResult:
    """Create the archive ``target`` from ``plan`` with ``processes`` processes (see the
    module doc). ``on_added`` is called as each part is joined."""
    if archive_options:
        raise ValueError(
            "several processes write plain archives only, for now; create a sealed "
            "archive with one process (the default)"
        )
    processes = max(1, min(processes, len(plan.files) or 1))
    result = IngestResult(failures=list(plan.failures))
    with building_archive(target, overwrite, shard_size_limit) as out:
        out.add_dirs(plan.dirs)
        result.dirs = len(plan.dirs)
        limit = out.shard_size_limit
        shares = []
        per = -(-len(plan.files) // processes)
        for k in range(processes):
            part = f"{out.path}.part{k}"
            remove_archive(part)
            files = plan.files[k * per : (k + 1) * per]
            shares.append(_Share(part, IngestPlan(files=files), limit, threads))
        context = multiprocessing.get_context("spawn")  # no SQLite or locks across a fork
        try:
            with ProcessPoolExecutor(processes, mp_context=context) as pool:
                done = list(pool.map(_ingest_part, shares))
            for share, part_result in zip(shares, done, strict=True):
                _join(out, share.part)
                result.files += part_result.files
                result.bytes += part_result.bytes
                result.failures += part_result.failures
                if on_added is not None and part_result.files:
                    failed = {disk_path for disk_path, _ in part_result.failures}
                    stored = [s.store_path for s in share.plan.files if s.disk_path not in failed]
                    on_added(stored, part_result.bytes)
        finally:
            for share in shares:
                remove_archive(share.part)
    return result


def _join(out: Barecat, part: str) -> None:
    """Move a part's shards into ``out`` and insert its rows; the part is consumed."""
    with Barecat(part, readonly=True, lookup_table=False) as src:
        copy_files_from(out.index, out.sharder, src.index, src.sharder, move=True)
    out.commit()


__all__ = ["ingest_in_processes"]
