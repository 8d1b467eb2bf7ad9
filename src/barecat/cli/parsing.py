"""The shape shared by every subcommand: how one is declared, with help and examples.

Command modules declare their subcommands as :class:`Declared` values (the module's
``register`` is :func:`registering` of them), so each gets the same help layout
(description, then an examples block), its help line and aliases from the command table
(:mod:`barecat.cli.commands`) and a ``handler`` the entry point calls; the option groups
several commands share are declared here once.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from barecat.cli.commands import COMMAND_BY_NAME, HIDDEN

Handler = Callable[[argparse.Namespace], int]
Subparsers = Any
"""``argparse._SubParsersAction``, which argparse does not export."""


class CommandParser(argparse.ArgumentParser):
    """A subcommand parser that lets options and positionals mix, as tar users type them.

    Plain argparse binds ``archive paths*`` at the first positional, so in
    ``barecat add ar -C dir a`` the ``a`` would be an error. "The following arguments are
    required" names all that is missing and only that: a positional that takes any number
    of values (``paths*``) is optional (argparse, given no default, would name it when
    nothing at all is given: ``barecat extract`` said "archive, paths"), and the
    positionals missing are named with the options missing (the intermixed parse reads
    options first and stopped there: ``barecat reshard`` named only ``-s``).
    """

    _parsing_intermixed = False
    _collecting = False

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if kwargs.get("nargs") == "*" and args and not args[0].startswith(self.prefix_chars):
            kwargs.setdefault("default", [])
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if self._collecting and message.startswith(_REQUIRED):
            raise _MissingError(message[len(_REQUIRED) :].split(", "))
        super().error(message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._parsing_intermixed:  # the intermixed parser calls back in here
            return super().parse_known_args(args, namespace)
        self._parsing_intermixed = self._collecting = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        except _MissingError as e:
            missing = e.names
            if all(name.startswith("-") for name in missing):  # (options first: then these)
                missing += self._missing_positionals(args)
        finally:
            self._parsing_intermixed = self._collecting = False
        self.error(_REQUIRED + ", ".join(missing))

    def _missing_positionals(self, args: Sequence[str] | None) -> list[str]:
        """The names of the required positionals ``args`` lacks (its options as if none
        were required)."""
        required = [a for a in self._actions if a.option_strings and a.required]
        for action in required:
            action.required = False
        try:
            self.parse_known_intermixed_args(args, argparse.Namespace())
        except _MissingError as positionals:
            return positionals.names
        finally:
            for action in required:
                action.required = True
        return []


_REQUIRED = "the following arguments are required: "


class _MissingError(Exception):
    """What argparse found missing, caught to be said once with all of it."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.names = names


class Declared(NamedTuple):
    """One command as its module declares it: its name in the command table
    (:mod:`barecat.cli.commands`, which gives its help line and aliases), the function that
    runs it, the function that adds its arguments, and what its --help says beyond the
    help line: ``examples`` under 'examples:', ``details`` as a paragraph of its own after
    the description (by default the help line).

    ``short_help=False`` leaves ``-h`` free for the command (``du -h``, as in GNU): help is
    ``--help`` only.
    """

    name: str
    handler: Handler
    arguments: Callable[[argparse.ArgumentParser], None]
    examples: str | None = None
    description: str | None = None
    details: str | None = None
    short_help: bool = True


def add_command(sub: Subparsers, command: Declared) -> argparse.ArgumentParser:
    """Declare ``command`` in ``sub``, with its help line and aliases from the command
    table, then its arguments. A hidden command still parses, but the command list leaves
    it out."""
    row = COMMAND_BY_NAME[command.name]
    epilog = None
    if command.examples:
        examples = textwrap.dedent(command.examples).strip("\n")
        epilog = "examples:\n" + textwrap.indent(examples, "  ")
    details = "\n\n" + command.details.strip("\n") if command.details else ""
    parser: argparse.ArgumentParser = sub.add_parser(
        command.name,
        aliases=list(row.aliases),
        help=row.help,
        description=(command.description or row.help) + details,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=command.short_help,
    )
    if row.help == HIDDEN:  # argparse would list it as '==SUPPRESS=='
        sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest != command.name]
    if not command.short_help:
        parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.set_defaults(handler=command.handler, command=command.name)
    command.arguments(parser)
    return parser


def registering(*commands: Declared) -> Callable[[Subparsers], None]:
    """The ``register(sub)`` of a command module: it declares ``commands``, in this order,
    with :func:`add_command`."""

    def register(sub: Subparsers) -> None:
        for command in commands:
            add_command(sub, command)

    return register


def size(text: str) -> int:
    """argparse type for SIZE options (named so its error reads 'invalid size value')."""
    from barecat.entries import parse_size  # (not needed to list the commands)

    return parse_size(text)


def add_shard_limit_option(
    parser: argparse.ArgumentParser, help: str, required: bool = False
) -> None:
    """``-s/--shard-size-limit SIZE`` (``500M``, ``10G``), as every writing command has it."""
    parser.add_argument(
        "-s", "--shard-size-limit", type=size, metavar="SIZE", required=required, help=help
    )


SHARED_FLAGS = {"-q": "--quiet", "-v": "--verbose", "-f": "--force", "-n": "--dry-run"}
"""The on/off options several commands have, by short name; each says in its own words
what it does there."""


def add_flag(parser: argparse._ActionsContainer, short: str, help: str) -> None:
    """The shared on/off option ``short`` (a key of ``SHARED_FLAGS``) with its long name."""
    parser.add_argument(short, SHARED_FLAGS[short], action="store_true", help=help)


def add_workers_option(parser: argparse.ArgumentParser, help: str, default: int | None) -> None:
    """``-j/--workers N``: how many threads or processes; ``help`` says which."""
    parser.add_argument("-j", "--workers", type=int, default=default, metavar="N", help=help)


def add_archive_argument(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """The ``archive`` positional, and how to unlock it if it is encrypted."""
    parser.add_argument("archive", help=help or "Barecat archive path (without -shard suffix)")
    add_passphrase_option(parser)


def add_passphrase_option(parser: argparse.ArgumentParser) -> None:
    """``--passphrase-file FILE``: where the passphrase of an encrypted archive comes from
    (:func:`barecat.cli.sealing.passphrase_source` reads it)."""
    parser.add_argument(
        "--passphrase-file",
        metavar="FILE",
        help="Passphrase of an encrypted archive: the first line of FILE (else "
        "$BARECAT_PASSPHRASE, else a prompt on the terminal; never on the command line)",
    )


def add_address_options(parser: argparse.ArgumentParser) -> None:
    """``--host`` and ``--port``: where a server on this machine listens."""
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on")
    parser.add_argument("--port", type=int, default=0, help="Port (default: a free one)")


def add_allowed_host_option(parser: argparse.ArgumentParser) -> None:
    """``--allowed-host NAME``: the host names a server on this machine answers besides its
    own address (``allowed_host``, a list)."""
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="Also answer requests for host NAME (repeatable; '*': any name); requests for "
        "names other than the address listened on (and localhost) get 421, against DNS "
        "rebinding",
    )


class _FilterRule(argparse._AppendAction):
    """Appends the pattern to its own list (``include`` or ``exclude``) and, as
    ``(sign, pattern)``, to ``filter_rules``, which keeps -i and -x in the order typed
    (an append action, so completion offers it again)."""

    def __init__(self, *args: Any, sign: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sign = sign

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        for dest, item in ((self.dest, values), ("filter_rules", (self.sign, values))):
            setattr(namespace, dest, [*(getattr(namespace, dest, None) or []), item])


def add_filter_options(
    parser: argparse.ArgumentParser,
    exclude_flags: Sequence[str],
    ordered: bool = False,
    pattern: str | None = None,
) -> None:
    """``-i/--include`` and the exclude option, with the tar/rsync pattern rules (the
    reference spells exclude ``--exclude`` for create and ``-x/--exclude`` for extract).
    Besides ``include`` and ``exclude``, ``filter_rules`` lists both as ``(sign, pattern)``
    in command-line order; ``ordered`` says in the help that the first match decides.
    With ``pattern`` (its help), ``--pattern GLOB`` comes first, the other way to choose
    (:func:`check_pattern_alone` refuses both at once)."""
    if pattern is not None:
        parser.add_argument("--pattern", metavar="GLOB", help=pattern)
    parser.set_defaults(filter_rules=[])
    if ordered:
        rules = (
            "no '/': a name at any depth; with '/': the whole path, ** spanning directories; "
            "trailing '/': a directory and everything in it. With -i and -x mixed, the first "
            "rule that matches a path or one of its directories decides, as in rsync; what "
            "no rule matches is kept"
        )
        exclude_help = f"Leave out paths matching PATTERN ({rules}). Repeatable"
        include_help = "Keep paths matching PATTERN, even if a later -x matches them. Repeatable"
    else:
        exclude_help = (
            "Leave out paths matching PATTERN (no '/': a name at any depth; with '/': the "
            "whole path, ** spanning directories; trailing '/': directories). Repeatable"
        )
        include_help = "Only paths matching PATTERN (same rules). Repeatable"
    parser.add_argument(
        *exclude_flags,
        dest="exclude",
        action=_FilterRule,
        sign="-",
        default=[],
        metavar="PATTERN",
        help=exclude_help,
    )
    parser.add_argument(
        "-i",
        "--include",
        action=_FilterRule,
        sign="+",
        default=[],
        metavar="PATTERN",
        help=include_help,
    )


def check_pattern_alone(args: argparse.Namespace) -> None:
    """Refuse ``--pattern`` with ``-i``/``-x`` (see :func:`add_filter_options`).

    Raises:
        ValueError: both were given.
    """
    if args.pattern and (args.include or args.exclude):
        raise ValueError("--pattern cannot be combined with -i/-x")
