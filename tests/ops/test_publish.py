"""``barecat publish``: the index laid out for remote reading with every row kept, the
sidecar built and checked, nothing changed when run again, and an archive that barecat
0.3.1 still reads and writes."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import (
    ArchiveLockedBarecatError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    NotEnoughSpaceBarecatError,
    SchemaVersionBarecatError,
)
from barecat.index.publishing import census, plain_connection, read_layout, rewrite
from barecat.index.sidecar import check_sidecar, is_fresh, read_head
from barecat.layout import remove_archive, sidecar_path
from barecat.ops.publish import publish
from helpers import PASSPHRASE, Run
from helpers.disks import fill, small_tmpfs
from helpers.killing import appeared, barecat_with, contents, grown, hidden_leftovers, kill_at
from helpers.reference import reference_env, reference_python

ALL = {f"dir{i % 9}/sub{i % 4}/f{i}.txt": b"%d " % i * (i % 40) for i in range(1500)}
FILES = {p: data for i, (p, data) in enumerate(ALL.items()) if i % 5}
"""What the archive holds: every fifth file of ALL was deleted."""


@pytest.fixture
def archive(tmp_path: Path) -> str:
    path = str(tmp_path / "photos.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        for p, data in ALL.items():
            bc[p] = data
        for p in ALL.keys() - FILES.keys():  # free pages and holes for VACUUM to squeeze out
            del bc[p]
    return path


def rows(path: str) -> tuple[tuple[int, ...], str]:
    with plain_connection(path, "ro") as conn:
        return census(conn)


def test_publish_rewrites_the_index_keeping_every_row(archive: str) -> None:
    before = rows(archive)
    assert read_layout(archive).page_size == 4096
    summary = publish(archive)
    layout = read_layout(archive)
    assert (layout.page_size, layout.journal_mode, layout.free_pages) == (65536, "delete", 0)
    assert summary.rewritten and not summary.already_published
    assert rows(archive) == before
    assert summary.sidecar is not None and summary.files_checked == len(FILES)
    assert summary.sidecar.total_bytes == os.path.getsize(sidecar_path(archive))
    with barecat.Barecat(archive) as bc:
        assert dict(bc.items()) == FILES


def test_a_second_publish_changes_no_byte(archive: str, run: Run) -> None:
    publish(archive)
    index, sidecar = Path(archive), Path(sidecar_path(archive))
    state = (index.read_bytes(), index.stat().st_mtime_ns, sidecar.read_bytes())
    state += (sidecar.stat().st_mtime_ns,)
    code, out, err = run("publish", archive)
    assert (code, err) == (0, "")
    assert "already published" in out and "nothing changed" in out
    assert (index.read_bytes(), index.stat().st_mtime_ns, sidecar.read_bytes()) == state[:3]
    assert sidecar.stat().st_mtime_ns == state[3]


def test_a_damaged_sidecar_is_built_again(archive: str) -> None:
    publish(archive)
    sidecar = Path(sidecar_path(archive))
    good = sidecar.read_bytes()
    damaged = bytearray(good)
    damaged[-10] ^= 1  # in the last bucket: the head still matches the index
    sidecar.write_bytes(damaged)
    assert is_fresh(archive, str(sidecar))
    summary = publish(archive)
    assert not summary.already_published and not summary.rewritten
    rebuilt = sidecar.read_bytes()
    assert check_sidecar(archive, str(sidecar)) == len(FILES)
    # the same buckets; only the head differs (it records the index's new stamp)
    assert rebuilt[-100:] == good[-100:]


def test_each_publication_stamps_the_index_so_no_other_index_matches_its_sidecar(
    tmp_path: Path,
) -> None:
    """Two archives built alike (same files, same commits: same size and change counter)
    still have headers of their own once published, so one's sidecar is stale for the
    other."""
    paths = []
    for name in ("a", "b"):
        path = str(tmp_path / name / "x.barecat")
        with barecat.Barecat(path, readonly=False) as bc:
            bc.add_many(sorted(FILES.items()))
        publish(path)
        paths.append(path)
    first, second = (Path(p).read_bytes()[:100] for p in paths)
    assert first[24:28] == second[24:28]  # the same change counter...
    assert first != second  # ...but another stamp
    assert not is_fresh(paths[1], sidecar_path(paths[0]))


def test_the_cli_says_what_it_did(archive: str, run: Run) -> None:
    code, out, err = run("publish", archive)
    assert (code, err) == (0, "")
    assert "index rewritten: 4 KiB pages" in out and "-> 64 KiB pages" in out
    for part in ("head", "interior", "buckets", f"{len(FILES)} files"):
        assert part in out
    assert out.splitlines()[-1].startswith(f"Published {archive} in ")


def test_publish_refuses_urls_missing_sealed_and_locked_archives(
    archive: str, tmp_path: Path, run: Run
) -> None:
    with pytest.raises(InvalidPathBarecatError, match="local archive; publish it before"):
        publish("s3://bucket/photos.barecat")
    code, _, err = run("publish", "s3://bucket/photos.barecat")
    assert code == 1 and "publish it before uploading" in err
    with pytest.raises(FileNotFoundBarecatError):
        publish(str(tmp_path / "nope"))
    sealed = str(tmp_path / "sealed.barecat")
    with barecat.Barecat(sealed, readonly=False, passphrase=PASSPHRASE) as bc:
        bc["a"] = b"secret"
    with pytest.raises(SchemaVersionBarecatError, match=r"sealed archive .* not supported yet"):
        publish(sealed)
    assert not os.path.exists(sidecar_path(sealed))
    with (
        barecat.Barecat(archive, readonly=False),
        pytest.raises(ArchiveLockedBarecatError, match="close it before publishing"),
    ):
        publish(archive)
    assert not os.path.exists(sidecar_path(archive))


def test_a_wal_index_is_checkpointed_and_published(archive: str) -> None:
    conn = sqlite3.connect(archive)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("UPDATE files SET mode = 420 WHERE path = 'dir1/sub1/f1.txt'")
    conn.commit()
    conn.close()  # (the last connection checkpoints: keep the WAL with a second one)
    before = rows(archive)
    summary = publish(archive)
    assert summary.layout_before.journal_mode == "wal" and summary.rewritten
    assert rows(archive) == before and read_layout(archive).journal_mode == "delete"


def run_reference(snippet: str, *args: str) -> str:
    done = subprocess.run(
        [reference_python(), "-I", "-c", snippet, *args],
        capture_output=True,
        text=True,
        env=reference_env(),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


READ_ALL = """
import barecat, sys, hashlib
with barecat.Barecat(sys.argv[1]) as bc:
    print(len(bc), hashlib.sha256(repr(sorted(bc.items())).encode()).hexdigest())
"""
WRITE = """
import barecat, sys
with barecat.Barecat(sys.argv[1], readonly=False) as bc:
    bc["new/from-0.3.1"] = b"written by 0.3.1"
    del bc["dir1/sub1/f1.txt"]
"""


def test_barecat_031_reads_and_writes_a_published_archive(archive: str) -> None:
    import hashlib

    publish(archive)
    expected = hashlib.sha256(repr(sorted(FILES.items())).encode()).hexdigest()
    assert run_reference(READ_ALL, archive).split() == [str(len(FILES)), expected]
    head = read_head(sidecar_path(archive))
    run_reference(WRITE, archive)
    index = Path(archive).read_bytes()
    assert not head.matches(index[:100], len(index))
    assert not is_fresh(archive, sidecar_path(archive))
    now = {**FILES, "new/from-0.3.1": b"written by 0.3.1"}
    del now["dir1/sub1/f1.txt"]
    with barecat.Barecat(archive) as bc:
        assert dict(bc.items()) == now  # read through SQLite, the sidecar unused
    again = publish(archive)
    assert not again.already_published and is_fresh(archive, sidecar_path(archive))
    assert again.files_checked == len(now)
    assert run_reference(READ_ALL, archive).split()[0] == str(len(now))


def test_the_sidecar_goes_with_its_archive(archive: str, tmp_path: Path, run: Run) -> None:
    """Replaced (create -f) or removed, an archive takes its sidecar with it: no stale
    sidecar is left beside a new archive of the same name."""
    publish(archive)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x").write_bytes(b"new")
    code, _, err = run("create", "-f", "-C", str(tmp_path / "src"), archive, "x")
    assert (code, err) == (0, "")
    assert not os.path.exists(sidecar_path(archive))
    publish(archive)
    remove_archive(archive)
    assert os.listdir(tmp_path) == ["src"]


KILLED_MID_COMMIT = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")  # pages spill into the file before the commit
conn.execute("BEGIN")
conn.execute("UPDATE files SET mode = 1, size = size + 1")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crashed_writers_hot_journal_is_rolled_back_first(archive: str) -> None:
    before = rows(archive)
    killed = subprocess.run([sys.executable, "-I", "-c", KILLED_MID_COMMIT, archive])
    assert killed.returncode == -signal.SIGKILL
    assert os.path.getsize(archive + "-journal") > 0
    summary = publish(archive)
    assert summary.rewritten and rows(archive) == before
    with barecat.Barecat(archive) as bc:
        assert dict(bc.items()) == FILES


def test_a_damaged_index_is_a_barecat_error_naming_it(archive: str, tmp_path: Path) -> None:
    data = bytearray(Path(archive).read_bytes())
    data[4096 : 4096 * 3] = bytes(range(256)) * 32  # pages 2 and 3: b-tree pages no more
    Path(archive).write_bytes(data)
    with pytest.raises(barecat.BarecatError, match=re.escape(archive)):
        publish(archive)


def test_a_full_disk_leaves_the_archive_as_it_was(tmp_path: Path) -> None:
    """Out of space in the VACUUM's journal or in the sidecar, publish fails naming the
    full disk; the index keeps its rows (and its layout when VACUUM failed), no sidecar or
    temporary file is left, and once there is room it publishes."""
    with small_tmpfs(tmp_path, "8m") as disk:
        path = str(disk / "photos.barecat")
        with barecat.Barecat(path, readonly=False) as bc:
            bc.add_many(ALL.items())
        before = rows(path)
        filler = fill(disk)
        with pytest.raises(NotEnoughSpaceBarecatError, match=r"[Dd]isk full"):
            publish(path)
        assert rows(path) == before and read_layout(path).page_size == 4096
        filler.unlink()
        rewrite(path)  # the index in the published layout: only the sidecar is left to write
        filler = fill(disk)
        with pytest.raises(NotEnoughSpaceBarecatError, match=r"[Dd]isk full"):
            publish(path)  # (out of room stamping the index, or writing the sidecar)
        assert rows(path) == before
        assert not [name for name in os.listdir(disk) if "sidecar" in name]
        filler.unlink()
        assert publish(path).files_checked == len(ALL)


MANY = {f"d{i % 50}/f{i:06d}": b"%d" % i for i in range(30_000)}


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["vacuum", "sidecar-written", "sidecar-checked"])
def test_a_publish_killed_at_any_moment_loses_nothing(tmp_path: Path, moment: str) -> None:
    """SIGKILLed while VACUUM writes its journal, while the sidecar is written under its
    temporary name, or while it is checked after its rename: the archive reads every file
    as before, and the next publish finishes the work and leaves no temporary file."""
    path = str(tmp_path / "big.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc.add_many(MANY.items())
    before = rows(path)
    sidecar = sidecar_path(path)
    states = {
        "vacuum": grown(path + "-journal", 1),
        "sidecar-written": appeared(
            lambda child: f"{tmp_path}/.big.barecat-sidecar.partial-{child.pid}"
        ),
        "sidecar-checked": appeared(sidecar),
    }
    killed = kill_at([*barecat_with(""), "publish", path], states[moment])
    assert killed.cut_short, "the publish ended before the moment to kill it"
    assert contents(path) == MANY and rows(path) == before
    summary = publish(path)
    assert summary.files_checked == len(MANY) and is_fresh(path, sidecar)
    assert hidden_leftovers(str(tmp_path)) == []
    assert contents(path) == MANY


def commit_from_another_program(archive: str) -> str:
    """A deletion committed by a plain SQLite connection that does not wait for locks
    (as barecat 0.3.1's, which takes no barecat lock): "written", or SQLite's error."""
    other = sqlite3.connect(archive, timeout=0)
    try:
        other.execute("DELETE FROM files WHERE path = 'dir1/sub1/f1.txt'")
        other.commit()
        return "written"
    except sqlite3.OperationalError as e:
        return str(e)
    finally:
        other.close()


def test_no_other_program_writes_between_the_counts_and_vacuum(
    archive: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program's commit (barecat 0.3.1 takes no barecat lock) waits for the
    rewrite: its write, tried as the rows are first counted, finds the index locked."""
    from barecat.index import publishing

    tried: list[str] = []
    real_census = publishing.census

    def census_meanwhile_written(conn: sqlite3.Connection) -> tuple[tuple[int, ...], str]:
        if not tried:
            tried.append(commit_from_another_program(archive))
        return real_census(conn)

    monkeypatch.setattr(publishing, "census", census_meanwhile_written)
    before = rows(archive)
    rewrite(archive)
    assert tried == ["database is locked"] and rows(archive) == before


def test_no_other_program_commits_between_the_build_and_its_check(
    archive: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit tried between the sidecar's build and its check (barecat 0.3.1 takes no
    barecat lock) finds the index locked, so the check sees the state built from."""
    from barecat.ops import publish as publishing_op

    tried: list[str] = []
    real_check = publishing_op.check_sidecar

    def check_meanwhile_written(index: str, sidecar: str) -> int:
        tried.append(commit_from_another_program(archive))
        return real_check(index, sidecar)

    monkeypatch.setattr(publishing_op, "check_sidecar", check_meanwhile_written)
    assert publish(archive).files_checked == len(FILES)
    assert tried == ["database is locked"] and is_fresh(archive, sidecar_path(archive))


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE files SET mode = 1 WHERE path = 'dir1/sub1/f1.txt'",
        "UPDATE files SET path = 'dir1/sub1/f1.txT' WHERE path = 'dir1/sub1/f1.txt'",
        "UPDATE dirs SET num_files = num_files + 1 WHERE path = 'dir1'",
        "UPDATE config SET value_int = 7 WHERE key = 'use_triggers'",
    ],
)
def test_the_row_check_sees_any_changed_value(archive: str, change: str) -> None:
    before = rows(archive)
    with sqlite3.connect(archive) as conn:
        conn.execute(change)
    assert rows(archive) != before and rows(archive)[0] == before[0]
