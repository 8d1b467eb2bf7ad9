"""The batch kernels, compiled against the pure-Python reference: ``fill_table`` (a
lookup table's build), ``AddressTable.get_many`` and ``read_each`` (stopping where a read
would wait), fed hostile rows and paths; and that a table the kernel built answers every
row it stored, and only those."""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from typing import Any

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from barecat.entries import Address
from barecat.kernels import python
from helpers.fuzzing import fuzz_settings

compiled = pytest.importorskip(
    "barecat.kernels._compiled", reason="the compiled core is not built here"
)
HASH = xxhash.xxh3_64_intdigest
KERNELS = [python, compiled]

texts = st.text(st.characters(codec=None, blacklist_categories=()), max_size=12)
paths = st.one_of(texts, st.sampled_from(["a", "a/b", "./a", "a//b", "/a", "é/ü", "a\x00b",
                                           "\udcff", "a/.b", "a/"]))  # fmt: skip
numbers = st.one_of(
    st.integers(-3, 300), st.integers(-(2**70), 2**70), st.sampled_from([True, None, "1", 1.0]),
    st.sampled_from([2**16 - 1, 2**16, 2**48 - 1, 2**48, 2**32 - 1, 2**32]),
)  # fmt: skip
rows = st.lists(st.tuples(st.one_of(paths, st.none()), numbers, numbers, numbers, numbers),
                max_size=24)  # fmt: skip


def outcome(call: Any) -> Any:
    """What a call returned, or the type of what it raised."""
    try:
        return ("returned", call())
    except Exception as e:  # (the twins must raise alike)
        return ("raised", type(e))


def encodes(path: str) -> bool:
    """Whether a table can hold ``path`` (its bytes, surrogates escaped, exist)."""
    try:
        return len(path.encode("utf-8", "surrogateescape")) < 2**24
    except UnicodeEncodeError:
        return False


def filled(kernel: Any, capacity: int, batch: list[Any]) -> tuple[Any, bytes, bytes]:
    slots, paths_bytes = array("Q", [0]) * (4 * capacity), bytearray()
    got = outcome(lambda: kernel.fill_table(slots, paths_bytes, batch, HASH, 0))
    return got, slots.tobytes(), bytes(paths_bytes)


@pytest.mark.fuzz
@fuzz_settings(300)
@given(rows, st.integers(1, 40))
def test_fill_table_is_the_reference(batch: list[Any], capacity: int) -> None:
    assert filled(compiled, capacity, batch) == filled(python, capacity, batch)


@pytest.mark.fuzz
@fuzz_settings(100)
@given(st.lists(st.tuples(paths, st.integers(0, 3), st.integers(0, 2**48 - 1),
                          st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
                max_size=30, unique_by=lambda r: r[0]))  # fmt: skip
def test_a_built_table_answers_what_it_stored(batch: list[Any]) -> None:
    for kernel in KERNELS:
        capacity = len(batch) * 4 // 3 + 1
        slots, paths_bytes = array("Q", [0]) * (4 * capacity), bytearray()
        stored = kernel.fill_table(slots, paths_bytes, batch, HASH, 0)
        held = [r for r in batch if encodes(r[0])]
        assert stored == len(held)
        table = kernel.AddressTable(slots, paths_bytes, 0, HASH, Address)
        for path, *address in held:
            assert table.find(path) == Address(*address)
        assert table.find("never stored, surely") is None or "never stored, surely" in dict(
            (r[0], r) for r in batch
        )


def test_fill_table_refuses_more_rows_than_slots() -> None:
    for kernel in KERNELS:
        slots, paths_bytes = array("Q", [0]) * 8, bytearray()  # two slots
        batch = [(f"f{i}", 0, i, 1, 0) for i in range(3)]
        assert kernel.fill_table(slots, paths_bytes, batch, HASH, 0) == -1
        full = array("Q", [1]) * 8  # no empty slot, though nothing is counted in it
        assert kernel.fill_table(full, bytearray(), batch[:1], HASH, 0) == -1


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, bytes]]:
    tmp_path = tmp_path_factory.mktemp("shard")
    data = os.urandom(5000)
    (tmp_path / "shard").write_bytes(data)
    fd = os.open(tmp_path / "shard", os.O_RDONLY)
    try:
        yield fd, data
    finally:
        os.close(fd)


def tables(files: dict[str, tuple[int, int, int]]) -> list[Any]:
    """The same table of ``files`` (path: shard, offset, size, crc) in each kernel."""
    made = []
    for kernel in KERNELS:
        capacity = len(files) * 4 // 3 + 1
        slots, paths_bytes = array("Q", [0]) * (4 * capacity), bytearray()
        batch = [(p, s, o, n, c) for p, (s, o, n, c) in files.items()]
        assert kernel.fill_table(slots, paths_bytes, batch, HASH, 0) == len(files)
        made.append(kernel.AddressTable(slots, paths_bytes, 0, HASH, Address))
    return made


@pytest.mark.fuzz
@fuzz_settings(200)
@given(st.data())
def test_get_many_is_the_reference_and_answers_only_clean_reads(shard, data) -> None:  # type: ignore[no-untyped-def]
    fd, content = shard
    files: dict[str, tuple[int, int, int, int]] = {}
    for i in range(data.draw(st.integers(0, 12))):
        offset = data.draw(st.integers(0, 5200))  # (some past the shard's end)
        size = data.draw(st.integers(0, 300))
        piece = content[offset : offset + size]
        right = python.crc32c(piece)
        crc = data.draw(st.sampled_from([right, right ^ 1]))
        files[f"d/{i}"] = (data.draw(st.sampled_from([0, 1])), offset, size, crc)
    asked = data.draw(st.lists(st.one_of(st.sampled_from([*files, "nope"] if files else ["nope"]),
                                         paths), max_size=20))  # fmt: skip
    fds = {0: fd}  # (shard 1 is not open: None, the careful path's)
    answers = [table.get_many(asked, fds) for table in tables(files)]
    assert answers[0] == answers[1]
    singles = [[table.get(p, fds) for p in asked] for table in tables(files)]
    assert singles[0] == singles[1] == answers[0]
    for path, got in zip(asked, answers[0], strict=True):
        if path not in files or got is None:
            continue
        shard_no, offset, size, crc = files[path]
        assert shard_no == 0 and got == content[offset : offset + size]
        assert python.crc32c(got) == crc


def test_read_each_stopping_on_waits_reads_a_warm_file_whole(shard) -> None:  # type: ignore[no-untyped-def]
    fd, content = shard
    addresses = [(0, o, 100, python.crc32c(content[o : o + 100])) for o in range(0, 4900, 350)]
    addresses.append((0, 4950, 100, 0))  # (past the end: None)
    for kernel in KERNELS:
        for stop in (False, True):
            got = kernel.read_each({0: fd}, addresses, stop)
            assert got[:-1] == [content[o : o + 100] for _, o, _, _ in addresses[:-1]]
            assert got[-1] is None


def test_a_stale_table_answers_nothing(shard) -> None:  # type: ignore[no-untyped-def]
    fd, content = shard
    header = bytearray(100)
    header[24:28] = b"\x00\x00\x00\x07"
    for kernel in KERNELS:
        capacity = 2
        slots, paths_bytes = array("Q", [0]) * (4 * capacity), bytearray()
        kernel.fill_table(slots, paths_bytes, [("a", 0, 10, 5, python.crc32c(content[10:15]))],
                          HASH, 0)  # fmt: skip
        table = kernel.AddressTable(
            slots, paths_bytes, 0, HASH, Address, header, bytes(header[24:28])
        )
        assert table.get("a", {0: fd}) == content[10:15]
        assert table.get_many(["a"], {0: fd}) == [content[10:15]]
        header[27] = 8  # a commit moved the index's change counter
        assert table.get("a", {0: fd}) is None and table.get_many(["a"], {0: fd}) == [None]
        assert table.find("a") == Address(0, 10, 5, python.crc32c(content[10:15]))
        header[27] = 7
