"""Commands that check and mend archives: ``barecat verify``, ``repair``, ``upgrade``, and
for encrypted archives ``rekey`` and ``digest``; reorganizing shards is ``cli/defrag.py``.

Thin front ends over ``barecat.ops``: the operation reports what it found, this module
words it and picks the exit code (0 clean, 1 problems found or left).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from barecat.archive import Barecat
from barecat.cli.parsing import (
    Declared,
    add_archive_argument,
    add_flag,
    add_workers_option,
    registering,
)
from barecat.cli.sealing import NEW_PASSPHRASE_ENV, PASSPHRASE_ENV, new_passphrase, open_archive
from barecat.cli.summary import timed
from barecat.cli.terminal import Progress, human_size, wants_progress
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.ops.repair import drop_foreign_schema
from barecat.ops.upgrade import UpgradeResult, format_version, upgrade
from barecat.ops.verify import OnFile, VerifyReport

DEFAULT_JOBS = min(4, os.cpu_count() or 1)


VERIFY_EXAMPLES = """
barecat verify photos.barecat
barecat verify --quick photos.barecat   # index, shard sizes, the last file
barecat verify -j 4 photos.barecat      # checksums on 4 threads
"""
REPAIR_ABOUT = (
    "Make a crashed or partly copied archive consistent again: first remove from the index "
    "the triggers, views and indexes barecat did not make (they keep the archive from "
    "opening), then cut shard bytes no file uses, rebuild directory data and report the "
    "files whose bytes are missing or corrupt."
)
REPAIR_EXAMPLES = """
barecat repair photos.barecat               # cut stray shard tails, fix statistics
barecat repair --drop-bad photos.barecat    # also forget files whose bytes are bad
"""
UPGRADE_ABOUT = (
    "Convert the index of an archive made by barecat 0.2.x (schema 0.2) or by the "
    "unversioned 2023 code to schema 0.3, in place. A new index is built beside the old "
    "one, checked, and swapped in with one rename, so an interruption leaves either index "
    "whole; the old one is kept as INDEX.old. Shard files are only read. An archive already "
    "at 0.3 is left alone."
)
UPGRADE_WORKERS_HELP = (
    "Threads computing CRC32C from the shards (only the unversioned layout, which stored "
    "none, needs this; a 0.2 upgrade rewrites the index alone)"
)
UPGRADE_EXAMPLES = """
barecat upgrade photos                        # photos-sqlite-index, photos-shard-*
barecat upgrade -j 8 old-dataset              # unversioned: CRC32C on 8 threads
barecat upgrade --no-preserve-backup photos   # drop the .old copy when done
"""
REKEY_EXAMPLES = f"""
barecat rekey private.barecat        # old passphrase, then the new one twice
barecat rekey --passphrase-file old.txt --new-passphrase-file new.txt private.barecat
${PASSPHRASE_ENV}=... ${NEW_PASSPHRASE_ENV}=... barecat rekey private.barecat
"""
DIGEST_ABOUT = (
    "Check every file row of an encrypted archive against its index digest and print the "
    "digest: written down, 'barecat verify --expect-digest' later tells whether the index "
    "is still that one (not rolled back to an older state)."
)
DIGEST_EXAMPLES = """
barecat digest private.barecat                 # prints 32 hex digits
barecat verify --expect-digest HEX private.barecat
barecat digest --reset private.barecat         # trust the rows as they are now
"""


def _verify_options(verify: argparse.ArgumentParser) -> None:
    verify.add_argument(
        "--quick", action="store_true", help="Check the index, shard sizes and the last file"
    )
    verify.add_argument(
        "--expect-digest",
        metavar="HEX",
        help="Encrypted archives: fail unless the index digest is HEX (as 'barecat digest' "
        "printed it when the archive was known good): catches a whole index rolled back",
    )


def _repair_options(fix: argparse.ArgumentParser) -> None:
    fix.add_argument(
        "--drop-bad",
        action="store_true",
        help="Remove files whose bytes are missing or corrupt from the index",
    )


def _checking(
    options: Callable[[argparse.ArgumentParser], None],
) -> Callable[[argparse.ArgumentParser], None]:
    """The arguments of verify and repair, which read every file's bytes: the archive,
    ``options``, then the checksum threads and -q."""

    def arguments(parser: argparse.ArgumentParser) -> None:
        add_archive_argument(parser)
        options(parser)
        add_workers_option(parser, "Checksum threads", DEFAULT_JOBS)
        add_flag(parser, "-q", "No progress bar")

    return arguments


def _rekey_arguments(rekey: argparse.ArgumentParser) -> None:
    add_archive_argument(rekey)
    rekey.add_argument(
        "--new-passphrase-file",
        metavar="FILE",
        help=f"The new passphrase: the first line of FILE (else ${NEW_PASSPHRASE_ENV}, else "
        "typed twice)",
    )


def _digest_arguments(digest: argparse.ArgumentParser) -> None:
    add_archive_argument(digest)
    digest.add_argument(
        "--reset",
        action="store_true",
        help="Make the digest that of the file rows as they are now, trusting them (an "
        "archive encrypted before digests existed, or one checked otherwise)",
    )


def _progress(args: argparse.Namespace, total: int) -> tuple[Progress, OnFile]:
    progress = Progress(args.command, total, wants_progress(args.quiet))

    def on_file(info: BarecatFileInfo) -> None:
        progress.advance(1, info.size if type(info.size) is int else 0)  # (damaged: not)

    return progress, on_file


def _print_bad(paths: list[str], reasons: dict[str, str], stream: TextIO | None = None) -> None:
    for path in paths:
        print(f"{path}: {reasons.get(path, 'bad')}", file=stream or sys.stderr)


def run_verify(args: argparse.Namespace) -> int:
    started = time.monotonic()
    args.expect_digest = getattr(args, "expect_digest", None)  # (the legacy script has none)
    if args.quick and args.expect_digest:
        raise ValueError("--expect-digest reads every file row: not with --quick")
    with open_archive(args.archive, args) as bc:
        num_files = bc.num_files
        total = 1 if args.quick else num_files
        progress, on_file = _progress(args, total)
        with progress:
            report = bc.verify(args.quick, on_file=on_file, workers=args.workers)
        unsealed = _verify_seals(args, bc, report) if not args.quick else ""
    # The findings are the report, on stdout as with 'md5sum -c' (and 0.3.1); the verdict
    # and what failed to run go to stderr.
    for problem in report.index_problems:
        print(f"index: {problem}")
    _print_bad(report.bad_files, report.reasons, sys.stdout)
    if not report.ok:
        print(
            f"Verification failed: {len(report.bad_files)} bad files, "
            f"{len(report.index_problems)} index problems.",
            file=sys.stderr,
        )
        return 1
    if args.quick:
        print(timed(_quick_verdict(report, num_files), started))
        return 0
    n = report.files_unchecked
    unchecked = f" ({n} file{'s' * (n != 1)} without a CRC32C: not checked)" if n else ""
    verified = f"Verified {report.files_checked} files ({human_size(report.bytes_checked)}B)"
    print(timed(f"{verified}, all checksums OK{unchecked}{unsealed}.", started))
    return 0


def _quick_verdict(report: VerifyReport, num_files: int) -> str:
    """What a quick check that found nothing checked, and that it read no other bytes."""
    if num_files == 0:
        return "Quick check OK: the index is consistent (no files)."
    last = "the last file's CRC32C matches"
    if report.files_unchecked:
        last = "the last file has no CRC32C (not checked)"
    others = num_files - 1
    whose = "the other file's" if others == 1 else f"the other {others} files'"
    unread = f"; {whose} bytes were not read (verify without --quick checks them)"
    return (
        f"Quick check of {num_files} file{'s' * (num_files != 1)} OK: the index is "
        f"consistent, every file lies within its shard, {last}{unread if others else ''}."
    )


def _verify_seals(args: argparse.Namespace, bc: Barecat, report: VerifyReport) -> str:
    """Authenticate and decode a sealed archive's files as well, when the key is at hand;
    bad ones join the report. Returns what to add to the summary."""
    if args.expect_digest and not bc.encrypted:
        raise BarecatError(f"{bc.path} is not encrypted: it keeps no index digest to expect")
    if not bc.sealed:
        return ""
    if bc.encrypted and not (args.passphrase_file or os.environ.get(PASSPHRASE_ENV)):
        if args.expect_digest:
            raise BarecatError(
                f"--expect-digest needs the passphrase (--passphrase-file or ${PASSPHRASE_ENV})"
            )
        print(
            f"note: encrypted archive: only the checksums were verified; give the passphrase "
            f"(--passphrase-file or ${PASSPHRASE_ENV}) to authenticate every file too",
            file=sys.stderr,
        )
        return ""
    progress, on_file = _progress(args, bc.num_files)
    with progress:
        for path, reason in bc.verify_seals(on_file):
            report.flag(path, reason)
    if not bc.encrypted:
        return ", every file decodes"
    return ", every file authenticated" + _verify_digest(args, bc, report)


def _verify_digest(args: argparse.Namespace, bc: Barecat, report: VerifyReport) -> str:
    """Check the file rows against the index digest (and the one expected, if given)."""
    problem, pin = bc.verify_index_digest()
    if pin is None:
        print(f"note: {bc.path} keeps no index digest: {_ADOPT}", file=sys.stderr)
        return ""
    if problem is not None:
        report.index_problems.append(problem)
    elif args.expect_digest and pin != args.expect_digest.strip().lower():
        report.index_problems.append(
            f"the index digest is {pin}, not {args.expect_digest}: the index changed since "
            "that digest was taken (files added, removed or renamed, or rolled back)"
        )
    return f", index digest {pin}"


def run_digest(args: argparse.Namespace) -> int:
    with open_archive(args.archive, args, readonly=not args.reset) as bc:
        if not bc.encrypted:
            raise BarecatError(f"{bc.path} is not encrypted: it keeps no index digest")
        if args.reset:
            bc.reset_index_digest()
        problem, pin = bc.verify_index_digest()
    if pin is None:
        raise BarecatError(f"{args.archive} keeps no index digest yet: {_ADOPT}")
    if problem is not None:
        print(f"{args.archive}: {problem}", file=sys.stderr)
        return 1
    print(pin)
    return 0


_ADOPT = "'barecat digest --reset' gives it one (encrypted before index digests existed)"


def run_rekey(args: argparse.Namespace) -> int:
    with open_archive(args.archive, args, readonly=False) as bc:
        if not bc.encrypted:
            raise BarecatError(f"{bc.path} is not encrypted: it has no passphrase to change")
        bc.sealing_for_writers()  # the old passphrase first: a wrong one stops here
        bc.rekey(
            new_passphrase(args.new_passphrase_file, NEW_PASSPHRASE_ENV, "--new-passphrase-file")
        )
    print(f"Changed the passphrase of {bc.path}; the old one no longer opens it.")
    return 0


def run_repair(args: argparse.Namespace) -> int:
    dropped = drop_foreign_schema(args.archive)
    for description, made_again in dropped:
        if made_again:
            print(f"made {description} again as barecat makes it: it had other SQL")
        else:
            print(f"removed {description} from the index: barecat did not make it")
    with open_archive(args.archive, args, readonly=False) as bc:
        progress, on_file = _progress(args, bc.num_files)
        with progress:
            result = bc.repair(drop_bad=args.drop_bad, workers=args.workers, on_file=on_file)
    if result.bytes_truncated:
        print(f"cut {result.bytes_truncated} bytes that no file uses from the shard ends")
    if result.stats_fixed:
        print(f"rebuilt directory data ({len(result.stats_fixed)} problems)")
    if result.guarded:
        print(
            "files share bytes: added a shard linked to /dev/null, "
            "so that barecat 0.3.1 does not write the archive"
        )
    _print_bad(result.bad_files, result.reasons)
    if result.dropped:
        print(f"dropped {len(result.dropped)} bad files from the index")
    for problem in result.remaining_problems:
        print(f"index: {problem}", file=sys.stderr)
    if not result.changed and not result.bad_files and not dropped:
        print("nothing to repair")
    left = result.remaining_problems or (result.bad_files and not result.dropped)
    return 1 if left else 0


def _upgrade_arguments(up: argparse.ArgumentParser) -> None:
    add_archive_argument(up)
    add_workers_option(up, UPGRADE_WORKERS_HELP, DEFAULT_JOBS)
    up.add_argument(
        "--preserve-backup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Keep the old index as INDEX.old (default: keep)",
    )
    add_flag(up, "-q", "No progress bar")


def run_upgrade(args: argparse.Namespace) -> int:
    progress: list[Progress] = []

    def on_begin(version: tuple[int, int], to_read: int) -> None:
        print(f"Upgrading {args.archive} from {format_version(version)} to schema 0.3...")
        if to_read:
            progress.append(Progress("checksums", to_read, wants_progress(args.quiet)))

    def on_file(size: int) -> None:
        if progress:
            progress[0].advance(1, size)

    try:
        result = upgrade(
            args.archive,
            workers=args.workers,
            preserve_backup=args.preserve_backup,
            on_begin=on_begin,
            on_file=on_file,
        )
    finally:
        for bar in progress:
            bar.close()
    if not result.upgraded:
        at = format_version(result.from_version)
        print(f"{result.index_path} is already at {at}, nothing to do.")
        return 0
    _report_upgrade(result)
    return 1 if result.bad_files else 0


def _report_upgrade(result: UpgradeResult) -> None:
    print(f"Upgraded {result.index_path}: {result.num_files} files, {result.num_dirs} directories.")
    if result.checksums_computed:
        print(f"computed CRC32C of {result.checksums_computed} files")
    if result.dirs_fixed:
        n = result.dirs_fixed
        dirs = "directory" if n == 1 else "directories"
        print(f"rebuilt the statistics of {n} {dirs} the old index had wrong")
    _print_bad(result.bad_files, result.reasons)
    if result.bad_files:
        print(
            f"{len(result.bad_files)} files have bad bytes; see 'barecat verify' and "
            "'barecat repair --drop-bad'",
            file=sys.stderr,
        )
    if result.backup_path:
        print(f"old index kept as {result.backup_path}")


register = registering(
    Declared("verify", run_verify, _checking(_verify_options), VERIFY_EXAMPLES),
    Declared("repair", run_repair, _checking(_repair_options), REPAIR_EXAMPLES, REPAIR_ABOUT),
    Declared("upgrade", run_upgrade, _upgrade_arguments, UPGRADE_EXAMPLES, UPGRADE_ABOUT),
    Declared("rekey", run_rekey, _rekey_arguments, REKEY_EXAMPLES),
    Declared("digest", run_digest, _digest_arguments, DIGEST_EXAMPLES, DIGEST_ABOUT),
)
