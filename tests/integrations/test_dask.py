"""Dask with a real ``distributed.LocalCluster`` (2 worker processes of one thread,
once per module): archives read into DataFrames (plain and sealed; projection, pattern,
where) and DataFrames written as archives, with a partition that fails and a path in two
partitions. No mocks: real archives, real worker processes, real shards."""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat.layout import shard_files
from helpers.damaging import damage
from helpers.engines import build, leftovers, make_files
from helpers.s3 import Bucket, wait_for_objects

dd = pytest.importorskip(
    "dask.dataframe", reason="Dask is not installed (the dask extra; ./run test installs it)"
)
distributed = pytest.importorskip(
    "distributed", reason="distributed is not installed: pip install 'barecat[dask]'"
)
import dask  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from barecat.integrations.dask import read_barecat, write_barecat  # noqa: E402

pytestmark = pytest.mark.slow

BINARY = pd.ArrowDtype(pa.binary())


@contextlib.contextmanager
def local_cluster(n_workers: int) -> Iterator[Any]:
    """A client of a local cluster of ``n_workers`` processes of one thread, every port
    a free one of the loopback: ``dashboard_address=None`` would still put the
    scheduler's HTTP server on 8787 when it is free, and warn (an error here) when
    another program holds it."""
    with distributed.LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        scheduler_port=0,
        dashboard_address="127.0.0.1:0",
        scheduler_kwargs={"dashboard": False},  # (the HTTP server only, no Bokeh pages)
    ) as cluster, distributed.Client(cluster) as c:  # fmt: skip
        yield c


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """One local cluster for this module's tests: 2 worker processes, one thread each
    (not for the session: its client's threads must be gone before a later test forks,
    as Ray's must, test_ray.py's cluster says why)."""
    with local_cluster(2) as c:
        yield c


def test_the_cluster_starts_while_the_dashboard_port_is_taken() -> None:
    with socket.socket() as other:  # another program's dashboard (or anything) on 8787
        try:
            other.bind(("", 8787))
            other.listen()
        except OSError:  # taken already: the case this test is about
            pass
        with local_cluster(1) as c:
            assert c.submit(sum, [1, 2]).result() == 3
            assert c.scheduler_info()["services"].get("dashboard") != 8787


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, bytes]]:
    path = str(tmp_path_factory.mktemp("dask") / "ds.barecat")
    files = make_files()
    build(path, files)
    return path, files


def by_path(frame: pd.DataFrame) -> dict[str, bytes]:
    out = dict(zip(frame["path"], frame["bytes"], strict=True))
    assert len(out) == len(frame), "a file came twice"
    return out


# -- reading -------------------------------------------------------------------------------


def test_read_equals_the_archive_in_disjoint_partitions(
    client: Any, archive: tuple[str, dict[str, bytes]]
) -> None:
    path, files = archive
    df = read_barecat(path, partition_bytes=64 << 10, chunk_bytes=16 << 10)
    assert list(df.columns) == ["path", "bytes", "size", "mtime_ns", "crc32c"]
    assert df.npartitions > 2 and df.known_divisions
    assert len(df) == len(files)
    whole = df.compute()
    assert by_path(whole) == files
    with barecat.Barecat(path) as bc:
        for row in whole.itertuples():
            info = bc.lookup_file(row.path)
            assert (row.size, row.mtime_ns, row.crc32c) == (info.size, info.mtime_ns, info.crc32c)
        in_storage_order = [f.path for f in bc.iter_fileinfos(barecat.Order.ADDRESS)]
    parts = [df.get_partition(i).compute() for i in range(df.npartitions)]
    seen: list[str] = []
    for part in parts:
        assert not set(part["path"]) & set(seen), "partitions are disjoint"
        seen += list(part["path"])
    assert seen == in_storage_order, "partitions are contiguous runs, in storage order"
    assert list(whole.index) == list(range(len(files))), "the index is the row number"
    assert df.loc[150].compute()["path"].tolist() == [whole["path"][150]]


def test_the_first_partition_is_small_and_the_next_ones_grow(tmp_path: Path) -> None:
    path = str(tmp_path / "big.barecat")
    with barecat.Barecat(path, readonly=False) as bc:  # one shard, 1 MiB files
        for i in range(14):
            bc[f"f/{i:02d}"] = bytes([i]) * (1 << 20)
    df = read_barecat(path)  # the defaults: 4 MiB first, then 8, then up to 64 MiB
    assert df.divisions == (0, 4, 12, 13)
    assert df.get_partition(1).compute(scheduler="sync")["path"].tolist() == [
        f"f/{i:02d}" for i in range(4, 12)
    ]


def test_columns_are_read_without_shards_unless_bytes(client: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    files = make_files(60)
    build(path, files)
    for shard in shard_files(path):  # every byte gone: only the index can answer now
        os.truncate(shard, 0)
    sizes = {p: len(d) for p, d in files.items()}
    df = read_barecat(path)
    projected = df[["path", "size"]].compute()  # Dask pushes the selection into the read
    assert dict(zip(projected["path"], projected["size"], strict=True)) == sizes
    assert sorted(df["path"].compute()) == sorted(files)
    chosen = read_barecat(path, columns=["size", "path"]).compute()
    assert list(chosen.columns) == ["size", "path"]
    assert dict(zip(chosen["path"], chosen["size"], strict=True)) == sizes
    with pytest.raises(Exception, match=r"truncated|missing"):
        df.compute()
    with pytest.raises(barecat.BarecatError, match="Unknown column 'colour'"):
        read_barecat(path, columns=["path", "colour"])


@pytest.mark.parametrize("pattern", ["train/c1/*.jpg", "**/*.json", "meta/*", "nope/*"])
def test_pattern_chooses_what_globfiles_chooses(
    client: Any, archive: tuple[str, dict[str, bytes]], pattern: str
) -> None:
    path, files = archive
    with barecat.Barecat(path) as bc:
        expected = sorted(bc.globfiles(pattern, True, True))
    frame = read_barecat(path, pattern=pattern).compute()
    assert sorted(frame["path"]) == expected
    assert all(data == files[p] for p, data in zip(frame["path"], frame["bytes"], strict=True))


def test_where_runs_in_sqlite_with_parameters(
    client: Any, archive: tuple[str, dict[str, bytes]]
) -> None:
    path, files = archive
    df = read_barecat(path, where="size >= ? AND path GLOB ?", params=(700, "train/*"))
    expected = {p: d for p, d in files.items() if len(d) >= 700 and p.startswith("train/")}
    assert by_path(df.compute()) == expected
    with pytest.raises(Exception, match="no such column"):
        read_barecat(path, where="colour = 'red'")


def test_damaged_bytes_fail_the_read_naming_the_file(client: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"a/one.bin": b"1" * 5000, "a/two.bin": b"2" * 5000})
    damage(path, "a/two.bin", at=10)
    with pytest.raises(Exception, match=r"a/two\.bin.*CRC32C mismatch"):
        read_barecat(path).compute()
    assert read_barecat(path, pattern="a/one.bin").compute()["bytes"].tolist() == [b"1" * 5000]


def test_samples_grouped_by_stem(client: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "wds.barecat")
    files = {}
    for i in range(30):
        files[f"s/{i:04d}.jpg"] = os.urandom(500)
        files[f"s/{i:04d}.json"] = b'{"label": %d}' % i
    build(path, dict(sorted(files.items(), key=lambda kv: random.Random(kv[0]).random())))
    df = read_barecat(path, group_by_stem=True, partition_bytes=8192, chunk_bytes=4096)
    assert list(df.columns) == ["__key__", "jpg", "json"] and df.npartitions > 1
    samples = df.compute()
    assert len(samples) == 30 == len(df)
    for key, jpg, json in zip(samples["__key__"], samples["jpg"], samples["json"], strict=True):
        assert (jpg, json) == (files[f"{key}.jpg"], files[f"{key}.json"])


def test_sealed_archive_reads_with_the_key_in_the_graph(client: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sealed.barecat")
    files = make_files(120, seed=2)
    passphrase = "correct horse battery staple"
    build(path, files, compression="zstd", passphrase=passphrase)
    df = read_barecat(path, passphrase=passphrase, partition_bytes=32 << 10)
    assert df.npartitions > 1
    graph = pickle.dumps(dict(df.__dask_graph__()))
    assert passphrase.encode() not in graph, "the passphrase never leaves the client"
    assert by_path(df.compute()) == files
    with pytest.raises(barecat.BarecatError, match="passphrase"):
        read_barecat(path)
    with pytest.raises(barecat.BarecatError):
        read_barecat(path, passphrase="wrong")


def test_workers_never_need_the_index(client: Any, tmp_path: Path) -> None:
    path = tmp_path / "a.barecat"
    files = make_files(80, seed=5)
    build(str(path), files)
    df = read_barecat(path, partition_bytes=16 << 10)
    path.rename(tmp_path / "index-elsewhere")  # the workers have only the shards now
    assert by_path(df.compute()) == files


def test_remote_archive_read_by_workers_with_ranged_requests(client: Any, tmp_path: Path) -> None:
    pytest.importorskip("s3fs", reason="the remote extra (fsspec + s3fs) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] (a local S3 server) is not installed")
    import s3fs

    from helpers.s3 import S3Server, upload

    server = S3Server()
    server.start()
    try:
        fs = s3fs.S3FileSystem(**server.options(), skip_instance_cache=True)
        fs.mkdir("dask-data")
        local = str(tmp_path / "ds.barecat")
        files = make_files(150, seed=4)
        build(local, files)
        upload(fs, local, "s3://dask-data/ds.barecat")
        df = read_barecat(
            "s3://dask-data/ds.barecat",
            storage_options=server.options(),
            cache_dir=str(tmp_path / "cache"),
            partition_bytes=64 << 10,
        )
        fs.rm("s3://dask-data/ds.barecat")  # planned: the workers never see the index
        assert df.npartitions > 1
        assert by_path(df.compute()) == files
    finally:
        server.stop()


# -- writing -------------------------------------------------------------------------------


def frame_of(items: dict[str, bytes], npartitions: int, **extra: list[Any]) -> Any:
    contents = pd.Series(list(items.values()), dtype=BINARY)
    data = pd.DataFrame({"path": list(items), "bytes": contents, **extra})
    return dd.from_pandas(data, npartitions=npartitions, sort=False)


def test_write_round_trip_joins_the_parts(client: Any, tmp_path: Path) -> None:
    items = {f"out/{i:04d}.bin": os.urandom(i * 7 % 3000) for i in range(400)}
    mtimes = [i * 10**9 for i in range(400)]
    target = tmp_path / "written.barecat"
    write_barecat(frame_of(items, 4, mtime_ns=mtimes, mode=[0o600] * 400), target)
    with barecat.Barecat(target) as bc:
        assert dict(bc.items()) == items
        info = bc.lookup_file("out/0007.bin")
        assert (info.mtime_ns, info.mode) == (7 * 10**9, 0o600)
        assert bc.verify_integrity()
        assert list(bc.files()) == list(items), "partitions' order kept"
    shards = shard_files(str(target))
    assert len(shards) >= 4 and not any(os.path.islink(s) for s in shards), "parts' shards adopted"
    assert leftovers(tmp_path) == []
    assert by_path(read_barecat(target).compute()) == items
    with pytest.raises(barecat.FileExistsBarecatError):
        write_barecat(frame_of({"a": b"a"}, 1), target)
    write_barecat(frame_of({"only.txt": b"new"}, 1), target, overwrite=True)
    with barecat.Barecat(target) as bc:
        assert dict(bc.items()) == {"only.txt": b"new"}
    assert leftovers(tmp_path) == []


def test_read_then_write_compressed(
    client: Any, archive: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    path, files = archive
    target = tmp_path / "copy.barecat"
    write_barecat(read_barecat(path, partition_bytes=64 << 10), target, compression="zstd")
    with barecat.Barecat(target) as bc:
        assert bc.sealed
        assert dict(bc.items()) == files
    assert leftovers(tmp_path) == []


def test_write_with_a_local_scheduler(tmp_path: Path) -> None:
    items = {f"t/{i:03d}": os.urandom(100) for i in range(50)}
    with dask.config.set(scheduler="threads"):  # not the cluster: dask.compute's path
        write_barecat(frame_of(items, 3), tmp_path / "t.barecat")
    with barecat.Barecat(tmp_path / "t.barecat") as bc:
        assert dict(bc.items()) == items
    assert leftovers(tmp_path) == []


def _fail_once_a_part_is_written(frame: pd.DataFrame, folder: str) -> pd.DataFrame:
    """Raises in the partition holding ``bad/file``, once another partition's part-archive
    exists in ``folder``'s staging folder; others pass through."""
    if "bad/file" not in set(frame["path"]):
        return frame
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(p.name.startswith("part-") and p.suffix == "" for p in Path(folder).glob(".*/*")):
            raise ValueError("this partition fails")
        time.sleep(0.01)
    raise AssertionError("no part-archive was ever written")


def test_a_partition_that_raises_leaves_no_output_and_no_parts(client: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    items = {f"k/{i:04d}.bin": os.urandom(1000) for i in range(200)}
    items["bad/file"] = b"x"
    df = frame_of(items, 4).map_partitions(_fail_once_a_part_is_written, str(out))
    with pytest.raises(ValueError, match="this partition fails"):
        write_barecat(df, out / "ds.barecat")
    assert sorted(os.listdir(out)) == [], "no output, no part, no staging folder"


def test_a_path_in_two_partitions_is_an_error_naming_it(client: Any, tmp_path: Path) -> None:
    data = pd.DataFrame(
        {"path": [f"f/{i}.txt" for i in range(20)] + ["f/3.txt"],
         "bytes": pd.Series([b"x"] * 20 + [b"again"], dtype=BINARY)}
    )  # fmt: skip
    target = tmp_path / "dup.barecat"
    with pytest.raises(barecat.FileExistsBarecatError, match=r"f/3\.txt"):
        write_barecat(dd.from_pandas(data, npartitions=3, sort=False), target)
    assert sorted(os.listdir(tmp_path)) == []
    with pytest.raises(Exception, match=r"f/3\.txt"):  # twice in one partition
        write_barecat(dd.from_pandas(data, npartitions=1, sort=False), target)
    assert sorted(os.listdir(tmp_path)) == []


def test_rows_without_binary_bytes_are_refused(client: Any, tmp_path: Path) -> None:
    with pytest.raises(barecat.BarecatError, match="path and bytes"):
        write_barecat(dd.from_pandas(pd.DataFrame({"path": ["a"]}), npartitions=1), tmp_path / "x")
    strings = dd.from_pandas(pd.DataFrame({"path": ["a"], "bytes": [b"a"]}), npartitions=1)
    with pytest.raises(barecat.BarecatError, match=r"binary.*ArrowDtype"):
        write_barecat(strings, tmp_path / "x.barecat")  # Dask made the bytes strings
    assert sorted(os.listdir(tmp_path)) == []


# -- writing to object storage --------------------------------------------------------------


def test_write_to_object_storage_round_trip_and_overwrite(
    client: Any, bucket: Bucket, tmp_path: Path
) -> None:
    url, options = bucket.url("ds.barecat"), bucket.options
    items = {f"out/{i:04d}.bin": os.urandom(i * 7 % 3000) for i in range(300)}
    write_barecat(frame_of(items, 3), url, storage_options=options, shard_size_limit="64K")
    names = bucket.objects()
    assert names[0] == "ds.barecat" and len(names) >= 4, names  # the index, shards
    assert all(n.startswith("ds.barecat-shard-") for n in names[1:]), "no staging left"
    where = {"storage_options": options, "cache_dir": str(tmp_path / "cache")}
    with barecat.Barecat(url, **where) as bc:
        assert dict(bc.items()) == items
        assert list(bc.files()) == list(items), "partitions' order kept"
    assert by_path(read_barecat(url, **where).compute()) == items
    with pytest.raises(barecat.FileExistsBarecatError):
        write_barecat(frame_of({"a": b"a"}, 1), url, storage_options=options)
    # replaced by an encrypted one, once it is whole: the old shards beyond its own go
    passphrase = "correct horse battery staple"
    few = {"enc/one": b"1" * 500, "enc/two": b"2" * 700}
    write_barecat(frame_of(few, 2), url, overwrite=True, storage_options=options,
                  passphrase=passphrase)  # fmt: skip
    assert len(bucket.objects()) < len(names)
    with barecat.Barecat(url, passphrase=passphrase, **where) as bc:
        assert bc.encrypted and dict(bc.items()) == few
    assert by_path(read_barecat(url, passphrase=passphrase, **where).compute()) == few


def test_object_storage_a_path_in_two_partitions_leaves_nothing(
    client: Any, bucket: Bucket
) -> None:
    data = pd.DataFrame(
        {"path": [f"f/{i}.txt" for i in range(20)] + ["f/3.txt"],
         "bytes": pd.Series([b"x"] * 20 + [b"again"], dtype=BINARY)}
    )  # fmt: skip
    frame = dd.from_pandas(data, npartitions=3, sort=False)
    with pytest.raises(barecat.FileExistsBarecatError, match=r"f/3\.txt"):
        write_barecat(frame, bucket.url("d.barecat"), storage_options=bucket.options)
    assert bucket.objects() == [], "no output, no staged part"


def _fail_once_staged(frame: pd.DataFrame, bucket: str, options: dict[str, Any]) -> pd.DataFrame:
    """Raises in the partition holding ``bad/file`` once another partition's part is
    staged on the store (so the failure has parts to clean up); others pass through."""
    if "bad/file" in set(frame["path"]):
        wait_for_objects(options, f"{bucket}/.*.dask-*/part-*")
        raise ValueError("this partition fails")
    return frame


def test_object_storage_a_partition_that_raises_leaves_nothing(client: Any, bucket: Bucket) -> None:
    items = {f"k/{i:04d}.bin": os.urandom(500) for i in range(60)}
    items["bad/file"] = b"x"
    df = frame_of(items, 3).map_partitions(_fail_once_staged, bucket.name, bucket.options)
    with pytest.raises(ValueError, match="this partition fails"):
        write_barecat(df, bucket.url("d.barecat"), storage_options=bucket.options)
    assert bucket.objects() == [], "no output, no staged part"


def test_without_dask_the_error_names_the_extra() -> None:
    code = "import sys; sys.modules['dask'] = None; import barecat.integrations.dask"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "pip install '.[dask]' in a checkout of barecat (the 'dask' extra)" in done.stderr
