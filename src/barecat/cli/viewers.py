"""The interactive ways to look inside: ``barecat ncdu`` and ``barecat browse`` in the
terminal, ``barecat view`` (``barecat-image-viewer``) in a web browser.

The terminal ones are Textual applications (``barecat.cli.tui``, the ``tui`` extra), the
viewer a Starlette page (``barecat.web.viewer``, the ``viewer`` extra); each is imported when
it starts, and a missing one is one line saying what to install.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from barecat.cli.parsing import (
    Declared,
    add_address_options,
    add_allowed_host_option,
    add_archive_argument,
    registering,
)
from barecat.cli.running import run_command
from barecat.cli.sealing import open_archive, unlock_if_at_hand
from barecat.exceptions import MissingDependencyBarecatError
from barecat.paths import normalize

NCDU_EXAMPLES = """
barecat ncdu photos.barecat            # arrows to move, Enter to open, q to quit
barecat ncdu photos.barecat train/     # start in a directory
"""
BROWSE_EXAMPLES = "barecat browse photos.barecat          # / filters, g goes to a path, q quits"
VIEW_EXAMPLES = """
barecat view photos.barecat                 # opens the browser, or prints the address
barecat view --port 8080 --no-browser photos.barecat
"""


def _terminal_app_arguments(parser: argparse.ArgumentParser) -> None:
    add_archive_argument(parser)
    parser.add_argument("path", nargs="?", default="", help="Directory to start in")


def _textual_apps() -> None:
    try:
        import textual  # noqa: F401
    except ModuleNotFoundError as e:
        raise MissingDependencyBarecatError("The terminal interfaces need Textual", "tui", e) from e


def run_ncdu(args: argparse.Namespace) -> int:
    _textual_apps()
    from barecat.cli.tui.ncdu import NcduApp

    with open_archive(args.archive, args) as bc:
        start = normalize(args.path)
        bc.lookup_dir(start)  # a missing directory fails here, not in the interface
        NcduApp(bc, start).run()
    return 0


def run_browse(args: argparse.Namespace) -> int:
    _textual_apps()
    from barecat.cli.tui.browse import BrowseApp

    with open_archive(args.archive, args) as bc:
        unlock_if_at_hand(bc, args)
        start = normalize(args.path)
        bc.lookup_dir(start)
        BrowseApp(bc, start).run()
    return 0


def _view_arguments(view: argparse.ArgumentParser) -> None:
    add_archive_argument(view)
    _add_viewer_options(view)


def _add_viewer_options(parser: argparse.ArgumentParser) -> None:
    add_address_options(parser)
    parser.add_argument(
        "--no-browser", action="store_true", help="Only print the address; open no browser"
    )
    add_allowed_host_option(parser)


def run_view(args: argparse.Namespace) -> int:
    from barecat.web.viewer import serve_viewer  # (without its packages: names the extra)

    with open_archive(args.archive, args, threadsafe=True) as bc:
        unlock_if_at_hand(bc, args)

        def ready(url: str) -> None:
            print(f"Serving {bc.path} at {url} (Ctrl-C to stop)", flush=True)

        serve_viewer(
            bc,
            args.host,
            args.port,
            open_browser=not args.no_browser,
            on_ready=ready,
            allowed_hosts=args.allowed_host,
        )
    return 0


def legacy_image_viewer(argv: Sequence[str] | None = None) -> int:
    """The seeds' ``barecat-image-viewer ARCHIVE`` script."""
    parser = argparse.ArgumentParser(
        prog="barecat-image-viewer", description="Browse an archive's images in a web page."
    )
    add_archive_argument(parser)
    _add_viewer_options(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    return run_command("barecat-image-viewer", lambda: run_view(args))


register = registering(
    Declared("ncdu", run_ncdu, _terminal_app_arguments, NCDU_EXAMPLES),
    Declared("browse", run_browse, _terminal_app_arguments, BROWSE_EXAMPLES),
    Declared("view", run_view, _view_arguments, VIEW_EXAMPLES),
)
