"""``barecat extract`` and ``barecat cat``: archive contents back out, to disk or stdout.

Extraction refuses, before writing anything, an archive whose entries would land outside
the target directory. Otherwise it goes on as tar does: each entry that fails (damaged
bytes, a name the file system refuses, no permission) is reported as ``PATH: reason``,
links pointing outside the target are not created (one summary line says how many and how
to allow them; ``-v`` lists them), the rest is extracted, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from barecat.cli.names import shown_on, tar_escaped
from barecat.cli.parsing import (
    Declared,
    add_archive_argument,
    add_filter_options,
    add_flag,
    check_pattern_alone,
    registering,
)
from barecat.cli.running import Interrupted
from barecat.cli.sealing import open_archive
from barecat.cli.summary import Summary, failure_reason
from barecat.cli.terminal import Progress, error, failure_line, wants_progress
from barecat.entries import BarecatFileInfo
from barecat.glob import PathFilter
from barecat.transfer import ExtractResult, copy_file_to, extract_to_directory

CAT_EXAMPLE = "barecat cat photos.barecat train/cat/001.jpg > 001.jpg"
EXTRACT_EXAMPLES = """
barecat extract photos.barecat -C /tmp/out/     # everything
barecat extract photos.barecat train/cat/ -C out/
barecat extract photos.barecat -i '*.jpg' -x 'thumbs/' -C out/
"""


def _extract_arguments(parser: argparse.ArgumentParser) -> None:
    add_archive_argument(parser)
    parser.add_argument("paths", nargs="*", help="Files or directories to extract (default: all)")
    parser.add_argument(
        "-C", "--directory", default=".", metavar="DIR", help="Extract into DIR (default: .)"
    )
    add_filter_options(
        parser, ["-x", "--exclude"], pattern="Only paths matching GLOB (incompatible with -i/-x)"
    )
    parser.add_argument(
        "--allow-outside-links",
        action="store_true",
        help="Also create symbolic links that point outside DIR (e.g. absolute ones)",
    )
    parser.add_argument(
        "--no-same-owner",
        action="store_true",
        help="Do not restore owners (by default restored when run as root, like tar)",
    )
    add_flag(parser, "-v", "List files as extracted")
    add_flag(parser, "-q", "No progress bar or summary")


def _cat_arguments(parser: argparse.ArgumentParser) -> None:
    add_archive_argument(parser)
    parser.add_argument("path", nargs="+", help="Path(s) of files in the archive")


def _path_filter(args: argparse.Namespace) -> PathFilter | None:
    check_pattern_alone(args)
    include = [args.pattern] if args.pattern else args.include
    path_filter = PathFilter.from_patterns(include, args.exclude)
    return None if path_filter.selects_everything else path_filter


def run_extract(args: argparse.Namespace) -> int:
    summary = Summary("extracted", quiet=args.quiet)
    path_filter = _path_filter(args)
    with open_archive(args.archive, args) as bc:
        total = bc.num_files if not args.paths and path_filter is None else None
        if total is not None and bc.encrypted:  # every row is read: check them first
            bc.check_index_digest()
        shown = shown_on(sys.stdout, tar_escaped)
        with Progress("extract", total, wants_progress(args.quiet)) as progress:

            def on_file(info: BarecatFileInfo) -> None:  # (above the bar, which advance may draw)
                progress.print_lines([shown(info.path) + "\n"], sys.stdout.writelines)
                progress.advance(1, 0 if info.is_symlink_entry else info.size or 0)

            try:
                result = extract_to_directory(
                    bc,
                    args.directory,
                    args.paths or None,
                    path_filter=path_filter,
                    allow_outside_links=args.allow_outside_links,
                    restore_owners=False if args.no_same_owner else None,
                    on_file=on_file if args.verbose else None,
                    on_files=progress.advance,  # (without -v, no record per file is made)
                )
            except KeyboardInterrupt:
                raise Interrupted(_how_to_go_on(args, whole=total is not None)) from None
    code = report_extraction(result, args.directory, "extract", args.verbose)
    for _, exc in result.failures:
        summary.skip(failure_reason(exc))
    summary.skip("link outside", len(result.outside_links))
    summary.finish(result.files + result.links, result.bytes, f"into {args.directory}")
    return code


def _how_to_go_on(args: argparse.Namespace, *, whole: bool) -> str:
    """What an interrupted extraction says after "interrupted; ": where its files are and,
    for a whole archive, the rsync that copies only what is still missing or differs."""
    kept = f"the files extracted so far are in {args.directory}"
    if not whole:
        return f"{kept}; run the command again to extract the rest (it writes every file again)"
    key = ["--passphrase-file", args.passphrase_file] if args.passphrase_file else []
    source, target = f"{args.archive}::/", os.path.join(args.directory, "")
    line = shlex.join(["barecat", "rsync", *key, source, target])
    return f"{kept}; to finish, copy only what is missing or differs: {line}"


def report_extraction(
    result: ExtractResult,
    directory: str,
    command: str | None,
    verbose: bool | None,
    allow: str = "--allow-outside-links",
) -> int:
    """Say what an extraction left out: each failure on its own line, the links pointing
    outside ``directory`` in one summary line naming the option ``allow`` (each listed
    too when ``verbose``; None: the command has no ``-v``). Returns the exit code: 1 if
    anything was left out."""
    for path, exc in result.failures:
        error(failure_line(path, exc), command=command)
    links = result.outside_links
    if verbose:
        for path, target in links:
            error(f"{path}: link to {target!r} not created: it points outside", command=command)
    if links:
        which = "; -v lists them" if verbose is False else ""
        error(
            f"{len(links)} symbolic link{'s' if len(links) > 1 else ''} pointing outside "
            f"{os.path.abspath(directory)} not created (use {allow} to create them{which})",
            command=command,
        )
    return 1 if result.failures or links else 0


def run_cat(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    with open_archive(args.archive, args) as bc:
        for path in args.path:
            copy_file_to(bc, path, out)
    out.flush()
    return 0


register = registering(
    Declared("extract", run_extract, _extract_arguments, EXTRACT_EXAMPLES),
    Declared("cat", run_cat, _cat_arguments, CAT_EXAMPLE),
)
