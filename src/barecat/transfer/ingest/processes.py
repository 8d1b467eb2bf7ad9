"""Storing a plan with several processes: each writes a part-archive of its share of the
files, and the parts are joined without copying a byte.

The plan's files are cut into ``processes`` contiguous shares (in plan order, so the
joined archive keeps the plan's layout). Each share is ingested by its own process into a
part-archive beside the target (``ingest``, with its reader threads). The join then
renames each part's shards into the output under new numbers and inserts its index rows
with one statement per part (``Barecat.take_all_from``): bytes are written once.
The output is built under a temporary name (``building_archive``), so a failure or a kill
leaves no archive at the target, and the parts go with it. This is also the recipe for
many machines: each writes a part, ``barecat merge --symlink`` joins them. A sealed output
is created first and each part adopts its sealing (settings, dictionary, wrapped data key),
so the parts' sealed bytes are valid in the output unchanged; the passphrase reaches the
part processes through the pool's pipe, never their command lines.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from barecat.archive import Barecat
from barecat.index.schema import ConfigValue
from barecat.layout import remove_archive
from barecat.transfer.building import ArchiveOptions, building_archive
from barecat.transfer.ingest.sources import IngestPlan
from barecat.transfer.ingest.threads import DEFAULT_WORKERS, IngestResult, OnAdded, ingest

_PART_OPTIONS = ("compression", "compression_level", "passphrase")
"""Options of the output that its parts are opened with (its dictionary and data key
travel in the sealing config the parts adopt)."""


@dataclass(frozen=True, slots=True)
class _Share:
    part: str
    plan: IngestPlan
    shard_size_limit: int | None
    threads: int
    sealing: dict[str, ConfigValue] | None = None
    options: ArchiveOptions = field(default_factory=dict)


def _ingest_part(share: _Share) -> IngestResult:
    """One process's work: its share into its own part-archive, sealed (if the output is)
    with the output's settings and data key, so its bytes move into the output as they are."""
    if share.sealing is not None:
        with Barecat(share.part, readonly=False) as empty:
            empty.seal_with_records(share.sealing)
    with Barecat(
        share.part,
        readonly=False,
        shard_size_limit=share.shard_size_limit,
        lookup_table=False,  # (a part is joined, never read: no table to build)
        **share.options,
    ) as bc:
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
        module doc). ``archive_options`` (compression, passphrase, dictionary) make a sealed
    archive; its parts share its data key. ``on_added`` is called as each part is joined.
    If sources failed and nothing was stored, no archive is made (an existing ``target``
    stays)."""
    processes = max(1, min(processes, len(plan.files) or 1))
    result = IngestResult(failures=list(plan.failures))
    archive_options = archive_options or {}
    with building_archive(target, overwrite, shard_size_limit, archive_options) as out:
        out.add_dirs(plan.dirs)
        result.dirs = len(plan.dirs)
        limit = out.shard_size_limit
        sealing = out.sealing_records()
        options = {k: v for k, v in archive_options.items() if k in _PART_OPTIONS}
        shares = []
        per = -(-len(plan.files) // processes)
        for k in range(processes):
            part = f"{out.path}.part{k}"
            remove_archive(part)
            files = plan.files[k * per : (k + 1) * per]
            shares.append(_Share(part, IngestPlan(files=files), limit, threads, sealing, options))
        context = multiprocessing.get_context("spawn")  # no SQLite or locks across a fork
        try:
            with ProcessPoolExecutor(
                processes, context, initializer=_die_with_parent, initargs=(os.getpid(),)
            ) as pool:
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
        if result.failures:
            out.abandon()  # nothing stored: no archive appears
    return result


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """In a part process: be killed with the process that started it. Otherwise a
    ``barecat create -j N`` killed with SIGKILL leaves its workers behind, writing parts
    no one will join, and then blocked for good on the pipe to their dead parent (seen:
    still there ten minutes later). Linux only (``prctl``); elsewhere nothing changes."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _join(out: Barecat, part: str) -> None:
    """Move a part's shards into ``out`` and insert its rows; the part is consumed."""
    with Barecat(part, readonly=True, lookup_table=False) as src:
        out.take_all_from(src)
    out.commit()


__all__ = ["ingest_in_processes"]
