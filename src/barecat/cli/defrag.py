"""Commands that reorganize an archive's shards: ``barecat defrag`` and ``barecat reshard``.

Thin front ends over the archive's ``defragment`` and ``reshard`` (``barecat.ops.defrag``
and ``barecat.ops.reshard`` underneath), which are crash-safe on their own (a kill at any
moment loses nothing); this module parses the options, draws a progress bar on a terminal
and words the result in one line. Exit codes: 0 done, 1 an error, or files whose
checksums were already wrong (moved unchanged). Also the reference's ``barecat-defrag``
script (:func:`legacy_defrag`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from barecat.archive import Barecat
from barecat.cli.parsing import (
    Declared,
    add_archive_argument,
    add_flag,
    add_shard_limit_option,
    registering,
)
from barecat.cli.running import run_legacy
from barecat.cli.sealing import open_archive
from barecat.cli.summary import timed
from barecat.cli.terminal import Progress, error, human_size, wants_progress
from barecat.layout import archive_exists, archive_not_found
from barecat.ops.defrag import DefragResult

DEFRAG_EXAMPLES = """
barecat defrag photos.barecat                   # pack every file, drop emptied shards
barecat defrag --quick photos.barecat           # fill holes from the end for up to 5 s
barecat defrag --quick --time-budget 60 photos.barecat
barecat defrag -n photos.barecat                # only show how much space is reclaimable
"""

RESHARD_EXAMPLES = """
barecat reshard -s 50G photos.barecat           # consolidate into fewer, larger shards
barecat reshard -s 1G photos.barecat            # split for a filesystem with a file size limit
"""


DEFRAG_ABOUT = (
    "Reclaim the space of deleted and replaced files by moving files into the holes. Safe "
    "to interrupt at any moment: every file stays readable and verifiable."
)
RESHARD_ABOUT = (
    "Reorganize the archive into shards of at most SIZE bytes (squeezing out holes) and "
    "store SIZE as the archive's limit. Safe to interrupt at any moment."
)


def _defrag_arguments(p: argparse.ArgumentParser) -> None:
    add_archive_argument(p)
    p.add_argument(
        "--quick",
        action="store_true",
        help="Only move files from the end into holes that fit them best, within the time "
        "budget (may leave holes)",
    )
    p.add_argument(
        "--time-budget",
        "--max-seconds",
        dest="time_budget",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="Time limit of --quick (default: 5)",
    )
    p.add_argument(
        "--smart",
        action="store_true",
        help="Accepted for compatibility: a full defrag always copies runs of files in chunks",
    )
    add_flag(p, "-n", "Only show the reclaimable space")
    add_flag(p, "-q", "No progress bar")


def _reshard_arguments(p: argparse.ArgumentParser) -> None:
    add_archive_argument(p)
    add_shard_limit_option(p, "New shard size limit (e.g. 1G, 500M)", required=True)
    add_flag(p, "-q", "No progress bar")


def _bytes(n: int) -> str:
    return f"{n} bytes" if n < 1024 else human_size(n) + "B"


def run_defrag(args: argparse.Namespace) -> int:
    if args.time_budget < 0:
        raise ValueError(f"--time-budget must not be negative, not {args.time_budget}")
    if args.dry_run:
        return _show_fragmentation(args.archive)
    _require_archive(args.archive)
    started = time.monotonic()
    with open_archive(args.archive, args, readonly=False) as bc:
        total = None if args.quick else bc.num_files
        with Progress(args.command, total, wants_progress(args.quiet)) as progress:
            result = bc.defragment(
                quick=args.quick, time_budget=args.time_budget, on_progress=progress.advance
            )
    what = "Quick defrag of" if args.quick else "Defragmented"
    if not result.files_moved and not result.bytes_reclaimed:
        print(f"{args.archive}: nothing to defragment.")
    else:
        stop = " (stopped at the time budget)" if result.timed_out else ""
        print(timed(f"{what} {args.archive}: {_summary(result)}{stop}.", started))
    return _report_corrupt(result)


def _summary(result: DefragResult) -> str:
    return (
        f"{result.files_moved} file moves ({_bytes(result.bytes_moved)} copied), "
        f"freed {_bytes(max(0, result.bytes_reclaimed))}, "
        f"shards {result.shards_before} -> {result.shards_after}"
    )


def _report_corrupt(result: DefragResult) -> int:
    for path in result.corrupt_files:
        error(f"{path}: checksum was already wrong before the move (bytes moved unchanged)")
    if result.corrupt_files:
        error(f"{len(result.corrupt_files)} files have bad checksums; see 'barecat verify'")
        return 1
    return 0


def _show_fragmentation(archive: str) -> int:
    with Barecat(archive) as bc:
        f = bc.fragmentation()
    ratio = f.physical_size / f.data_size if f.data_size else 1.0
    print(f"Physical size:       {_bytes(f.physical_size)} in {f.shards} shards")
    print(f"Data size:           {_bytes(f.data_size)}")
    print(f"Reclaimable:         {_bytes(f.reclaimable)}")
    print(
        f"Holes between files: {f.holes} ({_bytes(f.hole_bytes)}, largest {_bytes(f.largest_hole)})"
    )
    print(f"Past shard ends:     {_bytes(f.slack_bytes)}")
    print(f"Fragmentation ratio: {ratio:.3f}")
    return 0


def _require_archive(path: str) -> None:
    """Opening for writing would create a missing archive: say it is missing instead."""
    if not archive_exists(path):
        raise archive_not_found(path)


def run_reshard(args: argparse.Namespace) -> int:
    _require_archive(args.archive)
    started = time.monotonic()
    with (
        open_archive(args.archive, args, readonly=False) as bc,
        Progress(args.command, bc.num_files, wants_progress(args.quiet)) as progress,
    ):
        result = bc.reshard(args.shard_size_limit, on_progress=progress.advance)
    limit = _bytes(result.new_limit)
    print(
        timed(
            f"Resharded {args.archive} to shards of at most {limit}: {_summary(result)}.", started
        )
    )
    return _report_corrupt(result)


def legacy_defrag(argv: Sequence[str] | None = None) -> int:
    """``barecat-defrag [--quick] FILE``, the reference's old script (same options)."""
    parser = argparse.ArgumentParser(
        prog="barecat-defrag",
        description="Defragment a Barecat archive to remove gaps left by deleted files.",
    )
    parser.add_argument("file", help="path to the index file")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="faster but less thorough attempt at defrag, using the best-fit algorithm to "
        "move the last files into gaps.",
    )

    def body(args: argparse.Namespace) -> int:
        ns = argparse.Namespace(
            archive=args.file, quick=args.quick, time_budget=5.0, dry_run=False, quiet=False,
            command="defrag",
        )  # fmt: skip
        return run_defrag(ns)

    return run_legacy("barecat-defrag", "barecat defrag", parser, body, argv)


register = registering(
    Declared("defrag", run_defrag, _defrag_arguments, DEFRAG_EXAMPLES, DEFRAG_ABOUT),
    Declared("reshard", run_reshard, _reshard_arguments, RESHARD_EXAMPLES, RESHARD_ABOUT),
)
