"""Damaged, unreadable and unwritable indexes give barecat's errors naming the index.

Real index files damaged on disk (config rows, pages, text that is not UTF-8) and a real
directory made unwritable under a live writer: every API call raises a ``BarecatError``
(also the matching builtin) whose message names the index file, and the command line
says it in one line, without a traceback. Fuzzing the same: ``test_index_file_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    DamagedIndexBarecatError,
)
from helpers import Run

FILES = {f"d{i % 4}/sub{i % 3}/f{i:03d}.txt": b"x%d" % i * (i % 7) for i in range(300)}


@pytest.fixture
def archive(tmp_path: Path) -> str:
    path = str(tmp_path / "a.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        for p, data in FILES.items():
            bc[p] = data
    return path


def _sql(archive: str, *statements: str) -> None:
    conn = sqlite3.connect(archive)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def _one_clear_line(run: Run, *argv: str) -> str:
    code, _, err = run(*argv)
    assert code == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schema_version_major", "NULL"),
        ("schema_version_minor", "NULL"),
        ("schema_version_major", "'abc'"),
        ("schema_version_minor", "x'80ff'"),
        ("shard_size_limit", "'1G'"),
        ("shard_size_limit", "2.5"),
    ],
)
def test_a_damaged_config_value_is_one_clear_error(
    archive: str, run: Run, key: str, value: str
) -> None:
    _sql(archive, f"UPDATE config SET value_int = {value} WHERE key = '{key}'")
    with pytest.raises(DamagedIndexBarecatError, match=key.replace("_major", "") + "|NULL") as e:
        barecat.Barecat(archive)
    assert isinstance(e.value, ValueError) and e.value.filename == archive
    assert archive in str(e.value)
    for argv in (["ls", archive], ["add", archive, __file__], ["verify", archive]):
        assert archive in _one_clear_line(run, *argv)


def test_a_null_shard_size_limit_is_no_limit_as_in_0_3_1(archive: str) -> None:
    _sql(archive, "UPDATE config SET value_int = NULL WHERE key = 'shard_size_limit'")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc["new.txt"] = b"new"
        assert bc.get_many(["new.txt", "d0/sub0/f000.txt"]) == [b"new", b""]


def test_a_damaged_sealing_config_row_is_one_clear_error(tmp_path: Path, run: Run) -> None:
    archive = str(tmp_path / "z.barecat")
    with barecat.Barecat(archive, readonly=False, compression="zstd") as bc:
        bc["a.txt"] = b"compressed " * 100
    _sql(archive, "UPDATE config SET value_text = NULL WHERE key = 'sealing_codec'")
    with pytest.raises(DamagedIndexBarecatError, match="'sealing_codec' holds NULL"):
        barecat.Barecat(archive)
    assert archive in _one_clear_line(run, "cat", archive, "a.txt")


def test_a_sealed_archive_whose_version_row_is_lost_is_refused(tmp_path: Path, run: Run) -> None:
    archive = str(tmp_path / "z.barecat")
    with barecat.Barecat(archive, readonly=False, compression="zstd") as bc:
        bc["a.txt"] = b"compressed " * 100
    _sql(archive, "DELETE FROM config WHERE key = 'schema_version_major'")
    with pytest.raises(DamagedIndexBarecatError, match="sealing settings"):
        barecat.Barecat(archive)  # else: the sealed bytes served as the file's
    assert "schema version 0.3" in _one_clear_line(run, "cat", archive, "a.txt")


def _api_calls(bc: barecat.Barecat) -> dict[str, Callable[[], object]]:
    some = sorted(FILES)[::37]
    return {
        "listdir": lambda: bc.listdir("d1"),
        "files": lambda: list(bc.index.iter_all_filepaths()),
        "records": lambda: list(bc.iter_fileinfos()),
        "walk": lambda: list(bc.walk("")),
        "glob": lambda: bc.glob("**", recursive=True),
        "len": lambda: len(bc),
        "total_size": lambda: bc.total_size,
        "stat": lambda: bc.stat("d2/sub1"),
        "getitem": lambda: [bc[p] for p in some],
        "get_many": lambda: bc.get_many(some),
        "verify": lambda: bc.verify(),
    }


def _page_of(archive: str, name: str) -> int:
    conn = sqlite3.connect(archive)
    try:
        row = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,))
        return int(row.fetchone()[0])
    finally:
        conn.close()


def test_a_damaged_page_is_a_damaged_index_error_from_every_call(archive: str, run: Run) -> None:
    conn = sqlite3.connect(archive)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    for table in ("files", "idx_files_path", "dirs"):
        damaged = archive.replace("a.barecat", f"{table}.barecat")
        for name in os.listdir(os.path.dirname(archive)):
            if name.startswith("a.barecat-shard"):
                shutil.copy(os.path.join(os.path.dirname(archive), name), damaged + name[9:])
        shutil.copy(archive, damaged)
        with open(damaged, "r+b") as f:  # the table's root page: its header, then garbage
            f.seek((_page_of(archive, table) - 1) * page_size)
            f.write(b"\x0d" + bytes(range(7, 207)))
        failed = set()
        with barecat.Barecat(damaged, lookup_table=False) as bc:
            for call, step in _api_calls(bc).items():
                try:
                    step()
                except BarecatError as e:
                    assert isinstance(e, (BarecatIntegrityError, OSError)), (call, e)
                    assert damaged in str(e) or "Damaged index entry" in str(e), (call, e)
                    failed.add(call)
        assert failed, f"no call noticed the damaged {table}"
        if table == "files":  # (paths alone come from the index on paths)
            assert {"records", "getitem", "get_many", "walk", "verify"} <= failed
            assert "Damaged index" in _one_clear_line(run, "ls", "-l", damaged, "d1/sub1")


def _flip(archive: str, at: int, mask: int) -> None:
    with open(archive, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ mask]))


def test_an_index_counting_fewer_rows_than_it_holds_opens_without_a_lookup_table(
    archive: str,
) -> None:
    """The lookup table is sized by ``count(*)``, which SQLite answers from an index: a
    damaged one (its root page's cell count, here) counted 44 of 300 files, and building
    the table probed for an empty slot forever."""
    _flip(archive, _page_of(archive, "idx_files_shard_offset") * 4096 - 4096 + 3, 1)
    script = (
        "import sys, barecat\n"
        "with barecat.Barecat(sys.argv[1], lookup_table=True) as bc:\n"
        "    print(bc.index.lookup_table_size, *[d.hex() for d in bc.get_many(sys.argv[2:])])"
    )
    wanted = ["d1/sub2/f005.txt", "d0/sub2/f008.txt"]
    done = subprocess.run(
        [sys.executable, "-c", script, archive, *wanted],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # no table; SQLite answers, rightly
    assert done.stdout.split() == ["None", *(FILES[p].hex() for p in wanted)]
    with barecat.Barecat(archive) as bc:
        assert not bc.verify().ok


def test_a_failed_open_leaves_no_descriptor_open(archive: str) -> None:
    conn = sqlite3.connect(archive)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    _flip(archive, (_page_of(archive, "files") - 1) * page_size, 0xFF)  # its page type
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(DamagedIndexBarecatError):  # the table built at open
            barecat.Barecat(archive, lookup_table=True)
    assert len(os.listdir("/proc/self/fd")) == before


def test_text_that_is_not_utf8_is_a_damaged_index_error(archive: str, run: Run) -> None:
    _sql(archive, "UPDATE files SET path = CAST(x'64302f80ff' AS TEXT) WHERE rowid = 5")
    with barecat.Barecat(archive) as bc:
        for call in ("files", "records", "walk", "glob", "verify"):
            with pytest.raises(DamagedIndexBarecatError, match="UTF-8") as e:
                _api_calls(bc)[call]()
            assert e.value.filename == archive
        assert bc.get_many(["d1/sub1/f001.txt"]) == [FILES["d1/sub1/f001.txt"]]  # the rest
    assert "UTF-8" in _one_clear_line(run, "find", archive)


def test_a_path_that_is_not_text_is_left_out_of_walks_and_named_by_verify(archive: str) -> None:
    _sql(archive, "UPDATE files SET path = x'64302f7a' WHERE rowid = 5")  # a blob 'd0/z'
    with barecat.Barecat(archive) as bc:
        walked = [f for _, _, files in bc.walk("") for f in files]
        assert len(walked) == len(FILES) - 1
        assert any("not text" in problem for problem in bc.index.find_inconsistencies())
        assert not bc.verify().ok


def test_sql_of_ones_own_keeps_sqlite_errors(archive: str) -> None:
    with barecat.Barecat(archive) as bc, pytest.raises(sqlite3.OperationalError):
        bc.index.conn.execute("SELECT nonsense FROM files")


_WRITER = textwrap.dedent(
    """
    import json, os, sys
    import barecat
    archive = sys.argv[1]
    bc = barecat.Barecat(archive, readonly=False)
    for i in range(3):
        bc[f"kept{i}.txt"] = b"kept"
    bc.commit()
    os.chmod(os.path.dirname(archive), 0o555)  # the journal can no longer be made
    try:
        bc["lost.txt"] = b"lost"
        bc.commit()
        outcome = {"raised": None}
    except Exception as e:
        outcome = {"raised": [c.__name__ for c in type(e).__mro__], "message": str(e)}
    bc.close()
    print(json.dumps(outcome))
    """
)


def _unprivileged() -> list[str]:
    """A command prefix that makes root obey file permissions (none for other users)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv (util-linux) is missing")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def test_a_directory_made_unwritable_mid_write_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    archive = str(folder / "w.barecat")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    prefix = _unprivileged()
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", _WRITER, archive],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outcome = json.loads(done.stdout)
        assert outcome["raised"] is not None and "ReadOnlyBarecatError" in outcome["raised"]
        assert "PermissionError" in outcome["raised"] and archive in outcome["message"]
        cli = subprocess.run(
            [*prefix, sys.executable, "-m", "barecat", "add", archive, __file__],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr
        assert len(cli.stderr.splitlines()) == 1 and archive in cli.stderr
    finally:
        os.chmod(folder, 0o755)
    with barecat.Barecat(archive) as bc:  # what was committed before is all there
        assert sorted(bc) == ["kept0.txt", "kept1.txt", "kept2.txt"]
        assert bc.verify().ok


@pytest.mark.parametrize("field", ["mtime_ns", "uid", "mode"])
def test_a_number_beyond_64_bits_is_refused_naming_the_entry(tmp_path: Path, field: str) -> None:
    path = str(tmp_path / "n.barecat")
    huge = {field: 2**70 if field != "mode" else -(2**70)}
    with barecat.Barecat(path, readonly=False) as bc:
        bc["kept.txt"] = b"kept"
        with pytest.raises(barecat.OutOfRangeBarecatError, match=f"one.txt: .*{field}="):
            bc.add(barecat.BarecatFileInfo("one.txt", **huge), data=b"1")  # type: ignore[arg-type]
        with pytest.raises(OverflowError, match=f"many/b.txt: .*{field}="):
            bc.add_many([
                (barecat.BarecatFileInfo("many/a.txt"), b"a"),
                (barecat.BarecatFileInfo("many/b.txt", **huge), b"b"),  # type: ignore[arg-type]
            ])  # fmt: skip
        with pytest.raises(ValueError, match=f"dir: .*{field}="):
            bc.add(barecat.BarecatDirInfo("dir", **huge))  # type: ignore[arg-type]
        with pytest.raises(barecat.OutOfRangeBarecatError, match=r"kept\.txt"):
            bc.chmod("kept.txt", 2**64)
        bc["after.txt"] = b"after"  # the archive goes on
    with barecat.Barecat(path) as bc:
        assert sorted(bc.files()) == ["after.txt", "kept.txt"]
        assert bc["kept.txt"] == b"kept" and bc.verify_integrity()
