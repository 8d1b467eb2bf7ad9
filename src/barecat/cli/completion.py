"""Shell completion: the ``completion-script`` command and the engine behind the scripts.

All the knowledge lives here, in one engine that reads the real argparse parser (so a new
command or option completes without touching this file) and, for paths inside an archive,
the archive itself. The bash and zsh scripts in ``completion_scripts/`` are thin wrappers:
they call the hidden ``__complete`` command, which prints a kind line and then one
candidate per line, and hand the answer to the shell. The engine must be quick and quiet:
a broken archive, a missing file or a surprise in the parser just yields no candidates.
Imports the facade, the on-disk naming (``layout``) and where the scripts are installed
(``shell_completion``), never another command module.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from barecat.archive import Barecat
from barecat.cli.parsing import Declared, Subparsers, registering
from barecat.layout import OLD_INDEX_SUFFIX, archive_exists, shard_path
from barecat.paths import normalize
from barecat.shell_completion import SCRIPT_NAMES, script_path

COMPLETE_COMMAND = "__complete"
SCRIPT_COMMAND = "completion-script"
WORD_MARK = ":"
"""Put before every word handed to ``__complete``: words like ``--sh`` must reach the
engine as data, whatever argparse does with option-like arguments."""
ROOT_OPTIONS = ("-h", "--help", "--version")
"""Options of the top-level parser, which the hidden command cannot reach (it only sees
the subcommand table); a test keeps this in step with ``build_parser()``."""

ARCHIVE_DESTS = frozenset({"archive", "archives"})
MEMBER_DESTS = frozenset({"path", "paths"})
LOCAL_SOURCE_COMMANDS = frozenset({"create", "add"})
"""Commands whose ``paths`` after the archive are local files to put in, not members."""
LOCAL_DIR_NAMES = frozenset({"dir", "directory", "mountpoint"})
LOCAL_FILE_NAMES = frozenset({"file", "files_from", "output", "input"})


SCRIPT_ABOUT = (
    "Print the absolute path of barecat's completion script for SHELL,\n"
    "to be sourced from the shell's startup file."
)
SCRIPT_EXAMPLES = """
echo 'source "$(barecat completion-script bash)"' >> ~/.bashrc
echo 'source "$(barecat completion-script zsh)"' >> ~/.zshrc   # after compinit
barecat completion-script bash   # just show where the script is
"""
COMPLETE_ABOUT = "Print completion candidates (called by the completion scripts)."


def register(sub: Subparsers) -> None:
    candidates = functools.partial(_print_candidates, sub)  # (it reads every parser)
    registering(
        Declared(SCRIPT_COMMAND, _print_path, _script_arguments, SCRIPT_EXAMPLES, SCRIPT_ABOUT),
        Declared(COMPLETE_COMMAND, candidates, _complete_arguments, description=COMPLETE_ABOUT),
    )(sub)


def _script_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=sorted(SCRIPT_NAMES), help="the shell")


def _complete_arguments(hidden: argparse.ArgumentParser) -> None:
    hidden.add_argument("shell", choices=sorted(SCRIPT_NAMES))
    hidden.add_argument(
        "rest",
        nargs="*",
        help=f"{WORD_MARK}REPLACED {WORD_MARK}WORD...: the text the shell will replace, then "
        "the words up to and including the current one (raw for bash, unquoted for zsh), "
        f"each behind a '{WORD_MARK}' so that none can pass for an option",
    )


def _print_path(args: argparse.Namespace) -> int:
    print(script_path(args.shell))
    return 0


@dataclass(slots=True)
class Answer:
    """What to complete: ``words``/``paths`` list candidates (paths ending in '/' are
    directories to descend into, with no space after); ``files``/``dirs`` ask the shell
    to complete local paths for ``text``, keeping ``prefix`` (such as ``--directory=``)
    in front."""

    kind: str
    candidates: list[str] = field(default_factory=list)
    prefix: str = ""
    text: str = ""

    def lines(self, kept: str) -> list[str]:
        """The protocol the scripts read. ``kept`` is the start of the current word that
        the shell keeps rather than replaces (bash splits words at '=' and ':'); it is
        cut from every candidate."""
        if self.kind in ("files", "dirs"):
            return [self.kind, self.prefix, self.text, str(len(kept))]
        cut = len(kept)
        found = [c[cut:] for c in self.candidates if c.startswith(kept) and "\n" not in c]
        return [self.kind, *found]


def _print_candidates(commands: Subparsers, args: argparse.Namespace) -> int:
    """The hidden ``__complete`` command; never fails loudly, since a shell is waiting."""
    rest = [w[len(WORD_MARK) :] if w.startswith(WORD_MARK) else w for w in args.rest]
    if not rest:
        return 0
    replaced, words = rest[0], rest[1:]
    try:
        if args.shell == "bash":
            words = [dequote(w) for w in words]
        answer = complete(commands, words)
        current = words[-1] if words else ""
        kept = current[: len(current) - len(replaced)] if current.endswith(replaced) else ""
        sys.stdout.write("".join(line + "\n" for line in answer.lines(kept)))
    except Exception:
        # Whatever goes wrong, the shell gets no candidates rather than a traceback
        # over the command line being typed.
        return 0
    return 0


def dequote(word: str) -> str:
    """Remove shell quoting the way bash would, tolerating the unterminated quote of a
    word still being typed (readline passes raw words)."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(word):
        c = word[i]
        nxt = word[i + 1] if i + 1 < len(word) else ""
        if quote == "'":
            quote = "" if c == "'" else quote
            out.append("" if c == "'" else c)
        elif c == "\\" and (not quote or nxt in '$`"\\\n'):
            out.append(nxt)
            i += 1
        elif quote == '"' and c == '"':
            quote = ""
        elif not quote and c in "'\"":
            quote = c
        else:
            out.append(c)
        i += 1
    return "".join(out)


# -- the engine ---------------------------------------------------------------------


@dataclass(slots=True)
class _Scan:
    """Where the words before the current one left us: which parser, which positional
    slot is next, which option still wants a value."""

    options: dict[str, argparse.Action]
    positionals: list[argparse.Action]
    command: str | None = None
    slot: int = 0
    filled: int = 0
    pending: argparse.Action | None = None
    pending_left: int = 0
    pending_optional: bool = False
    values: dict[str, list[str]] = field(default_factory=dict)
    used: set[argparse.Action] = field(default_factory=set)
    after_dashdash: bool = False
    lost: bool = False


def complete(commands: Subparsers, words: Sequence[str]) -> Answer:
    """Candidates for the last of ``words`` (the current word, up to the cursor), given
    unquoted words starting with the program name."""
    root = argparse.ArgumentParser(add_help=False)
    for option in ROOT_OPTIONS:
        root.add_argument(option, action="store_true")
    scan = _Scan(dict(root._option_string_actions), [commands])
    for word in words[1:-1]:
        _feed(scan, word)
        if scan.lost:
            return Answer("words")
    return _complete_current(scan, words[-1] if len(words) > 1 else "")


def _enter_parser(scan: _Scan, parser: argparse.ArgumentParser, name: str) -> None:
    command = parser.get_default("command")
    scan.options = dict(parser._option_string_actions)
    scan.positionals = [a for a in parser._actions if not a.option_strings]
    scan.command = command if isinstance(command, str) else name
    scan.slot = scan.filled = 0


def _feed(scan: _Scan, word: str) -> None:
    """Account for one complete word before the cursor."""
    if scan.pending is not None and not (scan.pending_optional and _is_option(scan, word)):
        scan.pending_left -= 1
        if scan.pending_left <= 0:
            scan.pending = None
        return
    scan.pending = None
    if word == "--" and not scan.after_dashdash:
        scan.after_dashdash = True
    elif not scan.after_dashdash and _is_option(scan, word):
        action, attached = _resolve_option(scan.options, word)
        if action is not None:
            scan.used.add(action)
            if _values_wanted(action) != 0 and not attached:
                _expect_values(scan, action)
    else:
        _feed_positional(scan, word)


def _expect_values(scan: _Scan, action: argparse.Action) -> None:
    """Remember that the next words belong to ``action``; optional ones (``?``, ``*``,
    ``+``) end at the next option."""
    scan.pending = action
    scan.pending_optional = not isinstance(action.nargs, int) and action.nargs is not None
    scan.pending_left = 1 if action.nargs in (None, "?") else _positional_capacity(action)


def _feed_positional(scan: _Scan, word: str) -> None:
    if scan.slot >= len(scan.positionals):
        return
    action = scan.positionals[scan.slot]
    if isinstance(action, argparse._SubParsersAction):
        parser = action.choices.get(word)
        if parser is None:
            scan.lost = True
        else:
            _enter_parser(scan, parser, word)
        return
    scan.values.setdefault(action.dest, []).append(word)
    scan.filled += 1
    if scan.filled >= _positional_capacity(action):
        scan.slot, scan.filled = scan.slot + 1, 0


def _positional_capacity(action: argparse.Action) -> int:
    if action.nargs in (None, "?"):
        return 1
    if isinstance(action.nargs, int):
        return action.nargs
    return sys.maxsize


def _values_wanted(action: argparse.Action) -> int:
    """How many values an option takes: 0 for flags, -1 for 'some, until the next
    option' (``?``, ``*``, ``+``)."""
    if action.nargs is None:
        return 1
    if isinstance(action.nargs, int):
        return action.nargs
    return -1


def _is_option(scan: _Scan, word: str) -> bool:
    """argparse's rule: a leading '-' makes an option, unless it reads as a negative number
    or is a lone '-' (stdin)."""
    if len(word) < 2 or not word.startswith("-"):
        return False
    if word in scan.options:
        return True
    return not word[1:].replace(".", "", 1).isdigit()


def _resolve_option(
    options: dict[str, argparse.Action], word: str
) -> tuple[argparse.Action | None, bool]:
    """The action a typed option word means, and whether its value is attached to it
    (``--opt=value``, ``-Cdir``); follows argparse's exact, '=' and abbreviation rules."""
    if word in options:
        return options[word], False
    if "=" in word:
        name = word.split("=", 1)[0]
        if name in options:
            return options[name], True
    matches = [o for o in options if o.startswith(word) and (len(o) > 2 or o == word)]
    if len(matches) == 1:
        return options[matches[0]], False
    head = word[:2]
    if not word.startswith("--") and head in options:
        return options[head], _values_wanted(options[head]) != 0
    return None, False


def _complete_current(scan: _Scan, cur: str) -> Answer:
    pending = scan.pending
    if pending is not None and not (scan.pending_optional and cur.startswith("-")):
        return _option_value(pending, cur, "")
    if not scan.after_dashdash and cur.startswith("-"):
        return _option_word(scan, cur)
    if scan.slot >= len(scan.positionals):
        return Answer("words")
    return _positional_value(scan, scan.positionals[scan.slot], cur)


def _option_word(scan: _Scan, cur: str) -> Answer:
    """An option being typed: its names, or its value when attached (``--dir=...``)."""
    if cur.startswith("--") and "=" in cur:
        name, _, value = cur.partition("=")
        action = scan.options.get(name)
        if action is None or _values_wanted(action) == 0:
            return Answer("words")
        return _option_value(action, value, name + "=")
    names = _option_names(scan, cur)
    if not names and not cur.startswith("--") and cur[:2] in scan.options:
        action = scan.options[cur[:2]]
        if _values_wanted(action) != 0:
            return _option_value(action, cur[2:], cur[:2])
    return Answer("words", names)


def _option_names(scan: _Scan, cur: str) -> list[str]:
    """Visible options starting with ``cur``, without those already given once unless
    they can repeat (append, count, extend)."""
    repeatable = (argparse._AppendAction, argparse._CountAction, argparse._ExtendAction)
    names = []
    for name, action in scan.options.items():
        if not name.startswith(cur) or action.help == argparse.SUPPRESS:
            continue
        if action in scan.used and not isinstance(action, repeatable):
            continue
        names.append(name)
    return sorted(names)


def _option_value(action: argparse.Action, text: str, prefix: str) -> Answer:
    """A value for an option: its choices, a local path for file-ish options, or nothing
    for free text (patterns, numbers, sizes)."""
    if action.choices is not None:
        return Answer("words", _matching_choices(action.choices, text, prefix))
    kind = _local_kind(action)
    if kind is None:
        return Answer("words")
    return Answer(kind, prefix=prefix, text=text)


def _local_kind(action: argparse.Action) -> str | None:
    """'dirs' or 'files' when the option's name or metavar says it takes a local path."""
    names = {action.dest.lower()}
    if isinstance(action.metavar, str):
        names.add(action.metavar.lower())
    if names & LOCAL_DIR_NAMES:
        return "dirs"
    if names & LOCAL_FILE_NAMES:
        return "files"
    return None


def _matching_choices(choices: Iterable[object], text: str, prefix: str) -> list[str]:
    return [prefix + str(c) for c in choices if str(c).startswith(text)]


def _positional_value(scan: _Scan, action: argparse.Action, cur: str) -> Answer:
    if isinstance(action, argparse._SubParsersAction):
        return Answer("words", _command_names(action, cur))
    if action.choices is not None:
        return Answer("words", _matching_choices(action.choices, cur, ""))
    metavar = action.metavar.lower() if isinstance(action.metavar, str) else ""
    if action.dest in ARCHIVE_DESTS or metavar == "archive":
        archives = local_archives(cur)
        return Answer("files", text=cur) if archives is None else Answer("paths", archives)
    given = scan.values.get("archive")
    archive = given[0] if given else None
    if (
        action.dest in MEMBER_DESTS
        and archive is not None
        and scan.command not in LOCAL_SOURCE_COMMANDS
    ):
        return Answer("paths", archive_members(archive, cur))
    return Answer(_local_kind(action) or "files", text=cur)


def _command_names(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], cur: str
) -> list[str]:
    """Subcommand names and aliases starting with ``cur``, hiding undocumented ones."""
    documented = {a.dest for a in commands._choices_actions if a.help != argparse.SUPPRESS}
    visible = {id(p) for name, p in commands.choices.items() if name in documented}
    return sorted(
        name
        for name, parser in commands.choices.items()
        if id(parser) in visible and name.startswith(cur)
    )


# -- what is on disk and in archives -------------------------------------------------


def _hidden_name(name: str, typed: str) -> bool:
    """Dot-names show only once a dot is typed, as in filename completion."""
    return name.startswith(".") and not typed.startswith(".")


def local_archives(text: str) -> list[str] | None:
    """Archives (and directories to look into) whose path starts with ``text``; None
    when no archive matches, so the shell falls back to plain file completion.

    An archive is an index file with a ``-shard-00000`` beside it; old-style
    ``NAME-sqlite-index`` files are offered as ``NAME``, the name commands expect.
    """
    head, _, typed = text.rpartition("/")
    head = head + "/" if "/" in text else ""
    directory = os.path.expanduser(head) if head else "."
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    names = {e.name for e in entries}
    archives: set[str] = set()
    subdirs: list[str] = []
    for entry in entries:
        if _hidden_name(entry.name, typed):
            continue
        archive = _archive_name(entry, names)
        if archive is not None:
            if archive.startswith(typed):
                archives.add(head + archive)
        elif entry.name.startswith(typed) and _is_dir(entry):
            subdirs.append(head + entry.name + "/")
    if not archives:
        return None
    return sorted(archives) + sorted(subdirs)


def _archive_name(entry: os.DirEntry[str], siblings: set[str]) -> str | None:
    name = entry.name.removesuffix(OLD_INDEX_SUFFIX)
    if shard_path(name, 0) in siblings and _is_file(entry):
        return name
    return None


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def archive_members(archive: str, text: str) -> list[str]:
    """Entries of the archive's directory named by ``text`` up to its last '/', whose
    names start with the rest; directories end in '/'. Empty when the archive cannot be
    read."""
    path = os.path.expanduser(archive)
    try:
        if not archive_exists(path):
            return []
        with Barecat(path, lookup_table=False) as bc:
            return _members(bc, text)
    except Exception:
        # A corrupt index, a schema from the future, a permission problem: no members.
        return []


def _members(bc: Barecat, text: str) -> list[str]:
    rel = text.lstrip("/")
    head, slash, typed = rel.rpartition("/")
    shown = text[: len(text) - len(rel)] + head + slash
    directory = normalize(head)
    if directory and not bc.isdir(directory):
        return []
    found: list[str] = []
    for info in bc.subdirs_of(directory):
        name = info.path.rpartition("/")[2]
        if name.startswith(typed) and not _hidden_name(name, typed):
            found.append(shown + name + "/")
    for file_info in bc.files_in(directory):
        name = file_info.path.rpartition("/")[2]
        if name.startswith(typed) and not _hidden_name(name, typed):
            found.append(shown + name)
    return sorted(found)
