"""Ranged, coalesced and block-cached reads of one object (``barecat.objectstore``), compared
with slicing the object's bytes; through fsspec's real local filesystem, so no server is
needed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import barecat
from barecat.objectstore import (
    ArchiveCache,
    ObjectStore,
    StoredObject,
    is_remote_url,
    local_path_of,
)

pytest.importorskip("fsspec", reason="the remote extra (fsspec) is not installed")

DATA = os.urandom(300_000)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("object") / "blob"
    path.write_bytes(DATA)
    return str(path)


ranges = st.lists(
    st.tuples(st.integers(0, len(DATA) + 10), st.integers(0, 70_000)).map(
        lambda r: (r[0], r[0] + r[1])
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(ranges, min_size=1, max_size=3),
    block_size=st.sampled_from([4096, 8192, 65536, 1 << 20]),
    max_gap=st.sampled_from([0, 1000, 1 << 20]),
    cached=st.booleans(),
)
def test_reads_equal_slices(
    source: str,
    batches: list[list[tuple[int, int]]],
    block_size: int,
    max_gap: int,
    cached: bool,
) -> None:
    store = ObjectStore("file")
    version = store.describe(source)
    with tempfile.TemporaryDirectory() as cache_root:
        cache = ArchiveCache(cache_root, source).blocks_of(version, block_size) if cached else None
        obj = StoredObject(store, version, cache)
        try:
            for batch in batches:  # later batches find some blocks cached
                got = obj.read_ranges(batch, max_gap)
                assert got == [DATA[s:e] for s, e in batch]
        finally:
            obj.close()


def test_coalescing_and_caching_save_requests(source: str, tmp_path: Path) -> None:
    store = ObjectStore("file")
    version = store.describe(source)
    plain = StoredObject(store, version)
    wanted = [(i * 10_000, i * 10_000 + 3000) for i in range(20)]
    before = store.stats.requests
    assert plain.read_ranges(wanted, max_gap=8000) == [DATA[s:e] for s, e in wanted]
    assert store.stats.requests - before == 1  # gaps of 7,000 bytes: one span
    before = store.stats.requests
    plain.read_ranges(wanted, max_gap=0)
    assert store.stats.requests - before == len(wanted)

    cached = StoredObject(
        store, version, ArchiveCache(str(tmp_path), source).blocks_of(version, 4096)
    )
    before = store.stats.requests
    assert cached.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    fetched = store.stats.requests - before
    assert cached.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    assert store.stats.requests - before == fetched  # second time: all from the cache
    cached.close()


def test_a_short_object_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 1000)
    store = ObjectStore("file")
    version = store.describe(str(path))
    path.write_bytes(b"x" * 10)  # truncated after it was described
    with pytest.raises(OSError, match="shorter than the index says"):
        StoredObject(store, version).read(0, 500)


def test_url_recognition() -> None:
    assert is_remote_url("s3://bucket/ds.barecat")
    assert is_remote_url("gs://b/x") and is_remote_url("memory://x")
    assert not is_remote_url("/data/ds.barecat") and not is_remote_url("ds.barecat")
    assert not is_remote_url("file:///data/ds.barecat")
    assert not is_remote_url("dir/with://odd name")
    assert local_path_of("file:///data/ds.barecat") == "/data/ds.barecat"


def test_file_urls_open_local_archives(make_archive: Callable[..., str]) -> None:
    path = make_archive({"a/b.txt": b"local"})
    with barecat.Barecat("file://" + os.path.abspath(path)) as bc:
        assert not bc.remote and bc["a/b.txt"] == b"local"


def test_an_archive_on_fsspecs_memory_filesystem(
    make_archive: Callable[..., str], tmp_path: Path
) -> None:
    fsspec = pytest.importorskip("fsspec")
    files = {f"d{i % 3}/{i}.bin": os.urandom(i * 37) for i in range(40)}
    path = make_archive(files, shard_size_limit=4096)
    memory = fsspec.filesystem("memory")
    directory, name = os.path.split(path)
    for entry in os.listdir(directory):
        if entry.startswith(name) and not entry.endswith("-lookup"):
            memory.pipe_file(f"/mem-test/{entry}", Path(directory, entry).read_bytes())
    url = f"memory://mem-test/{name}"
    with barecat.Barecat(url, cache_dir=str(tmp_path)) as bc:
        assert bc.remote and bc.sharder.num_shards > 3
        assert {p: bc[p] for p in bc} == files
        assert bc.get_many(sorted(files)) == [files[p] for p in sorted(files)]
        assert bc.verify_integrity()


def test_a_download_killed_midway_leaves_nothing_behind(source: str, tmp_path: Path) -> None:
    store = ObjectStore("file")
    version = store.describe(source)
    cache = ArchiveCache(str(tmp_path), source)
    os.makedirs(cache.directory)
    first_copy = cache.copy_of(store, version)
    os.remove(first_copy)
    stem = os.path.basename(first_copy)
    dead = Path(cache.directory, f"{stem}.part-999999999")  # no such process
    alive = Path(cache.directory, f"{stem}.part-1")  # init's: a download in progress
    dead.write_bytes(b"half")
    alive.write_bytes(b"half")
    copy = cache.copy_of(store, version)
    assert Path(copy).read_bytes() == DATA
    assert not dead.exists() and alive.exists()


def test_a_cache_limit_deletes_the_archives_used_longest_ago(
    make_archive: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    urls, contents = [], []
    for k in range(3):
        files = {f"f{i}": os.urandom(50_000) for i in range(20)}  # 1 MB each
        path = make_archive(files)
        directory, name = os.path.split(path)
        for entry in os.listdir(directory):
            if entry.startswith(name) and not entry.endswith("-lookup"):
                memory.pipe_file(f"/limit/{k}/{entry}", Path(directory, entry).read_bytes())
        urls.append(f"memory://limit/{k}/{name}")
        contents.append(files)
    cache = tmp_path / "cache"
    for k, url in enumerate(urls[:2]):
        with barecat.Barecat(url, cache_dir=str(cache)) as bc:
            assert bc.get_many(sorted(contents[k])) == [contents[k][p] for p in sorted(contents[k])]
        os.utime(ArchiveCache(str(cache), url).directory, (k, k))  # 0 oldest
    assert len(os.listdir(cache)) == 2
    monkeypatch.setenv("BARECAT_CACHE_LIMIT", "1500K")  # room for about one archive
    with barecat.Barecat(urls[2], cache_dir=str(cache)) as bc:
        assert {p: bc[p] for p in bc} == contents[2]
    kept = sorted(os.listdir(cache))
    assert kept == sorted(
        os.path.basename(ArchiveCache(str(cache), u).directory) for u in urls[1:]
    )  # the oldest went; the newest two stay (the one in use is never deleted)
