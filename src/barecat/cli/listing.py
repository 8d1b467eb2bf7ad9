"""``barecat list``/``ls``, ``find`` and ``tree``: looking inside an archive from the shell.

Output mirrors the Unix tools on the extracted tree (``ls -p``/``ls -l``, GNU ``find``,
``tree``) with names sorted bytewise, so it diffs cleanly against them; paths are
archive paths, the root shown as '.'. Symbolic-link entries show their target as
``ls -l`` and ``tree`` do. A path that is not in the archive is reported on stderr and
makes the exit code 1, the other paths are still listed. On a terminal, names are escaped
as each of these tools escapes them there (:mod:`barecat.cli.names`), so none can talk to
the terminal; in a pipe they go out as they are.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

from barecat.archive import Barecat
from barecat.cli.entry_format import bytewise, long_listing
from barecat.cli.names import Shown, as_is, ls_quoted, octal_escaped, question_marks, shown_on
from barecat.cli.parsing import Declared, add_archive_argument, registering
from barecat.cli.sealing import open_archive, unlock_if_at_hand
from barecat.cli.terminal import describe, error
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import FileNotFoundBarecatError
from barecat.glob import has_magic
from barecat.paths import basename, normalize, parent

_SIZE_FILTER = re.compile(r"^([+-]?)(\d+)([ckMGT]?)$")
_SIZE_UNITS = {"": 1, "c": 1, "k": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


LIST_EXAMPLES = """
barecat ls photos.barecat                  # the root
barecat ls -l photos.barecat train/cat/
barecat ls photos.barecat 'train/*/001.jpg'
barecat ls -R photos.barecat               # every file path
"""
FIND_EXAMPLES = """
barecat find photos.barecat -name '*.jpg'
barecat find photos.barecat train/ -type d -maxdepth 1
barecat find photos.barecat -size +1M -type f -print0 | xargs -0 echo
"""
TREE_EXAMPLES = """
barecat tree photos.barecat
barecat tree -L 2 -d photos.barecat train/
"""


def _list_arguments(ls: argparse.ArgumentParser) -> None:
    add_archive_argument(ls)
    ls.add_argument("paths", nargs="*", help="Directories, files or glob patterns (default: root)")
    ls.add_argument(
        "-l", "--long", action="store_true", help="Long format: mode, owner, size, time"
    )
    ls.add_argument("-R", "--recursive", action="store_true", help="Every file below, full paths")
    ls.add_argument("--jsonl", action="store_true", help="One JSON object per entry")


def _find_arguments(find: argparse.ArgumentParser) -> None:
    add_archive_argument(find)
    find.add_argument("path", nargs="?", default="", help="Where to start (default: root)")
    find.add_argument("-name", metavar="PATTERN", help="Last component matches glob PATTERN")
    find.add_argument(
        "-path", "-wholename", dest="path_pattern", metavar="PATTERN",
        help="Whole path matches PATTERN ('*' also matches '/')",
    )  # fmt: skip
    find.add_argument(
        "-type", choices=["f", "d", "l"], help="f: regular file, d: directory, l: symbolic link"
    )
    find.add_argument(
        "-size", metavar="[+-]N[ckMGT]",
        help="Size (bytes; k/M/G/T = KiB/MiB/...; directories: their whole tree) more than "
        "(+N), less than (-N) or exactly N",
    )  # fmt: skip
    find.add_argument("-maxdepth", type=int, metavar="N", help="Descend at most N levels")
    find.add_argument("-print0", action="store_true", help="End each path with NUL, not newline")


def _tree_arguments(tree: argparse.ArgumentParser) -> None:
    add_archive_argument(tree)
    tree.add_argument("path", nargs="?", default="", help="Where to start (default: root)")
    tree.add_argument("-L", "--level", type=int, metavar="N", help="Descend at most N levels")
    tree.add_argument("-d", "--dirs-only", action="store_true", help="Directories only")


# -- shared traversal ----------------------------------------------------------------------


def name_key(info: BarecatEntryInfo) -> bytes:
    """Sort key putting names in ``LC_ALL=C ls`` order (bytewise)."""
    return bytewise(info.name)


def children(bc: Barecat, path: str) -> list[BarecatEntryInfo]:
    """A directory's entries, sorted by name."""
    return sorted(bc.scandir(path), key=name_key)


def display(path: str) -> str:
    return path or "."


ENCRYPTED_TARGET = "(encrypted)"
"""What a link points to, as listings show it while an encrypted archive is locked."""


def link_target(bc: Barecat, info: BarecatEntryInfo) -> str | None:
    if isinstance(info, BarecatFileInfo) and info.is_symlink_entry:
        if not bc.unlocked:  # listings never prompt for a passphrase
            return ENCRYPTED_TARGET
        return os.fsdecode(bc.read(info))
    return None


def is_link(info: BarecatEntryInfo) -> bool:
    return isinstance(info, BarecatFileInfo) and info.is_symlink_entry


# -- ls -------------------------------------------------------------------------------------


def long_lines(
    bc: Barecat, entries: list[tuple[BarecatEntryInfo, str]], shown: Shown = as_is
) -> list[str]:
    """``ls -l`` lines for (entry, name to show), links with their targets."""
    pairs = [(name, info) for info, name in entries]
    return long_listing(pairs, link_target=lambda info: link_target(bc, info), shown=shown)


def _json_line(info: BarecatEntryInfo) -> str:
    record: dict[str, object] = {"type": "dir" if isinstance(info, BarecatDirInfo) else "file"}
    if is_link(info):
        record["type"] = "symlink"
    record.update(info.asdict())
    return json.dumps(record)


def _short(info: BarecatEntryInfo, name: str) -> str:
    return name + "/" if isinstance(info, BarecatDirInfo) else name


def _print_entries(
    bc: Barecat, entries: list[tuple[BarecatEntryInfo, str]], args: argparse.Namespace, out: TextIO
) -> None:
    shown = shown_on(out, ls_quoted)
    if args.jsonl:
        out.writelines(_json_line(info) + "\n" for info, _ in entries)
    elif args.long:
        out.writelines(line + "\n" for line in long_lines(bc, entries, shown))
    else:
        out.writelines(_short(info, shown(name)) + "\n" for info, name in entries)


def _total_blocks(entries: Iterable[BarecatEntryInfo]) -> int:
    """GNU ``ls -l``'s ``total``: the space the listed entries take, in 1K blocks, each
    rounded up. In an archive only files' bytes take space: a directory (its contents are
    not counted, as in ``ls``) and a link (like a fast symlink) take none."""
    return sum(
        -(-(e.size or 0) // 1024)
        for e in entries
        if isinstance(e, BarecatFileInfo) and not is_link(e)
    )


def _files_below(bc: Barecat, path: str) -> Iterator[BarecatFileInfo]:
    for info in children(bc, path):
        if isinstance(info, BarecatDirInfo):
            yield from _files_below(bc, info.path)
        else:
            assert isinstance(info, BarecatFileInfo)
            yield info


def _expand(bc: Barecat, arg: str) -> list[BarecatEntryInfo]:
    if has_magic(arg):
        matches = bc.glob_entries(arg, recursive=True)
        if not matches:
            raise FileNotFoundBarecatError(arg, "No match for pattern")
        return [bc.stat(m) for m in matches]
    return [bc.stat(arg)]


def run_list(args: argparse.Namespace) -> int:
    out = sys.stdout
    status = 0
    with open_archive(args.archive, args) as bc:
        unlock_if_at_hand(bc, args)
        targets: list[BarecatEntryInfo] = []
        for arg in args.paths or [""]:
            try:
                targets.extend(_expand(bc, arg))
            except (FileNotFoundError, ValueError) as e:
                error(describe(e), command="list")
                status = 1
        singles = [t for t in targets if not isinstance(t, BarecatDirInfo)]
        dirs = [t for t in targets if isinstance(t, BarecatDirInfo)]
        if args.recursive:
            singles += [f for d in dirs for f in _files_below(bc, d.path)]
            dirs = []
        if not args.paths or (len(args.paths) == 1 and not has_magic(args.paths[0])):
            _print_entries(bc, [(t, t.path) for t in singles], args, out)
        else:  # several arguments or a pattern: matches are shown by their paths
            matched = sorted((*singles, *dirs), key=lambda t: t.path)
            _print_entries(bc, [(t, t.path) for t in matched], args, out)
            dirs = []
        for i, d in enumerate(dirs):
            entries = [(e, e.name) for e in children(bc, d.path)]
            if args.long and not args.jsonl:
                out.write(f"total {_total_blocks(e for e, _ in entries)}\n")
            _print_entries(bc, entries, args, out)
            if i < len(dirs) - 1:
                out.write("\n")
    return status


# -- find -----------------------------------------------------------------------------------


def _size_test(spec: str) -> tuple[str, int]:
    m = _SIZE_FILTER.match(spec)
    if m is None:
        raise ValueError(f"invalid -size {spec!r} (expected e.g. +100k, -1M, 512)")
    return m.group(1), int(m.group(2)) * _SIZE_UNITS[m.group(3)]


def _size_matches(n: int, op: str, limit: int) -> bool:
    return n > limit if op == "+" else n < limit if op == "-" else n == limit


def _entry_size(info: BarecatEntryInfo) -> int:
    if isinstance(info, BarecatDirInfo):
        return info.size_tree or 0
    assert isinstance(info, BarecatFileInfo)
    return info.size or 0


def _preorder(
    bc: Barecat, info: BarecatEntryInfo, depth: int, maxdepth: int | None
) -> Iterator[tuple[BarecatEntryInfo, int]]:
    yield info, depth
    if isinstance(info, BarecatDirInfo) and (maxdepth is None or depth < maxdepth):
        for child in children(bc, info.path):
            yield from _preorder(bc, child, depth + 1, maxdepth)


def print_find(
    bc: Barecat,
    start: str,
    out: TextIO,
    *,
    name: str | None = None,
    path: str | None = None,
    type: str | None = None,
    size: str | None = None,
    maxdepth: int | None = None,
    print0: bool = False,
) -> None:
    """Print the entries at and below ``start`` that pass every given test, like GNU find."""
    tests: list[Callable[[BarecatEntryInfo, str], bool]] = []
    if name is not None:
        tests.append(lambda info, shown: fnmatch.fnmatchcase(basename(shown), name))
    if path is not None:
        tests.append(lambda info, shown: fnmatch.fnmatchcase(shown, path))
    if type is not None:
        tests.append(lambda info, shown: _kind(info) == type)
    if size is not None:
        op, limit = _size_test(size)
        tests.append(lambda info, shown: _size_matches(_entry_size(info), op, limit))
    end = "\0" if print0 else "\n"
    escaped = as_is if print0 else shown_on(out, question_marks)
    for info, _ in _preorder(bc, bc.stat(start), 0, maxdepth):
        shown = display(info.path)
        if all(test(info, shown) for test in tests):
            out.write(escaped(shown) + end)


def _kind(info: BarecatEntryInfo) -> str:
    return "d" if isinstance(info, BarecatDirInfo) else "l" if is_link(info) else "f"


def run_find(args: argparse.Namespace) -> int:
    with open_archive(args.archive, args) as bc:
        unlock_if_at_hand(bc, args)
        print_find(
            bc,
            args.path,
            sys.stdout,
            name=args.name,
            path=args.path_pattern,
            type=args.type,
            size=args.size,
            maxdepth=args.maxdepth,
            print0=args.print0,
        )
    return 0


# -- tree -----------------------------------------------------------------------------------


def _points_to_dir(bc: Barecat, info: BarecatEntryInfo, target: str | None) -> bool:
    if target is None or target.startswith("/"):
        return False
    try:
        return bc.isdir(normalize(f"{parent(info.path)}/{target}"))
    except ValueError:
        return False


def print_tree(
    bc: Barecat,
    path: str,
    out: TextIO,
    *,
    level: int | None = None,
    dirs_only: bool = False,
) -> None:
    """Draw the tree below ``path`` with ``tree``'s lines and closing count."""
    root = bc.stat(path)
    shown = shown_on(out, octal_escaped)
    out.write(shown(display(root.path)) + "\n")
    counts = [0, 0] if isinstance(root, BarecatDirInfo) else [0, 1]
    drawing = _Drawing(bc, level, dirs_only, out, counts, shown)
    if isinstance(root, BarecatDirInfo) and drawing.draw(root.path, "", 1):
        counts[0] += 1  # tree 2.x counts the starting directory when it lists anything in it
    ndirs, nfiles = counts
    summary = f"{ndirs} director{'y' if ndirs == 1 else 'ies'}"
    if not dirs_only:
        summary += f", {nfiles} file{'' if nfiles == 1 else 's'}"
    out.write(f"\n{summary}\n")


@dataclass
class _Drawing:
    """What every level of a tree drawing shares."""

    bc: Barecat
    level: int | None
    dirs_only: bool
    out: TextIO
    counts: list[int]
    shown: Shown

    def draw(self, path: str, indent: str, depth: int) -> int:
        """Draw one directory's entries (and below); returns how many were drawn here."""
        bc, shown = self.bc, self.shown
        drawn = []
        for info in children(bc, path):
            target = link_target(bc, info)
            is_dir = isinstance(info, BarecatDirInfo) or _points_to_dir(bc, info, target)
            if is_dir or not self.dirs_only:
                drawn.append((info, target, is_dir))
        for i, (info, target, is_dir) in enumerate(drawn):
            last = i == len(drawn) - 1
            label = shown(info.name) if target is None else f"{shown(info.name)} -> {shown(target)}"
            self.out.write(f"{indent}{'└── ' if last else '├── '}{label}\n")
            self.counts[0 if is_dir else 1] += 1
            if isinstance(info, BarecatDirInfo) and (self.level is None or depth < self.level):
                self.draw(info.path, indent + ("    " if last else "│\u00a0\u00a0 "), depth + 1)
        return len(drawn)


def run_tree(args: argparse.Namespace) -> int:
    with open_archive(args.archive, args) as bc:
        unlock_if_at_hand(bc, args)
        print_tree(bc, args.path, sys.stdout, level=args.level, dirs_only=args.dirs_only)
    return 0


register = registering(
    Declared("list", run_list, _list_arguments, LIST_EXAMPLES),
    Declared("find", run_find, _find_arguments, FIND_EXAMPLES),
    Declared("tree", run_tree, _tree_arguments, TREE_EXAMPLES),
)
