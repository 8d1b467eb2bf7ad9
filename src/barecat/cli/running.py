"""Running a command body: the one place errors become messages and exit codes.

Exit codes follow the reference: 0 success, 1 an error (message on stderr), 2 a usage
error, 130 interrupted (Ctrl-C), 141 output pipe closed. Shared by the ``barecat``
command and the reference's legacy one-purpose scripts; imports no command module, so
every command module may use it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sqlite3
import sys
from collections.abc import Callable, Sequence

from barecat.cli.terminal import error, error_lines
from barecat.exceptions import BarecatError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 130, 141


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C that the command explains: ``advice`` (what was kept, how to go on) is
    said after "interrupted; "."""

    def __init__(self, advice: str) -> None:
        super().__init__(advice)
        self.advice = advice


def rerun_line(
    argv: Sequence[str] | None, option: str | None = None, dropping: Sequence[str] = ()
) -> str | None:
    """The command line ``barecat ARGV`` (``argv`` starting with the command's name, as
    typed) with ``option`` added after the name (unless given) and the flags ``dropping``
    left out, quoted for a shell; None when it cannot be exact: no ``argv`` (a legacy
    script), or a cluster of short options (``-vf``) that may hold a flag to drop."""
    if not argv:
        return None
    letters = {flag[1] for flag in dropping if len(flag) == 2}
    end = argv.index("--") if "--" in argv else len(argv)  # (operands after it, as they are)
    options = [arg for arg in argv[1:end] if arg not in dropping]
    if any(len(a) > 2 and a[0] == "-" and a[1] != "-" and letters & set(a) for a in options):
        return None
    added = [] if option is None or option in options else [option]
    return shlex.join(["barecat", argv[0], *added, *options, *argv[end:]])


def run_command(command: str | None, body: Callable[[], int]) -> int:
    """Run a command body, turning what it raises into a message and an exit code."""
    try:
        return body()
    except KeyboardInterrupt as e:
        advice = f"; {e.advice}" if isinstance(e, Interrupted) else ""
        error(f"interrupted{advice}", command=command)
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
