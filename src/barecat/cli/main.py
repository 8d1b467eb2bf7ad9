"""The ``barecat`` command: argument parsing, dispatch, and the one place errors become
messages and exit codes.

Exit codes follow the reference: 0 success, 1 an error (message on stderr), 2 a usage
error, 130 interrupted (Ctrl-C), 141 output pipe closed. Commands live in their own
modules and register here; they return an exit code and raise library errors, which
:func:`run_command` turns into one line.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence

from barecat import __version__
from barecat.cli import (
    combine,
    completion,
    create,
    extract,
    listing,
    maintenance,
    reorganize,
    reports,
    shell,
    sync,
)
from barecat.cli.parsing import CommandParser
from barecat.cli.terminal import PROG, describe, error
from barecat.exceptions import BarecatError

COMMAND_MODULES = (
    create,
    extract,
    listing,
    reports,
    shell,
    maintenance,
    reorganize,
    combine,
    sync,
    completion,
)

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 130, 141


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


def run_command(command: str | None, body: Callable[[], int]) -> int:
    """Run a command body, turning what it raises into a message and an exit code."""
    try:
        return body()
    except KeyboardInterrupt:
        error("interrupted", command=command)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing, and keep Python from complaining
        # when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except (BarecatError, OSError, ValueError, KeyError, sqlite3.Error) as e:
        error(describe(e), command=command)
        return EXIT_ERROR


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args_list = _attach_negative_values(list(sys.argv[1:] if argv is None else argv))
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
