"""The interpreter under ``barecat shell``: lines, words, paths, errors, completion.

Owns what every shell command relies on and none implements: splitting a line at ``;``,
words and getopt options, the current archive directory and the separate local one,
resolving and globbing operands against them, the error policy (a failing command prints
one ``barecat shell: CMD: message`` line, marks the session failed, and the shell goes
on), binary-safe output, help from docstrings, and readline completion of archive and
local paths. The commands themselves live in ``shell``. Imports only cli siblings and
the public library.
"""

from __future__ import annotations

import cmd
import getopt
import os
import posixpath
import re
import shlex
import sqlite3
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar, TextIO, TypeVar

from barecat.archive import Barecat
from barecat.cli.entry_format import bytewise
from barecat.cli.names import question_marks, shown_on
from barecat.cli.terminal import describe, did_you_mean, error
from barecat.entries import BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.paths import normalize

_T = TypeVar("_T")
_Shell = TypeVar("_Shell", bound="ShellEngine")
_MAGIC = re.compile(r"[*?[]")
_COMMAND_ERRORS = (BarecatError, OSError, ValueError, KeyError, sqlite3.Error, getopt.GetoptError)


_UNKNOWN = "unknown command (type 'help' for the list)"


class ShellError(Exception):
    """A command's own complaint (bad operand, read-only archive): printed, never raised out."""


def split_commands(line: str) -> list[str]:
    """Split a line at ``;`` and newlines outside quotes, dropping empty commands.

    Quotes and backslashes are kept, so each part is later split into words by ``shlex``
    exactly as if it had been typed alone. A command starting with ``!`` (a local shell
    command) runs to the end of its line: ``;``, quotes and all are the local shell's.
    """
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    escaped = False
    local_command = False
    for ch in line:
        if local_command:
            if ch != "\n":
                current.append(ch)
                continue
            local_command = False
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "!" and not "".join(current).strip():
            local_command = True
        elif ch in ";\n":
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def has_magic(text: str) -> bool:
    """True if an operand is a glob pattern rather than a literal path."""
    return _MAGIC.search(text) is not None


def natural_number(text: str, option: str) -> int:
    if not text.isdigit():
        raise ShellError(f"{option} takes a non-negative number, not {text!r}")
    return int(text)


class ShellEngine(cmd.Cmd):
    """A ``cmd.Cmd`` over one archive; subclasses add ``do_*`` commands.

    Given an explicit ``stdin`` it reads lines from it instead of using readline, which
    makes sessions scriptable (and testable); ``show_prompt=False`` keeps a piped
    script's output free of prompts. ``failed`` records whether any command
    failed, for the exit status. Output goes to ``stdout`` if one was given, else to
    whatever ``sys.stdout`` is when it is written; errors likewise to ``stderr``.
    ``local_cwd`` is the local directory that local paths are relative to.
    """

    archive_path_commands: ClassVar[frozenset[str]] = frozenset()
    """Commands whose operands are archive paths (for tab completion)."""
    local_operands: ClassVar[Mapping[str, frozenset[int] | None]] = {}
    """Commands with local-path operands: at these operand positions, or (None) all."""

    def __init__(
        self,
        archive: Barecat | str | os.PathLike[str],
        readonly: bool = True,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        show_prompt: bool = True,
    ) -> None:
        """Start a shell on an open archive, or on one it opens itself.

        Args:
            archive: an open :class:`Barecat` (left open by :meth:`close`: its owner
                closes it), or the path of an archive to open (closed by :meth:`close`).
            readonly: open the archive at ``archive`` read-only (the default) or writable;
                an open archive keeps the mode it was opened with.
            stdin: read commands from this stream instead of the terminal (readline).
            stdout: write output here (default: the current ``sys.stdout``).
            stderr: write error lines here (default: the current ``sys.stderr``).
            show_prompt: print the prompt before reading each line.

        Raises:
            FileNotFoundBarecatError: a read-only ``archive`` path holds no archive.
        """
        super().__init__(stdin=stdin, stdout=stdout)
        self._stdout = stdout  # cmd.Cmd stored sys.stdout itself when none was given
        self._owns_archive = not isinstance(archive, Barecat)
        self.bc = archive if isinstance(archive, Barecat) else Barecat(archive, readonly=readonly)
        self.show_prompt = show_prompt
        self.use_rawinput = stdin is None
        self.cwd = ""
        self.local_cwd = os.getcwd()
        self.failed = False
        self._stderr = stderr
        self._command = ""
        self.update_prompt()

    @property  # type: ignore[override]
    def stdout(self) -> TextIO:
        """Where output goes: the stream given, else the current ``sys.stdout``."""
        return self._stdout or sys.stdout

    @stdout.setter
    def stdout(self, stream: TextIO) -> None:
        self._stdout = stream

    @property
    def err(self) -> TextIO:
        """Where error lines go: the stream given, else the current ``sys.stderr``."""
        return self._stderr or sys.stderr

    def close(self) -> None:
        """Close the archive if this shell opened it (committing what was changed)."""
        if self._owns_archive:
            self.bc.close()

    def __enter__(self: _Shell) -> _Shell:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the loop, dispatch and errors ---------------------------------------------------

    def loop(self, intro: str | None = None) -> None:
        """``cmdloop`` where Ctrl-C abandons the current line instead of the session."""
        while True:
            try:
                self.cmdloop(intro)
                return
            except KeyboardInterrupt:
                self.stdout.write("^C\n")
                intro = self.intro = None  # cmdloop keeps the intro; greet only once

    def preloop(self) -> None:
        if self.use_rawinput:
            # Whole paths are completed as one word; readline's default delimiters would
            # split them at '/' and '-'. readline is missing on some platforms.
            try:
                import readline
            except ImportError:
                return
            readline.set_completer_delims(" \t\n;")

    def onecmd(self, line: str) -> bool:
        """Run every ``;``-separated command of ``line``; True once one asks to stop."""
        return any(self._run_one(part) for part in split_commands(line))

    def parseline(self, line: str) -> tuple[str | None, str | None, str]:
        """cmd's parsing, where a leading dot is dropped: ``.ls``, ``.quit`` (as in sqlite3)."""
        stripped = line.strip()
        if stripped[:1] == "." and stripped[1:2] in self.identchars:
            line = stripped[1:]
        return super().parseline(line)

    def _run_one(self, line: str) -> bool:
        self._command = self.parseline(line)[0] or line.split()[0]
        try:
            return bool(super().onecmd(line))
        except BrokenPipeError:
            raise  # the reader is gone: let the entry point end quietly
        except ShellError as e:
            self.fail(str(e))
        except _COMMAND_ERRORS as e:
            self.fail(str(e) if isinstance(e, BarecatError) else describe(e))
        return False

    def fail(self, message: str) -> None:
        """Report one failure of the running command; the session goes on."""
        self.failed = True
        self.stdout.flush()
        error(f"{self._command}: {message}", command="shell", stream=self.err)

    def each(self, items: Iterable[_T], action: Callable[[_T], None]) -> None:
        """Apply ``action`` to every item, reporting a failing one and going on (like cat)."""
        for item in items:
            try:
                action(item)
            except ShellError as e:
                self.fail(str(e))

    def emptyline(self) -> bool:
        return False  # cmd's default repeats the last command, surprising after 'rm'

    def default(self, line: str) -> None:
        names = [name[3:] for name in self.get_names() if name.startswith("do_")]
        hint = did_you_mean(self._command, [n for n in names if n.isalpha() and n.islower()])
        raise ShellError(f"unknown command; {hint}" if hint else _UNKNOWN)

    def update_prompt(self) -> None:
        """The prompt names the directory; on a terminal, with what it cannot print as
        ``?`` (a directory's name must not talk to the terminal)."""
        where = shown_on(self.stdout, question_marks)(self.cwd)
        self.prompt = f"barecat:/{where}> " if self.show_prompt else ""

    def write(self, text: str) -> None:
        self.stdout.write(text)

    def write_bytes(self, data: bytes) -> None:
        """File contents go out unchanged through the stream's binary buffer when it has one."""
        buffer = getattr(self.stdout, "buffer", None)
        if buffer is None:
            self.stdout.write(data.decode("utf-8", "replace"))
            return
        self.stdout.flush()
        buffer.write(data)
        buffer.flush()

    # -- words and paths -------------------------------------------------------------------

    @staticmethod
    def parse(arg: str, options: str) -> tuple[dict[str, str], list[str]]:
        """Split the words of a command and its getopt-style options (anywhere on the line)."""
        opts, operands = getopt.gnu_getopt(shlex.split(arg), options)
        return dict(opts), operands

    def resolve(self, operand: str) -> str:
        """Archive path of an operand: absolute from '/', else from the cwd; '..' stops at /."""
        anchored = operand if operand.startswith("/") else f"/{self.cwd}/{operand}"
        return normalize(posixpath.normpath(anchored).strip("/"))

    def display(self, path: str, pattern: str) -> str:
        """Show a glob match the way its pattern was written: the pattern's literal leading
        directories as typed ('../', '/a/'), then the rest of the match."""
        literal: list[str] = []
        for part in pattern.split("/")[:-1]:
            if has_magic(part):
                break
            literal.append(part)
        prefix = "/".join(literal) or ("/" if pattern.startswith("/") else "")
        base = self.resolve(prefix or ".")
        if path == base:
            return prefix or "."
        if base and not path.startswith(base + "/"):
            return "/" + path  # the pattern climbed out of its literal part ('*/../x')
        rest = path[len(base) + 1 :] if base else path
        return prefix.rstrip("/") + "/" + rest if prefix else rest

    def lookup(self, operand: str, shown: str | None = None) -> BarecatEntryInfo:
        """The entry an operand names; a missing one is reported as ``shown`` (the operand)."""
        try:
            return self.bc.stat(self.resolve(operand))
        except FileNotFoundError:
            raise ShellError(f"{shown or operand}: No such file or directory") from None

    def file_info(self, operand: str) -> BarecatFileInfo:
        info = self.lookup(operand)
        if not isinstance(info, BarecatFileInfo):
            raise ShellError(f"{operand}: Is a directory")
        return info

    def glob(self, pattern: str) -> list[str]:
        """Archive paths matching a glob (``**`` recursive), sorted; no match is an error."""
        anchored = pattern if pattern.startswith("/") else f"/{self.cwd}/{pattern}"
        matches = self.bc.glob_entries(posixpath.normpath(anchored).strip("/"), recursive=True)
        if not matches:
            raise ShellError(f"{pattern}: No match")
        return sorted(matches, key=bytewise)

    def expand(self, operands: Sequence[str]) -> list[tuple[str, str, bool]]:
        """(shown name, archive path, came from a glob) for operands, globs expanded.

        A glob without matches is reported (and the command counts as failed) but the
        other operands still run, as in a shell without ``failglob``.
        """
        result: list[tuple[str, str, bool]] = []
        for operand in operands:
            if not has_magic(operand):
                result.append((operand, self.resolve(operand), False))
                continue
            try:
                result += [(self.display(m, operand), m, True) for m in self.glob(operand)]
            except ShellError as e:
                self.fail(str(e))
        return result

    def expand_shown(self, operands: Sequence[str]) -> list[str]:
        return [shown for shown, _, _ in self.expand(operands)]

    def local_path(self, operand: str) -> str:
        """A local path against the shell's local directory (``lcd`` never chdirs the process)."""
        return os.path.normpath(os.path.join(self.local_cwd, os.path.expanduser(operand)))

    def require_writable(self) -> None:
        if self.bc.readonly:
            raise ShellError(
                "the archive is open read-only; reopen it with 'barecat shell -w ARCHIVE' "
                "to change it"
            )

    # -- leaving and help ----------------------------------------------------------------

    def do_exit(self, arg: str) -> bool:
        """exit: leave the shell (also quit, or Ctrl-D; .quit, .ls etc. work as in sqlite3)."""
        return True

    do_quit = do_exit

    def do_EOF(self, arg: str) -> bool:  # noqa: N802 - the name cmd.Cmd dispatches EOF to
        """Leave the shell at end of input."""
        if self.use_rawinput:
            self.write("\n")
        return True

    def do_help(self, arg: str) -> None:
        """help [COMMAND]: list the commands, or show how to use one."""
        if arg:
            method = getattr(self, f"do_{arg}", None)
            if method is None or not method.__doc__:
                raise ShellError(f"{arg}: no such command")
            first, _, rest = method.__doc__.partition("\n")
            self.write(first + "\n" + textwrap.dedent(rest).strip("\n") + "\n")
            return
        for name in self.get_names():
            if name.startswith("do_") and name not in ("do_EOF", "do_quit"):
                doc = getattr(self, name).__doc__ or name[3:]
                self.write(doc.split("\n")[0] + "\n")

    # -- tab completion ------------------------------------------------------------------

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        """Complete archive paths, or local paths where the command expects a local one."""
        words = line[:begidx].split()
        if not words:
            return []
        command = words[0]
        operand_number = len([w for w in words[1:] if not w.startswith("-")])
        if command in self.local_operands:
            positions = self.local_operands[command]
            if positions is None or operand_number in positions:
                return self.local_completions(text, dirs_only=command in ("lcd", "lls"))
        if command not in self.archive_path_commands:
            return []
        return self.archive_completions(text, dirs_only=command == "cd")

    def archive_completions(self, text: str, dirs_only: bool) -> list[str]:
        head, prefix = text[: text.rfind("/") + 1], text[text.rfind("/") + 1 :]
        try:
            entries = [(e.name, e.isdir()) for e in self.bc.scandir(self.resolve(head or "."))]
        except (BarecatError, OSError, ValueError):
            return []
        return _completions(head, prefix, entries, dirs_only)

    def local_completions(self, text: str, dirs_only: bool) -> list[str]:
        head, prefix = text[: text.rfind("/") + 1], text[text.rfind("/") + 1 :]
        try:
            with os.scandir(self.local_path(head or ".")) as it:
                entries = [(e.name, e.is_dir()) for e in it]
        except OSError:
            return []
        return _completions(head, prefix, entries, dirs_only)


def _completions(
    head: str, prefix: str, entries: list[tuple[str, bool]], dirs_only: bool
) -> list[str]:
    """Candidates keep what was typed before the last '/'; directories end in '/'."""
    return sorted(
        (
            head + name + ("/" if is_dir else "")
            for name, is_dir in entries
            if name.startswith(prefix) and (is_dir or not dirs_only)
        ),
        key=bytewise,
    )
