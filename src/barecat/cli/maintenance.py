"""Commands that check and maintain archives: ``barecat verify`` (more as they land).

Thin front ends over ``barecat.ops``: the operation reports what it found, this module
words it and picks the exit code (0 clean, 1 problems found).
"""

from __future__ import annotations

import argparse
import sys

from barecat.archive import Barecat
from barecat.cli.parsing import Subparsers, add_archive_argument, add_command
from barecat.cli.terminal import Progress, human_size, wants_progress
from barecat.entries import BarecatFileInfo
from barecat.ops import verify_archive


def register(sub: Subparsers) -> None:
    verify = add_command(
        sub,
        "verify",
        help="Verify archive integrity (index consistency and every file's CRC32C)",
        handler=run_verify,
        examples="""
        barecat verify photos.barecat
        barecat verify --quick photos.barecat   # index + the last file: catches truncation
        """,
    )
    add_archive_argument(verify)
    verify.add_argument(
        "--quick", action="store_true", help="Check the index and only the last file's bytes"
    )
    verify.add_argument("-q", "--quiet", action="store_true", help="No progress bar")


def run_verify(args: argparse.Namespace) -> int:
    with Barecat(args.archive) as bc:
        total = 1 if args.quick else bc.num_files
        with Progress("verify", total, wants_progress(args.quiet)) as progress:

            def on_file(info: BarecatFileInfo) -> None:
                progress.advance(1, info.size or 0)

            report = verify_archive(bc.index, bc.sharder, args.quick, on_file=on_file)
    for problem in report.index_problems:
        print(f"index: {problem}", file=sys.stderr)
    for path in report.bad_files:
        print(f"CRC32C mismatch or missing bytes: {path}", file=sys.stderr)
    if not report.ok:
        print(
            f"Verification failed: {len(report.bad_files)} bad files, "
            f"{len(report.index_problems)} index problems.",
            file=sys.stderr,
        )
        return 1
    scope = " (quick check)" if args.quick else f" ({human_size(report.bytes_checked)}B)"
    print(f"Verified {report.files_checked} files{scope}, all checksums OK.")
    return 0
