"""``barecat create`` and ``barecat add``: directory trees and file lists into an archive.

Sources are named as tar names them (``-C DIR`` first, leading '/' dropped), planned,
then stored by :func:`barecat.transfer.ingest`. A source that cannot be read is reported
and the rest goes on; the exit code says so at the end. Ctrl-C stops cleanly: the
archive is closed, so every file reported as added (progress bar, ``-v``) is in it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator

from barecat.cli.names import shown_on, tar_escaped
from barecat.cli.parsing import (
    Declared,
    add_archive_argument,
    add_filter_options,
    add_flag,
    add_shard_limit_option,
    add_workers_option,
    registering,
)
from barecat.cli.running import Interrupted, rerun_line
from barecat.cli.sealing import add_sealing_options, new_archive_options, open_archive
from barecat.cli.summary import Summary, failure_reason
from barecat.cli.terminal import Progress, error, failure_line, wants_progress
from barecat.glob import PathFilter
from barecat.layout import archive_exists, archive_not_found, base_path, index_path
from barecat.transfer import DEFAULT_WORKERS, IngestPlan, IngestResult, ingest, plan_sources
from barecat.transfer.ingest.dictionary_samples import sample_plan
from barecat.transfer.ingest.processes import ingest_in_processes

CREATE_EXAMPLES = """
barecat create photos.barecat ~/photos/          # a tree, stored as home/.../photos/...
barecat create -C ~/photos photos.barecat .      # the same tree, stored at the root
find /data -name '*.jpg' -print0 | barecat create -T - -0 jpgs.barecat
barecat create -s 10G --exclude '*.tmp' big.barecat /data/
barecat create --compress zstd labels.barecat labels/   # each file compressed on its own
barecat create --encrypt private.barecat docs/       # passphrase typed twice (or from a file)
"""

LINKS = """
Symbolic links are stored as links (-L: what they point to). A file with several hard
links is stored once: each later name of it met in the same run (with -j, by the same
process) gets a row pointing at the first name's bytes, and extract makes the names hard
links again (convert to tar writes hard-link members); in a compressed or encrypted
archive each name is stored whole.
An archive with such rows keeps a shard linked to /dev/null, so that barecat 0.3.1,
which would take the shared bytes for one file's own, reads it but does not write it.
FIFOs, sockets and devices are skipped, one line each (see docs/command-line.md).
"""

ADD_EXAMPLES = """
barecat add photos.barecat more/photos/
barecat add -c new.barecat data/                 # create it if missing
"""


WORKERS_HELP = (
    "Parallel workers: for a new archive N processes, each writing a part joined without "
    f"copying at the end; when adding, N reader threads (default {DEFAULT_WORKERS} threads)"
)


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    add_archive_argument(parser)
    parser.add_argument("paths", nargs="*", help="Files and directories to add (recursively)")
    parser.add_argument(
        "-T", "--files-from", metavar="FILE", help="Read paths from FILE, one per line (- = stdin)"
    )
    parser.add_argument(
        "-0", "--null", action="store_true", help="Paths in -T are NUL-separated (find -print0)"
    )
    parser.add_argument(
        "-C", "--directory", metavar="DIR", help="Change to DIR before adding (like tar)"
    )
    add_filter_options(parser, ["--exclude"])
    add_workers_option(parser, WORKERS_HELP, None)
    add_shard_limit_option(
        parser, "Start a new shard file beyond SIZE (e.g. 1G, 500M). Default: unlimited"
    )
    parser.add_argument(
        "--physical-order",
        action="store_true",
        help="Read sources in their on-disk order (fewer seeks on HDDs)",
    )
    parser.add_argument(
        "-L",
        "--dereference",
        action="store_true",
        help="Store what symbolic links point to, instead of the links",
    )
    add_sealing_options(parser, "a new archive")
    add_flag(parser, "-v", "List files as they are added")
    add_flag(parser, "-q", "No progress bar or summary")


def _create_arguments(parser: argparse.ArgumentParser) -> None:
    _add_source_options(parser)
    add_flag(parser, "-f", "Overwrite an existing archive")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="Finish an interrupted create: keep the archive, add only what is missing",
    )


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_source_options(parser)
    parser.add_argument("-c", "--create", action="store_true", help="Create the archive if missing")
    parser.add_argument(
        "--ignore-existing",
        "--resume",
        dest="resume",
        action="store_true",
        help="Skip paths already in the archive instead of reporting them",
    )


def read_path_list(source: str, null_separated: bool) -> Iterator[str]:
    """Paths from a file (or stdin for '-'), one per line or NUL-separated.

    NUL-separated input that ends in a newline (``find -print0 | sort`` appends one after
    the last NUL) has that newline dropped: it ends the text, it is not part of a name.
    """
    stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    try:
        data = stream.read()
    finally:
        if source != "-":
            stream.close()
    separator = b"\0" if null_separated else b"\n"
    if null_separated and data.endswith(b"\n"):
        data = data[:-1]
    for raw in data.split(separator):
        raw = raw if null_separated else raw.rstrip(b"\r")
        if raw:
            yield raw.decode("utf-8", "surrogateescape")


def make_plan(args: argparse.Namespace) -> IngestPlan:
    paths = list(args.paths)
    if args.files_from is not None:
        paths.extend(read_path_list(args.files_from, args.null))
    return plan_sources(
        paths,
        base_directory=args.directory,
        follow_symlinks=args.dereference,
        path_filter=PathFilter.from_patterns(args.include, args.exclude),
        physical_order=args.physical_order,
    )


def store(
    args: argparse.Namespace, plan: IngestPlan, *, overwrite: bool, command: str
) -> IngestResult:
    """Open the archive for writing and ingest ``plan``, with progress and -v listing.

    ``-v`` lists files when the commit that makes them durable is done, so a listed file
    survives even a kill -9 right after; the progress bar counts files as they are added.
    """
    progress = Progress(command, len(plan.files), wants_progress(args.quiet))
    shown = shown_on(sys.stdout, tar_escaped)
    added: list[str] = []

    def on_added(paths: list[str], nbytes: int) -> None:
        progress.advance(len(paths), nbytes)
        if args.verbose:
            added.extend(paths)

    def on_commit() -> None:
        if added:
            lines = [shown(p) + "\n" for p in added]
            added.clear()  # (before writing: a Ctrl-C there must not list them twice)
            progress.print_lines(lines)

    with (
        progress,
        open_archive(
            args.archive,
            args,
            create=True,
            readonly=False,
            overwrite=overwrite,
            shard_size_limit=args.shard_size_limit,
            **new_archive_options(args, lambda: sample_plan(plan)),
        ) as bc,
    ):
        bc.on_commit = on_commit
        threads = args.workers or DEFAULT_WORKERS
        result = ingest(bc, plan, workers=threads, on_added=on_added, skip_existing=args.resume)
        if result.failures:
            bc.abandon()  # a new archive that holds nothing goes: the corrected command works
        return result


def finish(
    args: argparse.Namespace,
    plan: IngestPlan,
    result: IngestResult,
    command: str,
    summary: Summary,
) -> int:
    """Name each source left out, then end with the summary (``-q``: with the count of
    sources that could not be added, if any). Returns the exit code."""
    for path, exc in result.failures:
        error(failure_line(path, exc), command=command)
        summary.skip(failure_reason(exc))
    for path in plan.skipped:
        error(f"{path}: not a regular file, directory or link; skipped", command=command)
    summary.skip("special file", len(plan.skipped))
    summary.skip("already there", result.skipped)
    dirs = f"{result.dirs:,} director{'y' if result.dirs == 1 else 'ies'}"
    summary.finish(result.files, result.bytes, f"and {dirs} to {base_path(args.archive)}")
    if result.failures and args.quiet:
        error(f"{len(result.failures)} sources could not be added", command=command)
    return 1 if result.failures else 0


def run_create(args: argparse.Namespace) -> int:
    if args.force and args.resume:
        raise ValueError("-f (start over) and --resume (keep what is there) exclude each other")
    if archive_exists(args.archive) and not (args.force or args.resume):
        error(
            f"{args.archive}: archive exists (-f to overwrite, --resume to finish it)",
            command="create",
        )
        return 1

    def stored(plan: IngestPlan) -> IngestResult:
        if (args.workers or 1) > 1 and not args.resume:
            return store_in_processes(args, plan)
        return store(args, plan, overwrite=args.force, command="create")

    return _add_sources(args, "create", stored)


def _add_sources(
    args: argparse.Namespace, command: str, stored: Callable[[IngestPlan], IngestResult]
) -> int:
    """Create's and add's work once the archive is checked: plan what the sources hold,
    store it with ``stored``, sum up; after a Ctrl-C, say how to finish."""
    summary = Summary("added", quiet=args.quiet)
    before = _index_identity(args.archive)
    try:
        plan = make_plan(args)
        result = stored(plan)
    except KeyboardInterrupt:
        raise Interrupted(_how_to_go_on(args, before)) from None
    return finish(args, plan, result, command, summary)


def _index_identity(archive: str) -> tuple[int, int] | None:
    """(device, inode) of the archive's index, None if there is none: tells whether the
    archive there after a run is the one it began with."""
    try:
        st = os.stat(index_path(base_path(archive)))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _how_to_go_on(args: argparse.Namespace, before: tuple[int, int] | None) -> str:
    """What a Ctrl-C of create or add left, and the command that finishes the work: the
    same with ``--resume`` (``-f`` left out: resuming keeps what is there), where the
    archive at the path is the one this run wrote into; else, that nothing was kept."""
    now = _index_identity(args.archive)
    in_place = args.command == "add" or args.resume  # (else a new archive, or a rebuilt one)
    if now is None or (not in_place and now == before):
        left = f" ({args.archive} is as it was)" if now is not None else ""
        return f"nothing of this run was stored{left}: run the command again"
    kept = f"{args.archive} keeps the files stored so far"
    line = rerun_line(getattr(args, "argv", None), "--resume", dropping=("-f", "--force"))
    if line is None:
        return f"{kept}; to finish it, run the command again with --resume (and without -f)"
    return f"{kept}; to finish it: {line}"


def store_in_processes(args: argparse.Namespace, plan: IngestPlan) -> IngestResult:
    """``create -j N``: N processes, each writing a part; the parts joined at the end."""
    progress = Progress("create", len(plan.files), wants_progress(args.quiet))
    shown = shown_on(sys.stdout, tar_escaped)

    def on_added(paths: list[str], nbytes: int) -> None:
        if args.verbose:
            progress.print_lines([shown(p) + "\n" for p in paths])
        progress.advance(len(paths), nbytes)

    with progress:
        return ingest_in_processes(
            args.archive,
            plan,
            args.workers,
            shard_size_limit=args.shard_size_limit,
            overwrite=args.force,
            on_added=on_added,
            archive_options=new_archive_options(args, lambda: sample_plan(plan)),
        )


def run_add(args: argparse.Namespace) -> int:
    if not archive_exists(args.archive) and not args.create:
        if os.path.isdir(args.archive):  # (where 'add -c' could not make one either)
            raise archive_not_found(args.archive)
        error(
            f"{args.archive}: archive does not exist (use 'barecat create' or 'barecat add -c')",
            command="add",
        )
        return 1
    return _add_sources(args, "add", lambda plan: store(args, plan, overwrite=False, command="add"))


register = registering(
    Declared("create", run_create, _create_arguments, CREATE_EXAMPLES, details=LINKS),
    Declared("add", run_add, _add_arguments, ADD_EXAMPLES, details=LINKS),
)
