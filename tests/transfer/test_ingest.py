"""The parallel ingest: reader threads write their own chunks, in turns, on real files.

The module's size thresholds are shrunk so that small trees exercise every path a
file can take (read into a thread's buffer, into its own bytes, streamed during its
chunk's turn) and shards rotate often.
"""

from __future__ import annotations

import importlib
import itertools
import os
import random
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import barecat
from barecat.entries import Order
from barecat.layout import existing_shard_numbers, shard_path
from barecat.transfer import IngestResult, plan_tree

# The module, not the function of the same name that ``barecat.transfer`` exports.
ingest_module = importlib.import_module("barecat.transfer.ingest.threads")


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "READ_CHUNK", 7)
    monkeypatch.setattr(ingest_module, "BUFFER_BYTES", 20_000)  # per thread, reused
    monkeypatch.setattr(ingest_module, "CHUNK_BYTES", 30_000)  # beyond it: streamed
    monkeypatch.setattr(ingest_module, "STREAM_THRESHOLD", 9_000)  # above it: streamed
    monkeypatch.setattr(ingest_module, "BATCH_FILES", 16)
    # Every thread gets a fresh buffer of the patched size.
    monkeypatch.setattr(ingest_module, "_thread_state", ingest_module.threading.local())


def make_tree(root: Path, count: int, seed: int = 1) -> dict[str, bytes]:
    """Files of 0-12,000 bytes (plus a few links) in a few directories."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    for i in range(count):
        rel = f"d{i % 5}/f{i:04d}.bin"
        data = rng.randbytes(rng.choice([0, 1, 500, 3000, 8000, 8999, 9001, 12000]))
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        files[rel] = data
    for i in range(3):
        os.symlink(f"../d0/f{i:04d}.bin", root / f"d1/link{i}")
        files[f"d1/link{i}"] = f"../d0/f{i:04d}.bin".encode()
    return files


def placements(archive: str) -> list[tuple[str, int, int, int, int]]:
    with sqlite3.connect(f"file:{archive}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT path, shard, offset, size, crc32c FROM files ORDER BY path")
        return list(rows)


def shard_bytes(archive: str) -> list[bytes]:
    return [Path(shard_path(archive, n)).read_bytes() for n in existing_shard_numbers(archive)]


def ingest_tree(archive: str, root: Path, workers: int, **kwargs: object) -> IngestResult:
    with barecat.Barecat(archive, readonly=False, **kwargs) as bc:  # type: ignore[arg-type]
        return ingest_module.ingest(bc, plan_tree(str(root), ""), workers=workers)


@pytest.mark.usefixtures("small_thresholds")
def test_layout_is_the_same_whatever_the_number_of_threads(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    files = make_tree(root, 300)
    archives = {}
    for workers in (1, 2, 4):
        archive = str(tmp_path / f"w{workers}.barecat")
        result = ingest_tree(archive, root, workers, shard_size_limit=40_000)
        assert result.failures == [] and result.files == len(files)
        assert result.bytes == sum(map(len, files.values()))
        archives[workers] = archive
    assert len(existing_shard_numbers(archives[1])) > 5  # rotation happened, many times
    for workers in (2, 4):
        assert placements(archives[workers]) == placements(archives[1])
        assert shard_bytes(archives[workers]) == shard_bytes(archives[1])
    with barecat.Barecat(archives[4]) as bc:
        assert {p: bc[p] for p in files} == files
        assert bc.verify_integrity()
        assert bc.index.find_inconsistencies() == []
    # Files lie in plan order, back to back: no holes, no overlaps.
    rows = sorted(placements(archives[4]), key=lambda r: (r[1], r[2]))
    assert [r[0] for r in rows] == sorted(files)
    for (_, shard_a, off_a, size_a, _), (_, shard_b, off_b, _, _) in itertools.pairwise(rows):
        assert (shard_b, off_b) in ((shard_a, off_a + size_a), (shard_a + 1, 0))


@pytest.mark.usefixtures("small_thresholds")
def test_file_over_the_shard_limit_is_reported_and_the_rest_stored(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "a" / "small").write_bytes(b"s" * 3000)
    (root / "a" / "read_whole").write_bytes(b"r" * 6000)  # read into the buffer
    (root / "a" / "streamed").write_bytes(b"t" * 12_000)  # over STREAM_THRESHOLD
    (root / "a" / "tail").write_bytes(b"z" * 10)
    archive = str(tmp_path / "x.barecat")
    result = ingest_tree(archive, root, 2, shard_size_limit=5000)
    failed = {os.path.basename(path): type(error) for path, error in result.failures}
    assert failed == {
        "read_whole": barecat.FileTooLargeBarecatError,
        "streamed": barecat.FileTooLargeBarecatError,
    }
    with barecat.Barecat(archive) as bc:
        assert sorted(bc) == ["a/small", "a/tail"]
        assert bc["a/tail"] == b"z" * 10 and bc.verify_integrity()
    assert sum(map(len, shard_bytes(archive))) == 3010  # nothing left of the refused ones


@pytest.mark.usefixtures("small_thresholds")
def test_unreadable_and_vanished_files_are_skipped(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    files = make_tree(root, 40)
    os.chmod(root / "d2/f0002.bin", 0)  # cannot be opened (unless root, checked below)
    plan = plan_tree(str(root), "")
    (root / "d3/f0003.bin").unlink()  # planned, then gone before it is read
    archive = str(tmp_path / "x.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        result = ingest_module.ingest(bc, plan, workers=2)
    failed = {os.path.relpath(path, root) for path, _ in result.failures}
    expected = {"d3/f0003.bin"} | ({"d2/f0002.bin"} if os.geteuid() != 0 else set())
    assert failed == expected
    with barecat.Barecat(archive) as bc:
        assert {p: bc[p] for p in bc} == {p: d for p, d in files.items() if p not in failed}


@pytest.mark.usefixtures("small_thresholds")
def test_a_failing_reader_stops_the_run_without_leaving_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader thread that fails outright (not one unreadable file) still passes its turn
    on, so the threads behind it finish; the run raises and the shards end where the last
    indexed batch ends."""
    root = tmp_path / "tree"
    files = make_tree(root, 200)
    real = ingest_module._read_chunk

    def failing(sources, *rest):  # type: ignore[no-untyped-def]
        if any(s.store_path == "d0/f0150.bin" for s in sources):
            raise RuntimeError("reader broke")
        return real(sources, *rest)

    monkeypatch.setattr(ingest_module, "_read_chunk", failing)
    archive = str(tmp_path / "x.barecat")
    raised: list[BaseException] = []

    def run() -> None:
        try:
            ingest_tree(archive, root, 3)
        except BaseException as e:
            raised.append(e)

    worker = threading.Thread(target=run, daemon=True)  # a deadlock fails, not hangs
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the threads behind the failed one never got their turn"
    assert [str(e) for e in raised] == ["reader broke"]
    with barecat.Barecat(archive) as bc:
        stored = {p: bc[p] for p in bc}
        assert 0 < len(stored) < 150
        assert all(files[p] == data for p, data in stored.items())
        assert bc.verify_integrity() and bc.index.find_inconsistencies() == []
    assert sum(map(len, shard_bytes(archive))) == sum(map(len, stored.values()))


@pytest.mark.usefixtures("small_thresholds")
def test_an_interrupt_after_a_commit_keeps_the_committed_files(tmp_path: Path) -> None:
    """Ctrl-C can land in ``on_commit`` (``create -v`` lists files there), after the index
    took and committed a batch and before the ingest noted it: the run stops, but the
    shards are not rewound under that batch, whose files stay whole."""
    root = tmp_path / "tree"
    files = make_tree(root, 200)
    archive = str(tmp_path / "x.barecat")
    commits = itertools.count(1)

    def interrupt_at_the_third() -> None:
        if next(commits) == 3:
            raise KeyboardInterrupt

    with barecat.Barecat(archive, readonly=False, commit_interval=0) as bc:
        bc.on_commit = interrupt_at_the_third
        with pytest.raises(KeyboardInterrupt):
            ingest_module.ingest(bc, plan_tree(str(root), ""), workers=3)
        bc.on_commit = None
    with barecat.Barecat(archive) as bc:
        stored = {p: bc[p] for p in bc}
        assert 0 < len(stored) < len(files)
        assert all(files[p] == data for p, data in stored.items())
        assert bc.verify_integrity() and bc.index.find_inconsistencies() == []


def test_create_with_several_processes_joins_parts_without_copying(tmp_path: Path) -> None:
    """``create -j 3``: three processes write parts whose shards become the archive's."""
    src = tmp_path / "src"
    files = make_tree(src, 240)
    unreadable = src / "d1" / "locked.bin"
    unreadable.write_bytes(b"secret")
    unreadable.chmod(0)
    one, three = str(tmp_path / "one.barecat"), str(tmp_path / "three.barecat")
    for archive, jobs in ((one, "1"), (three, "3")):
        done = subprocess.run(
            [sys.executable, "-m", "barecat.cli", "create", "-q", "-j", jobs, "-s", "64K",
             "-C", str(src), archive, "."],
            capture_output=True, text=True,
        )  # fmt: skip
        if os.geteuid() != 0:  # root reads anything: then nothing is refused
            assert done.returncode == 1 and "locked.bin" in done.stderr
    with barecat.Barecat(one) as a, barecat.Barecat(three) as b:
        assert {p: b[p] for p in b} == {p: a[p] for p in a}
        assert all(b[p] == data for p, data in files.items())
        assert [(d.path, d.mode, d.mtime_ns) for d in b.index.iter_all_dirinfos(Order.PATH)] == [
            (d.path, d.mode, d.mtime_ns) for d in a.index.iter_all_dirinfos(Order.PATH)
        ]
        assert b.verify_integrity() and b.index.find_inconsistencies() == []
        assert all(os.path.getsize(b.sharder.get_shard_path(i)) <= 64 << 10
                   for i in range(b.sharder.num_shards))  # fmt: skip
    leftovers = [n for n in os.listdir(tmp_path) if ".part" in n or n.startswith(".three")]
    assert leftovers == []


def test_processes_report_only_what_they_stored(tmp_path: Path) -> None:
    from barecat.transfer.ingest.processes import ingest_in_processes

    src = tmp_path / "src"
    files = make_tree(src, 60)
    plan = plan_tree(str(src), "")
    (src / "d2/f0002.bin").unlink()  # gone between planning and reading
    added: list[str] = []
    archive = str(tmp_path / "p.barecat")
    result = ingest_in_processes(archive, plan, 2, on_added=lambda paths, n: added.extend(paths))
    assert [os.path.basename(p) for p, _ in result.failures] == ["f0002.bin"]
    assert sorted(added) == sorted(p for p in files if p != "d2/f0002.bin")
    with barecat.Barecat(archive) as bc:
        assert sorted(bc) == sorted(added)
