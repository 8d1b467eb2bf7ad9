"""Hugging Face datasets with real ``datasets``: sharded IterableDatasets split by node and
by DataLoader worker, Datasets materialised by 2 processes, sealed and damaged archives.
No mocks: real archives, real ``datasets``, real worker processes."""

from __future__ import annotations

import io
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import barecat
from helpers.damaging import damage
from helpers.engines import build, make_files

datasets = pytest.importorskip(
    "datasets",
    reason="Hugging Face datasets is not installed (the hf extra; ./run test installs it)",
)

from datasets.distributed import split_dataset_by_node  # noqa: E402

from barecat.integrations.hf import iterable_dataset, plan_shards, to_dataset  # noqa: E402


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, bytes]]:
    path = str(tmp_path_factory.mktemp("hf") / "ds.barecat")
    files = make_files()
    build(path, files)
    return path, files


def by_path(rows: Any) -> dict[str, bytes]:
    rows = list(rows)
    out = {r["path"]: r["bytes"] for r in rows}
    assert len(out) == len(rows), "a file came twice"
    return out


def storage_order(path: str) -> list[str]:
    with barecat.Barecat(path) as bc:
        return [f.path for f in bc.iter_fileinfos(barecat.Order.ADDRESS)]


# -- planning ------------------------------------------------------------------------------


def test_shards_cover_every_file_once_in_storage_order(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    path, files = archive
    for num_shards in (1, 2, 3, 8, 1000):
        plan = plan_shards(path, num_shards=num_shards)
        assert len(plan.shards) == num_shards
        planned = [p for s in plan.shards for c in s for p in c.plan.column("path").to_pylist()]
        assert planned == storage_order(path), "shards are contiguous runs, back to back"
        assert plan.num_files == len(files)
    plan = plan_shards(path, num_shards=4)
    weights = [sum(chunk.stored_bytes for chunk in shard) for shard in plan.shards]
    total = sum(len(d) for d in files.values())
    assert all(abs(w - total / 4) < total / 8 for w in weights), weights
    assert len(plan_shards(path).shards) == 64


def test_rows_are_the_archive_with_its_index_columns(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    path, files = archive
    ds = iterable_dataset(path, num_shards=4)
    assert ds.num_shards == 4
    assert list(ds.features) == ["path", "bytes", "size", "mtime_ns", "crc32c"]
    rows = list(ds)
    assert by_path(rows) == files
    assert [r["path"] for r in rows] == storage_order(path)
    with barecat.Barecat(path) as bc:
        for r in rows:
            info = bc.lookup_file(r["path"])
            assert (r["size"], r["mtime_ns"], r["crc32c"]) == (
                info.size,
                info.mtime_ns,
                info.crc32c,
            )


def test_pattern_where_and_columns(archive: tuple[str, dict[str, bytes]], tmp_path: Path) -> None:
    path, files = archive
    with barecat.Barecat(path) as bc:
        expected = sorted(bc.globfiles("**/*.json", True, True))
    assert sorted(r["path"] for r in iterable_dataset(path, pattern="**/*.json")) == expected
    rows = iterable_dataset(path, where="size >= ? AND path GLOB ?", params=(700, "train/*"))
    assert {r["path"] for r in rows} == {
        p for p, d in files.items() if len(d) >= 700 and p.startswith("train/")
    }
    names = iterable_dataset(path, columns=["path", "size"])
    assert list(names.features) == ["path", "size"]
    assert {r["path"]: r["size"] for r in names} == {p: len(d) for p, d in files.items()}
    with pytest.raises(barecat.BarecatError, match="Unknown column 'colour'"):
        iterable_dataset(path, columns=["colour"])
    with pytest.raises(Exception, match="no such column"):
        iterable_dataset(path, where="colour = 'red'")


def test_without_the_bytes_column_no_shard_is_read(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    files = make_files(40)
    build(path, files)
    for shard in barecat.layout.shard_files(path):
        os.truncate(shard, 0)
    rows = list(iterable_dataset(path, columns=["path", "size"]))
    assert {r["path"]: r["size"] for r in rows} == {p: len(d) for p, d in files.items()}


# -- splitting between nodes and workers ---------------------------------------------------


def test_split_by_node_gives_disjoint_halves_of_their_own_shards(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    path, files = archive
    ds = iterable_dataset(path, num_shards=8)
    halves = [by_path(split_dataset_by_node(ds, rank=r, world_size=2)) for r in (0, 1)]
    assert not set(halves[0]) & set(halves[1])
    assert {**halves[0], **halves[1]} == files
    plan = plan_shards(path, num_shards=8)
    by_shard = [
        {p for chunk in shard for p in chunk.plan.column("path").to_pylist()}
        for shard in plan.shards
    ]
    for half in halves:  # each node reads whole shards of its own, no skipping of rows
        owned = [s for s in by_shard if s & set(half)]
        assert set().union(*owned) == set(half)
    total = sum(len(d) for d in files.values())
    assert all(sum(map(len, h.values())) > total / 4 for h in halves), "about half each"


@pytest.mark.slow
def test_dataloader_workers_yield_every_file_once(archive: tuple[str, dict[str, bytes]]) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (./run test installs it)")
    path, files = archive
    ds = iterable_dataset(path, num_shards=4)
    loader = torch.utils.data.DataLoader(ds, num_workers=2, batch_size=None)
    assert by_path(loader) == files
    node = split_dataset_by_node(ds, rank=1, world_size=2)  # 2 shards, one per worker
    loader = torch.utils.data.DataLoader(node, num_workers=2, batch_size=None)
    assert by_path(loader) == by_path(node)


# -- materialised --------------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_materialise_the_archive_once(
    archive: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    path, files = archive
    cache = str(tmp_path / "hf-cache")
    ds = to_dataset(path, num_proc=2, num_shards=4, dataset_cache_dir=cache)
    assert isinstance(ds, datasets.Dataset)
    assert len(ds) == len(files)
    assert by_path(ds) == files
    assert ds["path"] == storage_order(path)
    made = sorted(p for p in Path(cache).rglob("*.arrow"))
    again = to_dataset(path, num_proc=2, num_shards=4, dataset_cache_dir=cache)
    assert sorted(p for p in Path(cache).rglob("*.arrow")) == made, "the cache is reused"
    assert again["path"] == ds["path"]


def test_a_changed_file_changes_the_fingerprint(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"a.txt": b"one", "b.txt": b"two"})
    before = plan_shards(path).fingerprint()
    assert plan_shards(path).fingerprint() == before
    assert plan_shards(path, columns=["path"]).fingerprint() != before
    with barecat.Barecat(path, readonly=False) as bc:
        bc.remove("b.txt")
        bc["b.txt"] = b"TWO"
    assert plan_shards(path).fingerprint() != before


# -- samples and images --------------------------------------------------------------------


def png(colour: tuple[int, int, int]) -> bytes:
    image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
    out = io.BytesIO()
    image.new("RGB", (4, 3), colour).save(out, format="PNG")
    return out.getvalue()


def test_samples_grouped_by_stem_with_images(tmp_path: Path) -> None:
    path = str(tmp_path / "wds.barecat")
    files = {}
    for i in range(30):
        files[f"s{i // 10}/{i:04d}.png"] = png((i, 0, 0))
        files[f"s{i // 10}/{i:04d}.json"] = b'{"label": %d}' % i
        if i % 4 == 0:
            files[f"s{i // 10}/{i:04d}.seg.txt"] = b"mask"
    build(path, dict(sorted(files.items(), key=lambda kv: random.Random(kv[0]).random())))
    ds = iterable_dataset(path, group_by_stem=True, num_shards=4, chunk_bytes=2048)
    assert list(ds.features) == ["__key__", "json", "png", "seg.txt"]
    rows = list(ds)
    assert len(rows) == 30 and len({r["__key__"] for r in rows}) == 30
    for r in rows:
        for ext in ("png", "json", "seg.txt"):
            assert r[ext] == files.get(f"{r['__key__']}.{ext}")
    images = iterable_dataset(path, group_by_stem=True, images=True, columns=["__key__", "png"])
    assert isinstance(images.features["png"], datasets.Image)
    first = next(iter(images))
    assert first["png"].size == (4, 3)
    assert first["png"].getpixel((0, 0)) == (int(first["__key__"][-4:]), 0, 0)
    plain = iterable_dataset(path, pattern="**/*.png", images=True)
    assert list(plain.features) == ["path", "image", "size", "mtime_ns", "crc32c"]
    assert next(iter(plain))["image"].mode == "RGB"
    build(str(tmp_path / "b.barecat"), {"x/noext": b"", "x/a.jpg": b""})
    with pytest.raises(barecat.BarecatError, match=r"noext.*extension"):
        iterable_dataset(str(tmp_path / "b.barecat"), group_by_stem=True)


# -- without the index once planned: local and on S3 ---------------------------------------


def test_the_index_is_not_needed_once_planned(tmp_path: Path) -> None:
    path = tmp_path / "a.barecat"
    files = make_files(80, seed=5)
    build(str(path), files)
    ds = iterable_dataset(path, num_shards=4)
    path.rename(tmp_path / "index-elsewhere")  # the readers have only the shards now
    assert by_path(ds) == files


@pytest.mark.slow
def test_remote_archive_read_without_the_index(tmp_path: Path) -> None:
    pytest.importorskip("s3fs", reason="the remote extra (fsspec + s3fs) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] (a local S3 server) is not installed")
    import s3fs

    from helpers.s3 import S3Server, upload

    server = S3Server()
    server.start()
    try:
        fs = s3fs.S3FileSystem(**server.options(), skip_instance_cache=True)
        fs.mkdir("hf-data")
        local = str(tmp_path / "ds.barecat")
        files = make_files(120, seed=4)
        build(local, files)
        upload(fs, local, "s3://hf-data/ds.barecat")
        cache = tmp_path / "cache"
        url = "s3://hf-data/ds.barecat"
        ds = iterable_dataset(url, storage_options=server.options(), cache_dir=str(cache))
        fs.rm(url)  # planned: from now on nobody can see the index, on S3 or in the cache
        for copy in cache.rglob("*"):
            if copy.is_file():
                copy.unlink()
        halves = [by_path(split_dataset_by_node(ds, rank=r, world_size=2)) for r in (0, 1)]
        assert {**halves[0], **halves[1]} == files and not set(halves[0]) & set(halves[1])
    finally:
        server.stop()


# -- sealed and damaged archives -----------------------------------------------------------


@pytest.mark.slow
def test_sealed_archive_with_the_key_inside_the_reader(tmp_path: Path) -> None:
    path = str(tmp_path / "sealed.barecat")
    files = make_files(80, seed=2)
    passphrase = "correct horse battery staple"
    build(path, files, compression="zstd", passphrase=passphrase)
    plan = plan_shards(path, passphrase=passphrase, num_shards=2)
    assert passphrase.encode() not in pickle.dumps(plan.gen_kwargs())
    assert "key" not in repr(plan.reader).lower()
    assert by_path(iterable_dataset(path, passphrase=passphrase)) == files
    cache = tmp_path / "clear"  # a materialised dataset holds the contents in the clear
    ds = to_dataset(path, passphrase=passphrase, num_proc=2, num_shards=2, dataset_cache_dir=cache)
    assert by_path(ds) == files
    with pytest.raises(barecat.BarecatError, match="passphrase"):
        iterable_dataset(path)
    with pytest.raises(barecat.BarecatError):
        iterable_dataset(path, passphrase="wrong")


def test_damaged_bytes_fail_the_read_naming_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"a/one.bin": b"1" * 5000, "a/two.bin": b"2" * 5000})
    damage(path, "a/two.bin", at=10)
    with pytest.raises(barecat.BarecatIntegrityError, match=r"a/two\.bin.*CRC32C mismatch"):
        list(iterable_dataset(path))
    with pytest.raises(Exception) as raised:
        to_dataset(path, dataset_cache_dir=str(tmp_path / "cache"))
    chain = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    assert any("a/two.bin" in m and "CRC32C mismatch" in m for m in chain), chain
    ones = list(iterable_dataset(path, pattern="a/one.bin"))
    assert [r["bytes"] for r in ones] == [b"1" * 5000]


def test_without_datasets_the_error_names_the_extra() -> None:
    code = "import sys; sys.modules['datasets'] = None; import barecat.integrations.hf"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "pip install '.[hf]' in a checkout of barecat (the 'hf' extra)" in done.stderr


def test_a_published_archive_on_a_web_server_streams_rows_lazily(tmp_path: Path) -> None:
    from helpers.published import content, make_published, path_of, put_in_folder
    from helpers.static_http import StaticServer

    local = make_published(str(tmp_path / "local" / "ds.barecat"), 2000)
    root = tmp_path / "www"
    root.mkdir()
    put_in_folder(local, str(root))
    with StaticServer(str(root)) as server:
        url = f"{server.url}/ds.barecat"
        rows = iterable_dataset(url, pattern="train/c00*/**", cache_dir=str(tmp_path / "c"),
                                remote_mode="lazy")  # fmt: skip
        assert {r["path"]: r["bytes"] for r in rows} == {
            path_of(i): content(i) for i in range(2000) if i % 100 < 10
        }
        index_size = os.path.getsize(local)
        assert all(r.sent < index_size for r in server.requests() if r.path == "/ds.barecat")
