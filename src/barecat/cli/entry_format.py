"""How entries are shown to people: ``ls -l`` rows, ``stat`` fields, sort order.

Shared by ``barecat ls`` and the interactive shell, so both print what GNU ``ls -l`` prints
for the extracted files (columns, time format, owner names from the local user
database). Pure functions from info records to text; imports only the entries module and
the terminal and name helpers.
"""

from __future__ import annotations

import datetime
import functools
import grp
import pwd
import stat
import time
from collections.abc import Callable, Sequence

from barecat.cli.names import Shown, as_is
from barecat.cli.terminal import human_size
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo

_SIX_MONTHS_S = 183 * 24 * 3600


def bytewise(name: str) -> bytes:
    """Sort key matching ``LC_ALL=C ls``: by UTF-8 bytes, not by code point or locale."""
    return name.encode("utf-8", "surrogateescape")


def full_mode(info: BarecatEntryInfo) -> int:
    """The entry's mode with its file-type bits, defaulting as extraction would (644/755)."""
    is_dir = isinstance(info, BarecatDirInfo)
    mode = info.mode if info.mode is not None else (0o755 if is_dir else 0o644)
    if stat.S_IFMT(mode) == 0:
        mode |= stat.S_IFDIR if is_dir else stat.S_IFREG
    return mode


@functools.lru_cache(maxsize=256)
def user_name(uid: int | None) -> str:
    return _name_of(uid, lambda known: pwd.getpwuid(known).pw_name)


@functools.lru_cache(maxsize=256)
def group_name(gid: int | None) -> str:
    return _name_of(gid, lambda known: grp.getgrgid(known).gr_name)


def _name_of(number: int | None, lookup: Callable[[int], str]) -> str:
    """The name of a user or group id as ``ls -l`` shows it: '-' for none, the number
    itself when this system has no name for it."""
    if number is None:
        return "-"
    try:
        return lookup(number)
    except KeyError:
        return str(number)


def ls_time(mtime_ns: int | None, now: float | None = None) -> str:
    """'Mon DD HH:MM' within the past six months, else 'Mon DD  YYYY' (also for times in
    the future), as GNU ``ls -l`` does."""
    if mtime_ns is None:
        return "-"
    seconds = mtime_ns / 1e9
    when = datetime.datetime.fromtimestamp(seconds)
    if 0 <= (time.time() if now is None else now) - seconds < _SIX_MONTHS_S:
        return f"{when:%b} {when.day:>2} {when:%H:%M}"
    return f"{when:%b} {when.day:>2}  {when.year}"


LinkTarget = Callable[[BarecatEntryInfo], "str | None"]


def long_listing(
    entries: Sequence[tuple[str, BarecatEntryInfo]],
    human: bool = False,
    link_target: LinkTarget | None = None,
    shown: Shown = as_is,
) -> list[str]:
    """``ls -l`` lines for (name, info) pairs, columns aligned across the whole block.

    Directories show the size of their whole tree (the index keeps it), which tells more
    than a block size would; their link count is 2 plus their subdirectories, as on disk.
    ``link_target`` reads a link entry's target, shown as ``name -> target``. ``shown``
    quotes names and targets (on a terminal); when it quotes any name of the block, the
    names it leaves as they are get a space before them, as GNU ``ls -l`` aligns them.
    """
    names = [(name, shown(name)) for name, _ in entries]
    indent = " " if any(name != quoted for name, quoted in names) else ""
    rows = []
    for (name, quoted), (_, info) in zip(names, entries, strict=True):
        target = link_target(info) if link_target is not None else None
        label = quoted if quoted != name else indent + name
        rows.append(
            _long_row(label if target is None else f"{label} -> {shown(target)}", info, human)
        )
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    return [
        f"{mode} {links:>{widths[1]}} {user:<{widths[2]}} {group:<{widths[3]}} "
        f"{size:>{widths[4]}} {date:>{widths[5]}} {name}"
        for mode, links, user, group, size, date, name in rows
    ]


def _long_row(name: str, info: BarecatEntryInfo, human: bool) -> tuple[str, ...]:
    if isinstance(info, BarecatDirInfo):
        links, size = 2 + (info.num_subdirs or 0), info.size_tree or 0
    else:
        links, size = 1, (info.size if isinstance(info, BarecatFileInfo) else 0) or 0
    return (
        stat.filemode(full_mode(info)),
        str(links),
        user_name(info.uid),
        group_name(info.gid),
        human_size(size) if human else str(size),
        ls_time(info.mtime_ns),
        name,
    )


def _count(n: int | None, noun: str) -> str:
    return f"{n or 0} {noun}{'' if n == 1 else 's'}"


def size_text(size: int) -> str:
    return f"{size} bytes" + (f" ({human_size(size)})" if size >= 1024 else "")


def mtime_text(mtime_ns: int | None) -> str:
    """Local time with nanoseconds and UTC offset, the way ``stat`` prints it."""
    if mtime_ns is None:
        return "-"
    when = datetime.datetime.fromtimestamp(mtime_ns // 10**9).astimezone()
    return f"{when:%Y-%m-%d %H:%M:%S}.{mtime_ns % 10**9:09d} {when:%z}"


def stat_fields(info: BarecatEntryInfo) -> list[tuple[str, str]]:
    """Every stored fact about an entry as (label, value), for ``stat``."""
    mode = full_mode(info)
    fields = [("Dir" if isinstance(info, BarecatDirInfo) else "File", "/" + info.path)]
    if isinstance(info, BarecatFileInfo):
        crc = "-" if info.crc32c is None else f"0x{info.crc32c:08x}"
        fields += [
            ("Type", "symbolic link" if info.is_symlink_entry else "regular file"),
            ("Size", size_text(info.size or 0)),
            ("CRC32C", crc),
            ("Shard", str(info.shard)),
            ("Offset", str(info.offset)),
        ]
    elif isinstance(info, BarecatDirInfo):
        fields += [
            ("Type", "directory"),
            ("Subdirs", str(info.num_subdirs or 0)),
            ("Files", f"{info.num_files or 0} directly inside"),
            ("Tree", f"{_count(info.num_files_tree, 'file')}, {size_text(info.size_tree or 0)}"),
        ]
    return [
        *fields,
        ("Mode", f"{stat.S_IMODE(mode):04o} ({stat.filemode(mode)})"),
        ("Uid", "-" if info.uid is None else f"{info.uid} ({user_name(info.uid)})"),
        ("Gid", "-" if info.gid is None else f"{info.gid} ({group_name(info.gid)})"),
        ("Modified", mtime_text(info.mtime_ns)),
    ]


def aligned_fields(fields: Sequence[tuple[str, str]]) -> list[str]:
    """'label: value' lines with the labels right-aligned, as ``stat`` aligns them."""
    width = max((len(key) for key, _ in fields), default=0)
    return [f"{key:>{width}}: {value}" for key, value in fields]
