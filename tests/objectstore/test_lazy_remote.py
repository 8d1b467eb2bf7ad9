"""A published archive of 100,000 files read lazily, with no index download: on a real
S3-protocol server (moto, its own process) and on a plain static web server (Range,
ETag, If-Match, as nginx), counting every request the client made and, on the web
server, every request the server saw."""

from __future__ import annotations

import fcntl
import itertools
import os
import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat.exceptions import (
    BarecatIntegrityError,
    RangeIgnoredBarecatError,
    RemoteStorageBarecatError,
    WrongPassphraseBarecatError,
)
from barecat.index.sidecar import read_head
from helpers.published import (
    FILES,
    archive_files,
    content,
    make_published,
    path_of,
    put_in_folder,
)
from helpers.s3 import Bucket, S3Server
from helpers.static_http import StaticServer

pytest.importorskip("apsw", reason="the remote extra (apsw) is not installed")
pytest.importorskip("s3fs", reason="the remote extra (fsspec + s3fs) is not installed")
pytest.importorskip("moto.server", reason="moto[server] (a local S3 server) is not installed")

MB = 1_000_000
_copies = itertools.count()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local archive of 100,000 small files, published for lazy reads."""
    return make_published(str(tmp_path_factory.mktemp("published") / "ds.barecat"))


class Place:
    """Where copies of an archive are put and opened: a bucket or a web server's folder."""

    kind = ""

    def put(self, base: str, name: str) -> str:
        """Upload the archive at ``base`` as ``name``; returns its URL."""
        raise NotImplementedError

    def replace(self, local: str, url: str) -> None:
        """Put the local file ``local`` at ``url`` (another version of that object)."""
        raise NotImplementedError

    options: dict[str, Any]
    """The keywords that reach this place (the S3 server's storage options)."""

    def open(self, url: str, cache: Path, **options: Any) -> barecat.Barecat:
        return barecat.Barecat(url, cache_dir=str(cache), **self.options, **options)


class S3Place(Place):
    kind = "s3"

    def __init__(self, server: S3Server) -> None:
        self.bucket = Bucket(server, "lazy")
        self.options = {"storage_options": server.options()}

    def put(self, base: str, name: str) -> str:
        folder = os.path.dirname(base)
        for entry in archive_files(base):
            suffix = entry[len(os.path.basename(base)) :]
            self.bucket.fs.put_file(os.path.join(folder, entry), self.bucket.url(name + suffix))
        return self.bucket.url(name)

    def replace(self, local: str, url: str) -> None:
        self.bucket.fs.put_file(local, url)


class WebPlace(Place):
    kind = "http"

    def __init__(self, server: StaticServer, root: Path) -> None:
        self.options = {}
        self.server = server
        self.root = root

    def put(self, base: str, name: str) -> str:
        put_in_folder(base, str(self.root), name)
        return f"{self.server.url}/{name}"

    def replace(self, local: str, url: str) -> None:
        target = self.root / url.rsplit("/", 1)[1]
        shutil.copy(local, str(target) + ".new")
        os.replace(str(target) + ".new", target)


@pytest.fixture(scope="module")
def s3_place() -> Iterator[S3Place]:
    server = S3Server()
    server.start()
    try:
        yield S3Place(server)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def web_place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebPlace]:
    root = tmp_path_factory.mktemp("www")
    with StaticServer(str(root)) as server:
        yield WebPlace(server, root)


@pytest.fixture(params=["s3", "web"])
def place(request: pytest.FixtureRequest) -> Place:
    return request.getfixturevalue(f"{request.param}_place")  # type: ignore[no-any-return]


@pytest.fixture
def url(place: Place, published: str) -> str:
    """A fresh copy of the published archive there (tests may change it)."""
    return place.put(published, f"ds{next(_copies)}.barecat")


def stats(bc: barecat.Barecat) -> Any:
    return bc.sharder.store.stats


def test_open_and_a_first_random_file_take_four_requests_and_little_data(
    place: Place, url: str, published: str, tmp_path: Path
) -> None:
    i = random.Random(1).randrange(FILES)
    with place.open(url, tmp_path) as bc:
        assert bc[path_of(i)] == content(i)
        assert stats(bc).requests <= 4
        assert stats(bc).bytes_fetched <= 1.2 * MB
        assert len(bc) == FILES
    index_size = os.path.getsize(published)
    copies = [f for _, _, names in os.walk(tmp_path) for f in names]
    assert all(os.path.getsize(p) != index_size for p in _all_files(tmp_path)), copies


def _all_files(folder: Path) -> list[str]:
    return [os.path.join(d, n) for d, _, names in os.walk(folder) for n in names]


def test_each_further_cold_file_takes_at_most_two_requests(
    place: Place, url: str, tmp_path: Path
) -> None:
    rng = random.Random(2)
    with place.open(url, tmp_path, block_cache=False) as bc:
        assert bc[path_of(0)] == content(0)
        for i in rng.sample(range(FILES), 40):
            before = stats(bc).requests
            assert bc[path_of(i)] == content(i)
            assert stats(bc).requests - before <= 2
        before = stats(bc).requests
        assert "train/c001/img_999999.jpg" not in bc  # an absent path: its bucket says so
        assert stats(bc).requests - before <= 1


def test_get_many_of_256_files_takes_two_rounds_of_parallel_requests(
    place: Place, url: str, tmp_path: Path
) -> None:
    chosen = random.Random(3).sample(range(FILES), 256)
    with place.open(url, tmp_path, block_cache=False) as bc:
        assert bc[path_of(0)] == content(0)
        rounds = stats(bc).rounds
        assert bc.get_many([path_of(i) for i in chosen]) == [content(i) for i in chosen]
        assert stats(bc).rounds - rounds <= 3


def test_get_many_sends_its_bucket_requests_at_once(
    web_place: WebPlace, published: str, tmp_path: Path
) -> None:
    url = web_place.put(published, f"ds{next(_copies)}.barecat")
    with web_place.open(url, tmp_path, block_cache=False) as bc:
        assert bc[path_of(0)] == content(0)
        chosen = random.Random(4).sample(range(FILES), 64)
        head = read_head(published + "-sidecar")
        buckets = {head.bucket_span(path_of(i)) for i in chosen}
        web_place.server.gather(len(buckets))  # each waits until all have arrived
        assert bc.get_many([path_of(i) for i in chosen]) == [content(i) for i in chosen]
        assert not web_place.server.barrier_broken


def test_a_listing_and_a_glob_fetch_the_pages_they_touch_not_the_index(
    place: Place, url: str, published: str, tmp_path: Path
) -> None:
    with place.open(url, tmp_path) as bc:
        assert bc[path_of(0)] == content(0)
        before = stats(bc).requests, stats(bc).bytes_fetched
        names = bc.listdir("train/c042")
        assert names == sorted(os.path.basename(path_of(i)) for i in range(42, FILES, 100))
        listed = stats(bc).requests
        assert listed - before[0] <= 16
        globbed = bc.glob("train/c043/*.jpg")
        assert sorted(globbed) == sorted(path_of(i) for i in range(43, FILES, 100))
        assert stats(bc).requests - listed <= 16
        assert stats(bc).bytes_fetched - before[1] < 0.5 * os.path.getsize(published)


def test_an_index_replaced_while_open_is_an_error_naming_it_never_a_mix(
    place: Place, url: str, published: str, tmp_path: Path
) -> None:
    changed = str(tmp_path / "changed.barecat")
    shutil.copy(published, changed)
    conn = sqlite3.connect(changed)
    conn.execute("UPDATE files SET mtime_ns = 12345 WHERE path = ?", (path_of(5),))
    conn.commit()
    conn.close()
    with place.open(url, tmp_path / "cache") as bc:
        assert bc[path_of(1)] == content(1)
        place.replace(changed, url)
        with pytest.raises(RemoteStorageBarecatError, match="changed while open") as e:
            bc.listdir("train/c077")
        assert url in str(e.value)


def test_a_stale_sidecar_is_never_used_and_the_archive_still_reads(
    place: Place, published: str, tmp_path: Path
) -> None:
    local = str(tmp_path / "stale" / "ds.barecat")
    os.makedirs(os.path.dirname(local))
    for name in archive_files(published):
        suffix = name[len("ds.barecat") :]
        shutil.copy(os.path.join(os.path.dirname(published), name), local + suffix)
    with barecat.Barecat(local, readonly=False) as bc:  # a write after publish
        del bc[path_of(0)]
        bc["new/file.txt"] = b"new"
    url = place.put(local, f"ds{next(_copies)}.barecat")
    with pytest.warns(UserWarning, match="does not match the index"):
        bc = place.open(url, tmp_path / "cache", remote_mode="lazy")
    with bc:
        assert path_of(0) not in bc
        assert bc["new/file.txt"] == b"new"
        assert bc[path_of(7)] == content(7)


def test_an_unpublished_archive_is_downloaded_in_auto_mode_and_read_by_pages_in_lazy(
    place: Place, tmp_path: Path
) -> None:
    local = str(tmp_path / "plain" / "p.barecat")
    with barecat.Barecat(local, readonly=False) as bc:
        bc.add_many((f"d{i % 10}/{i}.txt", str(i).encode()) for i in range(2000))
    url = place.put(local, f"plain{next(_copies)}.barecat")
    size = os.path.getsize(local)
    with place.open(url, tmp_path / "auto") as bc:
        assert bc["d3/13.txt"] == b"13"
    assert size in [os.path.getsize(p) for p in _all_files(tmp_path / "auto")]
    with place.open(url, tmp_path / "lazy", remote_mode="lazy") as bc:
        assert bc["d3/13.txt"] == b"13"
        assert sorted(bc.listdir("d4")) == sorted(f"{i}.txt" for i in range(4, 2000, 10))
    assert size not in [os.path.getsize(p) for p in _all_files(tmp_path / "lazy")]


def test_hydrate_reads_at_once_and_then_from_a_local_copy(
    place: Place, url: str, published: str, tmp_path: Path
) -> None:
    with place.open(url, tmp_path, remote_mode="hydrate") as bc:
        assert bc[path_of(11)] == content(11)
        source = bc.index.connection.remote.source  # type: ignore[union-attr]
        source.wait_until_local()
        before = stats(bc).requests
        assert bc.listdir("train/c012")[:1] == ["img_000012.jpg"]
        assert len(bc.glob("train/c013/*.jpg")) == FILES // 100
        assert bc.index.lookup_file(path_of(913)).size == len(content(913))
        assert stats(bc).requests == before  # index pages and lookups: all local
    assert os.path.getsize(published) in [os.path.getsize(p) for p in _all_files(tmp_path)]
    with place.open(url, tmp_path, remote_mode="download") as bc:  # the copy is reused
        assert stats(bc).bytes_fetched < 1 * MB


def test_the_page_cache_stays_within_its_bound(place: Place, url: str, tmp_path: Path) -> None:
    bound = 300_000
    with place.open(url, tmp_path, page_cache=bound, block_cache=False) as bc:
        for i in random.Random(5).sample(range(FILES), 120):
            assert bc[path_of(i)] == content(i)
        bc.listdir("train/c050")
        cache = bc.index.connection.remote.cache  # type: ignore[union-attr]
        assert 0 < cache.nbytes <= bound


def test_a_server_that_ignores_range_is_reported_before_its_body_is_read(
    web_place: WebPlace, published: str, tmp_path: Path
) -> None:
    url = web_place.put(published, f"ds{next(_copies)}.barecat")
    web_place.server.ignore_range = True
    try:
        for mode in ("lazy", "auto"):
            with pytest.raises(RangeIgnoredBarecatError, match="ignores Range") as e:
                web_place.open(url, tmp_path / mode, remote_mode=mode)
            assert url in str(e.value)
        # the reader hung up: the server never got to send the whole index
        assert all(r.sent < os.path.getsize(published) for r in web_place.server.requests())
    finally:
        web_place.server.ignore_range = False


def test_failed_requests_are_retried_then_reported_naming_the_url(
    web_place: WebPlace, published: str, tmp_path: Path
) -> None:
    url = web_place.put(published, f"ds{next(_copies)}.barecat")
    with web_place.open(url, tmp_path, block_cache=False) as bc:
        assert bc[path_of(0)] == content(0)
        web_place.server.fail_next(2)
        assert bc[path_of(21)] == content(21)
        web_place.server.fail_next(100)
        with pytest.raises(RemoteStorageBarecatError, match=r"tried 4 times") as e:
            bc[path_of(22)]
        assert "127.0.0.1" in str(e.value)
        web_place.server.clear_failures()


def test_the_older_index_name_is_read_lazily_too(
    place: Place, published: str, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for name in archive_files(published):
        suffix = name[len("ds.barecat") :] or "-sqlite-index"
        shutil.copy(os.path.join(os.path.dirname(published), name), old / ("ds.barecat" + suffix))
    folder_files = sorted(os.listdir(old))
    assert "ds.barecat-sqlite-index" in folder_files and "ds.barecat" not in folder_files
    url = place.put(str(old / "ds.barecat"), f"old{next(_copies)}.barecat")
    with place.open(url, tmp_path / "cache", remote_mode="lazy") as bc:
        assert bc[path_of(3)] == content(3)


def test_an_encrypted_archive_reads_lazily_only_what_its_key_authenticates(
    place: Place, tmp_path: Path
) -> None:
    pytest.importorskip("cryptography", reason="the sealing extra is not installed")
    local = str(tmp_path / "sealed" / "s.barecat")
    files = {f"d{i % 3}/{i}.bin": os.urandom(100 + i) for i in range(60)}
    with barecat.Barecat(local, readonly=False, passphrase="pw", compression="zstd") as bc:
        bc.add_many(files.items())
    url = place.put(local, f"sealed{next(_copies)}.barecat")
    with place.open(url, tmp_path / "c1", remote_mode="lazy", passphrase="pw") as bc:
        assert bc.encrypted
        assert bc.get_many(sorted(files)) == [files[p] for p in sorted(files)]
    with pytest.raises(WrongPassphraseBarecatError):
        place.open(url, tmp_path / "c2", remote_mode="lazy", passphrase="wrong")["d0/0.bin"]
    # someone without the key points one file's row at another file's bytes
    tampered = str(tmp_path / "tampered.barecat")
    shutil.copy(local, tampered)
    conn = sqlite3.connect(tampered)
    (b_offset,) = conn.execute("SELECT offset FROM files WHERE path = 'd1/1.bin'").fetchone()
    conn.execute("UPDATE files SET offset = ? WHERE path = 'd0/0.bin'", (b_offset,))
    conn.commit()
    conn.close()
    place.replace(tampered, url)
    bc = place.open(url, tmp_path / "c3", remote_mode="lazy", passphrase="pw")
    with bc, pytest.raises(BarecatIntegrityError):
        bc["d0/0.bin"]


def test_hydrating_a_new_version_deletes_the_copy_of_the_old(
    web_place: WebPlace, published: str, tmp_path: Path
) -> None:
    url = web_place.put(published, f"ds{next(_copies)}.barecat")
    cache = tmp_path / "cache"
    with web_place.open(url, cache, remote_mode="hydrate") as bc:
        assert bc.index.connection.remote.source.wait_until_local()  # type: ignore[union-attr]
    index_size = os.path.getsize(published)
    first = [p for p in _all_files(cache) if os.path.getsize(p) == index_size]
    assert len(first) == 1
    changed = str(tmp_path / "changed" / "ds.barecat")
    os.makedirs(os.path.dirname(changed))
    for name in archive_files(published):
        shutil.copy(
            os.path.join(os.path.dirname(published), name), changed + name[len("ds.barecat") :]
        )
    with barecat.Barecat(changed, readonly=False) as writer:
        del writer[path_of(9)]
    barecat.publish(changed)  # (a new version, published: hydrated, not downloaded)
    web_place.replace(changed, url)
    web_place.replace(changed + "-sidecar", url + "-sidecar")
    with web_place.open(url, cache, remote_mode="hydrate") as bc:
        assert path_of(9) not in bc
        assert bc.index.connection.remote.source.wait_until_local()  # type: ignore[union-attr]
    assert not os.path.exists(first[0])
    assert len([p for p in _all_files(cache) if os.path.getsize(p) == index_size]) == 1


def test_a_hydrating_reader_takes_the_download_over_from_a_process_that_left_it(
    web_place: WebPlace, published: str, tmp_path: Path
) -> None:
    from barecat.objectstore import ArchiveCache, ObjectStore

    url = web_place.put(published, f"ds{next(_copies)}.barecat")
    cache = tmp_path / "cache"
    copy = ArchiveCache(str(cache), url).path_of(ObjectStore("http").describe(url))
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    other = os.open(copy + ".lock", os.O_RDWR | os.O_CREAT)  # another reader's download
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        bc = web_place.open(url, cache, remote_mode="hydrate")
        source = bc.index.connection.remote.source  # type: ignore[union-attr]
        assert not source.wait_until_local(timeout=0)  # (the other one downloads)
    finally:
        os.close(other)  # ...and ends without finishing
    with bc:
        assert source.wait_until_local(timeout=120)
        assert os.path.getsize(copy) == os.path.getsize(published)
        assert bc[path_of(5)] == content(5)
