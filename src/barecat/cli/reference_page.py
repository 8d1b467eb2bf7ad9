"""``docs/cli.md``, the command reference, written from the argument parser.

Each command's section is its ``--help`` text at a fixed width, so the reference says
exactly what ``barecat COMMAND --help`` prints (run with ``COLUMNS`` set to that width).
``python -m barecat.cli.reference_page > docs/cli.md`` (or ``./run docs``) regenerates
the checked-in page; a test fails when the two differ, or when a command's real
``--help`` differs from its section.
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
from typing import cast

from barecat.cli.main import build_parser
from barecat.cli.manpage import documented_commands
from barecat.cli.terminal import PROG

WIDTH = 80
"""Columns the help texts are wrapped at (argparse would ask the terminal)."""


def help_text(parser: argparse.ArgumentParser, columns: int = WIDTH) -> str:
    """What ``--help`` prints for ``parser`` on a terminal ``columns`` wide.

    Args:
        parser: the ``barecat`` parser or one of its commands' parsers.
        columns: the terminal's width (argparse wraps two columns short of it).

    Returns:
        The help text, ending in a newline.
    """
    formatter_class = cast("type[argparse.HelpFormatter]", parser.formatter_class)
    fixed = copy.copy(parser)
    fixed.formatter_class = functools.partial(formatter_class, width=columns - 2)
    return fixed.format_help()


def _anchor(name: str) -> str:
    """The link target of a command's section (GitHub's slug of its heading)."""
    return f"{PROG}-{name}"


def render(parser: argparse.ArgumentParser) -> str:
    """The command reference of ``parser`` (the ``barecat`` command) in Markdown.

    Args:
        parser: the ``barecat`` parser (``build_parser()``).

    Returns:
        The page's text.
    """
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = documented_commands(parser)
    lines = [
        f"# `{PROG}` command reference",
        "",
        "<!-- Written by `./run docs` (barecat.cli.reference_page) from the argument parser;",
        "     do not edit: tests/interop/test_docs.py fails when it differs from --help. -->",
        "",
        f"Every command and option, exactly as `{PROG} COMMAND --help` prints it. How the",
        "commands behave (names, patterns, links, errors, output) is explained in",
        "[the command line](command-line.md); `man barecat` has the same content as this page.",
        "",
        "| command | aliases | what it does |",
        "| --- | --- | --- |",
    ]
    for name, aliases, summary in commands:
        shown = ", ".join(f"`{alias}`" for alias in aliases)
        cell = summary.replace("|", "\\|")
        lines.append(f"| [`{name}`](#{_anchor(name)}) | {shown} | {cell} |")
    lines += ["", f"## `{PROG}`", "", "```text", help_text(parser).rstrip("\n"), "```"]
    for name, _, _ in commands:
        text = help_text(subparsers.choices[name]).rstrip("\n")
        lines += ["", f"## `{PROG} {name}`", ""]
        lines += ["```text", text, "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the page: ``python -m barecat.cli.reference_page > docs/cli.md``."""
    sys.stdout.write(render(build_parser()))


if __name__ == "__main__":
    main()
