"""The reference's older one-purpose scripts (``barecat-create`` and friends), same options.

Each parses its historical options and runs the same code as the matching ``barecat``
subcommand; a one-line note on stderr points to the new spelling.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from barecat.archive import Barecat
from barecat.cli import create as create_cmd
from barecat.cli.du import run_index_to_csv, run_to_ncdu_json
from barecat.cli.extract import report_extraction
from barecat.cli.maintenance import run_upgrade, run_verify
from barecat.cli.parsing import size
from barecat.cli.running import run_legacy
from barecat.cli.sealing import open_archive
from barecat.cli.terminal import error, failure_line
from barecat.transfer import (
    DEFAULT_WORKERS,
    IngestPlan,
    copy_file_to,
    extract_to_directory,
    ingest,
    plan_roots,
    plan_sources,
)

Body = Callable[[argparse.Namespace], int]


def _creation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", required=True, help="Archive to create")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument(
        "--shard-size-limit", type=size, help="Maximum shard size (default: unlimited)"
    )
    parser.add_argument("--overwrite", action="store_true", help="Overwrite an existing archive")


def _store(args: argparse.Namespace, plan: IngestPlan) -> int:
    with Barecat(
        args.file,
        readonly=False,
        overwrite=args.overwrite,
        exist_ok=False,
        shard_size_limit=args.shard_size_limit,
    ) as bc:
        result = ingest(bc, plan, workers=args.workers)
        if result.failures:
            bc.abandon()  # a new archive that holds nothing goes
    for path, exc in result.failures:
        error(failure_line(path, exc))
    return 1 if result.failures else 0


def create(argv: Sequence[str] | None = None) -> int:
    """``barecat-create --file ARCHIVE``: paths from stdin, one per line or NUL-separated."""
    parser = argparse.ArgumentParser(
        prog="barecat-create", description="Create an archive from paths read on stdin."
    )
    _creation_options(parser)
    parser.add_argument("--null", action="store_true", help="Paths on stdin are NUL-separated")

    def body(args: argparse.Namespace) -> int:
        return _store(args, plan_sources(create_cmd.read_path_list("-", args.null)))

    return run_legacy("barecat-create", "barecat create -T -", parser, body, argv)


def create_recursive(argv: Sequence[str] | None = None) -> int:
    """``barecat-create-recursive --file ARCHIVE PATHS...``: each directory's contents are
    stored at the archive root, as 0.3.1 does (``DIR/a.txt`` becomes ``a.txt``)."""
    parser = argparse.ArgumentParser(
        prog="barecat-create-recursive",
        description="Create an archive from directory trees: the contents of each PATH are "
        "stored at the archive root (a file PATH under its own name).",
    )
    parser.add_argument("paths", nargs="+")
    _creation_options(parser)
    parser.add_argument("--physical-order", action="store_true")
    parser.add_argument(
        "--strip-root", action="store_true", help="Accepted for 0.3.1 scripts: always done"
    )

    def body(args: argparse.Namespace) -> int:
        return _store(args, plan_roots(args.paths, physical_order=args.physical_order))

    return run_legacy("barecat-create-recursive", "barecat create -C DIR .", parser, body, argv)


def extract(argv: Sequence[str] | None = None) -> int:
    """``barecat-extract --file ARCHIVE --target-directory DIR``."""
    parser = argparse.ArgumentParser(prog="barecat-extract", description="Extract an archive.")
    parser.add_argument("--file", required=True)
    parser.add_argument("--target-directory", default=".")

    def body(args: argparse.Namespace) -> int:
        with open_archive(args.file) as bc:
            result = extract_to_directory(bc, args.target_directory)
        allow = "'barecat extract --allow-outside-links'"
        return report_extraction(result, args.target_directory, None, None, allow)

    return run_legacy("barecat-extract", "barecat extract", parser, body, argv)


def extract_single(argv: Sequence[str] | None = None) -> int:
    """``barecat-extract-single --barecat-file ARCHIVE --path PATH``: the bytes to stdout."""
    parser = argparse.ArgumentParser(
        prog="barecat-extract-single", description="Print one file of an archive to stdout."
    )
    parser.add_argument("--barecat-file", required=True)
    parser.add_argument("--path", required=True)

    def body(args: argparse.Namespace) -> int:
        with open_archive(args.barecat_file) as bc:
            copy_file_to(bc, args.path, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return 0

    return run_legacy("barecat-extract-single", "barecat cat", parser, body, argv)


def verify(argv: Sequence[str] | None = None) -> int:
    """``barecat-verify [--quick] FILE``."""
    parser = argparse.ArgumentParser(prog="barecat-verify", description="Verify an archive.")
    parser.add_argument("file", help="Archive (or its index file)")
    parser.add_argument("--quick", action="store_true", help="Bytes of the last file only")

    def body(args: argparse.Namespace) -> int:
        args.archive, args.workers, args.quiet, args.command = args.file, 1, True, "verify"
        return run_verify(args)

    return run_legacy("barecat-verify", "barecat verify", parser, body, argv)


def _export(prog: str, command: str, body: Body, argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=f"Same as 'barecat {command}'.")
    parser.add_argument("file", help="Archive (or its index file)")

    def run(args: argparse.Namespace) -> int:
        args.archive = args.file
        return body(args)

    return run_legacy(prog, f"barecat {command}", parser, run, argv)


def index_to_csv(argv: Sequence[str] | None = None) -> int:
    return _export("barecat-index-to-csv", "index-to-csv", run_index_to_csv, argv)


def to_ncdu_json(argv: Sequence[str] | None = None) -> int:
    return _export("barecat-to-ncdu-json", "to-ncdu-json", run_to_ncdu_json, argv)


def upgrade_database(argv: Sequence[str] | None = None) -> int:
    """``barecat-upgrade-database PATH [--workers N]``: upgrade in place, keeping a backup."""
    parser = argparse.ArgumentParser(
        prog="barecat-upgrade-database", description="Migrate an index to the current schema."
    )
    parser.add_argument("path", help="Archive (or its index file)")
    parser.add_argument(
        "--workers", type=int, default=8, help="Threads computing CRC32C (unversioned layout)"
    )

    def body(args: argparse.Namespace) -> int:
        args.archive, args.preserve_backup, args.quiet = args.path, True, True
        args.command = "upgrade"
        return run_upgrade(args)

    return run_legacy("barecat-upgrade-database", "barecat upgrade", parser, body, argv)
