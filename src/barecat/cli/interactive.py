"""``barecat ncdu`` and ``barecat browse``: the interactive terminal interfaces.

Both are Textual applications (``barecat.cli.tui``), in the ``tui`` extra; Textual is
imported only when one of them starts, and its absence is one line saying what to install.
"""

from __future__ import annotations

import argparse

from barecat.cli.parsing import Subparsers, add_archive_argument, add_command
from barecat.cli.sealing import open_archive, unlock_if_at_hand
from barecat.exceptions import BarecatError
from barecat.paths import normalize


def register(sub: Subparsers) -> None:
    ncdu = add_command(
        sub,
        "ncdu",
        help="Interactive disk usage viewer (ncdu-like)",
        handler=run_ncdu,
        examples="""
        barecat ncdu photos.barecat            # arrows to move, Enter to open, q to quit
        barecat ncdu photos.barecat train/     # start in a directory
        """,
    )
    browse = add_command(
        sub,
        "browse",
        help="Ranger-like file browser for archives",
        handler=run_browse,
        examples="""
        barecat browse photos.barecat          # / filters, g goes to a path, q quits
        """,
    )
    for parser in (ncdu, browse):
        add_archive_argument(parser)
        parser.add_argument("path", nargs="?", default="", help="Directory to start in")


def _textual_apps() -> None:
    try:
        import textual  # noqa: F401
    except ModuleNotFoundError as e:
        raise BarecatError(
            "The terminal interfaces need Textual: pip install 'barecat[tui]'"
        ) from e


def run_ncdu(args: argparse.Namespace) -> int:
    _textual_apps()
    from barecat.cli.tui.ncdu import NcduApp

    with open_archive(args.archive, args) as bc:
        start = normalize(args.path)
        bc.index.lookup_dir(start)  # a missing directory fails here, not in the interface
        NcduApp(bc, start).run()
    return 0


def run_browse(args: argparse.Namespace) -> int:
    _textual_apps()
    from barecat.cli.tui.browse import BrowseApp

    with open_archive(args.archive, args) as bc:
        unlock_if_at_hand(bc, args)
        start = normalize(args.path)
        bc.index.lookup_dir(start)
        BrowseApp(bc, start).run()
    return 0
