"""The benchmarks' delaying proxy (benchmarks/slow_proxy.py) and moto reading only the
asked range (benchmarks/moto_ranged.py): bytes pass exactly, each request waits the delay
once, requests and connections are counted, and round trips are told apart."""

from __future__ import annotations

import http.client
import http.server
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from slow_proxy import Request, SlowProxy, waves  # noqa: E402

DELAY = 0.2


class _Echo(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive: GET answers the path's bytes, POST echoes its body."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer(self.path.encode() * 1000)

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers["Content-Length"])))

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_each_request_of_a_keep_alive_connection_waits_once_and_bytes_pass_exactly(
    echo_port: int,
) -> None:
    body = os.urandom(3 << 20)  # sent in many chunks: one request, held once
    with SlowProxy("127.0.0.1", echo_port, delay=DELAY) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port)
        try:
            answers = []
            for method, path, data in [
                ("GET", "/a", None),
                ("POST", "/b", body),
                ("GET", "/c", None),
            ]:
                start = time.monotonic()
                connection.request(method, path, body=data)
                answers.append(connection.getresponse().read())
                assert time.monotonic() - start >= DELAY
        finally:
            connection.close()
        seen = proxy.requests_since(0)
        assert proxy.connections == 1
    assert answers == [b"/a" * 1000, body, b"/c" * 1000]
    assert [r.line for r in seen] == ["GET /a HTTP/1.1", "POST /b HTTP/1.1", "GET /c HTTP/1.1"]
    assert all(r.connection == 1 and r.answered is not None for r in seen)
    assert seen[1].sent > len(body) and seen[1].received > len(body)
    assert all(r.answered is not None and r.answered - r.start >= DELAY for r in seen)


def test_answers_share_the_link_at_its_bandwidth_and_pass_exactly(echo_port: int) -> None:
    body = os.urandom(1 << 20)
    rate = 4 << 20  # bytes a second: the answer takes at least a quarter of a second
    with SlowProxy("127.0.0.1", echo_port, delay=0.0, bandwidth=rate) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port)
        try:
            start = time.monotonic()
            connection.request("POST", "/big", body=body)
            answer = connection.getresponse().read()
            took = time.monotonic() - start
        finally:
            connection.close()
    assert answer == body
    assert took >= len(body) / rate  # (a lower bound: never met by a faster machine)


def test_a_mark_counts_from_there(echo_port: int) -> None:
    with SlowProxy("127.0.0.1", echo_port, delay=0.0) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port)
        try:
            connection.request("GET", "/x")
            connection.getresponse().read()
            mark = proxy.mark()
            connection.request("GET", "/y")
            connection.getresponse().read()
        finally:
            connection.close()
        assert [r.line for r in proxy.requests_since(mark)] == ["GET /y HTTP/1.1"]


def test_waves_count_requests_sent_together_once() -> None:
    def at(start: float, answered: float) -> Request:
        return Request(1, start, "GET / HTTP/1.1", answered)

    together = [at(0.0, 1.0), at(0.1, 1.1), at(0.2, 1.0)]
    after = [at(1.05, 2.0), at(1.3, 2.1), at(2.5, 3.0)]  # each waited for an answer
    assert waves([]) == 0
    assert waves(together) == 1
    assert waves(together + after) == 3


def test_moto_ranged_answers_ranges_and_whole_objects_exactly() -> None:
    from helpers.s3 import Bucket, S3Server

    server = S3Server([sys.executable, str(BENCHMARKS / "moto_ranged.py")])
    server.start()
    try:
        bucket = Bucket(server, "ranged")
        data = os.urandom(200_000)
        bucket.fs.pipe_file("ranged/o", data)
        with SlowProxy("127.0.0.1", server.port, delay=0.0) as proxy:
            import s3fs

            fs = s3fs.S3FileSystem(
                **{**server.options(), "endpoint_url": proxy.endpoint}, skip_instance_cache=True
            )
            assert fs.cat_file("ranged/o", start=1000, end=1100) == data[1000:1100]
            assert fs.cat_file("ranged/o", start=199_990) == data[199_990:]
            assert fs.cat_file("ranged/o") == data
            ranged = proxy.requests_since(0)[:2]
            assert [r.line.split()[0] for r in ranged] == ["GET", "GET"]
    finally:
        server.stop()
