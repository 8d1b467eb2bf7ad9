"""Archives on object storage: a real S3-protocol server (moto's server mode, a separate
process on 127.0.0.1) holds the index and shards; barecat opens them by URL, reads them
with ranged requests through its block cache, and keeps a local copy of the index."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat.exceptions import (
    BarecatIntegrityError,
    FileNotFoundBarecatError,
    ReadOnlyBarecatError,
    RemoteStorageBarecatError,
)
from helpers.s3 import S3Server, upload

s3fs = pytest.importorskip("s3fs", reason="the remote extra (fsspec + s3fs) is not installed")
pytest.importorskip("moto.server", reason="moto[server] (a local S3 server) is not installed")


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    s = S3Server()
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def fs(server: S3Server) -> Any:
    filesystem = s3fs.S3FileSystem(**server.options(), skip_instance_cache=True)
    filesystem.mkdir("data")
    return filesystem


def build(path: str, count: int = 300, seed: int = 1, **options: Any) -> dict[str, bytes]:
    rng = random.Random(seed)
    files = {
        f"train/c{i % 5}/{i:04d}.bin": rng.randbytes(rng.choice([0, 1, 700, 5000, 40_000]))
        for i in range(count)
    }
    files["meta/labels.json"] = json.dumps({"classes": 5}).encode()
    with barecat.Barecat(path, readonly=False, shard_size_limit="1M", **options) as bc:
        bc.add_many(files.items())
        bc.makedirs("empty/dir")
    return files


@pytest.fixture(scope="module")
def remote(fs: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict[str, bytes]]:
    """(local archive, its S3 URL, its files)."""
    local = str(tmp_path_factory.mktemp("remote") / "ds.barecat")
    files = build(local)
    upload(fs, local, "s3://data/ds.barecat")
    return local, "s3://data/ds.barecat", files


def open_remote(url: str, server: S3Server, cache: Path, **options: Any) -> barecat.Barecat:
    """The archive at ``url`` in download mode (what this file tests; lazy reads are
    ``test_lazy_remote.py``'s)."""
    options.setdefault("storage_options", server.options())
    options.setdefault("remote_mode", "download")
    return barecat.Barecat(url, cache_dir=str(cache), **options)


def test_every_file_and_listing_matches_the_local_archive(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    local_path, url, files = remote
    with barecat.Barecat(local_path) as local, open_remote(url, server, tmp_path) as bc:
        assert bc.sharder.num_shards == local.sharder.num_shards > 1
        assert sorted(bc) == sorted(files)
        for path, data in files.items():
            assert bc[path] == data
        assert list(bc.walk("")) == list(local.walk(""))
        assert sorted(bc.glob("train/**/*.bin", recursive=True)) == sorted(
            local.glob("train/**/*.bin", recursive=True)
        )
        assert bc.listdir("empty") == ["dir"]
        assert bc.index.lookup_file("meta/labels.json") == local.index.lookup_file(
            "meta/labels.json"
        )
        big = max(files, key=lambda p: len(files[p]))
        assert bc.read(big, 1000, 3000) == files[big][1000:4000]
        with bc.open(big, "rb") as f:
            f.seek(-10, os.SEEK_END)
            assert f.read() == files[big][-10:]
        assert bc.verify_integrity()


def test_a_second_open_reuses_the_cached_index_and_blocks(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    _, url, files = remote
    paths = sorted(files)
    with open_remote(url, server, tmp_path) as bc:
        first = bc.sharder.store.stats
        assert first.requests == 2  # the index's version, and the download of its copy
        assert bc.get_many(paths) == [files[p] for p in paths]
        fetched = first.requests
    with open_remote(url, server, tmp_path) as bc:
        stats = bc.sharder.store.stats
        assert stats.requests == 1 and stats.bytes_fetched == 0  # version check only
        assert [bc[p] for p in paths] == [files[p] for p in paths]
        # one metadata request per shard, no bytes: every block was cached
        assert stats.requests == 1 + bc.sharder.num_shards
        assert stats.bytes_fetched == 0
    assert fetched > 1


def _fill(server: S3Server, local: str, url: str) -> None:
    """A new bucket holding the archive (moto keeps objects in memory: a restarted
    server is empty)."""
    store = s3fs.S3FileSystem(**server.options(), skip_instance_cache=True)
    store.mkdir(url.removeprefix("s3://").split("/", 1)[0])
    upload(store, local, url)


@pytest.mark.slow
def test_cached_bytes_are_served_while_the_store_is_down(tmp_path: Path) -> None:
    local = str(tmp_path / "ds.barecat")
    files = build(local, count=120, seed=2)
    url = "s3://outage/ds.barecat"
    own = S3Server()
    own.start()
    _fill(own, local, url)
    bc = open_remote(url, own, tmp_path / "cache", storage_options=own.options(attempts=1))
    try:
        stored = [f.path for f in bc.index.iter_all_fileinfos(barecat.Order.ADDRESS)]
        warm = stored[:5]  # the start of shard 0
        cold = next(p for p in reversed(stored) if files[p])  # in the last shard
        assert bc.get_many(warm) == [files[p] for p in warm]
        own.stop()
        assert [bc[p] for p in warm] == [files[p] for p in warm]
        with pytest.raises(RemoteStorageBarecatError, match="Could not"):
            bc[cold]
        own.start()  # back, and filled again with the same bytes (the same ETags)
        _fill(own, local, url)
        assert bc[cold] == files[cold]  # nothing was poisoned by the failure
    finally:
        bc.close()
        own.stop()


def test_without_block_cache_each_read_fetches_exactly_its_bytes(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    _, url, files = remote
    paths = [p for p in sorted(files) if files[p]][:20]
    with open_remote(url, server, tmp_path, block_cache=False) as bc:
        stats = bc.sharder.store.stats
        at_open = (stats.requests, stats.bytes_fetched)  # the index: version and copy
        for p in paths:
            assert bc[p] == files[p]
        shards = {bc.index.lookup_file(p).shard for p in paths}
        assert stats.requests - at_open[0] == len(shards) + len(paths)
        assert stats.bytes_fetched - at_open[1] == sum(len(files[p]) for p in paths)
        # nothing but the index copy (and its lookup table) is kept
        kept = [n for n in os.listdir(next(tmp_path.iterdir())) if "shard" in n]
        assert kept == []


def test_get_many_coalesces_neighbours_into_few_requests(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    local_path, url, files = remote
    with barecat.Barecat(local_path) as local:
        shard0 = [f.path for f in local.index.iter_all_fileinfos(barecat.Order.ADDRESS)
                  if f.shard == 0]  # fmt: skip
    wanted = shard0[::2]  # every other file: gaps between them, all under 256 KiB
    random.Random(3).shuffle(wanted)
    for block_cache in (False, True):
        with open_remote(url, server, tmp_path / str(block_cache), block_cache=block_cache) as bc:
            stats = bc.sharder.store.stats
            assert bc.get_many(wanted) == [files[p] for p in wanted]  # in request order
            assert stats.requests <= 2 + 1 + 2, (block_cache, stats)  # index x2, shard, spans
            assert len(wanted) > 20


def test_a_changed_archive_is_downloaded_again(fs: Any, server: S3Server, tmp_path: Path) -> None:
    local = str(tmp_path / "v1" / "ds.barecat")
    os.makedirs(os.path.dirname(local))
    url = "s3://data/changing.barecat"
    old = build(local, count=20, seed=5)
    upload(fs, local, url)
    cache = tmp_path / "cache"
    with open_remote(url, server, cache) as bc:
        assert sorted(bc) == sorted(old)
        assert bc[sorted(old)[0]] == old[sorted(old)[0]]
    shutil.rmtree(os.path.dirname(local))
    os.makedirs(os.path.dirname(local))
    new = build(local, count=25, seed=6)
    upload(fs, local, url)
    with open_remote(url, server, cache) as bc:
        assert sorted(bc) == sorted(new)
        assert all(bc[p] == data for p, data in new.items())
    # the old version's index copy and blocks are gone: one index copy, one map per shard
    names = os.listdir(next(cache.iterdir()))
    assert len([n for n in names if n.startswith("changing.barecat-") and "shard" not in n
                and not n.endswith("-lookup")]) == 1  # fmt: skip
    assert len([n for n in names if n.endswith(".map")]) == 1


def test_damaged_cache_blocks_are_fetched_again(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    _, url, files = remote
    paths = [p for p in sorted(files) if len(files[p]) > 1000]
    with open_remote(url, server, tmp_path) as bc:
        assert bc.get_many(paths) == [files[p] for p in paths]
    directory = next(tmp_path.iterdir())
    for name in os.listdir(directory):
        if "shard" in name and not name.endswith(".map"):
            with open(directory / name, "r+b") as f:  # scribble over the cached bytes
                f.seek(0)
                f.write(os.urandom(200_000))
    with open_remote(url, server, tmp_path) as bc:
        assert [bc[p] for p in paths] == [files[p] for p in paths]
        assert bc.sharder.store.stats.bytes_fetched > 0


def test_corrupt_or_truncated_remote_shards_fail_clearly(
    fs: Any, server: S3Server, tmp_path: Path
) -> None:
    local = str(tmp_path / "ds.barecat")
    files = build(local, count=40, seed=8)
    url = "s3://data/damaged.barecat"
    upload(fs, local, url)
    with barecat.Barecat(local) as bc:
        victim = next(f for f in bc.index.iter_all_fileinfos() if (f.size or 0) > 100)
        last = max(bc.index.iter_all_fileinfos(), key=lambda f: (f.shard, f.offset))
    shard = f"{url}-shard-{victim.shard:05d}"
    data = bytearray(fs.cat_file(shard))
    data[(victim.offset or 0) + 7] ^= 0xFF
    fs.pipe_file(shard, bytes(data))
    with open_remote(url, server, tmp_path, block_cache=False) as bc:
        with pytest.raises(BarecatIntegrityError, match="CRC32C mismatch"):
            bc[victim.path]
        assert not bc.check_crc32c(victim.path)
    fs.pipe_file(f"{url}-shard-{last.shard:05d}", b"short")
    with open_remote(url, server, tmp_path / "2") as bc:
        with pytest.raises(BarecatIntegrityError, match="truncated"):
            bc[last.path]
        with pytest.raises(BarecatIntegrityError, match="truncated"):
            bc.get_many([last.path])  # through a batch too
    assert files[last.path] != b"short"


def test_old_naming_missing_archives_and_writes(fs: Any, server: S3Server, tmp_path: Path) -> None:
    local = str(tmp_path / "old.barecat")
    files = build(local, count=10, seed=9)
    os.rename(local, local + "-sqlite-index")
    upload(fs, local, "s3://data/old.barecat")
    with open_remote("s3://data/old.barecat", server, tmp_path) as bc:
        assert {p: bc[p] for p in bc} == files
    with pytest.raises(FileNotFoundBarecatError):
        open_remote("s3://data/nothing-here.barecat", server, tmp_path)
    with pytest.raises(ReadOnlyBarecatError, match="remote storage"):
        open_remote("s3://data/old.barecat", server, tmp_path, readonly=False)


def test_an_unreachable_store_is_a_clear_error(tmp_path: Path) -> None:
    dead = S3Server()  # never started: its port refuses connections
    with pytest.raises(RemoteStorageBarecatError, match="Could not look up s3://data/x"):
        open_remote("s3://data/x.barecat", dead, tmp_path, storage_options=dead.options(1))


def test_sealed_archives_unseal_from_the_store(fs: Any, server: S3Server, tmp_path: Path) -> None:
    pytest.importorskip("cryptography", reason="the sealing extra is not installed")
    local = str(tmp_path / "sealed.barecat")
    files = build(local, count=30, seed=10, compression="zstd", passphrase="pw")
    upload(fs, local, "s3://data/sealed.barecat")
    with open_remote("s3://data/sealed.barecat", server, tmp_path, passphrase="pw") as bc:
        assert bc.encrypted
        assert bc.get_many(sorted(files)) == [files[p] for p in sorted(files)]


def test_a_pickled_remote_archive_reads_in_worker_processes(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    _, url, files = remote
    bc = open_remote(url, server, tmp_path)
    paths = sorted(files)
    script = (
        "import pickle, sys; bc = pickle.loads(sys.stdin.buffer.read()); "
        "import hashlib; print(hashlib.sha256(b''.join(bc[p] for p in sorted(bc))).hexdigest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(bc), capture_output=True, check=True
    )

    assert (
        out.stdout.decode().strip() == hashlib.sha256(b"".join(files[p] for p in paths)).hexdigest()
    )
    bc.close()


def test_torch_dataloader_workers_read_batches_from_the_store(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    pytest.importorskip("torch", reason="torch is not installed (./run test installs 2.13.0)")
    from torch.utils.data import DataLoader

    from barecat.integrations.torch import BarecatDataset

    _, url, files = remote
    dataset = BarecatDataset(
        url, pattern="train/**", storage_options=server.options(), cache_dir=str(tmp_path)
    )
    loader = DataLoader(dataset, batch_size=32, num_workers=2, collate_fn=list)
    seen = {p: data for batch in loader for p, data in batch}
    assert seen == {p: d for p, d in files.items() if p.startswith("train/")}


@pytest.mark.slow
def test_fsspec_chained_urls_and_the_cli_read_from_the_store(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    fsspec = pytest.importorskip("fsspec")
    _, url, files = remote
    options = server.options()
    with fsspec.open(
        f"barecat://meta/labels.json::{url}", s3=options, barecat={"cache_dir": str(tmp_path)}
    ) as f:
        assert f.read() == files["meta/labels.json"]
    with fsspec.open(
        f"barecat::{url}/meta/labels.json", s3=options, barecat={"cache_dir": str(tmp_path)}
    ) as f:
        assert f.read() == files["meta/labels.json"]
    env = {
        **os.environ,
        "FSSPEC_S3": json.dumps(options),
        "BARECAT_CACHE_DIR": str(tmp_path / "cli"),
    }
    cli = [sys.executable, "-m", "barecat.cli"]
    listed = subprocess.run([*cli, "ls", url, "train/c1"], env=env, capture_output=True, check=True)
    assert listed.stdout.decode().split() == sorted(
        p.rsplit("/", 1)[1] for p in files if p.startswith("train/c1/")
    )
    cat = subprocess.run([*cli, "cat", url, "meta/labels.json"], env=env, capture_output=True)
    assert cat.returncode == 0 and cat.stdout == files["meta/labels.json"]
    verify = subprocess.run([*cli, "verify", url], env=env, capture_output=True)
    assert verify.returncode == 0, verify.stderr
    out = tmp_path / "out"
    subprocess.run([*cli, "extract", url, "-C", str(out)], env=env, check=True)
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_mounting_an_archive_that_lives_on_s3(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    """``barecat mount s3://...`` (options from FSSPEC_S3): the files read through FUSE."""
    from helpers.mounting import FUSE_PROBLEM, served

    if FUSE_PROBLEM:
        pytest.skip(FUSE_PROBLEM)
    _, url, files = remote
    env = {"FSSPEC_S3": json.dumps(server.options()), "BARECAT_CACHE_DIR": str(tmp_path / "c")}
    mnt = tmp_path / "mnt"
    with served(url, mnt, env=env):
        seen = {
            str(p.relative_to(mnt)): p.read_bytes() for p in sorted(mnt.rglob("*")) if p.is_file()
        }
        assert seen == files
        assert (mnt / "empty/dir").is_dir()


def test_serving_an_archive_that_lives_on_s3(
    remote: tuple[str, str, dict[str, bytes]], server: S3Server, tmp_path: Path
) -> None:
    """``barecat serve s3://...``: an HTTP gateway in front of the store, for clients
    without S3 credentials; batches reach the store coalesced."""
    pytest.importorskip("httpx", reason="the server extra is not installed")
    from helpers.serving import serving

    _, url, files = remote
    env = {"FSSPEC_S3": json.dumps(server.options()), "BARECAT_CACHE_DIR": str(tmp_path)}
    paths = sorted(files)
    with serving(url, env=env) as (base, _), barecat.connect(base + "/a/ds") as client:
        assert client.get_many(paths) == [files[p] for p in paths]
        assert client["meta/labels.json"] == files["meta/labels.json"]
        assert sorted(client.listdir("train")) == [f"c{i}" for i in range(5)]
