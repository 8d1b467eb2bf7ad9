"""``barecat shell``: explore (and with ``-w`` change) one archive like a filesystem.

Owns the subcommand and the shell's commands: navigating (cd, pwd, ls), reading (cat,
head, stat, info, find, du, tree), copying out (get, mget) and the local side (lcd, lpwd,
lls, and ``!`` to run a local command); those changing the archive (put, mput, rm, mv,
mkdir) it has from ``shell_edits``. The interpreter they run in is ``shell_engine``; how
entries are shown is ``entry_format``; tree, find and du are drawn by ``listing`` and
``du`` so they match the top-level commands; copies to disk go through ``transfer``'s
safe extraction. Everything done to the archive goes through the public ``Barecat`` API.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from typing import ClassVar, TextIO, cast

from barecat.cli import du, listing
from barecat.cli.entry_format import (
    aligned_fields,
    bytewise,
    long_listing,
    size_text,
    stat_fields,
)
from barecat.cli.names import ls_quoted, shown_on
from barecat.cli.parsing import Declared, add_archive_argument, registering
from barecat.cli.sealing import open_archive
from barecat.cli.shell_edits import ShellEdits
from barecat.cli.shell_engine import ShellError, has_magic, natural_number
from barecat.cli.terminal import failure_line, human_size
from barecat.entries import SHARD_SIZE_UNLIMITED, BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.layout import archive_exists, archive_not_found
from barecat.paths import is_within
from barecat.transfer import ExtractResult, extract_to_directory
from barecat.transfer.extraction import DirectoryWriter

ABOUT = (
    "Explore an archive with cd, ls, cat, stat, find, tree, du and get;\n"
    "with -w, change it with put, mput, rm, mv and mkdir. Type 'help' inside for more."
)
EXAMPLES = """
barecat shell photos.barecat                    # interactive, with tab completion
barecat shell -c 'cd 2024; ls -l' photos.barecat
barecat shell -c 'get 2024/a.jpg /tmp/a.jpg' photos.barecat
barecat shell -w -c 'mkdir new; put notes.txt new/' photos.barecat
echo 'find -name "*.jpg"' | barecat shell photos.barecat
"""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--cmd",
        dest="shell_cmd",
        metavar="CMD",
        help="run CMD (several may be separated by ';') and exit; exit status 1 if any failed",
    )
    parser.add_argument(
        "-w",
        "--write",
        action="store_true",
        help="open the archive writable (enables put, mput, rm, mv, mkdir)",
    )
    add_archive_argument(parser)


def run_shell(args: argparse.Namespace) -> int:
    """Open the archive and run one ``-c`` line, a piped script, or an interactive session."""
    if args.write and not archive_exists(args.archive):
        # Opening writable would otherwise create a new, empty archive from a typo.
        raise archive_not_found(args.archive)
    with open_archive(args.archive, args, readonly=not args.write) as bc:
        if args.shell_cmd is not None:
            shell = BarecatShell(bc)
            shell.onecmd(args.shell_cmd)
        elif sys.stdin.isatty():
            shell = BarecatShell(bc)
            mode = "writable" if args.write else "read-only"
            shell.loop(f"barecat shell on {args.archive} ({mode}); 'help' lists commands.")
            return 0
        else:
            shell = BarecatShell(bc, stdin=sys.stdin, show_prompt=False)
            shell.loop()
    return 1 if shell.failed else 0


class BarecatShell(ShellEdits):
    """The commands of ``barecat shell``; each ``do_*`` docstring is its help text."""

    archive_path_commands = frozenset(
        {"ls", "cd", "cat", "head", "stat", "info", "find", "du", "tree", "get", "mget"}
        | {"put", "rm", "mv", "mkdir"}
    )
    local_operands: ClassVar[Mapping[str, frozenset[int] | None]] = {
        "lcd": None,
        "lls": None,
        "mput": None,
        "shell": None,
        "put": frozenset({0}),
        "get": frozenset({1}),
    }
    previous_cwd = ""
    """Where ``cd -`` goes back to."""

    # -- navigating ----------------------------------------------------------------------

    def do_cd(self, arg: str) -> None:
        """cd [DIR]: change the archive directory ('/' or nothing: the root; '-': the last)."""
        _, operands = self.parse(arg, "")
        if len(operands) > 1:
            raise ShellError("too many arguments")
        operand = operands[0] if operands else "/"
        if operand == "-":
            target = self.previous_cwd
        else:
            target = self.resolve(operand)
            if not self.bc.isdir(target):
                if self.bc.exists(target):
                    raise ShellError(f"{operand}: Not a directory")
                raise ShellError(f"{operand}: No such file or directory")
        self.previous_cwd, self.cwd = self.cwd, target
        self.update_prompt()

    def do_pwd(self, arg: str) -> None:
        """pwd: print the current archive directory."""
        self.write(f"/{self.cwd}\n")

    def do_ls(self, arg: str) -> None:
        """ls [-l] [-h] [PATH|GLOB...]: list directories, files, or what globs match.

        Names are sorted bytewise; directories end in '/'. -l: long format (mode, links,
        owner, group, size, time, name) after a 'total' line giving the size of each listed
        directory's tree; a directory's size is that of its whole tree.
        -h: human-readable sizes.
        """
        opts, operands = self.parse(arg, "lh")
        long, human = "-l" in opts, "-h" in opts
        loose: list[tuple[str, BarecatEntryInfo]] = []
        directories: list[tuple[str, BarecatDirInfo]] = []
        for shown, path, globbed in self.expand(operands or ["."]):
            try:
                info = self.bc.stat(path)
            except FileNotFoundError:
                self.fail(f"{shown}: No such file or directory")
                continue
            if isinstance(info, BarecatDirInfo) and not globbed:
                directories.append((shown, info))
            else:
                loose.append((shown, info))
        self._print_entries(loose, long, human)
        headers = len(loose) + len(directories) > 1
        quoted = shown_on(self.stdout, ls_quoted)
        for number, (shown, directory) in enumerate(directories):
            if headers:
                self.write(("\n" if loose or number else "") + f"{quoted(shown)}:\n")
            if long:
                total = directory.size_tree or 0
                self.write(f"total {human_size(total) if human else total}\n")
            entries = [(e.name, e) for e in self.bc.scandir(directory.path)]
            self._print_entries(sorted(entries, key=lambda e: bytewise(e[0])), long, human)

    def _print_entries(
        self, entries: list[tuple[str, BarecatEntryInfo]], long: bool, human: bool
    ) -> None:
        shown = shown_on(self.stdout, ls_quoted)
        if long:
            target = functools.partial(listing.link_target, self.bc)
            lines = long_listing(entries, human, target, shown)
        else:
            lines = [shown(name) + ("/" if info.isdir() else "") for name, info in entries]
        self.write("".join(line + "\n" for line in lines))

    # -- reading -------------------------------------------------------------------------

    def do_cat(self, arg: str) -> None:
        """cat PATH|GLOB...: write files' bytes to standard output."""
        _, operands = self.parse(arg, "")
        if not operands:
            raise ShellError("missing file operand")
        self.each(
            self.expand_shown(operands),
            lambda shown: self.write_bytes(self.bc.read(self.file_info(shown))),
        )

    def do_head(self, arg: str) -> None:
        """head [-n N] PATH...: print the first N lines (default 10) of files."""
        opts, operands = self.parse(arg, "n:")
        count = natural_number(opts.get("-n", "10"), "-n")
        if not operands:
            raise ShellError("missing file operand")
        expanded = self.expand_shown(operands)

        def head(shown: str) -> None:
            info = self.file_info(shown)
            if len(expanded) > 1:
                self.write(("\n" if shown != expanded[0] else "") + f"==> {shown} <==\n")
            raw = cast(io.RawIOBase, self.bc.open(info, "rb"))
            with io.BufferedReader(raw) as f:
                self.write_bytes(b"".join(f.readline() for _ in range(count)))

        self.each(expanded, head)

    def do_stat(self, arg: str) -> None:
        """stat [PATH|GLOB...]: every stored fact about files or directories (default: cwd).

        Files: size, CRC32C, shard and offset; directories: subdirectory and file counts
        and the size of the whole tree; both: mode, owner, group, modification time.
        """
        _, operands = self.parse(arg, "")
        expanded = self.expand_shown(operands or ["."])

        def show(shown: str) -> None:
            fields = stat_fields(self.lookup(shown))
            self.write("" if shown == expanded[0] else "\n")  # a blank line between entries
            self._print_fields(fields)

        self.each(expanded, show)

    def do_info(self, arg: str) -> None:
        """info [PATH...]: like stat with a path; without one, a summary of the archive."""
        if shlex.split(arg):
            self.do_stat(arg)
            return
        bc = self.bc
        limit = bc.shard_size_limit
        self._print_fields(
            [
                ("Archive", bc.path),
                ("Open", "read-only" if bc.readonly else "writable"),
                ("Files", str(bc.num_files)),
                ("Dirs", str(bc.num_dirs)),
                ("Size", size_text(bc.total_size)),
                ("Shards", str(bc.sharder.num_shards)),
                ("Shard limit", "unlimited" if limit >= SHARD_SIZE_UNLIMITED else size_text(limit)),
            ]
        )

    def _print_fields(self, fields: list[tuple[str, str]]) -> None:
        self.write("".join(line + "\n" for line in aligned_fields(fields)))

    def do_find(self, arg: str) -> None:
        """find [DIR] [PATTERN] [TESTS]: print the paths at and under DIR that pass every test.

        DIR defaults to the current directory; paths are printed from the archive root.
        A bare PATTERN that is not a directory filters names, like -name. Tests:
        -name PAT, -path PAT, -type f|d|l, -size [+-]N[kMG], -maxdepth N.
        """
        start, options = self._find_arguments(shlex.split(arg))
        if options.get("-type") not in (None, "f", "d", "l"):
            raise ShellError("-type takes f, d or l")
        maxdepth = options.get("-maxdepth")
        listing.print_find(
            self.bc,
            start,
            self.stdout,
            name=options.get("-name"),
            path=options.get("-path"),
            type=options.get("-type"),
            size=options.get("-size"),
            maxdepth=None if maxdepth is None else natural_number(maxdepth, "-maxdepth"),
        )

    def _find_arguments(self, words: list[str]) -> tuple[str, dict[str, str]]:
        """The start directory and the tests (``-name`` etc.) of a find command line."""
        start: str | None = None
        options: dict[str, str] = {}
        while words:
            word = words.pop(0)
            if word in ("-name", "-path", "-type", "-size", "-maxdepth"):
                if not words:
                    raise ShellError(f"missing argument to {word}")
                options[word] = words.pop(0)
            elif word.startswith("-"):
                raise ShellError(f"unknown predicate {word!r}")
            elif start is None and not has_magic(word) and self.bc.isdir(self.resolve(word)):
                start = self.resolve(word)
            elif "-name" not in options:
                options["-name"] = word
            else:
                raise ShellError(f"{word}: No such directory")
        return (self.cwd if start is None else start), options

    def do_du(self, arg: str) -> None:
        """du [-a] [-s] [-h] [-d N] [PATH]: sizes of a directory and everything below it.

        -a: files too; -s: only the total; -h: human-readable; -d N: at most N levels.
        """
        opts, operands = self.parse(arg, "ashd:")
        depth = natural_number(opts["-d"], "-d") if "-d" in opts else None
        du.print_du(
            self.bc,
            self._single_path(operands),
            self.stdout,
            all_files="-a" in opts,
            summarize="-s" in opts,
            human="-h" in opts,
            max_depth=depth,
        )

    def do_tree(self, arg: str) -> None:
        """tree [-d] [-L LEVEL] [PATH]: draw the directory tree (-d: directories only)."""
        opts, operands = self.parse(arg, "dL:")
        level = natural_number(opts["-L"], "-L") if "-L" in opts else None
        listing.print_tree(
            self.bc, self._single_path(operands), self.stdout, level=level, dirs_only="-d" in opts
        )

    def _single_path(self, operands: list[str]) -> str:
        """The one existing path operand of du/tree (default: the current directory)."""
        if len(operands) > 1:
            raise ShellError("too many arguments")
        return self.lookup(operands[0] if operands else ".").path

    # -- copying out -----------------------------------------------------------------------

    def do_get(self, arg: str) -> None:
        """get PATH [LOCAL]: copy a file, or a directory with all it holds, to the local disk.

        It goes to LOCAL (into it if that is an existing directory), else into the local
        directory (see lcd) under its own name, with the stored permissions and
        modification times. Each file is CRC-checked before it is written.
        """
        _, operands = self.parse(arg, "")
        if not 1 <= len(operands) <= 2:
            raise ShellError("usage: get PATH [LOCAL]")
        info = self.lookup(operands[0])
        target = self.local_path(operands[1] if len(operands) == 2 else ".")
        if os.path.isdir(target):
            target = os.path.join(target, info.name)
        if isinstance(info, BarecatFileInfo):
            self._write_local(os.path.dirname(target), [(info, os.path.basename(target))])
            return
        result = extract_to_directory(self.bc, target, relative_to=info.path)
        self._report(result, target)

    def do_mget(self, arg: str) -> None:
        """mget [-d] PATH|GLOB... [LOCALDIR]: copy many files to the local disk.

        They go into LOCALDIR (the last of several operands, if it is an existing local
        directory and names nothing in the archive), else into the local directory (see
        lcd), under their own names; two matches with the same name are an error, not an
        overwrite. -d: keep their paths relative to the current archive directory instead.
        '**' matches at any depth: 'mget "**/*.jpg"' copies every .jpg below here.
        """
        opts, operands = self.parse(arg, "d")
        if not operands:
            raise ShellError("missing operand")
        root = self.local_cwd
        last = operands[-1]
        if (
            len(operands) > 1
            and not has_magic(last)
            and not self.bc.exists(self.resolve(last))
            and os.path.isdir(self.local_path(last))
        ):
            root = self.local_path(last)
            operands = operands[:-1]
        files: list[tuple[BarecatFileInfo, str]] = []
        taken: dict[str, str] = {}
        for shown, path, globbed in self.expand(operands):
            try:
                info = self.lookup("/" + path, shown)
                if isinstance(info, BarecatFileInfo):
                    files.append((info, self._mget_name(info, taken, "-d" in opts)))
                elif not globbed:  # '**' matches directories too; their files are matched
                    raise ShellError(f"{shown}: Is a directory (use: get {shown})")
            except ShellError as e:
                self.fail(str(e))
        self._write_local(root, files, self.cwd if "-d" in opts else "")

    def _mget_name(self, info: BarecatFileInfo, taken: dict[str, str], keep_dirs: bool) -> str:
        """Where mget writes a file: its path (-d: kept below the current directory) as
        DirectoryWriter takes it; a name another match already took is an error."""
        if keep_dirs and not is_within(info.path, self.cwd):
            raise ShellError(
                f"/{info.path}: outside the current directory (-d keeps paths below it)"
            )
        name = info.path if keep_dirs else info.name
        if name in taken:
            raise ShellError(f"/{info.path}: its name is taken by /{taken[name]} (use mget -d)")
        taken[name] = info.path
        return name

    def _write_local(
        self, root: str, files: list[tuple[BarecatFileInfo, str]], base: str = ""
    ) -> None:
        """Write archive files below the local directory ``root``, each to where it is paired
        with: a path relative to the archive directory ``base``. Links are made last and
        none pointing outside ``root`` (as in 'barecat extract'); failures are reported."""
        writer = DirectoryWriter(self.bc, os.path.abspath(root), False, os.geteuid() == 0, base)
        os.makedirs(writer.root, exist_ok=True)
        links: list[tuple[BarecatFileInfo, str]] = []
        for info, where in files:
            try:
                dest = writer.destination(where)
            except BarecatError as e:
                writer.result.failures.append((info.path, e))
                continue
            if info.is_symlink_entry:
                links.append((info, dest))
            else:
                writer.write_entry(info, dest)
        writer.make_links(links)  # last, all together
        writer.restore_directories([])
        self._report(writer.result, root)

    def _report(self, result: ExtractResult, root: str) -> None:
        """One error line per file that was not written (the rest were)."""
        for path, exc in result.failures:
            self.fail(failure_line(path, exc))
        for path, target in result.outside_links:
            self.fail(
                f"{path}: link to {target!r} not created: it points outside {root} "
                "('barecat extract --allow-outside-links' creates it)"
            )

    # -- the local side ------------------------------------------------------------------

    def do_lcd(self, arg: str) -> None:
        """lcd [DIR]: change the local directory that get, mget, put and mput use."""
        _, operands = self.parse(arg, "")
        operand = operands[0] if operands else "~"
        target = self.local_path(operand)
        if not os.path.isdir(target):
            raise ShellError(f"{operand}: No such local directory")
        self.local_cwd = target

    def do_lpwd(self, arg: str) -> None:
        """lpwd: print the local directory."""
        self.write(self.local_cwd + "\n")

    def do_lls(self, arg: str) -> None:
        """lls [DIR]: list a local directory (default: the local directory)."""
        _, operands = self.parse(arg, "")
        with os.scandir(self.local_path(operands[0] if operands else ".")) as it:
            names = [e.name + ("/" if e.is_dir() else "") for e in it]
        self.write("".join(name + "\n" for name in sorted(names, key=bytewise)))

    def do_shell(self, arg: str) -> None:
        """!COMMAND (or shell COMMAND): run COMMAND with /bin/sh in the local directory.

        It takes the rest of the line, ';' and '|' included. Its output goes where the
        shell's does; an exit status other than 0 counts as a failed command.
        """
        if not arg.strip():
            raise ShellError("missing command (e.g. '!ls -l')")
        streams = (self.stdout, self.err)
        for stream in streams:
            stream.flush()
        out, err = (_descriptor(stream) for stream in streams)
        result = subprocess.run(
            arg,
            shell=True,
            cwd=self.local_cwd,
            # A script read from stdin is not the command's to read.
            stdin=None if self.use_rawinput else subprocess.DEVNULL,
            stdout=subprocess.PIPE if out is None else out,
            stderr=subprocess.PIPE if err is None else err,
            check=False,
        )
        if result.stdout:
            self.write_bytes(result.stdout)
        if result.stderr:
            self.err.write(result.stderr.decode(errors="replace"))
        if result.returncode < 0:
            raise ShellError(f"{arg.strip()!r} was killed by signal {-result.returncode}")
        if result.returncode:
            raise ShellError(f"{arg.strip()!r} exited with status {result.returncode}")


def _descriptor(stream: TextIO) -> int | None:
    """The file descriptor under a stream, if it has one (captured streams do not)."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


register = registering(Declared("shell", run_shell, _arguments, EXAMPLES, ABOUT))
