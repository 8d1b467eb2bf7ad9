"""Read-side SQL of the index: row decoding, ordering, listings, walk and glob.

Every query here is index-assisted: listings use the ``parent`` indexes, subtree scans
are half-open ranges on the unique path indexes, and ``walk`` streams three sorted
cursors merged on the directory key instead of two queries per directory. Imports
``entries``, ``glob`` and ``paths``; the write side lives in ``index.py``.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Callable, Iterator

from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.glob import GlobPattern
from barecat.paths import parent, subtree_bounds

FILE_COLUMNS = "path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns"
DIR_COLUMNS = "path, num_subdirs, num_files, size_tree, num_files_tree, mode, uid, gid, mtime_ns"

WalkStep = tuple[BarecatDirInfo, list[BarecatDirInfo], list[BarecatFileInfo]]


def file_from_row(row: tuple[object, ...]) -> BarecatFileInfo:
    p, shard, offset, size, crc, mode, uid, gid, mtime = row
    return BarecatFileInfo(p, mode, uid, gid, mtime, shard, offset, size, crc)  # type: ignore[arg-type]


def dir_from_row(row: tuple[object, ...]) -> BarecatDirInfo:
    p, nsub, nfiles, size_tree, nftree, mode, uid, gid, mtime = row
    return BarecatDirInfo(p, mode, uid, gid, mtime, nsub, nfiles, size_tree, nftree)  # type: ignore[arg-type]


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
    conn: sqlite3.Connection, order: Order, where: str = "", args: tuple[object, ...] = ()
) -> Iterator[BarecatFileInfo]:
    sql = f"SELECT {FILE_COLUMNS} FROM files{where}{order_clause(order, True)}"
    for row in conn.execute(sql, args):
        yield file_from_row(row)


def iter_dirs(
    conn: sqlite3.Connection, order: Order, where: str = "", args: tuple[object, ...] = ()
) -> Iterator[BarecatDirInfo]:
    sql = f"SELECT {DIR_COLUMNS} FROM dirs{where}{order_clause(order, False)}"
    for row in conn.execute(sql, args):
        yield dir_from_row(row)


def subtree_where(directory: str, column: str = "path") -> tuple[str, tuple[object, ...]]:
    """WHERE clause selecting rows strictly below ``directory`` (all rows for the root)."""
    if not directory:
        return "", ()
    lo, hi = subtree_bounds(directory)
    return f" WHERE {column} >= ? AND {column} < ?", (lo, hi)


def walk(conn: sqlite3.Connection, top: str) -> Iterator[WalkStep]:
    """Top-down walk below ``top`` (which must be a directory), streaming.

    Directories come in path order, which is a valid top-down order because a prefix
    sorts before its extensions. Children are picked off two cursors sorted by parent —
    the same key — so the whole walk costs three index scans. Callers may prune the
    yielded subdirectory list in place, as with ``os.walk``.
    """
    args: tuple[object, ...]
    if top:
        lo, hi = subtree_bounds(top)
        dwhere, pwhere, args = (
            " WHERE path = ? OR (path >= ? AND path < ?)",
            " WHERE parent = ? OR (parent >= ? AND parent < ?)",
            (top, lo, hi),
        )
    else:
        dwhere, pwhere, args = "", " WHERE parent IS NOT NULL", ()
    dirs_in_order = iter_dirs(conn, Order.PATH, dwhere, args)
    subdirs = _grouped_by_parent(
        _with_parent(conn, "dirs", DIR_COLUMNS, dir_from_row, pwhere, args)
    )
    files = _grouped_by_parent(
        _with_parent(conn, "files", FILE_COLUMNS, file_from_row, pwhere, args)
    )
    pruned: set[str] = set()
    next_subdirs = next(subdirs, None)
    next_files = next(files, None)
    for d in dirs_in_order:
        key = d.path
        while next_subdirs is not None and next_subdirs[0] < key:
            next_subdirs = next(subdirs, None)
        while next_files is not None and next_files[0] < key:
            next_files = next(files, None)
        my_dirs: list[BarecatDirInfo] = []
        my_files: list[BarecatFileInfo] = []
        if next_subdirs is not None and next_subdirs[0] == key:
            my_dirs = next_subdirs[1]  # type: ignore[assignment]
        if next_files is not None and next_files[0] == key:
            my_files = next_files[1]  # type: ignore[assignment]
        if key != top and (key in pruned or parent(key) in pruned):
            pruned.add(key)
            continue
        my_dirs.sort(key=lambda x: x.path)
        my_files.sort(key=lambda x: x.path)
        offered = [x.path for x in my_dirs]
        yield d, my_dirs, my_files
        kept = {x.path for x in my_dirs}
        pruned.update(p for p in offered if p not in kept)


def _with_parent(
    conn: sqlite3.Connection,
    table: str,
    columns: str,
    decode: Callable[[tuple[object, ...]], BarecatEntryInfo],
    where: str,
    args: tuple[object, ...],
) -> Iterator[tuple[str, BarecatEntryInfo]]:
    for row in conn.execute(f"SELECT parent, {columns} FROM {table}{where} ORDER BY parent", args):
        yield row[0], decode(row[1:])


def _grouped_by_parent(
    rows: Iterator[tuple[str, BarecatEntryInfo]],
) -> Iterator[tuple[str, list[BarecatEntryInfo]]]:
    current: str | None = None
    group: list[BarecatEntryInfo] = []
    for key, info in rows:
        if key != current:
            if current is not None:
                yield current, group
            current, group = key, []
        group.append(info)
    if current is not None:
        yield current, group


def glob_candidates(
    conn: sqlite3.Connection, pattern: GlobPattern, only_files: bool
) -> Iterator[BarecatEntryInfo]:
    """Entries below ``pattern.base`` that may match, in path order, before Python matching."""
    base = pattern.base
    args: tuple[object, ...]
    if pattern.depth == 1:
        where, args = " WHERE parent = ?", (base,)
    else:
        where, args = subtree_where(base)
    prefilter = pattern.sql_glob_prefilter()
    if prefilter is not None:
        where = (where + " AND" if where else " WHERE") + " path GLOB ?"
        args = (*args, prefilter)
    files = iter_files(conn, Order.PATH, where, args)
    if only_files:
        yield from files
        return
    dirs = iter_dirs(conn, Order.PATH, where, args)
    yield from heapq.merge(dirs, files, key=lambda info: info.path)


def matching(
    pattern: GlobPattern, candidates: Iterator[BarecatEntryInfo]
) -> Iterator[BarecatEntryInfo]:
    """Filter ``candidates`` by the pattern's per-component rules."""
    skip = len(pattern.base) + 1 if pattern.base else 0
    for info in candidates:
        if pattern.dirs_only and not info.isdir():
            continue
        if pattern.matches_relative(info.path[skip:].split("/")):
            yield info
