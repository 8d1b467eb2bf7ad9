"""Pinned ranged reads (``barecat.objectstore.pinned``) against a real S3-protocol server
(moto, its own process) and a real static web server on 127.0.0.1: exact bytes, one
request per range all in flight at once, the version pinned at the first answer,
``If-Match``, servers that ignore ``Range``, bounded retries, missing objects."""

from __future__ import annotations

import multiprocessing
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from barecat.exceptions import FileNotFoundBarecatError, RemoteStorageBarecatError
from barecat.objectstore import ObjectStore, range_requests
from barecat.objectstore.pinned import PinnedObject, Retries, read_many
from helpers.fuzzing import fuzz_settings
from helpers.gathering_proxy import GatheringProxy
from helpers.s3 import Bucket, S3Server
from helpers.static_http import StaticServer, etag_of

pytest.importorskip("fsspec", reason="the remote extra (fsspec) is not installed")
pytest.importorskip("aiohttp", reason="the remote extra (aiohttp) is not installed")

DATA = random.Random(36).randbytes(300_000)
FAST = Retries(attempts=4, first_delay=0.001)


@dataclass
class Backend:
    """A store and a way to put objects on it."""

    name: str
    store: ObjectStore
    url: Callable[[str], str]
    put: Callable[[str, bytes], None]

    def pinned(self, name: str, retries: Retries = FAST) -> PinnedObject:
        return PinnedObject(self.store, self.url(name), retries)


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    pytest.importorskip("s3fs", reason="the remote extra (s3fs) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    server = S3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> Bucket:
    return Bucket(s3_server, "pinned")


@pytest.fixture
def web(tmp_path: Path) -> Iterator[StaticServer]:
    root = tmp_path / "www"
    root.mkdir()
    with StaticServer(str(root)) as server:
        yield server


def _put_file(root: str) -> Callable[[str, bytes], None]:
    def put(name: str, data: bytes) -> None:
        staged = os.path.join(root, f".{name}.new")
        with open(staged, "wb") as f:
            f.write(data)
        os.replace(staged, os.path.join(root, name))

    return put


def s3_backend(bucket: Bucket) -> Backend:
    return Backend(
        "s3",
        ObjectStore("s3", bucket.options),
        bucket.url,
        lambda name, data: bucket.fs.pipe_file(f"{bucket.name}/{name}", data),
    )


def http_backend(web: StaticServer) -> Backend:
    return Backend("http", ObjectStore("http"), lambda n: f"{web.url}/{n}", _put_file(web.root))


@pytest.fixture(params=["s3", "http"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "s3":
        return s3_backend(request.getfixturevalue("bucket"))
    return http_backend(request.getfixturevalue("web"))


def _ranges(rng: random.Random, count: int) -> list[tuple[int, int]]:
    out = []
    for _ in range(count):
        start = rng.randrange(len(DATA) + 100)
        out.append((start, start + rng.choice([0, 1, 99, 4096, 70_000, 400_000])))
    return out


def test_ranges_are_read_exactly(backend: Backend) -> None:
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    rng = random.Random(1)
    for _ in range(4):
        wanted = _ranges(rng, 9)
        assert obj.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    assert obj.size == len(DATA)
    assert obj.read(-5, 10) == DATA[:10]
    assert obj.read(len(DATA) - 3, len(DATA) + 1000) == DATA[-3:]


def test_the_first_answer_pins_and_tiny_reads_pin_too(backend: Backend) -> None:
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    before = backend.store.stats.requests
    assert not obj.pinned
    assert obj.read(0, 100) == DATA[:100]  # the one request that pins
    assert obj.pinned and obj.size == len(DATA)
    assert obj.version.size == len(DATA) and obj.version.version == obj.validator
    assert backend.store.stats.requests - before == 1
    empty_range = backend.pinned("blob")
    assert empty_range.read(0, 0) == b"" and empty_range.size == len(DATA)
    backend.put("empty", b"")
    empty = backend.pinned("empty")
    assert empty.read(0, 1000) == b"" and empty.size == 0
    assert empty.read(5, 10) == b""


def test_the_version_matches_what_describe_gives(backend: Backend) -> None:
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    obj.pin()
    assert obj.version == backend.store.describe(backend.url("blob"))


def test_every_range_is_one_request_all_sent_at_once(web: StaticServer) -> None:
    backend = http_backend(web)
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    obj.pin()
    wanted = [(i * 20_000, i * 20_000 + 700) for i in range(12)]
    before = (backend.store.stats.requests, backend.store.stats.bytes_fetched)
    web.gather(len(wanted))  # each waits until all 12 are at the server
    assert obj.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    assert not web.barrier_broken
    assert backend.store.stats.requests - before[0] == len(wanted)
    assert backend.store.stats.bytes_fetched - before[1] == 700 * len(wanted)
    assert web.count("GET") == 1 + len(wanted)


def test_hundreds_of_http_ranges_are_in_flight_at_once(web: StaticServer) -> None:
    """More ranges than aiohttp's 100 connections a session keeps unless told."""
    backend = http_backend(web)
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    obj.pin()
    wanted = [(i * 1000, i * 1000 + 10) for i in range(256)]
    web.gather(len(wanted), timeout=10)
    assert obj.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    assert not web.barrier_broken


def test_hundreds_of_s3_ranges_are_in_flight_at_once(s3_server: S3Server, bucket: Bucket) -> None:
    """More ranges than botocore's 10 connections a client keeps unless told."""
    bucket.fs.pipe_file(f"{bucket.name}/many", DATA)
    with GatheringProxy(s3_server.port) as proxy:
        store = ObjectStore("s3", {**bucket.options, "endpoint_url": proxy.endpoint})
        obj = PinnedObject(store, bucket.url("many"), FAST)
        obj.pin()
        wanted = [(i * 1000, i * 1000 + 10) for i in range(64)]
        proxy.gather(len(wanted), timeout=10)
        assert obj.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
        assert not proxy.barrier_broken


def test_reads_of_several_objects_go_out_together(web: StaticServer) -> None:
    backend = http_backend(web)
    backend.put("index", DATA[:5000])
    backend.put("sidecar", DATA[:100_000])
    index, sidecar, absent = (backend.pinned(n) for n in ("index", "sidecar", "absent"))
    web.gather(3)
    got = read_many([(index, 0, 100), (sidecar, 0, 256 << 10), (absent, 0, 100)], missing_ok=True)
    assert not web.barrier_broken
    assert got[:2] == [DATA[:100], DATA[:100_000]]
    assert isinstance(got[2], FileNotFoundBarecatError) and "absent" in str(got[2])
    assert index.size == 5000 and sidecar.size == 100_000
    with pytest.raises(FileNotFoundError, match="absent"):
        read_many([(index, 0, 10), (absent, 0, 10)])


def test_the_s3_ranges_are_counted(bucket: Bucket) -> None:
    backend = s3_backend(bucket)
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    wanted = [(i * 20_000, i * 20_000 + 300) for i in range(8)]
    before = (backend.store.stats.requests, backend.store.stats.bytes_fetched)
    assert obj.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    assert backend.store.stats.requests - before[0] == len(wanted)
    assert backend.store.stats.bytes_fetched - before[1] == 300 * len(wanted)


@pytest.mark.parametrize("same_size", [False, True])
def test_a_replaced_object_is_an_error_never_a_mix(backend: Backend, same_size: bool) -> None:
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    assert obj.read(0, 1000) == DATA[:1000]
    backend.put("blob", DATA[::-1] if same_size else DATA + b"more")
    fetched = backend.store.stats.bytes_fetched
    with pytest.raises(RemoteStorageBarecatError, match="changed while open") as e:
        obj.read(1000, 2000)
    assert backend.url("blob") in str(e.value)
    # judged from the headers (a 412, or the new ETag): none of the new bytes were read
    assert backend.store.stats.bytes_fetched == fetched
    with pytest.raises(RemoteStorageBarecatError, match="changed while open"):
        obj.read_ranges([(0, 10), (5000, 6000)])


def test_if_match_carries_the_pinned_etag(web: StaticServer) -> None:
    backend = http_backend(web)
    backend.put("blob", DATA)
    etag = etag_of(os.path.join(web.root, "blob"))
    obj = backend.pinned("blob")
    obj.read_ranges([(0, 10), (10, 20)])  # neither pinned when sent: no If-Match
    obj.read_ranges([(20, 30), (30, 40)])
    sent = [r.if_match for r in web.requests("GET")]
    assert sent == [None, None, etag, etag]


@pytest.mark.parametrize("knob", ["ignore_if_match", "weak_etags"])
def test_a_changed_validator_is_caught_where_if_match_does_not_work(
    web: StaticServer, knob: str
) -> None:
    """A server that never checks If-Match, or gives weak ETags (which If-Match never
    matches, so none is sent): the response's own validator tells the change."""
    setattr(web, knob, True)
    backend = http_backend(web)
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    assert obj.read_ranges([(0, 10), (10, 20)]) == [DATA[0:10], DATA[10:20]]
    assert obj.read(20, 30) == DATA[20:30]
    etag = etag_of(os.path.join(web.root, "blob"))
    backend.put("blob", DATA[::-1])
    with pytest.raises(RemoteStorageBarecatError, match="changed while open"):
        obj.read(30, 40)
    sent = [r.if_match for r in web.requests("GET")]
    assert sent == [None, None] + [None if knob == "weak_etags" else etag] * 2


def test_a_server_ignoring_range_is_detected_before_the_body_is_read(
    web: StaticServer,
) -> None:
    backend = http_backend(web)
    big = os.urandom(32 << 20)
    backend.put("big", big)
    web.ignore_range = True
    obj = backend.pinned("big")
    with pytest.raises(RemoteStorageBarecatError, match="ignores Range requests") as e:
        obj.read(1000, 2000)
    assert backend.url("big") in str(e.value) and "remote_mode='download'" in str(e.value)
    assert backend.store.stats.bytes_fetched == 0
    web.wait_for(lambda: len(web.log) == 1)
    (logged,) = web.requests("GET")
    assert logged.status == 200 and logged.sent < len(big)  # the client hung up


def test_a_whole_small_object_is_a_fair_answer_to_a_range_from_zero(web: StaticServer) -> None:
    """A server may answer a range that covers the whole object with the object (200):
    that is what was asked for, so the reader takes it."""
    backend = http_backend(web)
    backend.put("small", DATA[:50])
    web.ignore_range = True
    obj = backend.pinned("small")
    assert obj.read(0, 256 << 10) == DATA[:50] and obj.size == 50
    with pytest.raises(RemoteStorageBarecatError, match="ignores Range requests"):
        backend.pinned("small").read(10, 20)


@pytest.mark.parametrize("status", [503, 500, 429])
def test_failures_worth_retrying_are_retried(web: StaticServer, status: int) -> None:
    backend = http_backend(web)
    backend.put("blob", DATA)
    web.fail_next(2, status)
    before = backend.store.stats.requests
    assert backend.pinned("blob").read(10, 20) == DATA[10:20]
    assert web.count("GET") == 3
    assert backend.store.stats.requests - before == 3


def test_a_request_answered_with_silence_is_retried(web: StaticServer) -> None:
    backend = http_backend(web)
    backend.put("blob", DATA)
    web.stall_next(1)
    obj = backend.pinned("blob", Retries(attempts=4, first_delay=0.001, stall_timeout=1.0))
    assert obj.read(10, 20) == DATA[10:20]
    web.release()
    statuses = [r.status for r in web.requests("GET")]
    assert statuses.count(0) == 1 and 206 in statuses  # (a loaded machine may need a third)


def test_retries_are_bounded_and_the_error_names_the_url(web: StaticServer) -> None:
    backend = http_backend(web)
    backend.put("blob", DATA)
    web.fail_next(100, 503)
    obj = backend.pinned("blob", Retries(attempts=4, first_delay=0.001))
    with pytest.raises(RemoteStorageBarecatError, match="tried 4 times") as e:
        obj.read(0, 10)
    assert backend.url("blob") in str(e.value) and "503" in str(e.value)
    assert web.count("GET") == 4


def test_a_refusal_is_not_retried(web: StaticServer) -> None:
    backend = http_backend(web)
    backend.put("blob", DATA)
    web.fail_next(1, 403)
    with pytest.raises(RemoteStorageBarecatError, match="403") as e:
        backend.pinned("blob").read(0, 10)
    assert backend.url("blob") in str(e.value)
    assert web.count("GET") == 1


def test_a_server_that_is_gone_is_an_error_naming_the_url(tmp_path: Path) -> None:
    root = tmp_path / "www"
    root.mkdir()
    (root / "blob").write_bytes(DATA)
    with StaticServer(str(root)) as web:
        url = f"{web.url}/blob"
    obj = PinnedObject(ObjectStore("http"), url, FAST)
    with pytest.raises(RemoteStorageBarecatError, match="tried 4 times") as e:
        obj.read(0, 10)
    assert url in str(e.value)


def test_a_stopped_s3_server_is_an_error_naming_the_url() -> None:
    pytest.importorskip("s3fs", reason="the remote extra (s3fs) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    server = S3Server()
    server.start()
    try:
        bucket = Bucket(server, "outage")
        bucket.fs.pipe_file("outage/blob", DATA)
        store = ObjectStore("s3", server.options(attempts=1))
        obj = PinnedObject(store, bucket.url("blob"), FAST)
        assert obj.read(0, 10) == DATA[:10]
    finally:
        server.stop()
    before = store.stats.requests
    with pytest.raises(RemoteStorageBarecatError, match="tried 4 times") as e:
        obj.read(10, 20)
    assert bucket.url("blob") in str(e.value)
    assert store.stats.requests - before == 4


def test_what_the_s3_client_refuses_is_an_error_naming_the_url(bucket: Bucket) -> None:
    store = ObjectStore("s3", bucket.options)
    with pytest.raises(RemoteStorageBarecatError, match="Invalid bucket name") as e:
        PinnedObject(store, "s3://bad bucket/x", FAST).read(0, 10)
    assert "s3://bad bucket/x" in str(e.value)
    assert store.stats.requests == 1  # not retried


def test_a_missing_object_is_file_not_found(backend: Backend) -> None:
    obj = backend.pinned("no-such-object")
    with pytest.raises(FileNotFoundError, match="no-such-object") as e:
        obj.read(0, 10)
    assert isinstance(e.value, FileNotFoundBarecatError)
    with pytest.raises(FileNotFoundError):
        obj.pin()


def test_other_fsspec_protocols_pin_by_size(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    memory.pipe_file("/pinned-test/blob", DATA)
    store = ObjectStore("memory")
    obj = PinnedObject(store, "memory://pinned-test/blob")
    wanted = [(0, 10), (299_990, 300_500), (5, 5)]
    assert obj.read_ranges(wanted) == [DATA[s:e] for s, e in wanted]
    assert obj.size == len(DATA)
    memory.pipe_file("/pinned-test/blob", DATA[:1000])
    with pytest.raises(RemoteStorageBarecatError, match="memory://pinned-test/blob"):
        obj.read(2000, 3000)
    with pytest.raises(FileNotFoundError):
        PinnedObject(store, "memory://pinned-test/absent").read(0, 1)


def test_a_pinned_object_is_shared_by_threads(web: StaticServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    backend = http_backend(web)
    backend.put("blob", DATA)
    obj = backend.pinned("blob")
    rng = random.Random(7)
    batches = [_ranges(rng, 5) for _ in range(16)]

    def read(batch: list[tuple[int, int]]) -> Any:
        return obj.read_ranges(batch) == [DATA[s:e] for s, e in batch]

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, batches))
    assert len({r.if_match for r in web.requests("GET") if r.if_match}) == 1


def test_a_download_is_of_the_pinned_version(backend: Backend, tmp_path: Path) -> None:
    big = random.Random(3).randbytes(1_000_003)
    backend.put("big", big)
    obj = backend.pinned("big")
    before = backend.store.stats.requests
    assert obj.download(str(tmp_path / "copy"), chunk_size=128 << 10, parallel=3) == len(big)
    assert (tmp_path / "copy").read_bytes() == big
    assert backend.store.stats.requests - before == 1 + 8  # the pin, then 8 ranges
    backend.put("big", big[::-1])
    with pytest.raises(RemoteStorageBarecatError, match="changed while open"):
        obj.download(str(tmp_path / "copy2"), chunk_size=128 << 10)
    backend.put("empty", b"")
    assert backend.pinned("empty").download(str(tmp_path / "copy3")) == 0
    assert (tmp_path / "copy3").read_bytes() == b""


def _read_in_child(obj: PinnedObject, out: Any) -> None:
    try:
        out.put(obj.read(100, 200))
    except BaseException as e:  # the parent reports it
        out.put(e)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.parametrize("name", ["s3", "http"])
def test_a_forked_child_reads_the_version_its_parent_pinned(
    request: pytest.FixtureRequest, name: str
) -> None:
    """A DataLoader worker: forked after the parent's first reads (its event loop and
    sessions belong to the parent), it reads through the same object, with the pin."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform cannot fork")
    backend = (
        s3_backend(request.getfixturevalue("bucket"))
        if name == "s3"
        else http_backend(request.getfixturevalue("web"))
    )
    backend.put("forked", DATA)
    obj = backend.pinned("forked")
    assert obj.read(0, 10) == DATA[:10]
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_read_in_child, args=(obj, out))
    child.start()
    assert out.get(timeout=60) == DATA[100:200]
    child.join(timeout=60)
    assert child.exitcode == 0
    backend.put("forked", DATA[::-1])
    child = context.Process(target=_read_in_child, args=(obj, out))
    child.start()
    got = out.get(timeout=60)
    child.join(timeout=60)
    assert isinstance(got, RemoteStorageBarecatError) and "changed while open" in str(got)


@pytest.mark.fuzz
@fuzz_settings(300)
@example(start=5, length=1, status=206, header="bytes 5-4/5", content_length=None)
@given(
    start=st.integers(0, 1 << 40),
    length=st.integers(1, 1 << 30),
    status=st.sampled_from([200, 206]),
    header=st.one_of(
        st.none(),
        st.text(max_size=40),
        st.tuples(st.integers(0, 1 << 41), st.integers(0, 1 << 41), st.integers(0, 1 << 41)).map(
            lambda t: f"bytes {t[0]}-{t[1]}/{t[2]}"
        ),
    ),
    content_length=st.one_of(st.none(), st.integers(0, 1 << 41)),
)
def test_any_range_header_is_a_size_that_fits_or_a_clear_error(
    start: int, length: int, status: int, header: str | None, content_length: int | None
) -> None:
    """Content-Range and Content-Length come from the network: whatever they say, the
    reader gets the object's size, consistent with the range asked for, or the error."""
    end = start + length
    try:
        size = range_requests._ranged_size("u", start, end, status, header, content_length)
    except RemoteStorageBarecatError as e:
        assert str(e).startswith("u")
        return
    assert size >= 0
    if status == 206:
        assert start < size  # the answer holds the first byte asked for
    else:
        assert start == 0 and size == content_length and size <= end
