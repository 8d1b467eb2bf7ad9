"""Hard links: stored once (rows share bytes), restored as links, kept shared by maintenance.

A tree's hard links go into an archive as rows that point at the first name's bytes
(``create``, tar conversion), come back out as names of one file (``extract``, ``convert``
to tar as LNKTYPE members), and every operation that moves or drops rows keeps the
other names' bytes: verify, remove, defrag (full and quick), merge, subset. The property
test checks that the inode groups of a random tree are the same after a round trip.
"""

from __future__ import annotations

import importlib
import io
import os
import stat
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import barecat
from barecat.entries import BarecatFileInfo, Order
from barecat.layout import shard_path
from barecat.transfer import extract_to_directory, ingest, plan_tree
from helpers.fuzzing import fuzz_settings


def inode_groups(root: Path) -> set[frozenset[str]]:
    """The regular files below ``root`` grouped by inode (paths relative to root)."""
    groups: dict[tuple[int, int], set[str]] = defaultdict(set)
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath, name)
            st_ = path.lstat()
            if stat.S_ISREG(st_.st_mode):
                groups[(st_.st_dev, st_.st_ino)].add(str(path.relative_to(root)))
    return {frozenset(g) for g in groups.values()}


def rows(archive: Path) -> dict[str, tuple[int, int, int]]:
    with barecat.Barecat(str(archive)) as bc:
        return {f.path: (f.shard, f.offset, f.size) for f in bc.iter_fileinfos(Order.ADDRESS)}


def linked_tree(root: Path) -> None:
    """a (3 names), big (2 names, streamed past 16 MiB would be slow: 2 MB), lone."""
    (root / "d").mkdir(parents=True)
    (root / "a").write_bytes(b"hello")
    os.link(root / "a", root / "d" / "a2")
    os.link(root / "a", root / "d" / "a3")
    (root / "big").write_bytes(os.urandom(2_000_000))
    os.link(root / "big", root / "d" / "big2")
    (root / "lone").write_bytes(b"x")


def create(archive: Path, source: Path) -> barecat.transfer.IngestResult:
    with barecat.Barecat(str(archive), readonly=False) as bc:
        return ingest(bc, plan_tree(str(source)))


def test_create_stores_each_hard_link_once_and_extract_links_them(tmp_path: Path) -> None:
    src, archive = tmp_path / "src", tmp_path / "a.barecat"
    linked_tree(src)
    result = create(archive, src)
    assert result.files == 6 and result.shared == 3
    placed = rows(archive)
    assert placed["a"] == placed["d/a2"] == placed["d/a3"]
    assert placed["big"] == placed["d/big2"]
    assert os.path.getsize(shard_path(str(archive), 0)) == 5 + 2_000_000 + 1
    with barecat.Barecat(str(archive)) as bc:
        assert bc.verify_integrity()
        assert bc["d/a3"] == b"hello" and bc["d/big2"] == (src / "big").read_bytes()
        out = tmp_path / "out"
        extracted = extract_to_directory(bc, str(out))
    assert not extracted.failures and extracted.files == 6
    assert inode_groups(out) == inode_groups(src)
    assert (out / "d" / "big2").read_bytes() == (src / "big").read_bytes()


def test_links_across_chunks_threads_and_streamed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 3 files on 3 threads, files over 100 bytes streamed: a later name, in
    the same chunk or another, read into a buffer or streamed, points at its first
    name's bytes, which are written once; the layout is the plan's whatever the timing."""
    threads = importlib.import_module("barecat.transfer.ingest.threads")
    monkeypatch.setattr(threads, "READ_CHUNK", 3)
    monkeypatch.setattr(threads, "STREAM_THRESHOLD", 100)
    monkeypatch.setattr(threads, "BATCH_FILES", 4)
    src = tmp_path / "src"
    src.mkdir()
    expected: dict[str, bytes] = {}
    for k in range(12):
        data = bytes([k]) * (50 if k % 2 else 300)
        (src / f"f{k:02d}").write_bytes(data)
        expected[f"f{k:02d}"] = data
    for k, first in [(0, 0), (1, 1), (2, 5), (3, 11), (4, 0)]:
        os.link(src / f"f{first:02d}", src / f"l{k:02d}")
        expected[f"l{k:02d}"] = expected[f"f{first:02d}"]
    layouts = []
    for run in range(3):
        archive = tmp_path / f"a{run}.barecat"
        with barecat.Barecat(str(archive), readonly=False) as bc:
            result = ingest(bc, plan_tree(str(src)), workers=3)
        assert result.shared == 5 and not result.failures
        placed = rows(archive)
        assert placed["l00"] == placed["l04"] == placed["f00"]
        assert placed["l02"] == placed["f05"] and placed["l03"] == placed["f11"]
        unique = sum(len(d) for n, d in expected.items() if n.startswith("f"))
        assert os.path.getsize(shard_path(str(archive), 0)) == unique
        check(archive, expected)
        layouts.append(placed)
    assert layouts[0] == layouts[1] == layouts[2]


def test_a_sealed_archive_stores_each_name_whole(tmp_path: Path) -> None:
    src, archive = tmp_path / "src", tmp_path / "s.barecat"
    linked_tree(src)
    with barecat.Barecat(str(archive), readonly=False, compression="zstd") as bc:
        result = ingest(bc, plan_tree(str(src)))
    assert result.files == 6 and result.shared == 0
    placed = rows(archive)
    assert len({placed[p][:2] for p in placed}) == 6


def test_rows_sharing_bytes_but_not_metadata_extract_as_separate_files(tmp_path: Path) -> None:
    archive = tmp_path / "m.barecat"
    with barecat.Barecat(str(archive), readonly=False) as bc:
        bc.add(BarecatFileInfo("one", mode=stat.S_IFREG | 0o644, mtime_ns=10**18), data=b"same")
        one = bc.lookup_file("one")
        for name, mode, mtime in [("two", 0o600, 10**18), ("three", 0o644, 2 * 10**18)]:
            info = BarecatFileInfo(name, mode=stat.S_IFREG | mode, mtime_ns=mtime)
            info.shard, info.offset, info.size, info.crc32c = one.address
            bc.add_placed([info])
        out = tmp_path / "out"
        assert not extract_to_directory(bc, str(out)).failures
    assert inode_groups(out) == {frozenset({"one"}), frozenset({"two"}), frozenset({"three"})}
    assert stat.S_IMODE((out / "two").stat().st_mode) == 0o600
    assert (out / "three").stat().st_mtime_ns == 2 * 10**18


def test_an_empty_file_at_the_same_place_keeps_no_names_apart(tmp_path: Path) -> None:
    """Rows at one place are neighbours in storage order, but an empty file may be parked
    there too, between them (its own order is free): the names are still one file."""
    archive = tmp_path / "e.barecat"
    with barecat.Barecat(str(archive), readonly=False) as bc:
        bc.add(BarecatFileInfo("a", mode=stat.S_IFREG | 0o644, mtime_ns=10**18), data=b"xyz")
        a = bc.lookup_file("a")
        for name, size in [("m-empty", 0), ("z", 3)]:
            info = BarecatFileInfo(name, mode=stat.S_IFREG | 0o644, mtime_ns=10**18)
            info.shard, info.offset, info.size, info.crc32c = a.address
            if not size:
                info.size, info.crc32c = 0, 0
            bc.add_placed([info])
        order = [f.path for f in bc.iter_fileinfos(Order.ADDRESS)]
        out = tmp_path / "out"
        assert not extract_to_directory(bc, str(out)).failures
    assert set(order) == {"a", "m-empty", "z"}
    assert inode_groups(out) == {frozenset({"a", "z"}), frozenset({"m-empty"})}


def test_extract_replaces_what_is_in_the_way_of_a_link(tmp_path: Path) -> None:
    src, archive, out = tmp_path / "src", tmp_path / "a.barecat", tmp_path / "out"
    linked_tree(src)
    create(archive, src)
    (out / "d").mkdir(parents=True)
    (out / "d" / "a3").write_bytes(b"old file")
    os.symlink("/etc/passwd", out / "d" / "a2")
    with barecat.Barecat(str(archive)) as bc:
        assert not extract_to_directory(bc, str(out)).failures
    assert inode_groups(out) == inode_groups(src)
    assert (out / "d" / "a2").read_bytes() == b"hello"


def tar_with_links() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [("x/first", b"payload" * 100), ("solo", b"s")]:
            member = tarfile.TarInfo(name)
            member.size, member.mtime = len(data), 1_700_000_000
            tar.addfile(member, io.BytesIO(data))
        for name in ["x/second", "third"]:
            link = tarfile.TarInfo(name)
            link.type, link.linkname, link.mtime = tarfile.LNKTYPE, "x/first", 1_700_000_000
            tar.addfile(link)
    return buffer.getvalue()


def test_tar_round_trip_keeps_hard_links(tmp_path: Path) -> None:
    archive = tmp_path / "t.barecat"
    with barecat.Barecat(str(archive), readonly=False) as bc:
        result = barecat.transfer.import_tar(bc, io.BytesIO(tar_with_links()))
    assert result.files == 4 and not result.skipped
    placed = rows(archive)
    assert placed["x/first"] == placed["x/second"] == placed["third"]
    assert os.path.getsize(shard_path(str(archive), 0)) == 701
    out = io.BytesIO()
    with barecat.Barecat(str(archive)) as bc:
        assert bc.verify_integrity()
        barecat.transfer.export_tar(bc, out)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        # the first name in path order holds the bytes, the others link to it
        assert members["third"].isreg() and members["solo"].isreg()
        assert members["x/first"].islnk() and members["x/first"].linkname == "third"
        assert members["x/second"].islnk() and members["x/second"].linkname == "third"
        tar.extractall(tmp_path / "untarred", filter="tar")
    assert inode_groups(tmp_path / "untarred") == {
        frozenset({"x/first", "x/second", "third"}),
        frozenset({"solo"}),
    }
    assert (tmp_path / "untarred" / "third").read_bytes() == b"payload" * 100


def shared_archive(tmp_path: Path) -> Path:
    """Files with holes around a shared range: x, a (= b), c, g, d; x and g removed."""
    archive = tmp_path / "h.barecat"
    with barecat.Barecat(str(archive), readonly=False) as bc:
        for name, byte, size in [("x", b"X", 300), ("a", b"A", 100), ("c", b"C", 100)]:
            bc[name] = byte * size
        bc["g"], bc["d"] = b"G" * 300, b"D" * 10
        a = bc.lookup_file("a")
        b = BarecatFileInfo("b")
        b.shard, b.offset, b.size, b.crc32c = a.address
        bc.add_placed([b])
        bc.remove("x")
        bc.remove("g")
    return archive


CONTENTS = {"a": b"A" * 100, "b": b"A" * 100, "c": b"C" * 100, "d": b"D" * 10}


def check(archive: Path, contents: dict[str, bytes]) -> None:
    with barecat.Barecat(str(archive)) as bc:
        assert {p: bc[p] for p in bc.files()} == contents
        report = bc.verify()
        assert report.ok, (report.index_problems, report.bad_files)


@pytest.mark.parametrize("quick", [False, True])
def test_defrag_moves_shared_rows_together(tmp_path: Path, quick: bool) -> None:
    archive = shared_archive(tmp_path)
    with barecat.Barecat(str(archive), readonly=False) as bc:
        bc.defrag(quick=quick)
    placed = rows(archive)
    assert placed["a"] == placed["b"]
    assert os.path.getsize(shard_path(str(archive), 0)) == 210
    check(archive, CONTENTS)


def test_removing_one_name_keeps_the_others_bytes(tmp_path: Path) -> None:
    archive = tmp_path / "r.barecat"
    with barecat.Barecat(str(archive), readonly=False) as bc:
        bc["a"] = b"last bytes"
        a = bc.lookup_file("a")
        b = BarecatFileInfo("b")
        b.shard, b.offset, b.size, b.crc32c = a.address
        bc.add_placed([b])
        bc.remove("a")
        bc.defrag()
        bc.truncate_all_to_logical_size()
    check(archive, {"b": b"last bytes"})
    with barecat.Barecat(str(archive), readonly=False) as bc:
        bc["c"] = b"appended"  # goes after b's bytes, which are still used
    check(archive, {"b": b"last bytes", "c": b"appended"})


def test_merge_and_subset_keep_rows_shared(tmp_path: Path) -> None:
    archive = shared_archive(tmp_path)
    merged, subset = tmp_path / "merged.barecat", tmp_path / "subset.barecat"
    with barecat.Barecat(str(merged), readonly=False) as bc:
        bc["first"] = b"1" * 7
        bc.merge_from_other_barecat(str(archive))
    placed = rows(merged)
    assert placed["a"] == placed["b"]
    check(merged, {"first": b"1" * 7, **CONTENTS})
    with (
        barecat.Barecat(str(archive)) as source,
        barecat.Barecat(str(subset), readonly=False) as bc,
    ):
        bc.take_subset(source, source.select_entries("[ab]"))
    placed = rows(subset)
    assert placed["a"] == placed["b"]
    check(subset, {"a": CONTENTS["a"], "b": CONTENTS["b"]})


@pytest.mark.fuzz
@fuzz_settings(40)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 3), st.binary(max_size=300)),
        min_size=1,
        max_size=14,
    )
)
def test_round_trip_keeps_inode_groups(
    tmp_path_factory: pytest.TempPathFactory, spec: list[tuple[int, int, bytes]]
) -> None:
    """Each spec item makes a file (contents, directory) or, when its group number names
    an earlier file, another name of it; after create and extract the groups are equal."""
    base = tmp_path_factory.mktemp("trip")
    src = base / "src"
    src.mkdir()
    made: list[Path] = []
    for k, (group, directory, data) in enumerate(spec):
        path = src / f"d{directory}" / f"f{k}"
        path.parent.mkdir(exist_ok=True)
        if group < len(made):
            os.link(made[group], path)
        else:
            path.write_bytes(data)
        made.append(path)
    archive = base / "a.barecat"
    create(archive, src)
    out = base / "out"
    with barecat.Barecat(str(archive)) as bc:
        assert bc.verify_integrity()
        assert not extract_to_directory(bc, str(out)).failures
    expected: set[frozenset[str]] = set()
    for g in inode_groups(src):  # empty files have no bytes to share: each name alone
        empty = (src / next(iter(g))).stat().st_size == 0
        expected |= {frozenset({n}) for n in g} if empty else {g}
    assert inode_groups(out) == expected
    for g in expected:
        for name in g:
            assert (out / name).read_bytes() == (src / name).read_bytes()
