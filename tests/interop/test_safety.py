"""Committed data survives crashes, full disks and failing writers (real processes, real disks)."""

from __future__ import annotations

import errno
import importlib
import io
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import barecat
from helpers import BARECAT
from helpers.disks import fill, small_tmpfs
from helpers.killing import check_after_kill, kill_at, printed
from helpers.mounting import FUSE_PROBLEM, served, server_log
from helpers.serving import server_process

WRITER = textwrap.dedent(
    """
    import sys, barecat
    path, interval = sys.argv[1], float(sys.argv[2])
    with barecat.Barecat(path, readonly=False, commit_interval=interval) as bc:
        bc.on_commit = lambda: print(len(bc), flush=True)  # a line per commit
        for i in range(1000000):
            bc[f"d{i % 7}/f{i:06d}"] = bytes([i % 251]) * (1 + (i * 37) % 4000)
    """
)


def written(n: int) -> dict[str, bytes]:
    """The first ``n`` files WRITER adds."""
    return {f"d{i % 7}/f{i:06d}": bytes([i % 251]) * (1 + (i * 37) % 4000) for i in range(n)}


@pytest.mark.parametrize(("interval", "commits"), [(0.02, 5), (0, 1), (0, 20), (0, 200)])
def test_kill_9_mid_write_keeps_committed_files(
    tmp_path: Path, interval: float, commits: int
) -> None:
    """A library writer killed after some commits (every 20 ms, or after every file):
    each committed file is there, repair and verify pass, and a later writer carries on
    (the dead one's lock is gone)."""
    path = str(tmp_path / "crash.barecat")
    killed = kill_at([sys.executable, "-c", WRITER, path, str(interval)], printed(commits))
    assert killed.cut_short
    committed = int(killed.lines[-1])
    kept = check_after_kill(path, written(committed))
    assert kept is not None and kept == written(len(kept))
    with barecat.Barecat(path, readonly=False) as bc:
        bc["after/crash"] = b"new"
    with barecat.Barecat(path) as bc:
        assert bc["after/crash"] == b"new" and bc.verify_integrity()


def test_failing_stream_leaves_archive_unchanged(archive_path: str) -> None:
    class Exploding(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
            self.calls += 1
            if self.calls > 3:
                raise OSError("source went away")
            b[:10] = b"0123456789"
            return 10

    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["ok"] = b"kept"
        with pytest.raises(OSError, match="source went away"):
            bc.add("broken", fileobj=Exploding(), bufsize=10)
        assert "broken" not in bc and len(bc) == 1
        bc["ok2"] = b"also kept"
    assert os.path.getsize(archive_path + "-shard-00000") == len(b"keptalso kept")
    with barecat.Barecat(archive_path) as bc:
        assert dict(bc.items()) == {"ok": b"kept", "ok2": b"also kept"}


@pytest.fixture
def tiny_disk(tmp_path):  # type: ignore[no-untyped-def]
    """A real 1 MiB tmpfs, so writes hit a genuine ENOSPC."""
    with small_tmpfs(tmp_path, "1m") as disk:
        yield disk


def test_disk_full_is_a_clear_error_and_loses_nothing(tiny_disk) -> None:  # type: ignore[no-untyped-def]
    path = str(tiny_disk / "full.barecat")
    written: dict[str, bytes] = {}
    with barecat.Barecat(path, readonly=False, commit_interval=0) as bc:
        with pytest.raises(barecat.NotEnoughSpaceBarecatError):
            for i in range(1000):
                data = os.urandom(50_000)
                bc[f"f{i}"] = data
                written[f"f{i}"] = data
        assert len(written) > 5
        assert len(bc) == len(written)
        failed = f"f{len(written)}"
        assert failed not in bc
    with barecat.Barecat(path) as bc:
        assert dict(bc.items()) == written
        assert bc.verify_integrity()
    shard_size = os.path.getsize(path + "-shard-00000")
    assert shard_size == sum(map(len, written.values())), "partial bytes must be rolled back"


def test_disk_full_during_a_tree_ingest_keeps_whole_batches(  # type: ignore[no-untyped-def]
    tiny_disk, tmp_path, monkeypatch
) -> None:
    """Reader threads write their own chunks; when one hits ENOSPC the run stops, the
    shards are cut back to the last indexed batch, and what was indexed reads back."""
    tree = tmp_path / "tree"
    tree.mkdir()
    sources = {f"f{i:03d}": os.urandom(20_000) for i in range(100)}  # 2 MB for 1 MiB
    for name, data in sources.items():
        (tree / name).write_bytes(data)
    ingest_module = importlib.import_module("barecat.transfer.ingest.threads")
    monkeypatch.setattr(ingest_module, "BATCH_FILES", 8)
    monkeypatch.setattr(ingest_module, "READ_CHUNK", 4)
    path = str(tiny_disk / "full.barecat")
    with (
        barecat.Barecat(path, readonly=False) as bc,
        pytest.raises(barecat.NotEnoughSpaceBarecatError),
    ):
        barecat.transfer.add_directory(bc, str(tree))
    with barecat.Barecat(path) as bc:
        stored = {p: bc[p] for p in bc}
        assert bc.verify_integrity() and bc.index.find_inconsistencies() == []
    assert stored and len(stored) % 8 == 0 and len(stored) < len(sources)
    assert all(sources[p] == data for p, data in stored.items())
    shard_size = os.path.getsize(path + "-shard-00000")
    assert shard_size == sum(map(len, stored.values())), "bytes past the last batch stay"


HALF_COMMITTED = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1])
    conn.execute("PRAGMA cache_size = 1")  # spill pages into the database mid-transaction
    conn.execute("UPDATE files SET mtime_ns = 12345")
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_reader_rolls_back_a_crashed_writers_hot_journal(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({f"d/{i:05d}": b"y" * 10 for i in range(3000)})
    proc = subprocess.run([sys.executable, "-c", HALF_COMMITTED, path], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert os.path.getsize(path + "-journal") > 0, "the crash must leave a hot journal"
    with barecat.Barecat(path) as bc:  # read-only open right after the crash
        assert len(bc) == 3000
        assert bc.index.lookup_file("d/00001").mtime_ns is None  # uncommitted change undone
        assert bc.index.find_inconsistencies() == []
        assert bc["d/02999"] == b"y" * 10


def test_verify_report_names_every_bad_file(make_archive) -> None:  # type: ignore[no-untyped-def]
    from barecat.ops import verify_archive

    files = {f"f{i}": bytes([i]) * 100 for i in range(10)}
    path = make_archive(files)
    index = barecat.read_index(path)
    with open(path + "-shard-00000", "r+b") as f:
        for name in ("f2", "f7"):
            f.seek(index[name][1] + 5)
            f.write(b"\xee")
    with barecat.Barecat(path) as bc:
        report = verify_archive(bc.index, bc.sharder)
        assert sorted(report.bad_files) == ["f2", "f7"] and report.index_problems == []
        assert report.files_checked == 10 and report.bytes_checked == 1000 and not report.ok
        assert verify_archive(bc.index, bc.sharder, quick=True).ok  # the last file is fine
    os.truncate(path + "-shard-00000", 950)
    with barecat.Barecat(path) as bc:
        assert verify_archive(bc.index, bc.sharder, quick=True).bad_files == ["f9"]


def test_bulk_batches_commit_only_with_the_archive(archive_path: str) -> None:
    """Batched inserts stay in the archive's transaction: no index row becomes visible
    (committed) before the archive commits, which makes the shard bytes durable first."""
    with barecat.Barecat(archive_path, readonly=False, commit_interval=3600) as bc:
        bc.commit()
        bc.add_many((f"f{i}", b"x" * 10) for i in range(600))
        bc.add_dirs([barecat.BarecatDirInfo("d", mode=0o40700)])
        with barecat.Barecat(archive_path) as reader:
            assert reader.num_files == 0 and not reader.isdir("d")
        bc.commit()
        with barecat.Barecat(archive_path) as reader:
            assert reader.num_files == 600 and reader.isdir("d")


# -- full disks under writers that keep going, and under the servers that write ----------


FULL_WRITER = textwrap.dedent(
    """
    import os, sys, time, barecat
    path, reserve = sys.argv[1], sys.argv[2]
    with barecat.Barecat(path, readonly=False, commit_interval=0.01) as bc:
        seen = set()

        def committed():  # right after a commit: the files it made durable, a line each
            for p in sorted(set(bc) - seen):
                print(p, flush=True)
                seen.add(p)

        bc.on_commit = committed
        i = 0
        for _ in range(2):  # until the disk is full; then once more, the reserve freed
            while True:
                try:
                    bc[f"d{i % 7}/f{i:06d}"] = bytes([i % 251]) * (1 + (i * 37) % 4000)
                    if i == 10:
                        bc.commit()  # (at least this one, however fast the disk fills)
                except barecat.NotEnoughSpaceBarecatError:
                    print("full", flush=True)
                    break
                i += 1
            os.remove(reserve)
        time.sleep(3600)  # idle, then killed
    """
)


@pytest.mark.slow
def test_a_writer_that_fills_the_disk_twice_keeps_every_commit(tmp_path: Path) -> None:
    """A writer runs into a full disk, goes on once space is freed, fills it again and
    idles until killed: every file a commit made durable is there, the directory
    statistics are right (what a rolled-back transaction owed was dropped with it)."""
    with small_tmpfs(tmp_path, "3m") as disk:
        reserve = disk / "reserve"
        reserve.write_bytes(b"\\0" * (1 << 20))
        path = str(disk / "full.barecat")
        argv = [sys.executable, "-c", FULL_WRITER, path, str(reserve)]
        killed = kill_at(argv, lambda child: child.lines.count("full") == 2)
        assert killed.cut_short
        committed = [line for line in killed.lines if line != "full"]
        with barecat.Barecat(path) as bc:
            assert bc.index.find_inconsistencies() == []
        kept = check_after_kill(path, {p: written_file(p) for p in committed})
        assert kept is not None and len(kept) >= len(committed) > 0


def written_file(path: str) -> bytes:
    i = int(path.rpartition("/f")[2])
    return bytes([i % 251]) * (1 + (i * 37) % 4000)


@pytest.mark.slow
def test_serve_writable_on_a_full_disk_answers_507_and_keeps_every_201(tmp_path: Path) -> None:
    """Uploads until the disk is full: the one that does not fit gets 507 (the client
    raises NotEnoughSpaceBarecatError), the server goes on serving, and after a kill
    every upload answered 201 is in the archive."""
    with small_tmpfs(tmp_path, "2m") as disk:
        path = str(disk / "s.barecat")
        barecat.Barecat(path, readonly=False).close()
        answered: dict[str, bytes] = {}
        with server_process(path, "--writable") as (server, url, _):
            with barecat.connect(url + "/a/s") as remote:
                with pytest.raises(barecat.NotEnoughSpaceBarecatError):
                    for i in range(1000):
                        data = os.urandom(50_000)
                        remote[f"up/{i}"] = data
                        answered[f"up/{i}"] = data
                assert len(answered) > 5
                assert all(remote[p] == data for p, data in answered.items())
            server.kill()
            server.wait()
        check_after_kill(path, answered)


@pytest.mark.slow
@pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)
def test_a_writable_mount_on_a_full_disk(tmp_path: Path) -> None:
    """Files written one by one through a writable mount onto a disk that fills up: each
    one whose writes and close succeeded is in the archive byte for byte, the others got
    ENOSPC from write(2); a file whose bytes fit but whose commit does not (the disk
    filled meanwhile) gets ENOSPC from close(2) and is not stored; mkdir on the full disk
    gives ENOSPC; the mount's process ends with an error naming what was not stored, and
    no traceback."""
    with small_tmpfs(tmp_path, "6m") as disk:
        reserve = disk / "reserve"
        reserve.write_bytes(b"\0" * 500_000)
        archive = str(disk / "m.barecat")
        barecat.Barecat(archive, readonly=False).close()
        mnt = tmp_path / "mnt"
        stored: dict[str, bytes] = {}
        failed: list[str] = []
        with served(archive, mnt, "--rw") as server:
            (mnt / "dir").mkdir()
            for i in range(50):  # 10 MB for a 6 MB disk
                data = os.urandom(200_000)
                try:
                    with open(mnt / f"dir/f{i:02d}", "wb", buffering=0) as f:
                        f.write(data)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    failed.append(f"dir/f{i:02d}")
                else:
                    stored[f"dir/f{i:02d}"] = data
            reserve.unlink()
            fd = os.open(mnt / "dir/late", os.O_WRONLY | os.O_CREAT)
            os.write(fd, b"fits, but its commit will not")
            filler = fill(disk)
            with pytest.raises(OSError) as e:
                os.close(fd)  # (the descriptor is closed anyway)
            assert e.value.errno == errno.ENOSPC
            with pytest.raises(OSError) as e:
                (mnt / "newdir").mkdir()
            assert e.value.errno == errno.ENOSPC
            filler.unlink()
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
            assert server.wait(timeout=30) != 0
        assert stored and failed
        errors = server_log(mnt).read_text()
        assert "Traceback" not in errors, errors
        lines = errors.splitlines()  # a line for each file not stored, naming it
        for path in [*failed, "dir/late"]:
            assert any(line.startswith(f"barecat mount: {path}: ") for line in lines), errors
        with barecat.Barecat(archive) as bc:
            assert all(bc[p] == data for p, data in stored.items())
            assert not bc.exists("dir/late") and not bc.exists("newdir")
            assert bc.verify_integrity() and bc.index.find_inconsistencies() == []


@pytest.mark.slow
@pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)
def test_unmounting_a_background_mount_says_what_was_not_stored(tmp_path: Path) -> None:
    """``barecat mount --unmount`` of a background server waits until it has closed the
    archive, and fails with its message when a file written was not stored; after a
    session that stored everything it succeeds, the archive free for a writer at once."""
    with small_tmpfs(tmp_path, "2m") as disk:
        archive = str(disk / "b.barecat")
        barecat.Barecat(archive, readonly=False).close()
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        for session, big in enumerate((False, True)):
            done = subprocess.run(
                [BARECAT, "mount", "--rw", archive, str(mnt)], capture_output=True
            )
            assert done.returncode == 0, done.stderr
            try:
                (mnt / f"small{session}").write_bytes(b"stored")
                if big:
                    with pytest.raises(OSError) as e:
                        (mnt / "big").write_bytes(os.urandom(3 << 20))
                    assert e.value.errno == errno.ENOSPC
            finally:
                done = subprocess.run(
                    [BARECAT, "mount", "--unmount", str(mnt)], capture_output=True, text=True
                )
            if big:
                assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
                lines = done.stderr.splitlines()
                assert lines[0].startswith("barecat mount: not everything written"), lines
                assert any(line.startswith("barecat mount: big: ") for line in lines), lines
            else:
                assert done.returncode == 0, done.stderr
                with barecat.Barecat(archive, readonly=False) as bc:  # closed, lock released
                    assert bc["small0"] == b"stored"
        with barecat.Barecat(archive) as bc:
            assert bc["small1"] == b"stored" and bc.verify_integrity()
