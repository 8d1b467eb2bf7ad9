"""Inserting many file rows at once, with directory statistics applied per batch.

Row-by-row triggers walk up the tree for every file; here the triggers are switched off
inside a savepoint, the rows go in with one ``executemany`` (or, for merges, one
``INSERT ... SELECT`` from an attached index), and the statistics of every
touched directory are adjusted with one aggregated update each. The savepoint keeps the
batch atomic: a conflict anywhere undoes the whole batch and names the offending path.
The checks the triggers would make (a file over a directory, a directory over a file)
are made here first, set-wise. Imports ``entries``, ``exceptions`` and ``paths``.

Switched-off triggers still cost SQLite a sub-program call per row to evaluate their
``WHEN``; for big batches the two row triggers on ``files`` inserts are dropped inside
the savepoint and recreated from their stored text before it is released, so no
committed state ever lacks them and the rows go in about twice as fast.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence

from barecat.entries import BarecatFileInfo
from barecat.exceptions import (
    BarecatIntegrityError,
    FileExistsBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
)
from barecat.index.connection import open_savepoint, select
from barecat.paths import MAX_DEPTH, check_depth, parent


def first_in(conn: sqlite3.Connection, table: str, paths: Sequence[str]) -> str | None:
    row = select(
        conn,
        f"SELECT j.value FROM json_each(?) AS j JOIN {table} AS t ON t.path = j.value LIMIT 1",
        (json.dumps(list(paths)),),
    ).fetchone()
    return None if row is None else str(row[0])


_COLUMNS = "path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns"
INSERT_FILE = f"INSERT INTO files ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
INSERT_SEALED_FILE = (
    f"INSERT INTO files ({_COLUMNS}, logical_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def file_row(f: BarecatFileInfo, sealed: bool) -> tuple[object, ...]:
    """The values of ``INSERT_FILE`` (``INSERT_SEALED_FILE`` in a sealed archive, whose
    ``size`` column holds the stored length and ``logical_size`` the file's own)."""
    row = (f.path, f.shard, f.offset, f.stored_size, f.crc32c, f.mode, f.uid, f.gid, f.mtime_ns)
    return (*row, f.size) if sealed else row


def insert_files(
    conn: sqlite3.Connection, files: Sequence[BarecatFileInfo], sealed: bool = False
) -> None:
    """Insert ``files`` (normalized paths) and update every affected directory once."""
    if not files:
        return
    rows, per_parent = _rows_and_totals(files, sealed)
    paths = [f.path for f in files]
    for par in per_parent:  # a file is one level below its parent: deep parents only
        if par.count("/") + 1 >= MAX_DEPTH:
            for path in paths:
                check_depth(path)
    chain = with_ancestors(per_parent)
    _check_conflicts(conn, paths, chain)

    def insert() -> None:
        try:
            conn.executemany(INSERT_SEALED_FILE if sealed else INSERT_FILE, rows)
        except sqlite3.IntegrityError:
            raise _duplicate_error(conn, paths) from None

    _with_stats_by_hand(conn, insert, chain, per_parent, len(files) >= SUSPEND_TRIGGERS_ROWS)


def with_ancestors(dirs: Iterable[str]) -> set[str]:
    """``dirs`` (normalized) and all their ancestors, the root included: each directory
    is walked up only until an ancestor already seen."""
    chain: set[str] = set()
    for d in dirs:
        while d not in chain:
            chain.add(d)
            if not d:
                break
            d = d.rpartition("/")[0]
    return chain


def _rows_and_totals(
    files: Sequence[BarecatFileInfo], sealed: bool
) -> tuple[list[tuple[object, ...]], dict[str, list[int]]]:
    """The rows of ``files`` (``file_row``'s values) and, per parent directory, the count
    and stored bytes of its files among them, in one pass (a batch's files come grouped
    by directory, so the parent's totals are looked up once per run)."""
    rows: list[tuple[object, ...]] = []
    per_parent: dict[str, list[int]] = {}
    last: str | None = None
    totals = [0, 0]
    for f in files:
        rows.append(file_row(f, sealed))
        par = f.path.rpartition("/")[0]
        if par != last:
            found = per_parent.get(par)
            if found is None:
                found = per_parent[par] = [0, 0]
            totals, last = found, par
        totals[0] += 1
        totals[1] += f.stored_size
    return rows, per_parent


def insert_by_statement(
    conn: sqlite3.Connection,
    sql: str,
    args: dict[str, object],
    expected: int,
    chain: set[str],
    per_parent: dict[str, list[int]],
) -> None:
    """Insert file rows with one ``INSERT ... SELECT`` (from an attached index, say).

    The caller has checked for conflicts and gives the statement's per-parent totals
    and every directory the rows need (``chain``); all or nothing. A row count other
    than ``expected`` means the caller's plan and the statement disagree: nothing is kept.
    """

    def insert() -> None:
        inserted = conn.execute(sql, args).rowcount
        if inserted != expected:
            raise BarecatIntegrityError(
                f"Bulk insert placed {inserted} files where {expected} were planned"
            )

    _with_stats_by_hand(conn, insert, chain, per_parent, expected >= SUSPEND_TRIGGERS_ROWS)


def _with_stats_by_hand(
    conn: sqlite3.Connection,
    insert: Callable[[], None],
    chain: set[str],
    per_parent: dict[str, list[int]],
    many: bool,
) -> None:
    """Run ``insert`` with the statistics triggers off inside a savepoint, then create the
    missing directories of ``chain`` and apply the per-parent deltas."""
    open_savepoint(conn, "barecat_bulk")
    try:
        before = select(conn, "SELECT value_int FROM config WHERE key = 'use_triggers'").fetchone()
        conn.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
        suspended = drop_insert_triggers(conn) if many else []
        insert()
        for sql in suspended:
            conn.execute(sql)
        create_missing_dirs(conn, chain)
        apply_deltas(conn, per_parent)
        conn.execute(
            "UPDATE config SET value_int = ? WHERE key = 'use_triggers'",
            (1 if before is None else before[0],),
        )
    except BaseException:
        conn.execute("ROLLBACK TO barecat_bulk")
        conn.execute("RELEASE barecat_bulk")
        raise
    conn.execute("RELEASE barecat_bulk")


UPSERT_DIR = (
    "INSERT INTO dirs (path, mode, uid, gid, mtime_ns) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (path) DO UPDATE SET mode = ifnull(excluded.mode, mode), "
    "uid = ifnull(excluded.uid, uid), gid = ifnull(excluded.gid, gid), "
    "mtime_ns = ifnull(excluded.mtime_ns, mtime_ns)"
)
"""A directory's row, or new metadata (None fields kept) for one that exists."""


DirRow = tuple[str, int | None, int | None, int | None, int | None]
"""A directory's path, mode, uid, gid and mtime_ns: ``UPSERT_DIR``'s values."""


def upsert_dirs(conn: sqlite3.Connection, rows: list[DirRow]) -> bool:
    """``UPSERT_DIR`` of many ``rows`` (normalized paths, parents first) with the
    statistics triggers off: the directories missing among them and their ancestors are
    inserted first (each counted once in its parent's ``num_subdirs``; a new directory
    holds no file, so no tree total moves), then every row's metadata is upserted. All
    or nothing, in the caller's savepoint.

    Returns False, having changed nothing, when a file is at one of the paths or their
    ancestors: the caller then goes row by row with the triggers, whose refusal names
    the path.
    """
    chain = with_ancestors(row[0] for row in rows)
    if first_in(conn, "files", sorted(chain - {""})) is not None:
        return False
    before = select(conn, "SELECT value_int FROM config WHERE key = 'use_triggers'").fetchone()
    conn.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
    suspended = _drop_triggers(conn, _ROW_TRIGGERS_ON_DIR_INSERT)
    by_path = {row[0]: row for row in rows}
    if len(by_path) < len(rows):  # a path twice: the upserts merge its rows in order
        create_missing_dirs(conn, chain)
        conn.executemany(UPSERT_DIR, rows)
    else:  # new directories are inserted with their metadata, the others updated
        created = create_missing_dirs(conn, chain, by_path)
        conn.executemany(UPSERT_DIR, [row for row in rows if row[0] not in created])
    for sql in suspended:
        conn.execute(sql)
    conn.execute(
        "UPDATE config SET value_int = ? WHERE key = 'use_triggers'",
        (1 if before is None else before[0],),
    )
    return True


SUSPEND_TRIGGERS_ROWS = 256
_ROW_TRIGGERS_ON_DIR_INSERT = ("dir_over_file", "dir_inserted")
_ROW_TRIGGERS_ON_FILE_INSERT = ("file_over_dir", "file_inserted")


def drop_insert_triggers(conn: sqlite3.Connection) -> list[str]:
    """Drop the row triggers of ``INSERT INTO files``; returns the SQL that recreates them."""
    return _drop_triggers(conn, _ROW_TRIGGERS_ON_FILE_INSERT)


def _drop_triggers(conn: sqlite3.Connection, names: tuple[str, str]) -> list[str]:
    rows = select(
        conn,
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?)",
        names,
    ).fetchall()
    for name, _ in rows:
        conn.execute(f'DROP TRIGGER "{name}"')
    return [sql for _, sql in rows]


def _check_conflicts(conn: sqlite3.Connection, paths: list[str], chain: set[str]) -> None:
    dirs_needed = sorted(chain - {""})
    clash = None if chain.isdisjoint(paths) else next(p for p in paths if p in chain)
    if clash is not None or (clash := first_in(conn, "files", dirs_needed)) is not None:
        raise NotADirectoryBarecatError(f"Not a directory: {clash!r} is (to be) a file")
    if (taken := first_in(conn, "dirs", paths)) is not None:
        raise IsADirectoryBarecatError(taken)


def _duplicate_error(conn: sqlite3.Connection, paths: list[str]) -> FileExistsBarecatError:
    conn.execute("ROLLBACK TO barecat_bulk")
    twice = next((p for p, n in Counter(paths).items() if n > 1), None)
    return FileExistsBarecatError(twice or first_in(conn, "files", paths) or paths[0])


def create_missing_dirs(
    conn: sqlite3.Connection, chain: set[str], rows: dict[str, DirRow] | None = None
) -> set[str]:
    """Create the directories of ``chain`` that do not exist (statistics triggers off: the
    new ones' parents are counted here), each with its metadata in ``rows`` if it is
    there. One query finds them; usually there are none. Returns their paths."""
    wanted = sorted(chain - {""})
    if not wanted:
        return set()
    missing = select(
        conn,
        "SELECT j.value FROM json_each(?) AS j "
        "WHERE NOT EXISTS (SELECT 1 FROM dirs AS d WHERE d.path = j.value) ORDER BY j.key",
        (json.dumps(wanted),),
    ).fetchall()
    if rows is None:
        conn.executemany("INSERT INTO dirs (path) VALUES (?)", missing)  # parents first
    else:
        conn.executemany(
            "INSERT INTO dirs (path, mode, uid, gid, mtime_ns) VALUES (?, ?, ?, ?, ?)",
            [rows.get(d) or (d, None, None, None, None) for (d,) in missing],
        )
    new_children = Counter(parent(d) for (d,) in missing)
    conn.executemany(
        "UPDATE dirs SET num_subdirs = num_subdirs + ? WHERE path = ?",
        [(n, d) for d, n in new_children.items()],
    )
    return {d for (d,) in missing}


def apply_deltas(conn: sqlite3.Connection, per_parent: dict[str, list[int]]) -> None:
    """Add each parent's new files (count, stored bytes) to it and to its ancestors' tree
    totals: one update per directory touched, the totals folded up level by level."""
    tree = {par: [count, count, size] for par, (count, size) in per_parent.items()}
    levels: defaultdict[int, list[str]] = defaultdict(list)
    for d in tree:
        levels[d.count("/") + 1 if d else 0].append(d)
    for level in range(max(levels, default=0), 0, -1):  # deepest first; the root: level 0
        for d in levels[level]:
            _, count, size = tree[d]
            up = d.rpartition("/")[0]
            acc = tree.get(up)
            if acc is None:
                acc = tree[up] = [0, 0, 0]
                levels[level - 1].append(up)
            acc[1] += count
            acc[2] += size
    conn.executemany(
        "UPDATE dirs SET num_files = num_files + ?, num_files_tree = num_files_tree + ?, "
        "size_tree = size_tree + ? WHERE path = ?",
        [(files, count, size, d) for d, (files, count, size) in tree.items()],
    )
