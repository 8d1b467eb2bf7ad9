"""Batches read on several threads (``read_concurrency``): the same bytes in the same
order, the same checks and the same errors as one read at a time and as a loop of
``bc[path]``; the threads are this archive's, made again in a forked child, and gone
once it is closed."""

from __future__ import annotations

import multiprocessing
import os
import random
import threading

import pytest

import barecat
from barecat.exceptions import BarecatIntegrityError
from helpers import PASSPHRASE
from helpers.damaging import damage

FILES = {f"d{i % 7}/{i:04d}.bin": random.Random(i).randbytes(i * 13 % 3000) for i in range(300)}
WANTED = [*random.Random(1).sample(sorted(FILES), 200), "d1/0001.bin", "d0/0000.bin"]
SEALINGS = [{}, {"compression": "zstd"}, {"compression": "none", "passphrase": PASSPHRASE}]


def read_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("barecat-read")]


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
    with barecat.Barecat(path, passphrase=passphrase, read_concurrency=8) as bc:
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
        with barecat.Barecat(path, read_concurrency=workers) as bc:
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
    assert all(m.startswith("d3/0150.bin: ") for m in errors[1])  # the first stored


def test_the_threads_end_with_the_archive(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = build(make_archive, {})
    before = threading.active_count()
    bc = barecat.Barecat(path)
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
    with barecat.Barecat(path, read_concurrency=4) as bc:
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
