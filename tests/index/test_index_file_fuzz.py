"""Fuzzing the opening of an index: real index files damaged on disk, then used.

Each example copies a small real archive (plain or compressed) and damages its index
file as a bad disk, a crash of another tool or a hostile hand would: config rows set to
NULL, text, reals, blobs or text that is not UTF-8, or removed; rows of ``files`` and
``dirs`` given such values (paths included); bytes of chosen pages flipped; the file
cut short. Then it opens the archive and makes the common calls (listings, totals,
walk, glob, lookups, ``bc[path]``, ``get_many``, verify). Each call works or raises a
``BarecatError``; a mapping access may raise ``KeyError`` for a listed path, or read
another file's bytes, only when the index disagrees with itself (its table and its index
on paths), which verify must then report. Never any other exception. (Rows with
hostile numbers: ``test_index_fuzz.py``.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import barecat
from barecat.exceptions import BarecatError
from helpers.fuzzing import fuzz_settings

pytestmark = pytest.mark.slow

FILES = {f"d{i % 3}/s{i % 4}/f{i:03d}.txt": b"x%d," % i * (i % 9) for i in range(120)}
CONFIG_KEYS = [
    *("schema_version_major", "schema_version_minor", "shard_size_limit", "use_triggers"),
    *("sealing", "sealing_codec", "sealing_level", "sealing_block_size"),
]
VALUES = [  # SQL for a value
    *("NULL", "'abc'", "''", "x'80ff'", "x''", "1.5", "-1", "0", "2", "9223372036854775807"),
    *("CAST(x'80ff61' AS TEXT)", "CAST(x'64302f80' AS TEXT)", "'a//b'", "'../x'", "'d0'"),
]
FILE_COLUMNS = ["path", "shard", "offset", "size", "crc32c", "mode", "mtime_ns"]
DIR_COLUMNS = ["path", "num_subdirs", "num_files", "num_files_tree", "size_tree", "mode"]

# The "sealing" row is changed but never removed: removed with the schema version, what
# is left is a plain version over a sealed archive's tables, which the check of the schema
# at open judges (not this index's errors).
config_edits = st.lists(  # (key, column, value); column None: the row removed
    st.one_of(
        st.tuples(
            st.sampled_from(CONFIG_KEYS),
            st.sampled_from(["value_int", "value_text"]),
            st.sampled_from(VALUES),
        ),
        st.tuples(
            st.sampled_from([k for k in CONFIG_KEYS if k != "sealing"]), st.none(), st.just("")
        ),
    ),
    max_size=3,
)
row_edits = st.lists(  # (table, rowid, column, value)
    st.one_of(
        st.tuples(
            st.just("files"),
            st.integers(1, len(FILES)),
            st.sampled_from(FILE_COLUMNS),
            st.sampled_from(VALUES),
        ),
        st.tuples(
            st.just("dirs"),
            st.integers(1, 20),
            st.sampled_from(DIR_COLUMNS),
            st.sampled_from(VALUES),
        ),
    ),
    max_size=3,
)
flips = st.lists(  # (page, byte in the page, XOR mask); modulo the file's pages
    st.tuples(st.integers(0, 63), st.integers(0, 4095), st.integers(1, 255)), max_size=6
)
cuts = st.one_of(st.none(), st.integers(0, 1 << 20))  # the length kept, modulo the size


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """A plain and a compressed archive, each alone in its folder."""
    made = {}
    for compressed in (False, True):
        folder = tmp_path_factory.mktemp("compressed" if compressed else "plain")
        options: dict[str, Any] = {"compression": "zstd"} if compressed else {}
        with barecat.Barecat(
            str(folder / "t.barecat"), readonly=False, shard_size_limit=4000, **options
        ) as bc:
            for p, data in FILES.items():
                bc[p] = data
        for name in os.listdir(folder):
            if name.endswith("-lookup"):
                os.remove(folder / name)
        made[compressed] = folder
    return made


@contextmanager
def damaged_copy(
    template: Path,
    config: list[tuple[str, str | None, str]],
    rows: list[tuple[str, int, str, str]],
    flipped: list[tuple[int, int, int]],
    cut: int | None,
) -> Iterator[str]:
    """A copy of the archive in ``template`` with its index damaged (see the module doc;
    edits SQLite refuses are skipped)."""
    with tempfile.TemporaryDirectory() as directory:
        for name in os.listdir(template):
            shutil.copy(template / name, directory)
        path = os.path.join(directory, "t.barecat")
        conn = sqlite3.connect(path)
        try:
            for key, column, value in config:
                if column is None:
                    _try(conn, "DELETE FROM config WHERE key = ?", (key,))
                else:
                    _try(conn, f"UPDATE config SET {column} = {value} WHERE key = ?", (key,))
            for table, rowid, column, value in rows:
                _try(conn, f"UPDATE {table} SET {column} = {value} WHERE rowid = ?", (rowid,))
            conn.commit()
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            for page, at, mask in flipped:
                f.seek(page % (size // page_size) * page_size + at % page_size)
                byte = f.read(1)[0]
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([byte ^ mask]))
            if cut is not None:
                f.truncate(cut % (size + 1))
        yield path


def _try(conn: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> None:
    with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL, UNIQUE, a trigger's refusal
        conn.execute(sql, args)


def _works_or_barecat_error(call: Callable[[], object]) -> object:
    try:
        return call()
    except BarecatError as e:
        return e


def use_every_way(path: str, lookup_table: bool) -> None:
    """Open the archive at ``path`` and make the common calls (see the module doc)."""
    opened = _works_or_barecat_error(lambda: barecat.Barecat(path, lookup_table=lookup_table))
    if not isinstance(opened, barecat.Barecat):
        return
    with opened as bc:
        listed = _works_or_barecat_error(lambda: list(bc.index.iter_all_filepaths()))
        for call in (
            lambda: bc.listdir(""),
            lambda: [bc.listdir(d) for d in ("d0", "d1/s1", "d2/s3")],
            lambda: list(bc.iter_fileinfos()),
            lambda: list(bc.index.iter_all_dirinfos()),
            lambda: list(bc.walk("")),
            lambda: list(bc.walk_infos("d1")),
            lambda: bc.glob("**", recursive=True),
            lambda: bc.glob("d?/s1/*.txt"),
            lambda: (len(bc), bc.total_size, bc.num_dirs),
            lambda: [bc.stat(d) for d in ("", "d0", "d2/s1")],
        ):
            _works_or_barecat_error(call)
        paths = [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
        missing, wrong = _read_back(bc, paths)
        report = _works_or_barecat_error(bc.verify)
        _works_or_barecat_error(lambda: bc.verify(quick=True))
        if (missing or wrong) and not isinstance(report, BarecatError):
            assert not report.ok, f"{missing[:3]} not found, {wrong[:3]} misread, verify passes"


def _read_back(bc: barecat.Barecat, paths: list[str]) -> tuple[list[str], list[str]]:
    """Read listed ``paths`` one by one and as a batch: (those not found, those read as
    other bytes than stored). Both can only come from an index that disagrees with itself
    (a damaged index on paths pointing at another row: lookups by path do not read the
    path in the row again, see docs/safety.md); anything else raised is barecat's."""
    missing, wrong = [], []
    for p in paths[:25]:
        try:
            data = bc[p]
        except KeyError as e:
            if not isinstance(e, BarecatError):
                missing.append(p)
            continue
        except BarecatError:
            continue
        if p in FILES and data != FILES[p]:
            wrong.append(p)
        _works_or_barecat_error(lambda p=p: bc.read(p))
    try:
        datas = bc.get_many(paths[:60])
    except KeyError as e:
        if not isinstance(e, BarecatError):
            missing.append(e.args[0])
    except BarecatError:
        pass
    else:
        wrong += [p for p, d in zip(paths[:60], datas, strict=True) if FILES.get(p, d) != d]
    return missing, wrong


@pytest.mark.fuzz
@fuzz_settings(200)
@given(st.booleans(), config_edits, row_edits, flips, cuts, st.booleans())
@example(False, [("schema_version_major", "value_int", "NULL")], [], [], None, False)
@example(False, [("schema_version_minor", "value_int", "'abc'")], [], [], None, False)
@example(True, [("sealing_codec", "value_text", "NULL")], [], [], None, False)
@example(False, [], [("files", 7, "path", "CAST(x'64302f80' AS TEXT)")], [], None, False)
@example(False, [], [("files", 7, "path", "x'80ff'")], [], None, False)
@example(False, [], [("dirs", 3, "path", "x'80ff'")], [], None, True)
@example(False, [], [], [(2, 0, 255)], None, False)  # a b-tree page's header: malformed
@example(False, [], [], [(38, 127, 128)], None, False)  # sqlite3's message not UTF-8
@example(False, [], [], [(5, 12, 1)], None, False)  # a path read as NULL: walk compared it
@example(False, [], [], [(5, 11, 2)], None, False)  # a path read as a number
@example(True, [], [], [(18, 25, 126)], None, False)  # a number where a walk ranged over text
@example(False, [], [], [(18, 3451, 1)], None, False)  # the path index leads to another row
@example(False, [], [], [(1, 11, 1)], None, True)  # counted 120 of 230 rows: the lookup
# table's build probed for a free slot forever
@example(True, [], [], [(3, 8, 1)], None, False)  # the major version's row lost: sealed
# bytes served as the files' (a plain schema version, with a sealing row)
def test_a_damaged_index_gives_only_barecat_errors(
    templates: dict[bool, Path],
    compressed: bool,
    config: list[tuple[str, str | None, str]],
    rows: list[tuple[str, int, str, str]],
    flipped: list[tuple[int, int, int]],
    cut: int | None,
    lookup_table: bool,
) -> None:
    with damaged_copy(templates[compressed], config, rows, flipped, cut) as path:
        use_every_way(path, lookup_table)
