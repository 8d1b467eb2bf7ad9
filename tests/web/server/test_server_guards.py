"""``barecat serve`` against hostile requests on real sockets on 127.0.0.1: request bodies
bounded while they stream (the server's memory is watched), malformed batch bodies, and
the ``Host`` names a server answers to (DNS rebinding)."""

from __future__ import annotations

import json
import os
import select
import socket
from pathlib import Path

import pytest

import barecat
from helpers.serving import memory_peak, server_process, serving

httpx = pytest.importorskip("httpx", reason="the server extra is not installed")
pytest.importorskip("uvicorn", reason="the server extra is not installed")

MiB = 1 << 20
BATCH_REQUEST_LIMIT = 16 * MiB  # Limits.batch_request_bytes, as documented


@pytest.fixture
def archive(tmp_path: Path) -> str:
    path = str(tmp_path / "data.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc["notes.txt"] = b"hello, world\n"
        bc["a/b.bin"] = bytes(range(256))
    return path


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _until_closed(s: socket.socket) -> bytes:
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got


def _request(url: str, head: str, body: bytes = b"") -> bytes:
    """One raw request (``head``: request line and headers, without the blank line); the
    whole answer, the connection closed by us after it."""
    with socket.create_connection(_address(url), timeout=30) as s:
        s.sendall(f"{head}\r\nConnection: close\r\n\r\n".encode() + body)
        return _until_closed(s)


def _stream_until_answered(s: socket.socket, chunk: bytes, most: int) -> tuple[int, bytes]:
    """Send ``chunk`` again and again (up to ``most`` bytes) until the server answers or
    stops taking them; then read its answer. Returns (bytes sent, the answer)."""
    sent = 0
    try:
        while sent < most and not select.select([s], [], [], 0)[0]:
            s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass  # it closed the connection after answering
    answer = b""
    try:
        while part := s.recv(65536):
            answer += part
    except ConnectionResetError:
        pass
    return sent, answer


def test_a_declared_oversized_batch_body_is_refused_before_it_is_read(archive: str) -> None:
    with server_process(archive) as (proc, url, _):
        before = memory_peak(proc)
        with socket.create_connection(_address(url), timeout=30) as s:
            s.sendall(
                b"POST /a/data/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 400000000\r\n\r\n"
            )
            answer = _until_closed(s)  # answered and closed with none of the body sent
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"connection: close" in answer.lower() and b"16777216 bytes" in answer
        assert memory_peak(proc) - before < 8 * MiB


def test_a_streamed_oversized_batch_body_is_cut_off_and_memory_stays_flat(archive: str) -> None:
    most = 200 * MiB
    with server_process(archive) as (proc, url, _):
        before = memory_peak(proc)
        with socket.create_connection(_address(url), timeout=30) as s:
            s.sendall(  # no length: chunked, so the server learns the size only as it reads
                b"POST /a/data/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            piece = b'["notes.txt", ' * (MiB // 16)
            sent, answer = _stream_until_answered(s, b"%x\r\n%s\r\n" % (len(piece), piece), most)
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert sent < most // 2, f"the server read {sent} bytes of a body over its limit"
        growth = memory_peak(proc) - before
        assert growth < 3 * BATCH_REQUEST_LIMIT, f"the server's memory grew by {growth >> 20} MiB"
        with barecat.connect(url + "/a/data") as remote:  # still serving
            assert remote.get_many(["notes.txt"]) == [b"hello, world\n"]


def test_malformed_batch_bodies_are_400(archive: str) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with serving(archive) as (url, _):
        for body, why in [
            (deep, b"recursion"),  # Python's JSON parser gives up: not a 500
            (b'{"paths": ' + deep + b"}", b"recursion"),
            (b'{"paths": "notes.txt"}', b"list of strings"),
            (b'{"paths": [1, 2]}', b"list of strings"),
            (b"[1]", b"list of strings"),
            (b'{"paths": ["\xff"]}', b"must be JSON"),
            (b"", b"must be JSON"),
        ]:
            answer = httpx.post(f"{url}/a/data/batch", content=body, timeout=30)
            assert answer.status_code == 400, (body[:40], answer.text[:200])
            assert why in answer.content, answer.text[:200]
        good = httpx.post(f"{url}/a/data/batch", json={"paths": ["notes.txt"]}, timeout=30)
        assert good.status_code == 200 and good.content.endswith(b"hello, world\n")


def test_a_big_upload_streams_into_the_archive(archive: str) -> None:
    data = os.urandom(80 * MiB)  # far over the JSON limit: uploads have their own
    with server_process(archive, "--writable") as (proc, url, _):
        before = memory_peak(proc)
        with barecat.connect(url + "/a/data") as remote:
            remote["big.bin"] = data
            growth = memory_peak(proc) - before
            assert remote.stat("big.bin").size == len(data)
            remote["big.bin"] = data[::-1]  # replaced the same way
    assert growth < 40 * MiB, f"the server held {growth >> 20} MiB of an 80 MiB upload"
    with barecat.Barecat(archive) as bc:
        assert bc["big.bin"] == data[::-1]


def test_only_the_served_host_names_are_answered(archive: str) -> None:
    get = "GET /a/data/files/notes.txt HTTP/1.1\r\nHost: {}"
    put = "PUT /a/data/files/planted.txt HTTP/1.1\r\nHost: {}\r\nContent-Length: 6"
    with serving(archive, "--writable") as (url, _):
        port = _address(url)[1]
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.2", "[::1]"):
            answer = _request(url, put.format(host), b"planted")
            assert answer.startswith(b"HTTP/1.1 421 "), (host, answer[:200])
            assert b"--allowed-host" in answer
            assert _request(url, get.format(host)).startswith(b"HTTP/1.1 421 ")
        for host in ("127.0.0.1", f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST."):
            answer = _request(url, get.format(host))
            assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"hello, world\n")
        for i, base in enumerate((url, f"http://localhost:{port}")):
            with barecat.connect(base + "/a/data") as remote:
                remote[f"written{i}.txt"] = b"written"
                assert remote["notes.txt"] == b"hello, world\n"
    with barecat.Barecat(archive) as bc:
        assert "planted.txt" not in bc
        assert bc.get_many(["written0.txt", "written1.txt"]) == [b"written"] * 2


def test_more_host_names_can_be_allowed(archive: str) -> None:
    get = "GET /a/data/stat/notes.txt HTTP/1.1\r\nHost: {}"
    with serving(archive, "--allowed-host", "archive.lan") as (url, _):
        answer = _request(url, get.format("archive.lan:8000"))
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["size"] == 13
        assert _request(url, get.format("other.lan")).startswith(b"HTTP/1.1 421 ")
    with serving(archive, "--allowed-host", "*") as (url, _):
        assert _request(url, get.format("other.lan")).startswith(b"HTTP/1.1 200 ")
