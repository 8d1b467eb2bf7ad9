"""Running a command body: the one place errors become messages and exit codes.

Exit codes follow the reference: 0 success, 1 an error (message on stderr), 2 a usage
error, 130 interrupted (Ctrl-C), 141 output pipe closed. Shared by the ``barecat``
command and the reference's legacy one-purpose scripts; imports no command module, so
every command module may use it.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence

from barecat.cli.terminal import error, error_lines
from barecat.exceptions import BarecatError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 130, 141


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
    except (BarecatError, OSError, ValueError, KeyError, sqlite3.Error, ModuleNotFoundError) as e:
        for line in error_lines(e):
            error(line, command=command)
        return EXIT_ERROR


def run_legacy(
    prog: str,
    replacement: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
) -> int:
    """Run one of the reference's old scripts: its own options, a one-line deprecation
    note pointing to ``replacement``, then the same error handling as ``barecat``."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    print(f"{prog}: note: this script is deprecated, use '{replacement}'", file=sys.stderr)
    return run_command(None, lambda: body(args))
