"""Directory statistics maintained by hand: recomputed, checked, and shifted in bulk.

The triggers keep statistics right one row at a time; this module is for everything
bigger. Recomputing is one grouped scan of ``files`` plus one of ``dirs``, with the
numbers pushed up the tree in Python (cost: directories x depth) — far cheaper than a
correlated subquery per directory. Subtree moves and removals run with triggers off and
call ``adjust_ancestors``/``ensure_ancestors`` to fix the ancestors in a few statements.
Imports only ``paths`` (and ``query`` for subtree ranges and how values are named).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from barecat.index.connection import select
from barecat.index.query import SIZE_TOTAL, sql_kind, subtree_where
from barecat.paths import ancestors, parent


@dataclass(slots=True)
class TreeStats:
    num_subdirs: int = 0
    num_files: int = 0
    num_files_tree: int = 0
    size_tree: int = 0


_TEXT_PATH = "typeof(path) = 'text'"
"""Rows whose path is text: a damaged row's number or blob has no place in the tree."""


def compute_treestats(conn: sqlite3.Connection) -> dict[str, TreeStats]:
    """Correct statistics for every directory the files and dirs imply (root included;
    rows whose path is not text left out: ``find_inconsistencies`` names them)."""
    stats: dict[str, TreeStats] = {"": TreeStats()}

    def ensure(path: str) -> TreeStats:
        s = stats.get(path)
        if s is None:
            s = stats[path] = TreeStats()
            while path:  # up to the first known ancestor (a loop: paths may be deep)
                path = parent(path)
                up = stats.get(path)
                if up is not None:
                    up.num_subdirs += 1
                    break
                stats[path] = TreeStats(num_subdirs=1)
        return s

    for (path,) in select(conn, f"SELECT path FROM dirs WHERE {_TEXT_PATH}"):
        ensure(path)
    for par, count, total in select(
        conn,
        f"SELECT parent, count(*), {SIZE_TOTAL} FROM files "
        f"WHERE {_TEXT_PATH} AND typeof(parent) = 'text' GROUP BY parent",
    ):
        size = int(total)
        s = ensure(par)
        s.num_files += count
        for d in (par, *ancestors(par)) if par else ("",):
            t = stats[d]
            t.num_files_tree += count
            t.size_tree += size
    return stats


def subtree_totals(conn: sqlite3.Connection, path: str) -> tuple[int, int]:
    """(number of files, total size) strictly below directory ``path``."""
    where, args = subtree_where(path)
    sql = f"SELECT count(*), {SIZE_TOTAL} FROM files{where}"
    row = select(conn, sql, args).fetchone()
    return int(row[0]), int(row[1])


def deepest_below(conn: sqlite3.Connection, path: str) -> str | None:
    """The path with the most components strictly below directory ``path`` (file or
    directory), or None if there is none."""
    where, args = subtree_where(path)
    slashes = "length(path) - length(replace(path, '/', ''))"
    row = select(
        conn,
        f"SELECT path FROM (SELECT path FROM files{where} UNION ALL SELECT path FROM dirs{where}) "
        f"ORDER BY {slashes} DESC LIMIT 1",
        args + args,
    ).fetchone()
    return None if row is None else str(row[0])


def adjust_ancestors(
    conn: sqlite3.Connection, path: str, d_files: int, d_size: int, subdir_delta: int
) -> None:
    """Add deltas to the totals of every proper ancestor of ``path`` (triggers off)."""
    ups = ancestors(path)
    marks = ",".join("?" * len(ups))
    conn.execute(
        f"UPDATE dirs SET num_files_tree = num_files_tree + ?, size_tree = size_tree + ? "
        f"WHERE path IN ({marks})",
        (d_files, d_size, *ups),
    )
    conn.execute(
        "UPDATE dirs SET num_subdirs = num_subdirs + ? WHERE path = ?",
        (subdir_delta, parent(path)),
    )


def ensure_ancestors(conn: sqlite3.Connection, path: str) -> None:
    """Create missing proper ancestors of ``path`` with zero totals (triggers off)."""
    for a in reversed(ancestors(path)):
        sql = "INSERT INTO dirs (path) VALUES (?) ON CONFLICT (path) DO NOTHING"
        if conn.execute(sql, (a,)).rowcount:
            conn.execute(
                "UPDATE dirs SET num_subdirs = num_subdirs + 1 WHERE path = ?", (parent(a),)
            )


def insert_missing_dirs(conn: sqlite3.Connection) -> None:
    """Give every directory implied by a file or directory path its own row."""
    existing = {row[0] for row in select(conn, "SELECT path FROM dirs")}
    missing = sorted(p for p in compute_treestats(conn) if p not in existing)
    conn.executemany(
        "INSERT INTO dirs (path) VALUES (?) ON CONFLICT (path) DO NOTHING", [(p,) for p in missing]
    )


def rewrite_treestats(conn: sqlite3.Connection) -> None:
    """Store freshly computed statistics in every directory row (triggers must be off)."""
    stats = compute_treestats(conn)
    conn.executemany(
        "INSERT INTO dirs (path, num_subdirs, num_files, num_files_tree, size_tree) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
        "num_subdirs = excluded.num_subdirs, num_files = excluded.num_files, "
        "num_files_tree = excluded.num_files_tree, size_tree = excluded.size_tree",
        [
            (p, s.num_subdirs, s.num_files, s.num_files_tree, s.size_tree)
            for p, s in sorted(stats.items())
        ],
    )


def find_inconsistencies(conn: sqlite3.Connection) -> list[str]:
    """Every way the index disagrees with itself, as human-readable lines."""
    problems = []
    check = select(conn, "PRAGMA integrity_check").fetchall()
    if check != [("ok",)]:
        problems += [f"sqlite: {r[0]}" for r in check]
    expected = compute_treestats(conn)
    actual = {
        row[0]: TreeStats(row[1], row[2], row[3], row[4])
        for row in select(
            conn, "SELECT path, num_subdirs, num_files, num_files_tree, size_tree FROM dirs"
        )
    }
    for p, want in expected.items():
        got = actual.get(p)
        if got is None:
            problems.append(f"missing directory row: {p!r}")
        elif got != want:
            problems.append(f"wrong statistics for {p!r}: stored {got}, actual {want}")
    for (p,) in select(conn, "SELECT f.path FROM files f JOIN dirs d ON f.path = d.path"):
        problems.append(f"path is both a file and a directory: {p!r}")
    for table in ("files", "dirs"):
        for (p,) in select(conn, f"SELECT path FROM {table} WHERE NOT {_TEXT_PATH}"):
            problems.append(f"a row of {table} has a path that is {sql_kind(p)}, not text")
    return problems
