"""The sidecar of a published archive: every file found where SQLite says, absent paths
absent, copied pages equal to the index's, stale once the index changes, and damaged
bytes never answered."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import barecat
from barecat.entries import Address, BarecatFileInfo
from barecat.exceptions import BarecatError, BarecatIntegrityError, DamagedIndexBarecatError
from barecat.index import Index
from barecat.index.sidecar import (
    HEAD_GUESS,
    SidecarHead,
    build_sidecar,
    check_sidecar,
    is_fresh,
    read_head,
)
from barecat.layout import sidecar_path
from barecat.ops.publish import publish
from helpers.fuzzing import fuzz_settings

MANY = 100_000


def index_only(path: str, n: int) -> None:
    """An archive of ``n`` files' rows (index only: the addresses are what is tested),
    added in bulk: a few seconds for 100,000."""
    rows = [
        BarecatFileInfo(
            path=f"d{i % 300}/s{i % 7}/file-{i:06d}.bin",
            shard=i % 3,
            offset=i * 7919,
            size=i % 5000,
            crc32c=None if i % 1000 == 1 else (i * 2654435761) % 2**32,
        )
        for i in range(n)
    ]
    with Index(path, readonly=False) as index:
        index.add_files_bulk(rows)


def sql_addresses(path: str) -> dict[str, Address]:
    """Every file's address as SQLite has it (bytes that are not UTF-8 as surrogates)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        conn.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
        rows = conn.execute("SELECT path, shard, offset, size, crc32c FROM files").fetchall()
    return {p: Address(*rest) for p, *rest in rows}


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("published") / "many.barecat")
    index_only(path, MANY)
    publish(path)
    return path


def test_every_file_of_100k_is_found_with_sqlites_address(published: str) -> None:
    data = Path(sidecar_path(published)).read_bytes()
    head = SidecarHead.parse(data[:HEAD_GUESS], "many-sidecar")
    expected = sql_addresses(published)
    assert head.num_files == len(expected) == MANY
    assert head.head_size <= HEAD_GUESS  # one request for the head
    spans = head.bucket_spans(expected)
    assert len(spans) == 1 << head.bucket_bits  # 100k files fill every bucket
    sizes = [end - start for start, end in spans]
    assert max(sizes) < 2 * 32768 and sum(sizes) / len(sizes) <= 32768
    found = {}
    for (start, end), paths in spans.items():
        found.update(zip(paths, head.find_many(paths, data[start:end]), strict=True))
    assert found == expected
    some = random.Random(1).sample(sorted(expected), 300)
    assert all(head.find(p, data[slice(*head.bucket_span(p))]) == expected[p] for p in some)


def test_paths_the_archive_lacks_are_absent(published: str) -> None:
    data = Path(sidecar_path(published)).read_bytes()
    head = read_head(sidecar_path(published))
    absent = [f"d{i % 300}/s{i % 7}/file-{i:06d}.bin" for i in range(MANY, MANY + 500)]
    absent += ["", "d1", "d1/s1", "d1/s1/file-000001.bin/x", "D1/s1/file-000001.bin", "é\udcff"]
    for path in absent:
        assert head.find(path, data[slice(*head.bucket_span(path))]) is None, path


def test_the_copied_pages_are_the_indexs_pages(published: str) -> None:
    head = read_head(sidecar_path(published))
    index = Path(published).read_bytes()
    assert head.matches(index[:100], len(index))
    assert head.page_size == 65536 and head.index_size == len(index)
    assert 1 in head.eager_pages
    start, end = head.interior_span
    interior = head.parse_interior(Path(sidecar_path(published)).read_bytes()[start:end])
    assert interior and not set(interior) & set(head.eager_pages)
    for number, page in {**head.eager_pages, **interior}.items():
        assert page == index[(number - 1) * 65536 : number * 65536], number
    with sqlite3.connect(f"file:{published}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT pageno FROM dbstat WHERE pagetype = 'internal'")
        internal = {n for (n,) in rows}
    assert internal - set(head.eager_pages) == set(interior)


def test_a_write_after_publishing_makes_the_sidecar_stale(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc["a/b"] = b"1"
    publish(path)
    assert is_fresh(path, sidecar_path(path))
    head = read_head(sidecar_path(path))
    with barecat.Barecat(path, readonly=False) as bc:
        bc["a/c"] = b"2"
    index = Path(path).read_bytes()
    assert not head.matches(index[:100], len(index))
    assert not is_fresh(path, sidecar_path(path))
    with pytest.raises(BarecatIntegrityError, match="stale"):
        check_sidecar(path, sidecar_path(path))


def test_the_head_says_how_much_to_fetch_and_a_short_one_is_refused(published: str) -> None:
    data = Path(sidecar_path(published)).read_bytes()
    needed = SidecarHead.needed(data[:300], "x")
    assert needed == read_head(sidecar_path(published)).head_size
    with pytest.raises(BarecatIntegrityError, match="x: damaged sidecar: its head is"):
        SidecarHead.parse(data[: needed - 1], "x")
    for bad, what in [(b"NOTASIDE" + data[8:], "wrong magic"), (data[:100], "shorter")]:
        with pytest.raises(BarecatIntegrityError, match=what):
            SidecarHead.needed(bad, "x")


def test_rows_no_sidecar_can_hold_are_refused_by_name(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    index_only(path, 10)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE files SET offset = -5 WHERE path = 'd3/s3/file-000003.bin'")
    with pytest.raises(DamagedIndexBarecatError, match=r"d3/s3/file-000003\.bin"):
        build_sidecar(path, sidecar_path(path))
    assert not [n for n in os.listdir(tmp_path) if "sidecar" in n]  # nor a temporary one


def test_a_wal_index_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    index_only(path, 10)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    try:
        with pytest.raises(BarecatError, match="WAL mode"):
            build_sidecar(path, sidecar_path(path))
    finally:
        conn.close()


# -- damaged bytes ------------------------------------------------------------------------

SMALL = {f"x{i % 5}/{i}": Address(i % 2, i * 100, i % 100, (i * 7) % 2**32) for i in range(1500)}


@pytest.fixture(scope="module")
def small_sidecar(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = str(tmp_path_factory.mktemp("small") / "s.barecat")
    with Index(path, readonly=False) as index:
        index.add_files_bulk([BarecatFileInfo(path=p, **a._asdict()) for p, a in SMALL.items()])
    build_sidecar(path, sidecar_path(path))
    return Path(sidecar_path(path)).read_bytes()


flips = st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4)


@pytest.mark.fuzz
@fuzz_settings(300)
@given(flips, st.none() | st.integers(0, 10**6))
@example([(20, 1)], None)  # the head's bucket bits
@example([(2000, 1)], None)
def test_damaged_sidecar_bytes_raise_or_answer_right(
    small_sidecar: bytes, flipped: list[tuple[int, int]], cut: int | None
) -> None:
    """Whatever bytes are damaged, each part either raises BarecatIntegrityError or
    answers as the undamaged sidecar does: every file of the archive, and paths beside
    them that it lacks."""
    data = bytearray(small_sidecar)
    for at, xor in flipped:
        data[at % len(data)] ^= xor
    if cut is not None:
        del data[cut % len(data) :]
    good = SidecarHead.parse(small_sidecar, "s")
    try:
        head = SidecarHead.parse(bytes(data), "s")
    except BarecatIntegrityError:
        return
    assert (head.index_header, head.index_size, head.page_size) == (
        good.index_header, good.index_size, good.page_size,
    )  # fmt: skip
    assert (head.shard_sizes, head.num_files, head.eager_pages) == (
        good.shard_sizes, good.num_files, good.eager_pages,
    )  # fmt: skip
    start, end = head.interior_span
    with contextlib.suppress(BarecatIntegrityError):
        assert head.parse_interior(bytes(data[start:end])) == good.parse_interior(
            small_sidecar[start:end]
        )
    paths = [*SMALL, *(p + "-absent" for p in list(SMALL)[::10])]
    for (start, end), some in head.bucket_spans(paths).items():
        with contextlib.suppress(BarecatIntegrityError):
            found = head.find_many(some, bytes(data[start:end]))
            assert found == [SMALL.get(p) for p in some]  # never a wrong answer


def test_the_fuzz_template_is_undamaged(small_sidecar: bytes) -> None:
    head = SidecarHead.parse(small_sidecar, "s")
    for p, address in SMALL.items():
        assert head.find(p, small_sidecar[slice(*head.bucket_span(p))]) == address


def test_a_sidecar_survives_a_copy_to_another_name(published: str, tmp_path: Path) -> None:
    """The sidecar names no file: a copy of the archive (as an upload makes) is published."""
    copy = str(tmp_path / "copy.barecat")
    for suffix in ("", "-sidecar"):
        shutil.copyfile(published + suffix, copy + suffix)
    assert is_fresh(copy, sidecar_path(copy))


def test_buckets_average_32_kib_and_the_directory_fits_the_first_request() -> None:
    """k: buckets of at most 32 KiB on average, or up to 64 KiB rather than a directory
    past 2**14 buckets (128 KiB, in the reader's first 256 KiB with the eager pages)."""
    from barecat.index.sidecar import _bucket_bits

    assert [_bucket_bits(n) for n in (0, 32768, 32769, 4_500_000)] == [0, 0, 1, 8]
    assert _bucket_bits(10_000_000 * (30 + 15)) == 14  # 10M files of 30-byte paths
    assert _bucket_bits(10_000_000 * (60 + 15)) == 14  # of 60-byte paths: 46 KiB buckets
    assert _bucket_bits(30_000_000 * (60 + 15)) == 16


def test_a_path_whose_bytes_are_not_utf8_is_published_and_found(tmp_path: Path) -> None:
    """A row of bytes that are not UTF-8 (0.3.1 or a damaged index can hold one) is hashed
    as bytes and found by its surrogateescape spelling, as the lookup table finds it."""
    path = str(tmp_path / "a.barecat")
    index_only(path, 1)  # (one row: publish's check looks it up, absent neighbour too)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE files SET path = CAST(x'64302f80ff' AS TEXT) WHERE path = ?",
            ("d0/s0/file-000000.bin",),
        )
    publish(path)
    data = Path(sidecar_path(path)).read_bytes()
    head = read_head(sidecar_path(path))
    odd = "d0/\udc80\udcff"
    assert head.find(odd, data[slice(*head.bucket_span(odd))]) == sql_addresses(path)[odd]


def test_the_eager_pages_hold_config_and_sqlite_stat1(tmp_path: Path) -> None:
    """Page 1 (the schema), and every page of config and of ANALYZE's sqlite_stat1: what
    SQLite reads at every open and to plan every query."""
    path = str(tmp_path / "a.barecat")
    index_only(path, 2000)
    with sqlite3.connect(path) as conn:
        conn.execute("ANALYZE")
    publish(path)
    head = read_head(sidecar_path(path))
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        wanted = {
            n
            for (n,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name IN (SELECT name FROM sqlite_master "
                "WHERE tbl_name IN ('config', 'sqlite_stat1'))"
            )
        }
    assert len(wanted) >= 2 and set(head.eager_pages) == wanted | {1}
