"""The ``barecat(1)`` manual page, written from the argument parser so it cannot drift.

``python -m barecat.cli.manpage > man/barecat.1`` (or ``./run man``) regenerates the
checked-in page; a test fails when the two differ. The output depends on nothing but the
parser (no date, a fixed width), so the same code always writes the same page.
"""

from __future__ import annotations

import argparse
import sys

from barecat import __version__
from barecat.cli.main import build_parser
from barecat.cli.terminal import PROG

WIDTH = 78
"""Columns the usage lines are wrapped at (argparse would ask the terminal)."""


def _escape(text: str) -> str:
    """Text safe in roff: backslashes and hyphens escaped, no line starting a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in text.split("\n"))


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split()) if action.help else ""


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, "")
    return formatter.format_help().strip("\n")


def _term(action: argparse.Action) -> str:
    """An option's or argument's name as the page shows it: bold flags, italic values."""
    if not action.option_strings:
        return f"\\fI{_escape(action.metavar or action.dest)}\\fR"  # type: ignore[arg-type]
    flags = ", ".join(f"\\fB{_escape(flag)}\\fR" for flag in action.option_strings)
    if action.nargs == 0:
        return flags
    value = action.metavar or action.dest.upper()
    shown = " ".join(value) if isinstance(value, tuple) else value
    return f"{flags} \\fI{_escape(shown)}\\fR"


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        lines += [".TP", _term(action), _escape(_help(parser, action))]
    return lines


def documented_commands(parser: argparse.ArgumentParser) -> list[tuple[str, list[str], str]]:
    """Every documented subcommand, in the order of ``--help``.

    Args:
        parser: the ``barecat`` parser (``build_parser()``).

    Returns:
        ``(name, aliases, summary)`` per command; hidden commands are left out.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            names: dict[int, list[str]] = {}
            for name, sub in action.choices.items():
                names.setdefault(id(sub), []).append(name)
            return [
                (shown.dest, names[id(action.choices[shown.dest])][1:], shown.help or "")
                for shown in action._choices_actions
                if shown.help != argparse.SUPPRESS
            ]
    return []


def render(parser: argparse.ArgumentParser) -> str:
    """The manual page of ``parser`` (the ``barecat`` command) in roff."""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = [
        f'.TH {PROG.upper()} 1 "" "{PROG} {__version__}" "User Commands"',
        ".SH NAME",
        f"{PROG} \\- {_escape(parser.description or '')}",
        ".SH SYNOPSIS",
        f"\\fB{PROG}\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]",
        ".SH DESCRIPTION",
        _escape(parser.epilog or ""),
        ".SH OPTIONS",
        *_arguments(parser),
        ".SH COMMANDS",
    ]
    for name, aliases, summary in documented_commands(parser):
        sub = subparsers.choices[name]
        title = name + (f" ({', '.join(aliases)})" if aliases else "")
        lines += [f'.SS "{_escape(title)}"', _escape(summary), ".PP", ".nf"]
        lines += [_escape(_usage(sub)), ".fi"]
        if sub.description and sub.description != summary:
            for paragraph in sub.description.split("\n\n"):  # (blank lines part them)
                lines += [".PP", _escape(" ".join(paragraph.split()))]
        lines += _arguments(sub)
        if sub.epilog:
            lines += [".PP", ".nf", _escape(sub.epilog.strip("\n")), ".fi"]
    lines += [
        ".SH EXIT STATUS",
        "0 success, 1 an error (one line on standard error), 2 a usage error,",
        "130 interrupted, 141 output pipe closed.",
        ".SH SEE ALSO",
        "\\fBtar\\fR(1), \\fBdu\\fR(1), \\fBls\\fR(1), \\fBfusermount3\\fR(1)",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the page: ``python -m barecat.cli.manpage > man/barecat.1``."""
    sys.stdout.write(render(build_parser()))


if __name__ == "__main__":
    main()
