"""Batches read on several threads (``read_concurrency``): the same bytes in the same
order, the same checks and the same errors as one read at a time and as a loop of
``bc[path]``; the threads are this archive's, made again in a forked child, and gone
once it is closed. A batch fans out only from a read that waited: the archives here are
answered from the page cache, so most tests make every read count as waiting
(``fanned_out``), and the pool's own tests make reads that wait."""

from __future__ import annotations

import multiprocessing
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

import barecat
from barecat.exceptions import BarecatIntegrityError
from barecat.shards import Sharder
from barecat.shards.concurrent import ReadPool, read_would_wait, sleeps_so_far
from helpers import PASSPHRASE
from helpers.damaging import damage
from helpers.disks import small_tmpfs
from helpers.mounting import FUSE_PROBLEM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_latency import delayed_mount, through_mount

FILES = {f"d{i % 7}/{i:04d}.bin": random.Random(i).randbytes(i * 13 % 3000) for i in range(300)}
WANTED = [*random.Random(1).sample(sorted(FILES), 200), "d1/0001.bin", "d0/0000.bin"]
SEALINGS = [{}, {"compression": "zstd"}, {"compression": "none", "passphrase": PASSPHRASE}]


def read_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("barecat-read")]


def fanned_out(bc: barecat.Barecat) -> barecat.Barecat:
    """``bc``, its batches read on its threads from the first read on."""
    cast(Sharder, bc.sharder).read_pool.waiting_read_ns = 0
    return bc


def build(make_archive, sealing: dict[str, str]) -> str:  # type: ignore[no-untyped-def]
    if sealing:
        pytest.importorskip("cryptography", reason="the sealing extra is not installed")
    return str(make_archive(FILES, **sealing))


@pytest.mark.parametrize("sealing", SEALINGS, ids=["plain", "zstd", "encrypted"])
def test_a_concurrent_batch_is_the_loop(make_archive, sealing: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    path = build(make_archive, sealing)
    passphrase = sealing.get("passphrase")
    with barecat.Barecat(path, passphrase=passphrase, read_concurrency=1) as bc:
        loop = [bc[p] for p in WANTED]
        assert bc.get_many(WANTED, max_gap=0) == loop
        assert not read_threads()  # one at a time: no thread was made
    assert loop == [FILES[p] for p in WANTED]
    with fanned_out(barecat.Barecat(path, passphrase=passphrase, read_concurrency=8)) as bc:
        for gap in (0, 4096):
            assert bc.get_many(WANTED, max_gap=gap) == loop
            assert bc.read_many(WANTED) == loop
        buffer = bytearray(sum(map(len, loop)))
        places = bc.readinto_many(WANTED, buffer)
        assert [bytes(buffer[at : at + n]) for at, n in places] == loop
        assert 1 <= len(read_threads()) <= 7  # the caller reads too
        with pytest.raises(KeyError, match="d9/nothing"):
            bc.get_many([*WANTED[:50], "d9/nothing", *WANTED[50:]])


@pytest.mark.parametrize("sealing", SEALINGS[:2], ids=["plain", "zstd"])
def test_damage_is_reported_as_one_read_at_a_time_reports_it(make_archive, sealing) -> None:  # type: ignore[no-untyped-def]
    path = build(make_archive, sealing)
    for victim in ("d3/0150.bin", "d1/0260.bin"):
        damage(path, victim, at=1)
    wanted = [f"d{i % 7}/{i:04d}.bin" for i in range(298, 0, -2)]  # none stored side by side
    errors = {}
    for workers in (1, 16):
        with fanned_out(barecat.Barecat(path, read_concurrency=workers)) as bc:
            with pytest.raises(BarecatIntegrityError) as raised:
                bc.get_many(wanted, max_gap=0)
            messages = [str(raised.value)]
            if not sealing:
                with pytest.raises(BarecatIntegrityError) as raised:
                    bc.readinto_many(wanted, bytearray(10**6))
                messages.append(str(raised.value))
            errors[workers] = messages
            assert (len(read_threads()) > 0) == (workers > 1)
    assert errors[16] == errors[1]
    # the first requested (stored after d3/0150.bin), as a loop of bc[path] meets it
    assert all(m.startswith("d1/0260.bin: ") for m in errors[1])


def test_the_threads_end_with_the_archive(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = build(make_archive, {})
    before = threading.active_count()
    bc = fanned_out(barecat.Barecat(path))
    assert bc.get_many(WANTED, max_gap=0) == [FILES[p] for p in WANTED]
    assert threading.active_count() > before
    bc.close()
    assert threading.active_count() == before
    assert not read_threads()


def _read_in_child(bc: barecat.Barecat, wanted: list[str], out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    out.put(bc.get_many(wanted, max_gap=0) == [FILES[p] for p in wanted])


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_reads_on_threads_of_its_own(make_archive) -> None:  # type: ignore[no-untyped-def]
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform cannot fork")
    path = build(make_archive, {})
    context = multiprocessing.get_context("fork")
    with fanned_out(barecat.Barecat(path, read_concurrency=4)) as bc:
        bc.get_many(WANTED, max_gap=0)  # the parent's threads exist now, all idle
        # (1 to 3 of them: the executor starts a thread per submit only while none is
        # idle, and a quick batch can leave one idle before the last submit)
        assert 1 <= len(read_threads()) <= 3
        out = context.Queue()
        child = context.Process(target=_read_in_child, args=(bc, WANTED, out))
        child.start()
        child.join(timeout=60)  # (with the parent's dead threads it would wait forever)
        alive = child.is_alive()
        if alive:
            os.kill(child.pid or 0, 9)
            child.join()
        assert not alive and child.exitcode == 0
        assert out.get(timeout=5) is True


def test_page_cache_reads_stay_on_the_calling_thread(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = build(make_archive, {})
    with barecat.Barecat(path) as bc:
        cast(Sharder, bc.sharder).read_pool.waiting_read_ns = 10**10  # no read waits 10 s
        assert bc.get_many(WANTED, max_gap=0) == [FILES[p] for p in WANTED]
        assert not read_threads()


def _recording(waiting_k: int | None, other_ran: threading.Event, ran_on: dict[int, str]):  # type: ignore[no-untyped-def]
    """A task recording each read's thread; read ``waiting_k`` waits 10 ms, and read 1 on
    the calling thread waits until a read ran on another (so a batch that fans out
    always shows it, and one that does not fails here)."""
    caller = threading.current_thread().name

    def task(k: int) -> None:
        ran_on[k] = threading.current_thread().name
        if ran_on[k] != caller:
            other_ran.set()
        if k == waiting_k:
            time.sleep(0.01)  # (a read that waits 10 ms: the pool's limit is 1 ms)
        elif k == 1 and ran_on[k] == caller and waiting_k is not None:
            assert other_ran.wait(timeout=30), "the batch did not fan out"

    return task


@pytest.mark.parametrize("storage_says", [None, True, False], ids=["unknown", "waits", "cached"])
def test_a_batch_fans_out_when_its_reads_wait(storage_says: bool | None) -> None:
    caller = threading.current_thread().name
    pool = ReadPool(4, waiting_read_ns=1_000_000)
    asked: list[bool] = []

    def may_wait() -> bool | None:
        asked.append(True)
        return storage_says

    try:
        other_ran, ran_on = threading.Event(), {}  # type: ignore[var-annotated]
        waiting_k = 0 if storage_says is not False else None
        pool.run(20, _recording(waiting_k, other_ran, ran_on), may_wait)
        assert sorted(ran_on) == list(range(20)) and asked == [True]
        if storage_says is None:  # told by the first read's time: it ran on the caller
            assert ran_on[0] == caller and other_ran.is_set()
        else:  # told before the first read
            assert other_ran.is_set() == storage_says
        ran_on.clear()  # the next batch, whose reads do not wait, starts on the caller again
        pool.waiting_read_ns = 10**10  # (none takes 10 s, however loaded the machine)
        pool.run(20, lambda k: ran_on.__setitem__(k, threading.current_thread().name))
        assert set(ran_on.values()) == {caller}
    finally:
        pool.close()


def test_a_batch_read_in_spans_fans_out_when_a_read_waits() -> None:
    """The calling thread's reads in spans (one loop each) where the storage cannot
    tell: a read that waits still fans the rest of the batch out."""
    if sleeps_so_far() is None:
        pytest.skip("this system does not count a thread's sleeps")
    pool = ReadPool(4, waiting_read_ns=1_000_000)
    try:
        other_ran, ran_on = threading.Event(), {}  # type: ignore[var-annotated]
        spans: list[tuple[int, int]] = []

        def in_spans(task: Callable[[int], None]) -> Callable[[int, int], None]:
            def span(a: int, b: int) -> None:
                spans.append((a, b))
                for k in range(a, b):
                    task(k)

            return span

        task = _recording(0, other_ran, ran_on)
        pool.run_as(None, 20, task, in_spans(task))
        assert sorted(ran_on) == list(range(20)) and other_ran.is_set()
        assert spans == [(0, 1)]  # (read 0 waited: the rest went to the threads)
        spans.clear()
        quick = _recording(None, threading.Event(), {})  # (no read waits)
        pool.run_as(None, 20, quick, in_spans(quick))
        assert spans == [(0, 1), (1, 3), (3, 7), (7, 15), (15, 20)]  # (all on the caller)
    finally:
        pool.close()


def _busy(ns: int) -> None:
    """Runs (never sleeps) for ``ns`` nanoseconds: a read that is slow without waiting,
    as a copy into new memory, or one whose CPU went to other processes, is."""
    until = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < until:
        pass


def test_a_slow_read_that_did_not_wait_keeps_the_batch_on_the_calling_thread() -> None:
    if sleeps_so_far() is None:
        pytest.skip("this system does not count a thread's sleeps")
    caller = threading.current_thread().name
    pool = ReadPool(4, waiting_read_ns=1_000)  # (each read below takes 20 µs)
    ran_on: dict[int, str] = {}

    def task(k: int) -> None:
        ran_on[k] = threading.current_thread().name
        _busy(20_000)

    try:
        pool.run(20, task, lambda: None)  # (the storage cannot tell: the reads' times do)
        assert sorted(ran_on) == list(range(20)) and set(ran_on.values()) == {caller}
        assert not read_threads()  # (none was even made)
    finally:
        pool.close()


def test_a_batch_from_a_tmpfs_stays_on_the_calling_thread(tmp_path: Path) -> None:
    """tmpfs cannot tell a cached read (no ``RWF_NOWAIT``), and every read of it is
    answered from memory: however long one takes, the batch is not fanned out."""
    if sleeps_so_far() is None:
        pytest.skip("this system does not count a thread's sleeps")
    with small_tmpfs(tmp_path, "8m") as disk:
        path = str(disk / "a.barecat")
        with barecat.Barecat(path, readonly=False) as bc:
            for p, data in FILES.items():
                bc[p] = data
        with barecat.Barecat(path) as bc:
            sharder = cast(Sharder, bc.sharder)
            fd = os.open(sharder.get_shard_path(0), os.O_RDONLY)
            try:
                if read_would_wait(fd, 0) is not None:
                    pytest.skip("this tmpfs tells a cached read (RWF_NOWAIT)")
            finally:
                os.close(fd)
            sharder.read_pool.waiting_read_ns = 1  # (every read takes longer than 1 ns)
            assert bc.get_many(WANTED, max_gap=0) == [FILES[p] for p in WANTED]
            assert bc.get_many(WANTED) == [FILES[p] for p in WANTED]  # (neighbours too)
            assert not read_threads()


def dropped_from_cache(path: str) -> None:
    """Writes ``path`` out and drops its pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # (dirty pages stay in the cache)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_a_cold_shard_fans_out_from_the_first_read(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = build(make_archive, {})
    # Whether this filesystem tells a cold read is asked of another file: a probe that
    # would wait starts the kernel's readahead, which may warm the file it asked about.
    scratch = f"{path}.probe"
    with open(scratch, "wb") as f:
        f.write(bytes(1 << 16))
    dropped_from_cache(scratch)
    fd = os.open(scratch, os.O_RDONLY)
    try:
        if read_would_wait(fd, 0) is not True:
            pytest.skip("this filesystem cannot tell a cached read (RWF_NOWAIT), or kept it")
    finally:
        os.close(fd)
    dropped_from_cache(f"{path}-shard-00000")
    with barecat.Barecat(path) as bc:
        cast(Sharder, bc.sharder).read_pool.waiting_read_ns = 10**10  # (no read times out)
        assert bc.get_many(WANTED, max_gap=0) == [FILES[p] for p in WANTED]
        assert read_threads()
    with barecat.Barecat(path, lookup_table=True) as bc:  # through the kernel's get_many:
        assert bc[WANTED[0]] == FILES[WANTED[0]]  # (the shard open, the table up)
        dropped_from_cache(f"{path}-shard-00000")  # its first read would wait: it stops
        # there and the careful path reads the rest (on threads if its own probe still
        # finds them cold: the kernel's probe started the readahead, which may warm them)
        assert bc.get_many(WANTED, max_gap=0) == [FILES[p] for p in WANTED]


@pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM or "FUSE runs here")
def test_a_warm_batch_read_by_the_kernel_fans_out_where_reads_wait(tmp_path: Path) -> None:
    # The shards behind a FUSE filesystem that sleeps 2 ms in every read and cannot tell a
    # cached read (no RWF_NOWAIT): the kernel's get_many (the lookup table up, the shard
    # open) stops after its first read, which slept, and leaves the rest to the careful
    # path, which reads them on the pool's threads, as it would without the kernel.
    source, mounted = tmp_path / "source", tmp_path / "mounted"
    source.mkdir()
    mounted.mkdir()
    path = str(source / "slow.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        for name, data in FILES.items():
            bc[name] = data
    with delayed_mount(source, mounted, delay_ms=2, threads=8):
        local = through_mount(path, mounted, tmp_path / "local")
        with barecat.Barecat(local, lookup_table=True, read_concurrency=8) as bc:
            assert bc[WANTED[0]] == FILES[WANTED[0]]  # (the careful path opens the shard)
            assert bc.index.lookup_table_size == len(FILES)
            assert not read_threads()
            assert bc.get_many(WANTED, max_gap=0) == [FILES[p] for p in WANTED]
            assert read_threads()
