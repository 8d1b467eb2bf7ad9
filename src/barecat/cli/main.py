"""The ``barecat`` command: argument parsing and dispatch.

Commands live in their own modules and register here; they return an exit code and raise
library errors, which :func:`barecat.cli.running.run_command` turns into one line.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence

from barecat import __version__
from barecat.cli import (
    combine,
    completion,
    convert,
    create,
    extract,
    interactive,
    listing,
    maintenance,
    mount,
    reorganize,
    reports,
    serve,
    shell,
    sync,
)
from barecat.cli.parsing import CommandParser
from barecat.cli.running import EXIT_USAGE, run_command
from barecat.cli.terminal import PROG
from barecat.glob import directory_pattern

_normalize_pattern = directory_pattern
"""0.3.1's name for how ``--pattern`` values are read (its tests import it from here)."""

COMMAND_MODULES = (
    create,
    convert,
    extract,
    listing,
    reports,
    shell,
    interactive,
    maintenance,
    mount,
    reorganize,
    combine,
    sync,
    serve,
    completion,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Millions of small files in a few big ones: create, browse and extract "
        "barecat archives (an SQLite index plus raw shard files).",
        epilog=f"Run '{PROG} COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", parser_class=CommandParser
    )
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


NEGATIVE_VALUE_OPTIONS = ("-size",)
"""Options whose values may start with '-' (``find -size -1M``), which argparse would
otherwise take for an option."""


def _attach_negative_values(argv: list[str]) -> list[str]:
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg in NEGATIVE_VALUE_OPTIONS:
            value = next(it, None)
            out.append(arg if value is None else f"{arg}={value}")
        else:
            out.append(arg)
    return out


def _command_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every name a command answers to, aliases and hidden commands included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The message for a mistyped command name (the nearest public ones suggested), or
    None if ``argv`` names a command (or none at all: options only)."""
    word = next((a for a in argv if not a.startswith("-")), None)
    names = _command_names(parser)
    if word is None or word in names:
        return None
    public = [n for n in names if not n.startswith("_")]
    near = difflib.get_close_matches(word, public, n=3, cutoff=0.6)
    if not near:
        return f"unknown command '{word}' (see '{PROG} --help' for the commands)"
    return f"unknown command '{word}'; did you mean {' or '.join(repr(n) for n in near)}?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args_list = _attach_negative_values(list(sys.argv[1:] if argv is None else argv))
    mistyped = unknown_command(parser, args_list)
    if mistyped is not None:
        print(f"{PROG}: {mistyped}", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = parser.parse_args(args_list)
    except SystemExit as e:  # --help, --version, usage errors: argparse already printed
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_command(args.command, lambda: int(args.handler(args)))


def console_main() -> None:
    """Entry point of the installed ``barecat`` script."""
    sys.exit(main())
