"""The ``barecat://`` fsspec filesystem, compared with fsspec's own local filesystem over
the same tree extracted to disk."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

import barecat
from barecat.transfer.ingest.threads import add_directory

fsspec = pytest.importorskip("fsspec", reason="the fsspec extra is not installed")


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    base = tmp_path_factory.mktemp("fsspec")
    root = base / "tree"
    rng = random.Random(4)
    for i in range(120):
        path = root / f"{['train', 'val'][i % 2]}/c{i % 6}/{i:03d}.{['jpg', 'json'][i % 3 == 0]}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.randint(0, 3000)))
    (root / "empty").mkdir()
    archive = str(base / "ds.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        add_directory(bc, str(root))
    return archive, str(root)


def test_listing_and_metadata_match_the_local_filesystem(trees: tuple[str, str]) -> None:
    archive, root = trees
    ours = fsspec.filesystem("barecat", fo=archive)
    local = fsspec.filesystem("file")

    def rel(paths: list[str]) -> list[str]:
        return sorted(os.path.relpath(p, root) for p in paths)

    assert sorted(ours.find("")) == rel(local.find(root))
    for pattern in ("train/*/*.jpg", "**/*.json", "val/c1/*"):
        assert sorted(ours.glob(pattern)) == rel(local.glob(f"{root}/{pattern}")), pattern
    for directory in ("", "train", "val/c3", "empty"):
        assert sorted(ours.ls(directory, detail=False)) == rel(
            local.ls(os.path.join(root, directory), detail=False)
        )
    for path in ours.find(""):
        assert ours.size(path) == os.path.getsize(os.path.join(root, path))
    assert ours.isdir("train") and ours.isfile("train/c0/000.json")
    assert not ours.exists("train/c9") and ours.info("train")["type"] == "directory"
    with pytest.raises(FileNotFoundError):
        ours.info("no/such")


def test_reading_whole_ranged_and_through_chained_urls(trees: tuple[str, str]) -> None:
    archive, root = trees
    data = Path(root, "val/c1/001.jpg").read_bytes()
    with fsspec.open(f"barecat://val/c1/001.jpg::{archive}", "rb") as f:
        assert f.read() == data
        f.seek(10)
        assert f.read(5) == data[10:15]
    with fsspec.open(f"barecat::{archive}/val/c1/001.jpg", "rb") as f:  # archive found in path
        assert f.read() == data
    with pytest.raises(FileNotFoundError):
        fsspec.open(f"barecat::{root}/val/c1/none.jpg", "rb").open()  # no archive on the way
    with pytest.raises(barecat.CorruptIndexBarecatError):
        fsspec.open(f"barecat::{root}/val/c1/001.jpg", "rb").open()  # a file, not an archive
    fs = fsspec.filesystem("barecat", fo=archive)
    assert fs.cat_file("val/c1/001.jpg", 100, 200) == data[100:200]
    assert fs.cat_file("val/c1/001.jpg", -7) == data[-7:]
    assert fs.cat(["val/c1/001.jpg", "train/c0/000.json"]) == {
        "val/c1/001.jpg": data,
        "train/c0/000.json": Path(root, "train/c0/000.json").read_bytes(),
    }
    with pytest.raises(FileNotFoundError):
        fs.cat_file("no/such")
    with pytest.raises(NotImplementedError):
        fs.open("val/new.txt", "wb")
