"""``barecat rsync``: rsync-style sync between directories and paths inside archives.

``ARCHIVE::path`` (or ``ARCHIVE:path`` for an existing archive) names a path inside an
archive, ``DATA.tar.gz::path`` one inside a tar or zip source (see
:mod:`barecat.transfer.sync.locations`); the trailing-slash rule, quick check, ``--delete``,
``-c``, ``-u`` and the other options behave as in rsync. ``-v`` prints one line per
change, as rsync's names list; failures are reported at the end and make the exit code 1.
"""

from __future__ import annotations

import argparse
import sys

from barecat.cli.parsing import (
    Declared,
    add_flag,
    add_passphrase_option,
    registering,
    size,
)
from barecat.cli.running import Interrupted, rerun_line
from barecat.cli.sealing import passphrase_source
from barecat.cli.summary import Summary, failure_reason
from barecat.cli.terminal import Progress, error, failure_line
from barecat.glob import PathFilter
from barecat.transfer.sync.driver import SyncOptions, sync
from barecat.transfer.sync.plan import Action

RSYNC_EXAMPLES = """
barecat rsync /data/images/ photos.barecat::images/  # contents of images/ into images/
barecat rsync /data/images photos.barecat::          # the directory itself, at the root
barecat rsync photos.barecat::images/ /data/images/  # back out
barecat rsync photos.barecat:: /backup/              # the whole archive as /backup/photos/
barecat rsync --delete -c a.barecat::/ b.barecat::   # mirror one archive into another
barecat rsync data.tar.gz::/ photos.barecat::        # a tar or zip file's members
barecat rsync -nv --delete /data/ photos.barecat::data/

ARCHIVE::path always names a path inside an archive (created if it is the destination);
ARCHIVE:path too when ARCHIVE is an existing archive (or, as destination, ends in
.barecat). '\\::' and '\\:' are literal colons, '\\\\' a backslash.
"""


RSYNC_ABOUT = (
    "Sync files between local filesystem and barecat archives. Use archive.barecat::path/ "
    "syntax for archive paths."
)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", help="Source(s) and destination (last is dest)")
    add_flag(parser, "-n", "Show what would be done")
    add_flag(parser, "-v", "List each path copied or deleted")
    parser.add_argument("--progress", action="store_true", help="Show progress")
    add_flag(parser, "-q", "No summary")
    parser.add_argument("--delete", action="store_true", help="Delete extraneous files from dest")
    parser.add_argument(
        "-c",
        "--checksum",
        action="store_true",
        help="Compare contents (CRC32C) instead of size and mtime",
    )
    parser.add_argument(
        "-u", "--update", action="store_true", help="Skip files that are newer on dest"
    )
    parser.add_argument(
        "--existing", action="store_true", help="Only update files the destination has"
    )
    parser.add_argument(
        "--ignore-existing", action="store_true", help="Skip files the destination has"
    )
    parser.add_argument(
        "--size-only", action="store_true", help="Files of equal size count as unchanged"
    )
    parser.add_argument("--max-size", type=size, metavar="SIZE", help="Skip bigger files")
    parser.add_argument("--min-size", type=size, metavar="SIZE", help="Skip smaller files")
    for flag, help_text in (
        ("--include", "Only paths matching PAT (repeatable; rules as in create)"),
        ("--exclude", "Leave out paths matching PAT (repeatable)"),
    ):
        parser.add_argument(flag, action="append", default=[], metavar="PAT", help=help_text)
    parser.add_argument(
        "--decrypt",
        action="store_true",
        help="Let files of an encrypted archive go into an archive that is not encrypted, "
        "where they are stored decrypted (refused otherwise)",
    )
    add_passphrase_option(parser)


def run_rsync(args: argparse.Namespace) -> int:
    summary = Summary("would sync" if args.dry_run else "synced", quiet=args.quiet)
    if len(args.paths) < 2:
        error("need at least one source and a destination", command="rsync")
        return 2
    path_filter = PathFilter.from_patterns(args.include, args.exclude)
    options = SyncOptions.of(args)
    with Progress("rsync", None, args.progress and not args.dry_run) as progress:

        def on_action(action: Action, nbytes: int) -> None:
            progress.advance(0 if action.display is None else 1, nbytes)  # as -v lists them
            if args.verbose and action.display is not None:  # (above a bar)
                progress.print_lines([action.display + "\n"], sys.stdout.writelines)

        try:
            result = sync(
                args.paths[:-1],
                args.paths[-1],
                options,
                path_filter=None if path_filter.selects_everything else path_filter,
                dry_run=args.dry_run,
                on_action=on_action,
                passphrase=passphrase_source(args),
                decrypt=args.decrypt,
            )
        except KeyboardInterrupt:
            if args.dry_run:
                raise
            line = rerun_line(getattr(args, "argv", None)) or "the same command"
            raise Interrupted(
                f"what was sent is kept; to finish, run it again (it sends only what "
                f"differs): {line}"
            ) from None
    sys.stdout.flush()
    for path, exc in result.failures:
        error(failure_line(path, exc), command="rsync")
        summary.skip(failure_reason(exc))
    summary.finish(progress.files, progress.bytes, f"to {args.paths[-1]}")
    return 1 if result.failures else 0


register = registering(Declared("rsync", run_rsync, _arguments, RSYNC_EXAMPLES, RSYNC_ABOUT))
