"""A writer shared by threads (``threadsafe=True``), and SQLite's lock held by another
program: real threads, real SQLite files and shards, a real second process.

A writer is one SQLite transaction: every thread's changes go into it one at a time,
every thread sees them at once, and close() commits them all. No add that returned is
ever lost, and a busy index is reported as busy, never as a corrupt one.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import barecat
from barecat.exceptions import ArchiveLockedBarecatError, BarecatError, CorruptIndexBarecatError
from helpers import wait_for


def data_of(thread: int, i: int) -> bytes:
    return f"{thread}:{i};".encode() * (1 + (i * 7 + thread) % 300)


def test_threads_sharing_a_writer_lose_no_acknowledged_add(archive_path: str) -> None:
    """Four threads add one by one, in batches and through open(); commits come from
    whichever thread hits the interval; close() on the main thread keeps them all."""
    acknowledged: dict[str, bytes] = {}
    bc = barecat.Barecat(archive_path, readonly=False, threadsafe=True, commit_interval=0.005)

    def work(t: int) -> None:
        for i in range(150):
            path, data = f"t{t}/d{i % 5}/f{i:04d}", data_of(t, i)
            if i % 10 == 3:
                batch = {f"{path}.{k}": data + bytes([k]) for k in range(5)}
                bc.add_many(batch.items())
                acknowledged.update(batch)
            elif i % 10 == 7:
                bc.makedirs(f"t{t}/made/{i}", exist_ok=True)
                bc[path] = data
                acknowledged[path] = data
            else:
                bc.add(path, data=data)
                acknowledged[path] = data
        mine = {p: d for p, d in list(acknowledged.items()) if p.startswith(f"t{t}/")}
        assert {p: bc[p] for p in mine} == mine  # each thread reads back what it added

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))  # re-raises any thread's error
    bc.close()
    with barecat.Barecat(archive_path) as reader:
        assert reader.index.find_inconsistencies() == []
        assert reader.verify_integrity()
        assert dict(reader.items()) == acknowledged
        assert all(reader.isdir(f"t{t}/made/7") for t in range(4))


def test_other_threads_read_what_was_added_before_any_commit(archive_path: str) -> None:
    """One SQLite transaction for all threads: a file is readable from another thread as
    soon as add() returned, uncommitted."""
    with barecat.Barecat(archive_path, readonly=False, threadsafe=True, commit_interval=3600) as bc:
        bc.commit()
        added = threading.Event()
        seen: list[bytes] = []

        def reader() -> None:
            assert added.wait(30)
            seen.append(bc["fresh/file"])
            seen.append(bytes(bc.num_files))

        thread = threading.Thread(target=reader)
        thread.start()
        bc["fresh/file"] = b"not committed yet"
        added.set()
        thread.join()
        assert seen == [b"not committed yet", bytes(1)]
        with barecat.Barecat(archive_path) as other_process_view:
            assert other_process_view.num_files == 0  # really uncommitted
    with barecat.Barecat(archive_path) as after:
        assert after["fresh/file"] == b"not committed yet"


def test_close_while_threads_add_keeps_every_returned_add(archive_path: str) -> None:
    """close() from the main thread while others are adding: it waits for the add in
    progress, commits, and later adds fail with a clear error instead of vanishing."""
    bc = barecat.Barecat(archive_path, readonly=False, threadsafe=True)
    acknowledged: dict[str, bytes] = {}
    errors: list[BaseException] = []
    started = threading.Barrier(4)

    def work(t: int) -> None:
        started.wait()
        for i in range(10**6):
            path, data = f"t{t}/{i:06d}", data_of(t, i)
            try:
                bc[path] = data
            except BarecatError as e:
                errors.append(e)
                return
            acknowledged[path] = data

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for thread in threads:
        thread.start()
    started.wait()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 300:  # a state: every thread well into its loop
        assert time.monotonic() < deadline
        time.sleep(0.001)
    bc.close()
    for thread in threads:
        thread.join()
    assert len(errors) == 3 and all("is closed" in str(e) for e in errors)
    with barecat.Barecat(archive_path) as reader:
        assert dict(reader.items()) == acknowledged
        assert reader.verify_integrity() and reader.index.find_inconsistencies() == []


def test_a_tree_ingest_and_single_adds_from_another_thread(
    archive_path: str, tmp_path: os.PathLike[str]
) -> None:
    """An ingest's reader threads claim shard room while it runs; adds from another
    thread wait for it (``exclusive``) instead of writing into the same room."""
    tree = os.path.join(os.fspath(tmp_path), "tree")
    expected = {}
    for i in range(400):
        os.makedirs(os.path.join(tree, f"d{i % 4}"), exist_ok=True)
        expected[f"d{i % 4}/f{i}"] = data_of(9, i)
        with open(os.path.join(tree, f"d{i % 4}", f"f{i}"), "wb") as f:
            f.write(expected[f"d{i % 4}/f{i}"])
    with barecat.Barecat(archive_path, readonly=False, threadsafe=True) as bc:

        def single_adds() -> None:
            for i in range(400):
                bc[f"single/{i}"] = data_of(1, i)
                expected[f"single/{i}"] = data_of(1, i)

        thread = threading.Thread(target=single_adds)
        thread.start()
        barecat.transfer.add_directory(bc, tree, workers=3)
        thread.join()
    with barecat.Barecat(archive_path) as reader:
        assert reader.verify_integrity()
        assert dict(reader.items()) == expected


LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
"""


def test_an_index_locked_by_another_program_is_busy_not_corrupt(make_archive) -> None:  # type: ignore[no-untyped-def]
    """Opening waits SQLite's busy timeout (5 s), then says the index is locked."""
    path = make_archive({"a": b"1"})
    with subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ArchiveLockedBarecatError, match="locked") as info:
            barecat.Barecat(path)
        assert not isinstance(info.value, CorruptIndexBarecatError)
        holder.stdin.close()
    with barecat.Barecat(path) as bc:  # lock released: it opens
        assert bc["a"] == b"1"


def write_files(
    bc: barecat.Barecat, acknowledged: dict[str, bytes], going: threading.Event
) -> None:
    """Write files through ``open(path, "wb")`` until the archive refuses; 64 KiB a write,
    which lets go of the interpreter while the bytes go out."""
    for i in range(10**6):
        name, data = f"f{i}", bytes([i % 251 + 1]) * (65536 + i)
        try:
            f = bc.open(name, "wb")
            f.write(data)
        except (BarecatError, ValueError):  # closed meanwhile: refused, not lost
            return
        acknowledged[name] = data
        f.close()  # (a no-op once the archive's close closed it)
        if i == 2:
            going.set()


@pytest.mark.parametrize(("sealing", "rounds"), [({}, 20), ({"compression": "zstd"}, 40)])
def test_a_file_written_while_another_thread_closes_is_stored_whole_or_refused(
    tmp_path: os.PathLike[str], sealing: dict[str, str], rounds: int
) -> None:
    """A thread writes files while the main thread closes the archive: every write that
    returned is stored with all its bytes; the others raise."""
    for r in range(rounds):
        path = os.path.join(os.fspath(tmp_path), f"round{r}")
        bc = barecat.Barecat(path, readonly=False, threadsafe=True, **sealing)  # type: ignore[arg-type]
        acknowledged: dict[str, bytes] = {}
        going = threading.Event()
        thread = threading.Thread(target=write_files, args=(bc, acknowledged, going))
        thread.start()
        assert going.wait(30)  # a state: the writer is in its loop
        bc.close()
        thread.join()
        with barecat.Barecat(path) as reader:
            stored = {name: reader.get(name) for name in acknowledged}
        assert stored == acknowledged, f"round {r}"


def read_until_closed(
    bc: barecat.Barecat,
    files: dict[str, bytes],
    kind: int,
    going: threading.Barrier,
    done: list[int],
    outcome: dict[int, BaseException | None],
) -> None:
    """Read ``files`` one way (``kind``) until the archive refuses; the error is kept.
    Every read that returns must give the stored bytes."""
    paths = sorted(files)
    going.wait()
    try:
        for i in range(10**9):
            path = paths[i % len(paths)]
            if kind == 0:
                assert bc[path] == files[path]
            elif kind == 1:
                assert bc.get_many([path, paths[0]]) == [files[path], files[paths[0]]]
            elif kind == 2:
                assert bc.read(path, 1, 50) == files[path][1:51]
            elif kind == 3:
                with bc.open(path, "rb") as f:
                    assert f.read() == files[path]
            else:
                assert bc.listdir(path.split("/")[0]) and bc.lookup(path).size == len(files[path])
                assert len(list(itertools.islice(bc.iter_fileinfos(), 20))) == 20
            done[kind] += 1
    except BaseException as e:  # (the test asserts what it was)
        outcome[kind] = e


@pytest.mark.parametrize("threadsafe", [True, False], ids=["threadsafe", "plain"])
def test_closing_a_reader_under_reading_threads_raises_the_closed_error(
    tmp_path: os.PathLike[str], threadsafe: bool
) -> None:
    """Threads read in every way while the main thread closes the archive: each read
    that returns gives the stored bytes, and each thread ends on the one clear error
    (never an ``AttributeError``, a bad descriptor, or another file's bytes once the
    closed descriptors' numbers are used again). A plain reader's threads use only
    what needs no SQLite connection of their own (the lookup table, the shards)."""
    files = {f"d{i % 7}/f{i:04d}": bytes([i % 256]) * (500 + i) for i in range(300)}
    path = os.path.join(os.fspath(tmp_path), "shared.barecat")
    with barecat.Barecat(path, readonly=False) as writer:
        writer.add_many(files.items())
    kinds = range(5) if threadsafe else range(3)
    for r in range(20):
        bc = barecat.Barecat(path, threadsafe=threadsafe, lookup_table=True)
        going = threading.Barrier(len(kinds) + 1)
        outcome: dict[int, BaseException | None] = {}
        done = [0] * len(kinds)
        threads = [
            threading.Thread(target=read_until_closed, args=(bc, files, k, going, done, outcome))
            for k in kinds
        ]
        for thread in threads:
            thread.start()
        going.wait()
        wait_for(lambda: min(done) >= 20 or outcome, "every thread reading")  # noqa: B023
        bc.close()
        with open(path + "-shard-00000", "rb") as reused:  # a descriptor number freed
            assert reused.read(1) is not None  # by close, taken again at once
            for thread in threads:
                thread.join()
        errors = {type(e).__name__ for e in outcome.values()}
        assert errors == {"ArchiveClosedBarecatError"}, (r, outcome)
        assert all("is closed" in str(e) for e in outcome.values())
