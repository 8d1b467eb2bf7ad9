"""Read-side SQL of the index: row decoding and checking, ordering, listings, walk, glob.

Every query here is index-assisted: listings use the ``parent`` indexes, subtree scans
are half-open ranges on the unique path indexes, and ``walk`` streams three sorted
cursors merged on the directory key instead of two queries per directory. Records are
built from rows as stored (listings show even damaged rows); what is about to address
bytes is checked first (``address_problem``, ``checked_file``), so a damaged row is an
error naming its path, never a wrong read. Imports ``entries``, ``exceptions``, ``glob``
and ``paths``; the write side lives in ``transactions.py``, ``row_edits.py``,
``tree_edits.py`` and ``index.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import DamagedEntryBarecatError
from barecat.glob import GlobPattern
from barecat.index.connection import select
from barecat.paths import join, parent, subtree_bounds

FILE_COLUMNS = "path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns"
SEALED_FILE_COLUMNS = "path, shard, offset, logical_size, crc32c, mode, uid, gid, mtime_ns, size"
"""A sealed archive's files: ``size`` is the length of the sealed bytes in the shard and
``logical_size`` the file's own; records get the latter as ``size``."""
DIR_COLUMNS = "path, num_subdirs, num_files, size_tree, num_files_tree, mode, uid, gid, mtime_ns"

WalkStep = tuple[BarecatDirInfo, list[BarecatDirInfo], list[BarecatFileInfo]]
T = TypeVar("T")
D = TypeVar("D")
C = TypeVar("C")
F = TypeVar("F")


def file_from_row(row: tuple[Any, ...]) -> BarecatFileInfo:
    """A file record straight from a row: stored paths are taken as they are.

    No re-normalization, so archives written by other tools (even with odd paths) can
    still be listed, and building records for big listings stays cheap.
    """
    f = object.__new__(BarecatFileInfo)
    if len(row) == 9:  # (no slicing: this runs once per row of every listing)
        f.path, f.shard, f.offset, f.size, f.crc32c, f.mode, f.uid, f.gid, f.mtime_ns = row
        f.sealed_size = None
    else:
        f.path, f.shard, f.offset, f.size, f.crc32c = row[:5]
        f.mode, f.uid, f.gid, f.mtime_ns, f.sealed_size = row[5:]
    return f


SIZE_TOTAL = "total(CASE WHEN typeof(size) = 'integer' THEN size END)"
"""The files' total size in SQL: ``sum(size)`` of damaged rows could overflow (an error)
or be text or infinite; this is a float exact to 8 PiB, damaged sizes left out."""
_MAX_END = (1 << 63) - 1  # SQLite's largest integer, and the largest file offset
_MAX_CRC = (1 << 32) - 1


def address_problem(shard: object, offset: object, size: object, crc: object) -> str | None:
    """What keeps a row's (shard, offset, size, crc32c) from addressing stored bytes, or
    None when nothing does: integers, none negative, the end within 2**63 - 1, the CRC32C
    absent (NULL) or 32 bits. One expression for the usual good row (the read path runs it)."""
    if (
        type(shard) is int
        and type(offset) is int
        and type(size) is int
        and shard >= 0
        and offset >= 0
        and size >= 0
        and offset + size <= _MAX_END
        and (crc is None or (type(crc) is int and 0 <= crc <= _MAX_CRC))
    ):
        return None
    for name, value in (("shard", shard), ("offset", offset), ("size", size)):
        if type(value) is not int:
            return f"{name} is {sql_kind(value)}, not an integer"
        if value < 0:
            return f"{name} is negative ({value})"
    if offset + size > _MAX_END:  # type: ignore[operator]
        return f"offset {offset} + size {size} is past the largest possible file offset"
    if type(crc) is not int:
        return f"crc32c is {sql_kind(crc)}, not an integer"
    return f"crc32c {crc} is not a 32-bit checksum"


def sql_kind(value: object) -> str:
    """How SQLite would call ``value``, with the value: "text 'abc'", "NULL"."""
    if value is None:
        return "NULL"
    kinds = {str: "text", float: "a real number", bytes: "a blob"}
    return f"{kinds.get(type(value), type(value).__name__)} {value!r:.40}"


def file_problem(f: BarecatFileInfo) -> str | None:
    """What is wrong with a file record's row (see ``address_problem``; in a sealed
    archive the file's own size must be a non-negative integer too), or None."""
    sealed = f.sealed_size is not None
    problem = address_problem(f.shard, f.offset, f.sealed_size if sealed else f.size, f.crc32c)
    if problem is None and sealed and not (type(f.size) is int and f.size >= 0):
        problem = f"logical_size is {sql_kind(f.size)}, not a size"
    return problem


def row_problem(f: BarecatFileInfo) -> str | None:
    """``file_problem``, or else what is wrong with the metadata: mode, uid, gid and
    mtime_ns are integers or NULL. (For ``verify``: reads need only the address.)"""
    problem = file_problem(f)
    if problem is None:
        for name in ("mode", "uid", "gid", "mtime_ns"):
            value = getattr(f, name)
            if value is not None and type(value) is not int:
                return f"{name} is {sql_kind(value)}, not an integer"
    return problem


def checked_file(f: BarecatFileInfo) -> BarecatFileInfo:
    """``f`` if its row addresses stored bytes.

    Raises:
        DamagedEntryBarecatError: naming the path and what is wrong with its row.
    """
    problem = file_problem(f)
    if problem is not None:
        raise DamagedEntryBarecatError(f.path, problem)
    return f


def dir_from_row(row: tuple[Any, ...]) -> BarecatDirInfo:
    d = object.__new__(BarecatDirInfo)
    d.path, d.num_subdirs, d.num_files, d.size_tree, d.num_files_tree = row[:5]
    d.mode, d.uid, d.gid, d.mtime_ns = row[5:]
    return d


@functools.cache
def order_clause(order: Order, for_files: bool) -> str:
    """SQL ORDER BY for an ``Order`` flag (ADDRESS means PATH for directories)."""
    desc = " DESC" if order & Order.DESC else ""
    if order & Order.RANDOM:
        return " ORDER BY random()"
    if order & Order.ADDRESS and for_files:
        return f" ORDER BY shard{desc}, offset{desc}"
    if order & (Order.PATH | Order.ADDRESS):
        return f" ORDER BY path{desc}"
    return ""


def iter_files(
    conn: sqlite3.Connection,
    columns: str,
    order: Order,
    where: str = "",
    args: tuple[object, ...] = (),
) -> Iterator[BarecatFileInfo]:
    """File records; ``columns`` is ``FILE_COLUMNS`` or, in a sealed archive,
    ``SEALED_FILE_COLUMNS``."""
    sql = f"SELECT {columns} FROM files{where}{order_clause(order, True)}"
    return map(file_from_row, select(conn, sql, args))  # (a generator costs 1 µs a row more)


def iter_dirs(
    conn: sqlite3.Connection, order: Order, where: str = "", args: tuple[object, ...] = ()
) -> Iterator[BarecatDirInfo]:
    sql = f"SELECT {DIR_COLUMNS} FROM dirs{where}{order_clause(order, False)}"
    return map(dir_from_row, select(conn, sql, args))


def subtree_where(directory: str, column: str = "path") -> tuple[str, tuple[object, ...]]:
    """WHERE clause selecting rows strictly below ``directory`` (all rows for the root)."""
    if not directory:
        return "", ()
    lo, hi = subtree_bounds(directory)
    return f" WHERE {column} >= ? AND {column} < ?", (lo, hi)


def walk(
    conn: sqlite3.Connection, top: str, decoders: WalkDecoders[D, C, F]
) -> Iterator[tuple[D, list[C], list[F]]]:
    """Top-down walk below ``top`` (which must be a directory), streaming.

    Directories come in path order, which is a valid top-down order because a prefix
    sorts before its extensions. Children are picked off two cursors sorted by parent —
    the same key — so the whole walk costs three index scans. Callers may prune the
    yielded subdirectory list in place, as with ``os.walk``. ``decoders`` chooses what is
    built per row: full info records, or just names computed by SQLite (much cheaper).
    """
    args: tuple[object, ...]
    text = "typeof(path) = 'text'"  # (a damaged row's number, NULL or blob has no place)
    if top:
        lo, hi = subtree_bounds(top)
        dwhere, pwhere, args = (
            f" WHERE (path = ? OR (path >= ? AND path < ?)) AND {text}",
            f" WHERE (parent = ? OR (parent >= ? AND parent < ?)) AND {text}"
            " AND typeof(parent) = 'text'",
            (top, lo, hi),
        )
    else:
        dwhere, pwhere = f" WHERE {text}", f" WHERE typeof(parent) = 'text' AND {text}"
        args = ()
    dec = decoders
    sql = f"SELECT {dec.dir_columns} FROM dirs{dwhere} ORDER BY path"
    dirs_in_order = (dec.decode_dir(row) for row in select(conn, sql, args))
    subdirs: Iterator[tuple[str, list[C]]]
    files: Iterator[tuple[str, list[F]]]
    if dec.names_only:
        subdirs = cast(Iterator[tuple[str, list[C]]], _name_groups(conn, "dirs", pwhere, args))
        files = cast(Iterator[tuple[str, list[F]]], _name_groups(conn, "files", pwhere, args))
    else:
        subdirs = _grouped_by_parent(
            conn, "dirs", dec.child_columns, dec.decode_children, pwhere, args
        )
        files = _grouped_by_parent(conn, "files", dec.file_columns, dec.decode_files, pwhere, args)
    pruned: set[str] = set()
    next_subdirs = next(subdirs, None)
    next_files = next(files, None)
    for d in dirs_in_order:
        key = dec.dir_key(d)
        while next_subdirs is not None and next_subdirs[0] < key:
            next_subdirs = next(subdirs, None)
        while next_files is not None and next_files[0] < key:
            next_files = next(files, None)
        my_dirs: list[C] = []
        my_files: list[F] = []
        if next_subdirs is not None and next_subdirs[0] == key:
            my_dirs = next_subdirs[1]
        if next_files is not None and next_files[0] == key:
            my_files = next_files[1]
        if key != top and (key in pruned or parent(key) in pruned):
            pruned.add(key)
            continue
        name_of = dec.child_name
        my_dirs.sort(key=name_of)
        my_files.sort(key=dec.file_name)
        if not my_dirs:
            yield d, my_dirs, my_files
            continue
        offered = [name_of(x) for x in my_dirs]
        yield d, my_dirs, my_files
        kept = {name_of(x) for x in my_dirs}
        pruned.update(join(key, n) for n in offered if n not in kept)


def _first(row: tuple[Any, ...]) -> str:
    return row[0]  # type: ignore[no-any-return]


def _same(name: str) -> str:
    return name


def _info_name(info: BarecatEntryInfo) -> str:
    return info.name


def _info_path(info: BarecatEntryInfo) -> str:
    return info.path


GroupDecoder = Callable[[str, Iterable[tuple[Any, ...]]], list[T]]
"""Builds the children of one parent from its rows: (parent, rows) -> children."""


@dataclass(frozen=True, slots=True)
class WalkDecoders(Generic[D, C, F]):
    """What ``walk`` builds from rows: the walked directory (D), its subdirectories (C)
    and its files (F), plus how to get a walked directory's path and a child's name."""

    dir_columns: str
    decode_dir: Callable[[tuple[Any, ...]], D]
    dir_key: Callable[[D], str]
    child_columns: str
    decode_children: GroupDecoder[C]
    child_name: Callable[[C], str]
    file_columns: str
    decode_files: GroupDecoder[F]
    file_name: Callable[[F], str]
    names_only: bool = False  # children are names (str), concatenated per parent by SQLite


def _child_dirs(parent: str, rows: Iterable[tuple[Any, ...]]) -> list[BarecatDirInfo]:
    return [dir_from_row(row[1:]) for row in rows]


def _child_files(parent: str, rows: Iterable[tuple[Any, ...]]) -> list[BarecatFileInfo]:
    return [file_from_row(row[1:]) for row in rows]


def _joined(conn: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> list[str]:
    """The paths ``sql`` selects, joined into one string by SQLite and split here: a
    fraction of the cost of a Python row per path. (No path holds a NUL: barecat refuses
    them, and the format's generated ``parent`` column cannot represent them, so a row
    with one is never anyone's child.)"""
    (joined,) = select(conn, f"SELECT group_concat(path, char(0)) FROM ({sql})", args).fetchone()
    return joined.split("\0") if joined else []


def concatenated_children(conn: sqlite3.Connection, dirpath: str) -> list[str]:
    """Paths of the subdirectories, then the files, directly in ``dirpath``."""
    args = (dirpath,)
    return _joined(conn, "SELECT path FROM dirs WHERE parent = ?", args) + _joined(
        conn, "SELECT path FROM files WHERE parent = ?", args
    )


def typed_children(
    conn: sqlite3.Connection, dirpath: str
) -> tuple[list[str], list[str], dict[str, int]]:
    """Paths of the subdirectories and of the files directly in ``dirpath``, and the type
    bits of those files whose mode gives one other than a regular file's (few, usually
    none: SQLite picks them out, no Python row for the others)."""
    args = (dirpath,)
    dirs = _joined(conn, "SELECT path FROM dirs WHERE parent = ?", args)
    files = _joined(conn, "SELECT path FROM files WHERE parent = ?", args)
    sql = (
        "SELECT path, mode & 61440 FROM files WHERE parent = ? "
        "AND typeof(mode) = 'integer' AND mode & 61440 NOT IN (0, 32768)"
    )
    return dirs, files, dict(select(conn, sql, args))


def _name_groups(
    conn: sqlite3.Connection, table: str, where: str, args: tuple[object, ...]
) -> Iterator[tuple[str, list[str]]]:
    """(parent, child names) in parent order, each group joined into one string by SQLite
    (see ``_joined``): a whole-tree walk takes about 40% less time. Names
    are cut from the paths here, one slice each, which is cheaper than SQLite's
    character-counting substr()."""
    sql = f"SELECT parent, group_concat(path, char(0)) FROM {table}{where} GROUP BY parent"
    for key, joined in select(conn, sql + " ORDER BY parent", args):
        cut = len(key) + 1 if key else 0
        yield key, [p[cut:] for p in joined.split("\0")]


def _child_names(parent: str, rows: Iterable[tuple[Any, ...]]) -> list[str]:
    # One slice per row, with the cut known per group: cheaper than SQLite computing
    # substr(path, length(parent) + 2) for every row it scans.
    cut = len(parent) + 1 if parent else 0
    return [row[1][cut:] for row in rows]


# Group decoders get the parent and its (parent, *columns) rows.
WALK_INFOS: WalkDecoders[BarecatDirInfo, BarecatDirInfo, BarecatFileInfo] = WalkDecoders(
    DIR_COLUMNS, dir_from_row, _info_path,
    DIR_COLUMNS, _child_dirs, _info_name,
    FILE_COLUMNS, _child_files, _info_name,
)  # fmt: skip
SEALED_WALK_INFOS = dataclasses.replace(WALK_INFOS, file_columns=SEALED_FILE_COLUMNS)
WALK_NAMES: WalkDecoders[str, str, str] = WalkDecoders(
    "path", _first, _same,
    "path", _child_names, _same,
    "path", _child_names, _same,
    names_only=True,
)  # fmt: skip


def _grouped_by_parent(
    conn: sqlite3.Connection,
    table: str,
    columns: str,
    decode: GroupDecoder[T],
    where: str,
    args: tuple[object, ...],
) -> Iterator[tuple[str, list[T]]]:
    """(parent, decoded children) groups, in parent order."""
    sql = f"SELECT parent, {columns} FROM {table}{where} ORDER BY parent"
    rows = select(conn, sql, args)
    for key, group in itertools.groupby(rows, _first):
        yield key, decode(key, group)


def glob_matches(conn: sqlite3.Connection, pattern: GlobPattern, only_files: bool) -> list[str]:
    """Matches strictly below ``pattern.base``, spelled as ``glob.glob`` spells them
    (``'d/'`` for a directory matched as one, see :meth:`GlobPattern.match_forms`), sorted.

    SQL narrows the rows (to the exact answer, when the pattern allows it); Python's
    per-component check settles the rest.
    """
    conditions, extra, exact = pattern.sql_conditions()
    if pattern.depth == 1:
        conditions.insert(0, "parent = ?")
        extra.insert(0, pattern.base)
    elif pattern.base:
        conditions.insert(0, "path >= ? AND path < ?")
        extra[0:0] = subtree_bounds(pattern.base)
    where = (" WHERE " + " AND ".join(conditions)) if conditions else ""
    args = tuple(extra)

    tables = (
        []
        if pattern.dirs_only and only_files
        else ["dirs"]
        if pattern.dirs_only
        else (["files"] if only_files else ["dirs", "files"])
    )
    found = {table: _joined(conn, f"SELECT path FROM {table}{where}", args) for table in tables}
    slashes = pattern.required_slashes if exact else None
    if slashes is not None:
        found = {t: [p for p in paths if p.count("/") == slashes] for t, paths in found.items()}
    dirs = found.get("dirs", [])
    files = found.get("files", [])
    tail_matches = None if exact else pattern.tail_matcher()
    if exact or tail_matches is not None:
        # No trailing '**' here: every match is the entry itself, or a directory
        # matched as one when the pattern ends in '/'.
        paths = dirs + files
        if tail_matches is not None:
            paths = [p for p in paths if tail_matches(p)]
        if pattern.dirs_only:
            paths = [pattern.shown(p, True) for p in paths]
        paths.sort()
        return paths
    skip = len(pattern.base) + 1 if pattern.base else 0
    shown = []
    for is_dir, paths in ((True, dirs), (False, files)):
        for p in paths:
            itself, as_directory = pattern.match_forms(p[skip:].split("/"), is_dir)
            if itself:
                shown.append(p)
            if as_directory:
                shown.append(pattern.shown(p, True))
    shown.sort()
    return shown
