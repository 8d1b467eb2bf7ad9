"""``barecat upgrade``: archives of older releases become schema 0.3, in place and atomically.

The old archives are checked in (``tests/data``, written by barecat 0.2.5 and 0.2.7, and
by hand in the unversioned 2023 layout; see ``make_old_archives.py``), so nothing here
needs the network. Each is copied to a temporary directory before being upgraded. The
kill test builds bigger old indexes by hand and SIGKILLs upgrades at random moments.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import crc32c
import pytest

import barecat
from barecat.exceptions import (
    ArchiveLockedBarecatError,
    CorruptIndexBarecatError,
    SchemaVersionBarecatError,
)
from barecat.ops.upgrade import BACKUP_SUFFIX, TEMP_SUFFIX, upgrade
from helpers import BIN, DATA, Run
from helpers.old_archives import check_upgraded, implied_dirs, sha
from helpers.reference import reference_python

GEN: dict[str, Any] = runpy.run_path(str(DATA / "make_old_archives.py"))

OLD_ARCHIVES = {"ref027-small": (0, 2), "ref025-sharded": (0, 2), "prev-small": (-1, 0)}


def copy_archive(name: str, where: Path) -> str:
    """Copy checked-in archive ``name`` (index and shards) into ``where``; its base path."""
    for src in DATA.iterdir():
        if src.name.startswith(name + "-"):
            shutil.copy(src, where / src.name)
    return str(where / name)


def old_rows(index: str, table: str, columns: str) -> dict[str, tuple[Any, ...]]:
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        rows = conn.execute(f"SELECT path, {columns} FROM {table}").fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


# -- the checked-in archives ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OLD_ARCHIVES))
def test_upgrade_checked_in_archive(name: str, tmp_path: Path) -> None:
    base = copy_archive(name, tmp_path)
    index = base + "-sqlite-index"
    before = sha(index)
    old_files = old_rows(index, "files", "shard, offset, size")
    result = upgrade(base, workers=2)
    assert result.upgraded and result.from_version == OLD_ARCHIVES[name]
    assert result.index_path == index and result.backup_path == index + BACKUP_SUFFIX
    # the index keeps its (old) name, the backup is the untouched old file, no leftovers
    assert not os.path.exists(base) and sha(index + BACKUP_SUFFIX) == before
    assert sorted(os.listdir(tmp_path)) == sorted(
        [p.name for p in DATA.iterdir() if p.name.startswith(name + "-")]
        + [Path(index).name + BACKUP_SUFFIX]
    )
    expected = GEN["final_files"](name)
    extra = GEN["SMALL_EMPTY_DIRS"] if name == "ref027-small" else []
    check_upgraded(base, expected, implied_dirs(list(expected), extra))
    # places are copied unchanged
    new_files = old_rows(index, "files", "shard, offset, size")
    assert new_files == old_files
    assert result.num_files == len(expected)


def test_upgrade_keeps_metadata_and_config(tmp_path: Path) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    file_meta = old_rows(index, "files", "crc32c, mode, uid, gid, mtime_ns")
    dir_meta = old_rows(index, "dirs", "mode, uid, gid, mtime_ns")
    upgrade(base)
    assert old_rows(index, "files", "crc32c, mode, uid, gid, mtime_ns") == file_meta
    assert old_rows(index, "dirs", "mode, uid, gid, mtime_ns") == dir_meta
    with barecat.Barecat(base) as bc:
        info = bc.index.lookup_file(GEN["SMALL_META_PATH"])
        for key, value in GEN["FILE_META"].items():
            assert getattr(info, key) == value
        d = bc.index.lookup_dir(GEN["SMALL_META_DIR"])
        assert (d.mode, d.uid, d.gid) == tuple(GEN["DIR_META"][k] for k in ("mode", "uid", "gid"))
        assert bc.shard_size_limit == barecat.SHARD_SIZE_UNLIMITED

    sharded = copy_archive("ref025-sharded", tmp_path)
    upgrade(sharded)
    with barecat.Barecat(sharded) as bc:
        assert bc.shard_size_limit == GEN["SHARDED_LIMIT"]


def test_upgrade_repairs_statistics_of_0_2_triggers(tmp_path: Path) -> None:
    base = copy_archive("ref025-sharded", tmp_path)
    index = base + "-sqlite-index"
    # the 0.2 trigger for a removed directory left the root's direct file count at -1
    assert old_rows(index, "dirs", "num_files")[""] == (-1,)
    result = upgrade(base)
    assert result.dirs_fixed == 1
    with barecat.Barecat(base) as bc:
        root = bc.index.lookup_dir("")
        assert (root.num_files, root.num_subdirs, root.num_files_tree) == (0, 1, 8)


def test_unversioned_gets_checksums_from_the_shards(tmp_path: Path) -> None:
    base = copy_archive("prev-small", tmp_path)
    with pytest.raises(SchemaVersionBarecatError, match="barecat upgrade"):
        barecat.Barecat(base)
    calls: list[tuple[Any, ...]] = []
    result = upgrade(
        base,
        workers=3,
        on_begin=lambda version, n: calls.append((version, n)),
        on_file=lambda size: calls.append((size,)),
    )
    expected = GEN["final_files"]("prev-small")
    assert calls[0] == ((-1, 0), len(expected))
    assert sorted(c[0] for c in calls[1:]) == sorted(len(d) for d in expected.values())
    assert result.checksums_computed == len(expected) and result.bad_files == []


@pytest.mark.parametrize("name", sorted(OLD_ARCHIVES))
def test_reference_reads_and_edits_the_upgraded_archive(name: str, tmp_path: Path) -> None:
    python = reference_python()
    base = copy_archive(name, tmp_path)
    upgrade(base)
    snippet = textwrap.dedent(
        """
        import json, sys, warnings
        warnings.simplefilter("error")  # the reference warns about schemas older than 0.3
        import barecat
        with barecat.Barecat(sys.argv[1]) as bc:
            files = {p: bc.read(p).hex() for p in bc.index.iter_all_filepaths()}
            dirs = sorted(bc.index.iter_all_dirpaths())
            ok = bool(bc.verify_integrity())
        with barecat.Barecat(sys.argv[1], readonly=False) as bc:
            bc["added/by/reference.txt"] = b"hello"
            victim = sorted(files)[0]
            bc.remove(victim)
        print(json.dumps({"files": files, "dirs": dirs, "ok": ok, "removed": victim}))
        """
    )
    proc = subprocess.run(
        [python, "-I", "-c", snippet, base], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    expected = GEN["final_files"](name)
    assert {p: bytes.fromhex(h) for p, h in seen["files"].items()} == expected
    assert seen["ok"]
    with barecat.Barecat(base) as bc:
        assert set(seen["dirs"]) | {"added", "added/by"} == set(bc.index.iter_all_dirpaths())
        assert bc["added/by/reference.txt"] == b"hello"
        assert seen["removed"] not in bc
        assert bc.index.find_inconsistencies() == []


# -- no-op, refusals, backups, leftovers -------------------------------------------------


def test_current_archive_is_left_alone(tmp_path: Path, run: Run) -> None:
    for src in DATA.glob("ref031-small.barecat*"):
        shutil.copy(src, tmp_path / src.name)
    base = str(tmp_path / "ref031-small.barecat")
    before = sha(base)
    result = upgrade(base, preserve_backup=False)
    assert not result.upgraded and result.from_version == (0, 3)
    assert result.backup_path is None and not os.path.exists(base + BACKUP_SUFFIX)
    code, out, _ = run("upgrade", base)
    assert code == 0 and "already at schema 0.3, nothing to do" in out
    assert sha(base) == before and sorted(os.listdir(tmp_path)) == [
        "ref031-small.barecat",
        "ref031-small.barecat-shard-00000",
    ]


def test_newer_schemas_are_refused(make_archive: Any) -> None:
    path = make_archive({"a": b"1"})
    for key, value in (("schema_version_minor", 4), ("schema_version_major", 1)):
        with sqlite3.connect(path) as c:
            c.execute("UPDATE config SET value_int = ? WHERE key = ?", (value, key))
        with pytest.raises(SchemaVersionBarecatError, match="newer"):
            upgrade(path)
    assert not os.path.exists(path + BACKUP_SUFFIX) and not os.path.exists(path + TEMP_SUFFIX)


def test_missing_and_garbage_indexes(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        upgrade(str(tmp_path / "nothing"))
    junk = tmp_path / "junk"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(CorruptIndexBarecatError):
        upgrade(str(junk))
    assert sorted(os.listdir(tmp_path)) == ["junk"]


@pytest.mark.parametrize("preserve", [True, False])
def test_backup_kept_or_removed(tmp_path: Path, preserve: bool) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    before = sha(index)
    result = upgrade(base, preserve_backup=preserve)
    assert os.path.exists(index + BACKUP_SUFFIX) == preserve
    if preserve:
        assert result.backup_path == index + BACKUP_SUFFIX and sha(result.backup_path) == before
    else:
        assert result.backup_path is None


def test_an_older_backup_is_replaced(tmp_path: Path) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    Path(index + BACKUP_SUFFIX).write_bytes(b"an older backup")
    before = sha(index)
    upgrade(base)
    assert sha(index + BACKUP_SUFFIX) == before


def test_leftovers_of_an_interrupted_run_are_replaced(tmp_path: Path) -> None:
    base = copy_archive("prev-small", tmp_path)
    index = base + "-sqlite-index"
    for leftover in (index + TEMP_SUFFIX, index + BACKUP_SUFFIX + TEMP_SUFFIX):
        Path(leftover).write_bytes(b"half-written")
    Path(index + TEMP_SUFFIX + "-journal").write_bytes(b"junk journal")
    upgrade(base)
    check_upgraded(
        base, GEN["final_files"]("prev-small"), implied_dirs(list(GEN["final_files"]("prev-small")))
    )
    assert sorted(p for p in os.listdir(tmp_path) if "sqlite-index" in p) == [
        "prev-small-sqlite-index",
        "prev-small-sqlite-index.old",
    ]


def test_inconsistent_result_is_not_installed(tmp_path: Path) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    with sqlite3.connect(index) as conn:  # a damaged 0.2 index: a path both file and dir
        conn.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
        conn.execute("INSERT INTO dirs (path) VALUES ('readme.txt')")
        conn.execute("UPDATE config SET value_int = 1 WHERE key = 'use_triggers'")
    before = sha(index)
    with pytest.raises(CorruptIndexBarecatError, match="both a file and a directory"):
        upgrade(base)
    assert sha(index) == before
    assert not os.path.exists(index + TEMP_SUFFIX) and not os.path.exists(index + BACKUP_SUFFIX)


def test_failure_at_the_swap_leaves_the_old_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    before = sha(index)
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        if src.endswith(TEMP_SUFFIX) and not src.endswith(BACKUP_SUFFIX + TEMP_SUFFIX):
            raise OSError(5, "simulated I/O error")
        real_replace(src, dst)

    monkeypatch.setattr("barecat.index.migrate.os.replace", failing_replace)
    with pytest.raises(OSError, match="simulated"):
        upgrade(base)
    assert sha(index) == before and not os.path.exists(index + TEMP_SUFFIX)
    monkeypatch.undo()
    assert upgrade(base).upgraded


def test_writer_holding_the_archive_blocks_upgrade(tmp_path: Path) -> None:
    base = copy_archive("ref027-small", tmp_path)
    with barecat.Barecat(base, readonly=False), pytest.raises(ArchiveLockedBarecatError):
        upgrade(base)
    index = base + "-sqlite-index"
    conn = sqlite3.connect(index)  # a foreign writer in the middle of a transaction
    conn.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(ArchiveLockedBarecatError):
            upgrade(base)
    finally:
        conn.close()
    assert upgrade(base).upgraded


def _crash_while_writing(index: str, wal: bool) -> None:
    """A writer that dies (os._exit) with a committed WAL or an uncommitted journal."""
    mode = "WAL" if wal else "DELETE"
    end = "conn.commit()" if wal else "pass"
    code = textwrap.dedent(
        f"""
        import os, sqlite3
        conn = sqlite3.connect({index!r})
        conn.execute("PRAGMA journal_mode = {mode}")
        conn.execute("PRAGMA cache_size = 1")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("BEGIN")
        conn.execute("UPDATE files SET mode = 4242 WHERE path = 'readme.txt'")
        conn.execute("CREATE TABLE filler (x)")
        conn.executemany("INSERT INTO filler VALUES (?)", [(os.urandom(500),)] * 200)
        {end}
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("wal", [True, False])
def test_crashed_writer_journal_is_settled_first(tmp_path: Path, wal: bool) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    _crash_while_writing(index, wal)
    assert os.path.exists(index + ("-wal" if wal else "-journal"))
    upgrade(base)
    for suffix in ("-wal", "-shm", "-journal"):
        assert not os.path.exists(index + suffix)
    with barecat.Barecat(base) as bc:
        assert bc.index.lookup_file("readme.txt").mode == (4242 if wal else None)
        assert bc.index.find_inconsistencies() == []


def test_read_only_index_is_upgraded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    os.chmod(index, 0o444)
    # as root every file is writable; make the upgrade see what other users would
    monkeypatch.setattr("barecat.index.migrate.os.access", lambda path, mode: False)
    assert upgrade(base).upgraded
    assert os.stat(index).st_mode & 0o777 == 0o444
    with barecat.Barecat(base) as bc:
        assert bc.index.schema_version == (0, 3) and bc.index.find_inconsistencies() == []


def test_unmergeable_wal_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = copy_archive("ref027-small", tmp_path)
    index = base + "-sqlite-index"
    _crash_while_writing(index, wal=True)
    before = sha(index)
    monkeypatch.setattr("barecat.index.migrate.os.access", lambda path, mode: False)
    with pytest.raises(barecat.ReadOnlyBarecatError, match="write-ahead log"):
        upgrade(base)
    assert sha(index) == before and os.path.getsize(index + "-wal") > 0
    assert not os.path.exists(index + TEMP_SUFFIX)


def test_bad_bytes_are_reported_and_the_backup_kept(tmp_path: Path, run: Run) -> None:
    base = copy_archive("prev-small", tmp_path)
    shard = Path(base + "-shard-00000")
    data = bytearray(shard.read_bytes())
    data[20] ^= 0xFF  # inside d/e/f.bin
    shard.write_bytes(bytes(data))
    os.remove(base + "-shard-00001")
    code, out, err = run("upgrade", "--no-preserve-backup", "-q", base)
    assert code == 1
    assert "d/e/f.bin: bytes differ from the CRC-32" in err
    assert "h/i.bin: bytes unreadable" in err
    assert os.path.exists(base + "-sqlite-index" + BACKUP_SUFFIX)
    assert "old index kept" in out
    with barecat.Barecat(base) as bc:
        assert bc.index.lookup_file("d/e/f.bin").crc32c == crc32c.crc32c(bytes(data[16:86]))
        assert bc.index.lookup_file("h/i.bin").crc32c is None
        assert bc.index.find_inconsistencies() == []


# -- command line --------------------------------------------------------------------------


def test_cli_upgrade(tmp_path: Path, run: Run) -> None:
    base = copy_archive("ref025-sharded", tmp_path)
    code, out, err = run("upgrade", "-j", "2", base)
    assert code == 0, err
    assert "from schema 0.2 to schema 0.3" in out
    assert "rebuilt the statistics of 1 directory" in out
    assert f"old index kept as {base}-sqlite-index.old" in out
    # the index file's own name works too, and a second run is a no-op
    code, out, _ = run("upgrade", base + "-sqlite-index")
    assert code == 0 and "nothing to do" in out
    code, out, _ = run("upgrade", "--help")
    assert code == 0 and "--no-preserve-backup" in out and "examples:" in out


def test_cli_upgrade_unversioned_without_backup(tmp_path: Path, run: Run) -> None:
    base = copy_archive("prev-small", tmp_path)
    code, out, _ = run("upgrade", "--no-preserve-backup", base)
    assert code == 0
    assert "unversioned" in out and "computed CRC32C of 5 files" in out
    assert not os.path.exists(base + "-sqlite-index" + BACKUP_SUFFIX)
    code, out, _ = run("verify", base)
    assert code == 0


def test_legacy_upgrade_database_script(tmp_path: Path) -> None:
    base = copy_archive("ref027-small", tmp_path)
    proc = subprocess.run(
        [BIN / "barecat-upgrade-database", "--workers", "2", base],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "deprecated" in proc.stderr and "Upgraded" in proc.stdout
    assert os.path.exists(base + "-sqlite-index" + BACKUP_SUFFIX)
    check_upgraded(
        base,
        GEN["final_files"]("ref027-small"),
        implied_dirs(list(GEN["final_files"]("ref027-small")), GEN["SMALL_EMPTY_DIRS"]),
    )
    proc = subprocess.run(
        [BIN / "barecat-upgrade-database", "--bogus"], capture_output=True, check=False
    )
    assert proc.returncode == 2
