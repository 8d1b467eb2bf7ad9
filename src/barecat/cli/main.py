"""The ``barecat`` command: argument parsing and dispatch.

Commands live in their own modules and register here; they return an exit code and raise
library errors, which :func:`barecat.cli.running.run_command` turns into one line. A run
imports only the module of the command it names, so ``barecat ls`` does not pay for the
dependencies of ``create``, ``serve`` or ``mount``; a run that names no command
(``--help``, ``--version``) or a mistyped one imports none (the command table lists them
all), and completion imports them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from barecat import __version__
from barecat.cli.commands import COMMAND_MODULES, COMMANDS, HIDDEN
from barecat.cli.parsing import CommandParser
from barecat.cli.running import EXIT_INTERRUPTED, EXIT_USAGE, run_command
from barecat.cli.terminal import PROG, did_you_mean

MODULE_OF_COMMAND = {name: module for module, names in COMMAND_MODULES.items() for name in names}
EVERY_COMMAND_NEEDED = frozenset({"__complete"})
"""Commands that read the whole command table (completion)."""


def __getattr__(name: str) -> Any:
    if name == "_normalize_pattern":  # 0.3.1's tests import it from here; rarely needed
        from barecat.glob import directory_pattern

        return directory_pattern
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Version(argparse.Action):
    """``--version``: the version, then which kernels run (compiled or pure Python, and
    why), asked only when the option is given."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from barecat import kernels  # (only here: start-up loads no more than it needs)

        sys.stdout.write(f"{PROG} {__version__}\n{kernels.describe()}\n")
        parser.exit()


def build_parser(
    modules: Iterable[str] = COMMAND_MODULES, *, list_the_rest: bool = False
) -> argparse.ArgumentParser:
    """The ``barecat`` parser with the commands of ``modules`` (by default all of them).

    Args:
        modules: names of command modules in ``barecat.cli`` (keys of ``COMMAND_MODULES``).
        list_the_rest: also list every other command of the table, by its name, aliases
            and help line alone (enough for ``--help`` and for naming a mistyped command;
            such a command has no options and no ``handler``).

    Returns:
        The top-level parser; each command's ``handler`` is in its namespace defaults.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Millions of small files in a few big ones: create, browse and extract "
        "barecat archives (an SQLite index plus raw shard files).",
        epilog=f"Run '{PROG} COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="show the version and which kernels run, and exit",
    )
    sub = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", parser_class=CommandParser
    )
    wanted, registered = set(modules), set()
    for command in COMMANDS:  # (each module's commands together, in --help order)
        if command.module in wanted:
            if command.module not in registered:  # its register() declares them all
                registered.add(command.module)
                importlib.import_module(f"barecat.cli.{command.module}").register(sub)
        elif list_the_rest and command.help != HIDDEN:
            sub.add_parser(command.name, aliases=command.aliases, help=command.help)
    return parser


def modules_needed(args: Sequence[str]) -> tuple[str, ...]:
    """The command modules a run with ``args`` needs: the one of the command named; none
    when no command is named (help, ``--version``) or the word is no command (the table
    names the commands); all of them for an option before the command other than
    ``--version`` (it could be any command's) and for completion.

    Args:
        args: the arguments after the program name.

    Returns:
        Keys of ``COMMAND_MODULES``.
    """
    before = []
    for arg in args:
        if not arg.startswith("-"):
            break
        before.append(arg)
    else:
        return ()
    word = args[len(before)]
    if any(a != "--version" for a in before) or word in EVERY_COMMAND_NEEDED:
        return tuple(COMMAND_MODULES)
    module = MODULE_OF_COMMAND.get(word)
    return () if module is None else (module,)


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
    hint = did_you_mean(word, [n for n in names if not n.startswith("_")])
    if hint is None:
        return f"unknown command '{word}' (see '{PROG} --help' for the commands)"
    return f"unknown command '{word}'; {hint}"


def unknown_option(
    parser: argparse.ArgumentParser, command: str | None, extras: Sequence[str]
) -> str | None:
    """The message for the first mistyped option in ``extras`` (what the parser of
    ``command``, or the top-level one, did not take), with the nearest of its options
    suggested; None if ``extras`` holds no option (an extra argument: argparse says so)."""
    typed = next((a for a in extras if a.startswith("-") and a != "-"), None)
    if typed is None:
        return None
    for action in parser._actions:
        if command and isinstance(action, argparse._SubParsersAction):
            parser = action.choices.get(command, parser)
    option = typed.split("=", 1)[0]
    where = f"{PROG} {command}" if command else PROG
    hint = did_you_mean(option, [o for o in parser._option_string_actions if len(o) > 2])
    if hint is None:
        return f"unknown option '{option}' (see '{where} --help' for the options)"
    return f"unknown option '{option}'; {hint}"


def main(argv: Sequence[str] | None = None) -> int:
    args_list = _attach_negative_values(list(sys.argv[1:] if argv is None else argv))
    modules = modules_needed(args_list)
    parser = build_parser(modules, list_the_rest=not modules)
    mistyped = unknown_command(parser, args_list)
    if mistyped is not None:
        print(f"{PROG}: {mistyped}", file=sys.stderr)
        return EXIT_USAGE
    try:
        args, extras = parser.parse_known_args(args_list)
    except SystemExit as e:  # --help, --version, usage errors: argparse already printed
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if extras:
        command = getattr(args, "command", None)
        mistyped = unknown_option(parser, command, extras)
        if mistyped is None:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")  # exits with 2
        prefix = f"{PROG} {command}" if command else PROG
        print(f"{prefix}: {mistyped}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args.argv = args_list  # (as typed: a command may say how to run it again)
    return run_command(args.command, lambda: int(args.handler(args)))


def console_main() -> None:
    """Entry point of the installed ``barecat`` script."""
    try:
        code = main()
    except KeyboardInterrupt:  # (before a command runs: while its modules load)
        print(f"{PROG}: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)
