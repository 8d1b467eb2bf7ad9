"""Ray Data with real Ray: a local cluster (``ray.init(num_cpus=2)``, once per module)
reads archives (plain, sealed, on a local S3 server) and writes them, a write task
SIGKILLed mid-write included. No mocks: real archives, real tasks, real shards."""

from __future__ import annotations

import glob
import os
import pickle
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
import helpers.s3
from barecat.exceptions import WrongPassphraseBarecatError
from barecat.layout import shard_files
from helpers.engines import build, leftovers, make_files
from helpers.s3 import Bucket, wait_for_objects

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (the ray extra; ./run test installs it)"
)
pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'barecat[ray]'")

from barecat.integrations.ray import (  # noqa: E402
    BarecatDatasink,
    BarecatDatasource,
    read_barecat,
    sample_key,
    write_barecat,
)

# the tasks' workers cannot import the tests' helpers: functions of theirs travel whole
ray.cloudpickle.register_pickle_by_value(helpers.s3)

pytestmark = [
    pytest.mark.slow,
    # Ray's own code warns about its own deprecated settings as it reads them
    pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\..*"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One local Ray cluster for this module's tests, on the machine's 2 cores. Not one
    for the session: Ray's threads (its garbage-collection thread closes SQLite
    connections) must be gone before a later test's DataLoader forks its workers, as a
    worker forked while another thread holds SQLite's memory lock waits for ever."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, bytes]]:
    path = str(tmp_path_factory.mktemp("ray") / "ds.barecat")
    files = make_files()
    build(path, files)
    return path, files


def by_path(rows: list[dict[str, Any]]) -> dict[str, bytes]:
    out = {r["path"]: r["bytes"] for r in rows}
    assert len(out) == len(rows), "a file came twice"
    return out


# -- reading -------------------------------------------------------------------------------


def test_every_file_read_with_its_index_columns(
    cluster: None, archive: tuple[str, dict[str, bytes]]
) -> None:
    path, files = archive
    ds = read_barecat(path, target_bytes=64 << 10, chunk_bytes=16 << 10)
    rows = ds.take_all()
    assert by_path(rows) == files
    with barecat.Barecat(path) as bc:
        for r in rows:
            info = bc.lookup_file(r["path"])
            expected = (info.size, info.mtime_ns, info.crc32c)
            assert (r["size"], r["mtime_ns"], r["crc32c"]) == expected
    assert ds.schema().names == ["path", "bytes", "size", "mtime_ns", "crc32c"]


def test_tasks_are_contiguous_runs_in_storage_order(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    source = BarecatDatasource(path, target_bytes=64 << 10, chunk_bytes=16 << 10)
    total = sum(len(d) for d in files.values())
    tasks = source.get_read_tasks(parallelism=1000)
    assert len(tasks) == -(-total // (64 << 10)) or len(tasks) > 1
    assert sum(t.metadata.num_rows for t in tasks) == len(files)
    addresses = []
    for task in tasks:
        for block in task():
            addresses += [(r, block) for r in block.column("path").to_pylist()]
    with barecat.Barecat(path) as bc:
        expected = [f.path for f in bc.iter_fileinfos(barecat.Order.ADDRESS)]
    assert [p for p, _ in addresses] == expected, "tasks follow storage order, back to back"
    estimate = source.estimate_inmemory_data_size()
    assert total <= estimate <= total + 64 * len(files)
    assert sum(t.metadata.size_bytes for t in tasks) == estimate


def test_projection_reads_no_shard(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    files = make_files(60)
    build(path, files)
    for shard in shard_files(path):  # every byte gone: only the index can answer now
        os.truncate(shard, 0)
    rows = read_barecat(path).select_columns(["path", "size"]).take_all()
    assert {r["path"]: r["size"] for r in rows} == {p: len(d) for p, d in files.items()}
    rows = read_barecat(path, columns=["path"]).take_all()
    assert sorted(r["path"] for r in rows) == sorted(files)
    with pytest.raises(Exception, match=r"truncated|missing"):
        read_barecat(path, where="size > 0").take_all()


@pytest.mark.parametrize(
    "pattern", ["train/c1/*.jpg", "**/*.json", "meta/*", "meta/.hidden.txt", "train/**", "nope/*"]
)
def test_pattern_chooses_what_globfiles_chooses(
    cluster: None, archive: tuple[str, dict[str, bytes]], pattern: str
) -> None:
    path, files = archive
    with barecat.Barecat(path) as bc:
        expected = sorted(bc.globfiles(pattern, True, True))
    rows = read_barecat(path, pattern=pattern).take_all()
    assert sorted(r["path"] for r in rows) == expected
    assert all(r["bytes"] == files[r["path"]] for r in rows)


def test_where_runs_in_sqlite_with_parameters(
    cluster: None, archive: tuple[str, dict[str, bytes]]
) -> None:
    path, files = archive
    rows = read_barecat(path, where="size >= ? AND path GLOB ?", params=(700, "train/*")).take_all()
    expected = {p for p, d in files.items() if len(d) >= 700 and p.startswith("train/")}
    assert {r["path"] for r in rows} == expected
    with pytest.raises(Exception, match="no such column"):
        BarecatDatasource(path, where="colour = 'red'")


def test_damaged_bytes_fail_the_read_naming_the_file(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"a/one.bin": b"1" * 5000, "a/two.bin": b"2" * 5000})
    with barecat.Barecat(path) as bc:
        two = bc.lookup_file("a/two.bin")
    with open(shard_files(path)[two.shard or 0], "r+b") as f:
        f.seek((two.offset or 0) + 10)
        f.write(b"X")
    with pytest.raises(Exception, match=r"a/two\.bin.*CRC32C mismatch"):
        read_barecat(path).take_all()
    assert read_barecat(path, pattern="a/one.bin").take_all()[0]["bytes"] == b"1" * 5000


def test_samples_grouped_by_stem(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "wds.barecat")
    files = {}
    for i in range(40):
        files[f"shard{i // 20}/{i:04d}.jpg"] = os.urandom(500)
        files[f"shard{i // 20}/{i:04d}.json"] = b'{"label": %d}' % i
        if i % 4 == 0:
            files[f"shard{i // 20}/{i:04d}.seg.png"] = os.urandom(300)
    build(path, dict(sorted(files.items(), key=lambda kv: random.Random(kv[0]).random())))
    ds = read_barecat(path, group_by_stem=True, chunk_bytes=4096)
    rows = ds.take_all()
    assert ds.schema().names == ["__key__", "jpg", "json", "seg.png"]
    assert len(rows) == 40
    for r in rows:
        for ext in ("jpg", "json", "seg.png"):
            assert r[ext] == files.get(f"{r['__key__']}.{ext}")
    labels = read_barecat(path, group_by_stem=True, columns=["__key__", "json"]).take_all()
    assert {r["__key__"]: r["json"] for r in labels} == {
        sample_key(p)[0]: d for p, d in files.items() if p.endswith(".json")
    }
    assert sample_key("a/.b.c") == ("a/.b", "c")
    with pytest.raises(barecat.BarecatError, match=r"noext.*extension"):
        build(str(tmp_path / "b.barecat"), {"x/noext": b"", "x/a.jpg": b""})
        BarecatDatasource(str(tmp_path / "b.barecat"), group_by_stem=True)


def test_sealed_archive_reads_with_the_key_inside_tasks(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "sealed.barecat")
    files = make_files(120, seed=2)
    passphrase = "correct horse battery staple"
    build(path, files, compression="zstd", passphrase=passphrase)
    source = BarecatDatasource(path, passphrase=passphrase, target_bytes=32 << 10)
    tasks = source.get_read_tasks(parallelism=8)
    assert len(tasks) > 1
    for task in tasks:
        pickled = pickle.dumps(task)
        assert passphrase.encode() not in pickled, "the passphrase never leaves the driver"
    assert "key" not in repr(source._reader).lower()
    rows = ray.data.read_datasource(source).take_all()
    assert by_path(rows) == files
    with pytest.raises(barecat.BarecatError, match="passphrase"):
        BarecatDatasource(path)
    with pytest.raises(barecat.BarecatError):
        BarecatDatasource(path, passphrase="wrong")


def test_the_first_task_makes_a_batch_and_the_rest_grow_to_few_tasks(
    cluster: None, tmp_path: Path
) -> None:
    path = str(tmp_path / "small.barecat")  # 3,000 files of 100 bytes: 160 to a chunk
    files = {f"s/{i:04d}.txt": bytes([i % 256]) * 100 for i in range(3000)}
    build(path, files)
    # Ray asks for 200 tasks at least; the 2-CPU cluster gets at most 4 per CPU; the
    # first two make 1,024 rows each (Ray's batch iterator waits for a batch's rows
    # beyond the block it hands out), each next one is at most twice as long
    source = BarecatDatasource(path, target_bytes=1 << 20, chunk_bytes=16 << 10)
    tasks = source.get_read_tasks(parallelism=200)
    first = task_plans(tasks[0])
    rows = sum(plan.num_rows for plan in first)
    assert rows >= 1024 > rows - first[-1].num_rows, "whole chunks, as few as make 1,024"
    stored = [sum(sum(p.column("stored").to_pylist()) for p in task_plans(t)) for t in tasks]
    assert stored[1] <= stored[0], "the second task as short as the first: they run together"
    assert all(s <= 2 ** max(0, k - 1) * stored[0] for k, s in enumerate(stored))
    assert len(tasks) <= 4 * 2, "a few tasks, not 200: each costs a ray.put"
    assert sum(t.metadata.num_rows for t in tasks) == len(files)
    assert by_path(ray.data.read_datasource(source).take_all()) == files


def test_read_tasks_are_at_most_tasks_per_cpu_per_cpu(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "forty.barecat")  # 40 MiB: tasks of the 4 MiB minimum or more
    with barecat.Barecat(path, readonly=False) as bc:
        for i in range(320):
            bc[f"z/{i:03d}.bin"] = bytes(128 << 10)
    tasks = {
        cap: BarecatDatasource(path, chunk_bytes=1 << 20, tasks_per_cpu=cap).get_read_tasks(200)
        for cap in (1, None)
    }
    # (fewer than 1,024 rows: the first task is as long as the others)
    assert [len(task_plans(t)) for t in tasks[1]] == [20, 20], "2 CPUs, one task each"
    assert [len(task_plans(t)) for t in tasks[None]] == [4] * 10, "as Ray asks, 4 MiB each"


def task_plans(task: Any) -> list[Any]:
    """The plans of the chunks a read task reads."""
    plans: list[Any] = task.read_fn.args[1]
    return plans


def test_a_damaged_row_fails_the_plan_naming_it_unless_left_out(tmp_path: Path) -> None:
    import sqlite3

    path = str(tmp_path / "a.barecat")
    build(path, {"good/one.bin": b"1" * 100, "bad/two.bin": b"2" * 100})
    with sqlite3.connect(path) as conn:  # a size that is text: the row addresses nothing
        conn.execute("UPDATE files SET size = 'big' WHERE path = 'bad/two.bin'")
    conn.close()
    with pytest.raises(barecat.DamagedEntryBarecatError, match=r"bad/two\.bin.*size"):
        BarecatDatasource(path)
    assert BarecatDatasource(path, pattern="good/*").num_files == 1
    assert BarecatDatasource(path, pattern="**/one.bin").num_files == 1
    assert BarecatDatasource(path, where="path LIKE 'good/%'").num_files == 1


def test_compressed_archive_reads_without_a_passphrase(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "zstd.barecat")
    files = make_files(50, seed=3)
    build(path, files, compression="zstd")
    assert by_path(read_barecat(path).take_all()) == files


# -- an archive on S3 ----------------------------------------------------------------------


def test_remote_archive_read_without_the_index_in_workers(
    cluster: None, s3: Any, tmp_path: Path
) -> None:
    import s3fs

    from helpers.s3 import upload

    fs = s3fs.S3FileSystem(**s3.options(), skip_instance_cache=True)
    fs.mkdir("ray-data")
    local = str(tmp_path / "ds.barecat")
    files = make_files(200, seed=4)
    build(local, files)
    upload(fs, local, "s3://ray-data/ds.barecat")
    cache = tmp_path / "cache"
    source = BarecatDatasource(
        "s3://ray-data/ds.barecat",
        storage_options=s3.options(),
        cache_dir=str(cache),
        target_bytes=64 << 10,
    )
    # planned: from now on nobody can see the index, neither on S3 nor in any cache
    fs.rm("s3://ray-data/ds.barecat")
    fs.invalidate_cache()
    for copy in cache.rglob("*"):
        if copy.is_file():
            copy.unlink()
    assert len(source.get_read_tasks(parallelism=4)) > 1
    assert by_path(ray.data.read_datasource(source).take_all()) == files
    # the same tasks run here, counted: per block, one ranged request per shard it spans,
    # plus one lookup per shard; nothing per file
    tasks = source.get_read_tasks(parallelism=4)
    blocks = [block for task in tasks for block in task()]
    stats = source._reader._shards().store.stats  # this process's reader (tasks share it)
    shards = len(shard_files(local))
    assert len(blocks) > 1
    assert stats.requests <= shards + 2 * len(blocks) < len(files) / 4
    assert stats.bytes_fetched == sum(len(d) for d in files.values())


class _Watched(BarecatDatasink):
    """Notes in ``notes``, in each write task, where its part is written (every row taken)
    and what the task hands back; checks on the driver, before joining, that the tasks'
    own copies of their parts are gone and that they handed back only URLs and sizes."""

    notes = ""
    task_folder = ""
    part_indices = 0

    def write(self, blocks: Any, ctx: Any) -> Any:
        def rows_then_look() -> Any:
            yield from blocks
            made = glob.glob(os.path.join(tempfile.gettempdir(), "barecat-part-*", "part*"))
            with open(self.notes, "a") as f:
                f.writelines(f"{p}\n" for p in made)

        part = super().write(rows_then_look(), ctx)
        with open(self.notes, "a") as f:
            f.write(f"{part and part.location}\n")
        return part

    def on_write_complete(self, write_result: Any) -> None:
        import s3fs

        parts = [p for p in write_result.write_returns if p is not None]
        assert len(parts) >= 2 and all(p.location.startswith("s3://") for p in parts), parts
        assert os.listdir(self.task_folder) == [], "the tasks removed their local parts"
        fs = s3fs.S3FileSystem(**(self.parts.storage_options or {}), skip_instance_cache=True)
        self.part_indices = sum(fs.size(p.location) for p in parts)
        super().on_write_complete(write_result)


def test_write_to_object_storage_shares_no_filesystem(
    cluster: None, bucket: Bucket, tmp_path: Path
) -> None:
    url = bucket.url("ds.barecat")
    items = [{"path": f"up/{i:04d}.bin", "bytes": os.urandom(i * 11 % 1500)} for i in range(300)]
    files = {r["path"]: r["bytes"] for r in items}
    tasks_tmp = tmp_path / "tasks-tmp"  # the tasks' temporary folder, not the driver's
    tasks_tmp.mkdir()
    sink = _Watched(url, storage_options=bucket.options, part_bytes=0)
    sink.notes, sink.task_folder = str(tmp_path / "notes"), str(tasks_tmp)
    # (workers of another environment are new ones: they get the driver's sys.path too)
    path = os.pathsep.join(p for p in sys.path if p)
    env = {"env_vars": {"TMPDIR": str(tasks_tmp), "PYTHONPATH": path}}
    ray.data.from_items(items, override_num_blocks=3).write_datasink(
        sink, ray_remote_args={"runtime_env": env}
    )
    notes = Path(sink.notes).read_text().split()
    assert f"{tasks_tmp}/barecat-part-" in " ".join(notes), "parts made in the tasks' folder"
    assert sum(n.startswith(bucket.url(".ds.barecat.ray-")) for n in notes) == 3, "and staged"
    names = bucket.objects()
    assert names[0] == "ds.barecat" and len(names) >= 4, names  # the index, a shard a part
    assert all(n.startswith("ds.barecat-shard-") for n in names[1:]), "no staging left"
    # what the driver moved: the parts' indices in, the joined index out; no shard byte
    stats = sink.parts.store.stats
    assert (stats.bytes_fetched, stats.bytes_sent) == (sink.part_indices, bucket.fs.size(url))
    where = {"storage_options": bucket.options, "cache_dir": str(tmp_path / "cache")}
    with barecat.Barecat(url, **where) as bc:
        assert dict(bc.items()) == files
        assert list(bc.files()) == [r["path"] for r in items], "the blocks' order kept"
    assert by_path(read_barecat(url, **where).take_all()) == files


def test_object_storage_overwrite_duplicates_and_staging_dir(
    cluster: None, bucket: Bucket, tmp_path: Path
) -> None:
    url, options = bucket.url("ds.barecat"), bucket.options
    items = [{"path": f"o/{i:04d}.bin", "bytes": os.urandom(900)} for i in range(120)]
    ds = ray.data.from_items(items, override_num_blocks=3)
    missing = tmp_path / "no" / "such" / "folder"  # the driver's staging_dir: never used
    with pytest.warns(DeprecationWarning, match="staging_dir is no longer used"):
        write_barecat(ds, url, storage_options=options, staging_dir=missing, part_bytes=0,
                      shard_size_limit="32K")  # fmt: skip
    assert not missing.parent.exists()
    names = bucket.objects()
    assert len(names) >= 5, names
    with pytest.raises(barecat.FileExistsBarecatError):
        write_barecat(ds, url, storage_options=options)
    twice = [*items[:5], items[0]]  # a failed write leaves the old archive as it was
    with pytest.raises(Exception, match=r"o/0000\.bin"):
        write_barecat(ray.data.from_items(twice, override_num_blocks=2), url, overwrite=True,
                      storage_options=options, part_bytes=0)  # fmt: skip
    assert bucket.objects() == names, "nothing staged is left, the old archive stays"
    replacement = ray.data.from_items([{"path": "only.txt", "bytes": b"new"}])
    write_barecat(replacement, url, overwrite=True, storage_options=options)
    assert bucket.objects() == names[:2], "the old shards beyond the new one are gone"
    with barecat.Barecat(url, storage_options=options, cache_dir=str(tmp_path / "c")) as bc:
        assert dict(bc.items()) == {"only.txt": b"new"}


def test_object_storage_a_path_in_two_tasks_leaves_nothing(cluster: None, bucket: Bucket) -> None:
    items = [{"path": f"f/{i}.txt", "bytes": b"x" * 100} for i in range(20)]
    items.append({"path": "f/3.txt", "bytes": b"again"})
    sink = BarecatDatasink(bucket.url("d.barecat"), storage_options=bucket.options, part_bytes=0)
    with pytest.raises(Exception, match=r"f/3\.txt"):
        ray.data.from_items(items, override_num_blocks=3).write_datasink(sink)
    assert sink.parts.store.stats.bytes_fetched > 0, "found in the parts' indices, fetched"
    assert bucket.objects() == [], "no output, no staged part"


def _fail_once_staged(bucket: str, options: dict[str, Any]) -> Any:
    """A batch function that raises in the task holding ``bad/file`` once another task's
    part is staged on the store (so the failure has parts to clean up)."""

    def fail(batch: dict[str, Any]) -> dict[str, Any]:
        if "bad/file" in list(batch["path"]):
            wait_for_objects(options, f"{bucket}/.*.ray-*/part-*")
            raise ValueError("this task fails")
        return batch

    return fail


def test_object_storage_a_failing_task_leaves_nothing(cluster: None, bucket: Bucket) -> None:
    items = [{"path": f"k/{i:04d}.bin", "bytes": os.urandom(500)} for i in range(40)]
    items.append({"path": "bad/file", "bytes": b"x"})
    ds = ray.data.from_items(items, override_num_blocks=2).map_batches(
        _fail_once_staged(bucket.name, bucket.options), batch_size=None
    )
    with pytest.raises(Exception, match="this task fails"):
        write_barecat(ds, bucket.url("d.barecat"), storage_options=bucket.options, part_bytes=0)
    assert bucket.objects() == [], "no output, no staged part"


def test_object_storage_encrypted_and_a_dead_drivers_staging(
    cluster: None, bucket: Bucket, tmp_path: Path
) -> None:
    from barecat.integrations.remote_parts import staging_prefix

    url = bucket.url("enc.barecat")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    left = f"{staging_prefix(url, 'ray')}{int(dead.stdout)}-0123abcd/part-00000-0123abcd"
    bucket.fs.pipe(left, b"half a part")
    passphrase = "correct horse battery staple"
    items = [{"path": f"enc/{i:04d}.bin", "bytes": os.urandom(i * 13 % 2000)} for i in range(150)]
    files = {r["path"]: r["bytes"] for r in items}
    write_barecat(ray.data.from_items(items, override_num_blocks=3), url,
                  storage_options=bucket.options, compression="zstd", passphrase=passphrase,
                  part_bytes=0)  # fmt: skip
    assert all(not n.startswith(".") for n in bucket.objects()), "the dead one's gone"
    where = {"storage_options": bucket.options, "cache_dir": str(tmp_path / "cache")}
    with barecat.Barecat(url, passphrase=passphrase, **where) as bc:
        assert bc.encrypted and dict(bc.items()) == files
    assert by_path(read_barecat(url, passphrase=passphrase, **where).take_all()) == files
    with pytest.raises(WrongPassphraseBarecatError):
        barecat.Barecat(url, passphrase="wrong", **where)


# -- writing -------------------------------------------------------------------------------


def test_write_joins_the_parts_without_copying(cluster: None, tmp_path: Path) -> None:
    items = [
        {"path": f"out/{i:04d}.bin", "bytes": os.urandom(i * 7 % 3000), "mtime_ns": i * 10**9,
         "mode": 0o600}
        for i in range(500)
    ]  # fmt: skip
    ds = ray.data.from_items(items, override_num_blocks=4)
    target = tmp_path / "written.barecat"
    write_barecat(ds, target, part_bytes=0)  # a part per block
    with barecat.Barecat(target) as bc:
        assert dict(bc.items()) == {r["path"]: r["bytes"] for r in items}
        info = bc.lookup_file("out/0007.bin")
        assert (info.mtime_ns, info.mode) == (7 * 10**9, 0o600)
        assert bc.verify_integrity()
    shards = shard_files(str(target))
    assert len(shards) >= 4 and not any(os.path.islink(s) for s in shards), "parts' shards adopted"
    assert leftovers(tmp_path) == []
    with barecat.Barecat(target, readonly=False) as bc:  # the output is an ordinary archive
        bc["later.txt"] = b"added afterwards"
    with pytest.raises(barecat.FileExistsBarecatError):
        write_barecat(ds, target)
    replacement = ray.data.from_items([{"path": "only.txt", "bytes": b"new"}])
    write_barecat(replacement, target, overwrite=True)
    with barecat.Barecat(target) as bc:
        assert dict(bc.items()) == {"only.txt": b"new"}


def test_read_then_write_round_trip_compressed(
    cluster: None, archive: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    path, files = archive
    target = tmp_path / "copy.barecat"
    source = read_barecat(path, target_bytes=32 << 10)
    write_barecat(source, target, compression="zstd", part_bytes=64 << 10)
    with barecat.Barecat(target) as bc:
        assert bc.sealed
        assert dict(bc.items()) == files
    assert by_path(read_barecat(target).take_all()) == files
    assert leftovers(tmp_path) == []


def test_encrypted_output_parts_share_its_key(cluster: None, tmp_path: Path) -> None:
    passphrase = "correct horse battery staple"
    items = [{"path": f"enc/{i:04d}.bin", "bytes": os.urandom(i * 13 % 2000)} for i in range(300)]
    files = {r["path"]: r["bytes"] for r in items}
    target = tmp_path / "enc.barecat"
    sink = BarecatDatasink(target, passphrase=passphrase, part_bytes=0)
    for shown in (repr(sink), repr(sink.parts), repr(vars(sink.parts)), str(vars(sink))):
        assert passphrase not in shown, "the passphrase never shows"
    ray.data.from_items(items, override_num_blocks=3).write_datasink(sink)
    assert len(shard_files(str(target))) >= 3, "a part per block, joined as they were"
    assert leftovers(tmp_path) == []
    with barecat.Barecat(target, passphrase=passphrase) as bc:
        assert bc.encrypted
        assert dict(bc.items()) == files
        assert bc.verify_integrity()
    assert by_path(read_barecat(target, passphrase=passphrase).take_all()) == files
    with pytest.raises(WrongPassphraseBarecatError):
        barecat.Barecat(target, passphrase="wrong")
    with pytest.raises(WrongPassphraseBarecatError):
        read_barecat(target, passphrase="wrong")
    with pytest.raises(barecat.BarecatError, match="passphrase"):
        read_barecat(target)
    # compressed and encrypted, the passphrase given as a function (asked once, here)
    write_barecat(ray.data.from_items(items, override_num_blocks=2), tmp_path / "z.barecat",
                  compression="zstd", passphrase=lambda: passphrase, part_bytes=0)  # fmt: skip
    with barecat.Barecat(tmp_path / "z.barecat", passphrase=passphrase) as bc:
        assert dict(bc.items()) == files
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    for log in logs.rglob("*"):
        if log.is_file():
            assert passphrase.encode() not in log.read_bytes(), f"the passphrase is in {log}"


def test_a_path_in_two_tasks_is_an_error_naming_it(cluster: None, tmp_path: Path) -> None:
    items = [{"path": f"f/{i}.txt", "bytes": b"x"} for i in range(20)]
    items.append({"path": "f/3.txt", "bytes": b"again"})
    target = tmp_path / "dup.barecat"
    with pytest.raises(Exception, match=r"f/3\.txt"):
        write_barecat(ray.data.from_items(items, override_num_blocks=3), target, part_bytes=0)
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_rows_without_bytes_are_refused(cluster: None, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="path and bytes"):
        write_barecat(ray.data.from_items([{"path": "a"}]), tmp_path / "x.barecat")
    assert sorted(os.listdir(tmp_path)) == []


def _killer(folder: str, kills: int) -> Any:
    """A batch function that SIGKILLs its worker once a part-archive in ``folder`` holds
    bytes (the write is under way), ``kills`` times at most (each leaves a marker file)."""

    def kill_mid_write(batch: dict[str, Any]) -> dict[str, Any]:
        written = [p for p in glob.glob(f"{folder}/.*.ray-*/part-*-shard-*") if os.path.getsize(p)]
        done = len(glob.glob(f"{folder}.killed-*"))
        if written and done < kills:
            Path(f"{folder}.killed-{done}").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return batch

    return kill_mid_write


def test_a_task_killed_mid_write_is_retried_and_nothing_half_written_remains(
    cluster: None, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    items = [{"path": f"k/{i:04d}.bin", "bytes": os.urandom(1000)} for i in range(400)]
    ds = ray.data.from_items(items, override_num_blocks=2).map_batches(
        _killer(str(out), kills=1), batch_size=50
    )
    write_barecat(ds, out / "ds.barecat", part_bytes=0)  # fused: the kill is in the write
    assert os.path.exists(f"{out}.killed-0"), "a worker was killed while writing its part"
    with barecat.Barecat(out / "ds.barecat") as bc:
        assert dict(bc.items()) == {r["path"]: r["bytes"] for r in items}
        assert bc.verify_integrity()
    assert leftovers(out) == [], "the killed attempt's part went with the staging folder"


# (the same max_retries on both operators keeps them fused into one task; map_batches
# takes it as a remote argument, which Ray 2.60 warns about)
@pytest.mark.filterwarnings("ignore:`ray_remote_args` is deprecated")
def test_a_write_whose_task_dies_leaves_no_output(cluster: None, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    items = [{"path": f"k/{i:04d}.bin", "bytes": os.urandom(1000)} for i in range(400)]
    ds = ray.data.from_items(items, override_num_blocks=2).map_batches(
        _killer(str(out), kills=3), batch_size=50, max_retries=0
    )
    with pytest.raises(Exception, match=r"(?i)worker|died|crash"):
        write_barecat(ds, out / "ds.barecat", part_bytes=0, ray_remote_args={"max_retries": 0})
    assert os.path.exists(f"{out}.killed-0"), "a worker was killed while writing its part"
    assert sorted(os.listdir(out)) == [], "no output, no part, no staging folder"


def test_a_dead_drivers_parts_go_at_the_next_write(cluster: None, tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    left = tmp_path / f".ds.barecat.ray-{int(dead.stdout)}-0123abcd"
    build(str(left / "part-00000-0123abcd"), {"half/written.bin": b"x" * 100})
    live = tmp_path / f".ds.barecat.ray-{os.getppid()}-0123abcd"  # a live process's
    live.mkdir()
    write_barecat(ray.data.from_items([{"path": "a", "bytes": b"a"}]), tmp_path / "ds.barecat")
    assert leftovers(tmp_path) == [live.name]
    with barecat.Barecat(tmp_path / "ds.barecat") as bc:
        assert dict(bc.items()) == {"a": b"a"}


def test_the_archive_index_is_not_needed_once_planned(cluster: None, tmp_path: Path) -> None:
    path = tmp_path / "a.barecat"
    files = make_files(80, seed=5)
    build(str(path), files)
    source = BarecatDatasource(path, target_bytes=16 << 10)
    path.rename(tmp_path / "index-elsewhere")  # the workers have only the shards now
    assert by_path(ray.data.read_datasource(source).take_all()) == files


def test_the_datasink_checks_the_output_at_once(tmp_path: Path) -> None:
    build(str(tmp_path / "there.barecat"), {"a": b"a"})
    with pytest.raises(barecat.FileExistsBarecatError):
        BarecatDatasink(tmp_path / "there.barecat")


def test_without_ray_the_error_names_the_extra() -> None:
    code = "import sys; sys.modules['ray'] = None; import barecat.integrations.ray"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "pip install '.[ray]' in a checkout of barecat (the 'ray' extra)" in done.stderr


def test_each_tasks_output_stays_whole(cluster: None, tmp_path: Path) -> None:
    path = str(tmp_path / "whole.barecat")  # 3,000 files of 100 bytes: a few small tasks
    files = {f"w/{i:04d}.txt": bytes([i % 256]) * 100 for i in range(3000)}
    build(path, files)
    planned = BarecatDatasource(path, chunk_bytes=16 << 10).get_read_tasks(200)
    # Ray counts a task as one block and splits each task's output to make up the 200
    # blocks it asks for; told the number of tasks, it leaves them whole
    ds = read_barecat(path, chunk_bytes=16 << 10).materialize()
    assert ds.num_blocks() == len(planned) < 200
    assert by_path(ds.take_all()) == files


def test_a_published_archive_on_a_web_server_reads_without_its_index_downloaded(
    cluster: None, tmp_path: Path
) -> None:
    from helpers.published import content, make_published, path_of, put_in_folder
    from helpers.static_http import StaticServer

    local = make_published(str(tmp_path / "local" / "ds.barecat"), 3000)
    root = tmp_path / "www"
    root.mkdir()
    put_in_folder(local, str(root))
    wanted = {path_of(i): content(i) for i in range(3000) if 10 <= i % 100 < 20}
    with StaticServer(str(root)) as server:
        url = f"{server.url}/ds.barecat"
        for mode in (None, "lazy"):  # (None: the engines' default, hydrate)
            since = len(server.requests())
            rows = read_barecat(url, pattern="train/c01*/**", cache_dir=str(tmp_path / str(mode)),
                                remote_mode=mode).take_all()  # fmt: skip
            assert by_path(rows) == wanted
        index_size = os.path.getsize(local)
        lazy_answers = server.requests()[since:]
        assert all(r.sent < index_size for r in lazy_answers if r.path == "/ds.barecat")
