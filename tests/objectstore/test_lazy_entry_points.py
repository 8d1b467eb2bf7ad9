"""Every entry point opens a published archive on a plain static web server (Range, ETag,
If-Match: as nginx serves a folder) with no index download: the command line, fsspec's
``barecat::`` URLs, a pickled archive in another process, the PyTorch dataset with
DataLoader workers, Dask, and a FUSE mount. The server's log says what was sent."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import barecat
from helpers.published import content, make_published, path_of, put_in_folder
from helpers.static_http import StaticServer

pytest.importorskip("apsw", reason="the remote extra (apsw) is not installed")
pytest.importorskip("fsspec", reason="the remote extra (fsspec) is not installed")

FILES = 20_000
CLI = [sys.executable, "-m", "barecat.cli"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StaticServer, str, int]]:
    """(the server, the archive's URL there, the index's size)."""
    local = make_published(str(tmp_path_factory.mktemp("local") / "ds.barecat"), FILES)
    root = tmp_path_factory.mktemp("www")
    put_in_folder(local, str(root))
    with StaticServer(str(root)) as server:
        yield server, f"{server.url}/ds.barecat", os.path.getsize(local)


def whole_index_sent(server: StaticServer, index_size: int, since: int) -> bool:
    """Whether any answer after the first ``since`` logged carried the whole index."""
    answers = server.requests()[since:]
    return any(r.path == "/ds.barecat" and r.sent >= index_size for r in answers)


def no_index_copy(folder: Path, index_size: int) -> bool:
    sizes = [os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(folder) for n in ns]
    return index_size not in sizes


def test_the_command_line_lists_finds_cats_and_extracts_without_downloading(
    site: tuple[StaticServer, str, int], tmp_path: Path
) -> None:
    server, url, index_size = site
    since = len(server.requests())
    env = {**os.environ, "BARECAT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("BARECAT_REMOTE_MODE", None)
    listed = subprocess.run([*CLI, "ls", url, "train/c007"], env=env, capture_output=True)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.decode().split() == sorted(
        os.path.basename(path_of(i)) for i in range(7, FILES, 100)
    )
    found = subprocess.run([*CLI, "find", url, "train/c009", "-name", "img_001*.jpg"],
                           env=env, capture_output=True)  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert sorted(found.stdout.decode().split()) == [path_of(i) for i in range(1009, 2000, 100)]
    cat = subprocess.run([*CLI, "cat", url, path_of(1234)], env=env, capture_output=True)
    assert cat.returncode == 0 and cat.stdout == content(1234)
    out = tmp_path / "out"
    subprocess.run([*CLI, "extract", url, "-C", str(out), "--pattern", "train/c011/*"],
                   env=env, check=True, capture_output=True)  # fmt: skip
    extracted = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert extracted == {path_of(i): content(i) for i in range(11, FILES, 100)}
    assert not whole_index_sent(server, index_size, since)
    assert no_index_copy(tmp_path / "cache", index_size)


def test_fsspec_urls_read_a_file_lazily(
    site: tuple[StaticServer, str, int], tmp_path: Path
) -> None:
    import fsspec

    server, url, index_size = site
    since = len(server.requests())
    options = {"cache_dir": str(tmp_path)}
    with fsspec.open(f"barecat::{url}/{path_of(77)}", barecat=options) as f:
        assert f.read() == content(77)
    assert not whole_index_sent(server, index_size, since)


def test_a_pickled_lazy_archive_reads_in_another_process(
    site: tuple[StaticServer, str, int], tmp_path: Path
) -> None:
    _, url, _ = site
    with barecat.Barecat(url, cache_dir=str(tmp_path), remote_mode="lazy", page_cache="8M") as bc:
        script = (
            "import pickle, sys; bc = pickle.loads(sys.stdin.buffer.read()); "
            f"sys.stdout.buffer.write(bc[{path_of(4321)!r}]); "
            "print(bc._archive.remote_options['remote_mode'], file=sys.stderr)"
        )
        out = subprocess.run(
            [sys.executable, "-c", script], input=pickle.dumps(bc), capture_output=True
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout == content(4321)
    assert out.stderr.decode().strip() == "lazy"


def test_the_pytorch_dataset_hydrates_and_its_workers_read_every_file(
    site: tuple[StaticServer, str, int], tmp_path: Path
) -> None:
    pytest.importorskip("torch", reason="torch is not installed (./run test installs 2.13.0)")
    from torch.utils.data import DataLoader

    from barecat.integrations.torch import BarecatDataset

    _, url, index_size = site
    dataset = BarecatDataset(url, pattern="train/c00*/**", cache_dir=str(tmp_path))
    assert dataset.location.remote_mode is None  # (the default: hydrate)
    loader = DataLoader(dataset, batch_size=64, num_workers=2, collate_fn=list)
    seen = {p: data for batch in loader for p, data in batch}
    assert seen == {path_of(i): content(i) for i in range(FILES) if i % 100 < 10}
    with dataset.location.open() as bc:  # the hydrated copy: found, complete, local
        source = bc.index.connection.remote.source  # type: ignore[union-attr]
        assert source.wait_until_local()
    assert not no_index_copy(tmp_path, index_size)


@pytest.mark.slow
def test_dask_reads_a_published_archive_from_the_web_server(
    site: tuple[StaticServer, str, int], tmp_path: Path
) -> None:
    pytest.importorskip("dask", reason="the dask extra is not installed")
    from barecat.integrations.dask import read_barecat

    _, url, _ = site
    frame = read_barecat(url, pattern="train/c05*/**", cache_dir=str(tmp_path))
    rows = frame.compute(scheduler="sync")
    assert dict(zip(rows["path"], rows["bytes"], strict=True)) == {
        path_of(i): content(i) for i in range(FILES) if 50 <= i % 100 < 60
    }


@pytest.mark.slow
def test_mounting_a_published_archive_from_the_web_server(
    site: tuple[StaticServer, str, int], tmp_path: Path
) -> None:
    from helpers.mounting import FUSE_PROBLEM, served

    if FUSE_PROBLEM:
        pytest.skip(FUSE_PROBLEM)
    server, url, index_size = site
    since = len(server.requests())
    env = {"BARECAT_CACHE_DIR": str(tmp_path / "c"), "BARECAT_REMOTE_MODE": ""}
    mnt = tmp_path / "mnt"
    with served(url, mnt, env=env):
        assert (mnt / path_of(99)).read_bytes() == content(99)
        assert sorted(os.listdir(mnt / "train/c042"))[:2] == ["img_000042.jpg", "img_000142.jpg"]
    assert not whole_index_sent(server, index_size, since)
    assert no_index_copy(tmp_path / "c", index_size)
