"""Taking rows from another archive's index into this one, with their bytes' new places.

A merge or subset ATTACHes the source index to the target's connection, so choosing rows,
finding conflicts and inserting thousands of rows are each one SQL statement instead of a
Python loop. The caller (an op that copies or links the bytes) learns where the chosen
files lie (:meth:`MergeSource.spans`, in address order), moves the bytes, and hands back
:class:`Relocation` ranges: every source file whose offset falls in a range gets the same
shift. Rows then go in with statistics applied per directory (``bulk``); directory
metadata fills what the target does not know yet, so the first archive to name a
directory keeps its mode and times. Imports ``bulk``, ``entries``, ``exceptions`` and
``paths``; the SQL of merges lives here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass

from barecat.exceptions import (
    DirectoryOverFileBarecatError,
    FileExistsBarecatError,
    FileOverDirectoryBarecatError,
)
from barecat.index import bulk
from barecat.index.connection import select
from barecat.paths import ancestors, is_within

SCHEMA = "mergesrc"
FAR = 1 << 62
"""An offset beyond any shard: the open end of the last relocation of a source shard."""

_FILES = "temp.merge_files"
_DIRS = "temp.merge_dirs"
_MOVES = "temp.merge_moves"
_SKIP = "temp.merge_skip"


@dataclass(frozen=True, slots=True)
class Relocation:
    """Source files in ``src_shard`` with ``src_start <= offset < src_next`` now start
    ``dst_start - src_start`` further, in ``dst_shard``. Their bytes end by ``src_end``; an
    empty file past it (in a skipped gap) is placed at the copied run's end."""

    src_shard: int
    src_start: int
    src_end: int
    src_next: int
    dst_shard: int
    dst_start: int


@dataclass(frozen=True, slots=True)
class SourceTotals:
    """What a merge will take: ``files`` of ``size`` bytes (``largest`` the biggest one),
    and how many were left out because the target already has their path."""

    files: int
    size: int
    largest: int
    skipped: int


class MergeSource:
    """A source index attached as ``mergesrc``; which rows to take, and taking them.

    ``prefix`` (normalized, '' for none) is put in front of every source path.
    """

    def __init__(self, conn: sqlite3.Connection, prefix: str = "", sealed: bool = False) -> None:
        self._conn = conn
        self.sealed = sealed
        pre = f"{prefix}/" if prefix else ""
        self._args: dict[str, object] = {
            "pre": pre,  # before each source path ('' or 'PREFIX/')
            "root": prefix,  # where the source's root directory lands
            "cut": len(pre) + 1,  # substr() start of the source path in a target path
            "lo": pre,  # [lo, hi): the target paths below the prefix (see subtree_bounds)
            "hi": f"{prefix}0",
        }
        self._pick_files = False
        self._pick_dirs = False
        self._skipped = 0
        self._skipping = False
        self._per_parent: dict[str, list[int]] | None = None
        self._needed: set[str] | None = None

    # -- choosing ----------------------------------------------------------------------

    _FILE_TARGET = "(:pre || f.path)"
    _DIR_TARGET = "(CASE WHEN d.path = '' THEN :root ELSE :pre || d.path END)"

    def _files_where(self, by_path: bool = True) -> str:
        """SQL: ``f`` is chosen. ``by_path=False`` keeps SQLite from driving the query by
        the chosen paths (unary '+'), where a shard/offset range should drive it."""
        column = "f.path" if by_path else "+f.path"
        chosen = f"{column} IN {_FILES}" if self._pick_files else "1"
        return f"{chosen} AND f.path NOT IN {_SKIP}" if self._skipped else chosen

    def _dirs_where(self) -> str:
        return f"d.path IN {_DIRS}" if self._pick_dirs else "1"

    def _at_files(self) -> str:
        """SQL: chosen source files whose target path is a file in the target (one index
        probe per source file)."""
        return (
            f"SELECT f.path FROM {SCHEMA}.files f WHERE {self._files_where()} "
            f"AND EXISTS (SELECT 1 FROM main.files m WHERE m.path = {self._FILE_TARGET})"
        )

    def _at_dirs(self) -> str:
        """SQL: chosen source files whose target path is a directory in the target (one
        probe per target directory under the prefix: directories are the fewer)."""
        below = "m.path >= :lo AND m.path < :hi" if self._args["root"] else "m.path != ''"
        return (
            f"SELECT f.path FROM main.dirs m CROSS JOIN {SCHEMA}.files f "
            f"WHERE {below} AND f.path = substr(m.path, :cut) AND {self._files_where()}"
        )

    def select(
        self,
        files: Iterable[str] | None = None,
        dirs: Iterable[str] | None = None,
        skip_existing: bool = False,
    ) -> None:
        """Restrict to the given source paths (None: all); ``skip_existing`` also leaves out
        files whose target path is taken (the first archive to have a path wins)."""
        c = self._conn
        if files is not None:
            c.execute(f"CREATE TABLE {_FILES} (path TEXT PRIMARY KEY) WITHOUT ROWID")
            c.executemany(f"INSERT OR IGNORE INTO {_FILES} VALUES (?)", ((p,) for p in files))
            self._pick_files = True
        self._skipping = skip_existing
        if skip_existing and not self._target_is_empty():
            # usually few: remember the taken ones rather than the many to take
            c.execute(f"CREATE TABLE {_SKIP} (path TEXT PRIMARY KEY) WITHOUT ROWID")
            for taken in (self._at_files(), self._at_dirs()):
                c.execute(f"INSERT OR IGNORE INTO {_SKIP} {taken}", self._args)
            self._skipped = int(select(c, f"SELECT count(*) FROM {_SKIP}").fetchone()[0])
        if dirs is not None:
            c.execute(f"CREATE TABLE {_DIRS} (path TEXT PRIMARY KEY) WITHOUT ROWID")
            c.executemany(f"INSERT OR IGNORE INTO {_DIRS} VALUES (?)", ((p,) for p in dirs))
            self._pick_dirs = True
        self._per_parent = None
        self._needed = None

    def check_conflicts(self) -> None:
        """Raise if a chosen entry cannot go in: its path is taken, or a directory it needs
        is a file in the target. Nothing has been written when this raises.

        Raises:
            FileExistsBarecatError: a chosen file's path is a file in the target.
            FileOverDirectoryBarecatError: a chosen file's path is a directory there.
            DirectoryOverFileBarecatError: a directory the entries need (the prefix, one
                above it, or one of the source's) is a file there.
        """
        root = str(self._args["root"])
        needed = sorted(self.needed_dirs())
        prefix_chain = [d for d in needed if d and is_within(root, d)]
        row = self._first_target_file(prefix_chain)
        if row is not None:
            raise DirectoryOverFileBarecatError(row, prefix=root)
        if not self._skipping and not self._target_is_empty():
            for taken, error in (
                (self._at_files(), FileExistsBarecatError),
                (self._at_dirs(), FileOverDirectoryBarecatError),
            ):
                found = select(self._conn, f"{taken} LIMIT 1", self._args).fetchone()
                if found is not None:
                    raise error(str(self._args["pre"]) + found[0])
        row = self._first_target_file(needed)
        if row is not None:
            raise DirectoryOverFileBarecatError(row)

    def _first_target_file(self, paths: list[str]) -> str | None:
        """The first of ``paths`` that is a file in the target, if any."""
        row = select(
            self._conn,
            "SELECT j.value FROM json_each(?) j JOIN main.files m ON m.path = j.value LIMIT 1",
            (json.dumps(paths),),
        ).fetchone()
        return None if row is None else str(row[0])

    def _target_is_empty(self) -> bool:
        """True if the target has no entries but its root (no conflicts are possible)."""
        (empty,) = select(
            self._conn,
            "SELECT NOT EXISTS (SELECT 1 FROM main.files) "
            "AND NOT EXISTS (SELECT 1 FROM main.dirs WHERE path != '')",
        ).fetchone()
        return bool(empty)

    def totals(self) -> SourceTotals:
        files, size, largest = select(
            self._conn,
            f"SELECT count(*), ifnull(sum(f.size), 0), ifnull(max(f.size), 0) "
            f"FROM {SCHEMA}.files f WHERE {self._files_where()}",
        ).fetchone()
        return SourceTotals(int(files), int(size), int(largest), self._skipped)

    def largest_file(self) -> str | None:
        """The path of the biggest chosen file (for messages)."""
        row = select(
            self._conn,
            f"SELECT f.path FROM {SCHEMA}.files f WHERE {self._files_where()} "
            "ORDER BY f.size DESC LIMIT 1",
        ).fetchone()
        return None if row is None else str(row[0])

    def spans(self) -> Generator[tuple[int, int, int], None, None]:
        """(shard, offset, size) of every chosen file, in address order (files at the same
        offset in any order)."""
        cur = select(
            self._conn,
            f"SELECT f.shard, f.offset, ifnull(f.size, 0) FROM {SCHEMA}.files f "
            f"WHERE {self._files_where()} ORDER BY f.shard, f.offset",
        )
        try:
            while rows := cur.fetchmany(4096):
                yield from rows
        finally:
            cur.close()

    # -- directories -------------------------------------------------------------------

    def per_parent(self) -> dict[str, list[int]]:
        """Chosen files counted per target parent directory: [files, bytes]."""
        if self._per_parent is not None:
            return self._per_parent
        pre, root = str(self._args["pre"]), str(self._args["root"])
        rows = select(
            self._conn,
            f"SELECT f.parent, count(*), ifnull(sum(f.size), 0) FROM {SCHEMA}.files f "
            f"WHERE {self._files_where()} GROUP BY f.parent",
        )
        self._per_parent = {(pre + par if par else root): [int(n), int(s)] for par, n, s in rows}
        return self._per_parent

    def needed_dirs(self) -> set[str]:
        """Every target directory the chosen entries need: chosen source directories,
        parents of chosen files, and all their ancestors."""
        if self._needed is not None:
            return self._needed
        rows = select(
            self._conn,
            f"SELECT {self._DIR_TARGET} FROM {SCHEMA}.dirs d WHERE {self._dirs_where()}",
            self._args,
        )
        wanted = {r[0] for r in rows} | set(self.per_parent())
        chain: set[str] = set()
        for d in wanted:
            if d not in chain:
                chain.add(d)
                for a in ancestors(d):
                    if a in chain:
                        break
                    chain.add(a)
        self._needed = chain
        return chain

    # -- taking ------------------------------------------------------------------------

    def insert(self, relocations: Sequence[Relocation], expected: int) -> None:
        """Insert the chosen files at their relocated addresses and the chosen directories;
        statistics updated per directory. All or nothing (inside the caller's transaction)."""
        c = self._conn
        c.execute(
            f"CREATE TABLE {_MOVES} (src_shard INTEGER, src_start INTEGER, "
            "src_end INTEGER, src_next INTEGER, dst_shard INTEGER, dst_start INTEGER)"
        )
        c.executemany(
            f"INSERT INTO {_MOVES} VALUES (?, ?, ?, ?, ?, ?)",
            [
                (r.src_shard, r.src_start, r.src_end, r.src_next, r.dst_shard, r.dst_start)
                for r in relocations
            ],
        )
        # sealed archives take only sealed sources (checked by the caller): both have it
        logical, from_logical = (", logical_size", ", f.logical_size") if self.sealed else ("", "")
        sql = (
            "INSERT INTO main.files (path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns"
            f"{logical}) "
            f"SELECT {self._FILE_TARGET}, r.dst_shard, "
            "min(f.offset, r.src_end) - r.src_start + r.dst_start, "
            f"f.size, f.crc32c, f.mode, f.uid, f.gid, f.mtime_ns{from_logical} "
            f"FROM {_MOVES} AS r CROSS JOIN {SCHEMA}.files AS f "
            "WHERE f.shard = r.src_shard AND f.offset >= r.src_start AND f.offset < r.src_next "
            f"AND {self._files_where(by_path=False)}"
        )
        chain = self.needed_dirs()
        bulk.insert_by_statement(c, sql, self._args, expected, chain, self.per_parent())
        self._fill_dir_metadata()

    def _fill_dir_metadata(self) -> None:
        """Directories the target knew keep their metadata; unknown fields come from here."""
        self._conn.execute(
            "UPDATE main.dirs SET mode = ifnull(main.dirs.mode, s.mode), "
            "uid = ifnull(main.dirs.uid, s.uid), gid = ifnull(main.dirs.gid, s.gid), "
            "mtime_ns = ifnull(main.dirs.mtime_ns, s.mtime_ns) "
            f"FROM (SELECT {self._DIR_TARGET} AS path, d.mode, d.uid, d.gid, d.mtime_ns "
            f"FROM {SCHEMA}.dirs d WHERE {self._dirs_where()}) AS s "
            "WHERE main.dirs.path = s.path AND (main.dirs.mode IS NULL OR main.dirs.uid IS NULL "
            "OR main.dirs.gid IS NULL OR main.dirs.mtime_ns IS NULL)",
            self._args,
        )

    def drop_temp_tables(self) -> None:
        for table in (_FILES, _DIRS, _MOVES, _SKIP):
            self._conn.execute(f"DROP TABLE IF EXISTS {table}")
