"""The engines' ``bytes`` column (Ray Data, Dask, Hugging Face all make it with
``read_plans.binary_column``): in a plain archive made over one read into an Arrow
buffer, in a sealed one file by file; in every case what the per-file path
(``PlannedReader.read``) gives, every byte checked. Real archives, no engine needed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat.archive.planned_reads import PlannedFile
from barecat.layout import shard_files
from helpers import PASSPHRASE
from helpers.damaging import damage
from helpers.engines import build, make_files
from helpers.s3 import Bucket, upload

pa = pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed (the ray, dask or hf extra installs it)"
)

from barecat.integrations.read_plans import binary_column, plan_archive, read_chunk  # noqa: E402
from barecat.integrations.selection import ArchiveLocation, FileSelection  # noqa: E402


def planned(plan: Any) -> list[PlannedFile]:
    """A chunk's plan as the per-file path takes it."""
    names = ("path", "shard", "offset", "stored", "crc32c")
    return list(zip(*(plan.column(n).to_pylist() for n in names), strict=True))


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "zstd"}, {"compression": "lz4", "passphrase": PASSPHRASE}],
    ids=["plain", "compressed", "encrypted"],
)
def test_the_column_is_what_the_per_file_path_reads(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    path = str(tmp_path / "a.barecat")
    files = make_files(300)  # empty files too, in shards of 64 KiB
    build(path, files, **options)
    location = ArchiveLocation(path, passphrase=options.get("passphrase"))
    plan = plan_archive(location, chunk_bytes=20_000)
    assert len(plan.chunks) > 3 and len(shard_files(path)) > 1
    seen: dict[str, bytes] = {}
    for chunk in plan.chunks:
        column = binary_column(plan.reader, chunk.plan)
        assert column.type == pa.binary() and len(column) == chunk.plan.num_rows
        assert column.to_pylist() == plan.reader.read(planned(chunk.plan))
        seen.update(zip(chunk.plan.column("path").to_pylist(), column.to_pylist(), strict=True))
    assert seen == files


def test_files_come_back_to_back_in_one_buffer_over_gaps_and_in_any_order(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "a.barecat")
    files = {f"f/{i:03d}": os.urandom(0 if i % 9 == 4 else 1000 + i * 37) for i in range(25)}
    build(path, files)  # (one shard)
    with barecat.Barecat(path, readonly=False) as bc:
        for gone in ("f/005", "f/010", "f/011", "f/012", "f/013", "f/014", "f/020"):
            del bc[gone]  # holes: one read goes over the small ones, not over the big one
            del files[gone]
    plan = plan_archive(path)
    (chunk,) = plan.chunks
    sizes: list[int] = []

    def allocate(size: int) -> memoryview:
        sizes.append(size)
        return memoryview(bytearray(size))

    in_storage_order = planned(chunk.plan)
    view = plan.reader.read_packed(in_storage_order, allocate)
    assert len(sizes) == 1, "one buffer"
    assert sizes[0] - len(view) <= 4096, "no read over the big hole (room for a small one)"
    assert bytes(view) == b"".join(files[f[0]] for f in in_storage_order)
    backwards = chunk.plan.take(pa.array(range(chunk.plan.num_rows - 1, -1, -1)))
    column = binary_column(plan.reader, backwards)
    assert column.to_pylist() == [files[p] for p in backwards.column("path").to_pylist()]


def test_empty_files_and_no_files(tmp_path: Path) -> None:
    path = str(tmp_path / "empty.barecat")
    build(path, {"a": b"", "b/c": b"", "d": b""})
    plan = plan_archive(path)
    (chunk,) = plan.chunks
    assert binary_column(plan.reader, chunk.plan).to_pylist() == [b"", b"", b""]
    nothing = binary_column(plan.reader, chunk.plan.slice(0, 0))
    assert nothing.type == pa.binary() and len(nothing) == 0


@pytest.mark.parametrize("compression", [None, "zstd"], ids=["plain", "compressed"])
def test_a_corrupted_byte_fails_naming_the_file(tmp_path: Path, compression: str | None) -> None:
    path = str(tmp_path / "a.barecat")
    files = {f"a/{name}.bin": os.urandom(5000) for name in ("one", "two", "three")}
    build(path, files, compression=compression)
    damage(path, "a/two.bin", at=10)
    plan = plan_archive(path)
    with pytest.raises(barecat.BarecatIntegrityError, match=r"^a/two\.bin: CRC32C mismatch"):
        binary_column(plan.reader, plan.chunks[0].plan)


def test_a_truncated_shard_fails_naming_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"x/first": b"1" * 3000, "x/last": b"2" * 3000})
    (shard,) = shard_files(path)
    os.truncate(shard, 4000)
    plan = plan_archive(path)
    with pytest.raises(barecat.BarecatIntegrityError, match=r"^x/last: Shard .* is truncated"):
        binary_column(plan.reader, plan.chunks[0].plan)


def test_sealed_files_are_never_packed_unread(tmp_path: Path) -> None:
    path = str(tmp_path / "z.barecat")
    build(path, {"a": b"aaaa" * 100}, compression="zstd")
    plan = plan_archive(path)
    with pytest.raises(ValueError, match="sealed"):
        plan.reader.read_packed(planned(plan.chunks[0].plan), lambda n: memoryview(bytearray(n)))


@pytest.mark.parametrize("compression", [None, "zstd"], ids=["plain", "compressed"])
def test_samples_take_their_files_from_the_one_column(
    tmp_path: Path, compression: str | None
) -> None:
    path = str(tmp_path / "wds.barecat")
    files = {f"s/{i:03d}.{ext}": os.urandom(200 + i) for i in range(20) for ext in ("jpg", "txt")}
    del files["s/007.txt"]  # a sample without one
    build(path, files, compression=compression)
    plan = plan_archive(path, FileSelection(group_by_stem=True))
    (chunk,) = plan.chunks
    table = read_chunk(plan.reader, chunk.plan, ["__key__", "txt"], True, plan.extensions)
    assert table.column_names == ["__key__", "txt"] and table.num_rows == 20
    for key, txt in zip(*(table.column(n).to_pylist() for n in table.column_names), strict=True):
        assert txt == files.get(f"{key}.txt")


def test_on_object_storage_each_shards_ranges_are_fetched_together(
    tmp_path: Path, bucket: Bucket
) -> None:
    local = str(tmp_path / "a.barecat")
    files = {f"f/{i:02d}": os.urandom(3000) for i in range(12)}
    build(local, files)
    with barecat.Barecat(local, readonly=False) as bc:
        for gone in ("f/02", "f/03", "f/07", "f/08"):  # holes of 6,000 bytes
            del bc[gone]
            del files[gone]
    upload(bucket.fs, local, bucket.url("a.barecat"))
    url = bucket.url("a.barecat")
    plan = plan_archive(
        ArchiveLocation(url, storage_options=bucket.options, cache_dir=str(tmp_path))
    )
    (chunk,) = plan.chunks
    column = binary_column(plan.reader, chunk.plan)
    assert column.to_pylist() == [files[p] for p in chunk.plan.column("path").to_pylist()]
    store = plan.reader._shards().store  # type: ignore[attr-defined]
    assert store.stats.requests <= 2, "one ranged request over the holes (and a size)"
