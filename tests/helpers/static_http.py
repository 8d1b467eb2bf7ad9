"""A static web server on 127.0.0.1 (as nginx serves a directory), with knobs to make it
misbehave, and a log of what it was asked and answered.

HTTP/1.1 with keep-alive; GET and HEAD; one byte range per request (``bytes=a-b``,
``bytes=a-``, ``bytes=-n``) answered 206 with ``Content-Range``, 416 past the end; a
strong ETag made of the file's size and mtime_ns, and ``If-Match`` answered 412 when it
differs. Knobs: ``ignore_range`` (answer 200 with the whole file), ``fail_next(n,
status)``, ``delay`` (seconds before each answer), ``gather(n)`` (the next ``n``
requests wait until all ``n`` have arrived: proof they were in flight at once),
``ignore_if_match`` (as servers that never check it), ``weak_etags`` (``W/"..."``, as
servers that compress give) and ``stall_next(n)`` (the next ``n`` requests get no answer
until ``release()``).
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_CHUNK = 64 << 10


@dataclass(frozen=True)
class Logged:
    """One request as the server saw and answered it; ``sent`` counts the body bytes
    written to the socket (fewer than the body when the client hung up first)."""

    method: str
    path: str
    range: str | None
    if_match: str | None
    status: int
    sent: int


def etag_of(path: str) -> str:
    """The ETag the server gives the file at ``path`` now."""
    st = os.stat(path)
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


class StaticServer:
    """Serves ``root`` at ``http://127.0.0.1:PORT/``; a context manager (stops cleanly)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.ignore_range = False
        self.ignore_if_match = False
        self.weak_etags = False
        self.delay = 0.0
        self.log: list[Logged] = []
        self._changed = threading.Condition()
        self._failures: list[int] = []
        self._in_flight = 0
        self._stalls = 0
        self._released = threading.Event()
        self._barrier: threading.Barrier | None = None
        self.barrier_broken = False
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> StaticServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def fail_next(self, n: int, status: int = 503) -> None:
        """Answer the next ``n`` requests with ``status`` (and no body)."""
        with self._changed:
            self._failures.extend([status] * n)

    def clear_failures(self) -> None:
        """Forget the failures :meth:`fail_next` still has queued."""
        with self._changed:
            self._failures.clear()

    def stall_next(self, n: int) -> None:
        """Answer nothing to the next ``n`` requests until :meth:`release` (then they
        are dropped unanswered, logged with status 0)."""
        with self._changed:
            self._stalls += n

    def release(self) -> None:
        """Let the stalled requests go."""
        self._released.set()

    def gather(self, n: int, timeout: float = 30) -> None:
        """Hold each of the next ``n`` requests until all ``n`` have arrived; if they
        never do (the client sends them one by one), ``barrier_broken`` is set and they
        are answered 500 after ``timeout`` seconds."""
        self._barrier = threading.Barrier(n, timeout=timeout)
        self._barrier_left = n

    def requests(self, method: str | None = None, path: str | None = None) -> list[Logged]:
        """The requests logged so far, of ``method`` and ``path`` if given, once none is
        being answered (a client has its answer before the server logs it)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._in_flight == 0, 30):
                raise AssertionError("the server is still answering requests")
            return [
                r
                for r in self.log
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    def count(self, method: str | None = None, path: str | None = None) -> int:
        return len(self.requests(method, path))

    def wait_for(self, condition: Callable[[], bool], timeout: float = 30) -> None:
        """Return once ``condition()`` holds (checked after each logged request).

        Raises:
            AssertionError: it does not within ``timeout`` seconds.
        """
        with self._changed:
            if not self._changed.wait_for(condition, timeout):
                raise AssertionError("the server never reached the state waited for")

    # --- called by the handler -----------------------------------------------------------

    def _begin(self) -> None:
        with self._changed:
            self._in_flight += 1

    def _record(self, entry: Logged) -> None:
        with self._changed:
            self._in_flight -= 1
            self.log.append(entry)
            self._changed.notify_all()

    def _stalled(self) -> bool:
        with self._changed:
            if not self._stalls:
                return False
            self._stalls -= 1
        self._released.wait()
        return True

    def _next_failure(self) -> int | None:
        with self._changed:
            return self._failures.pop(0) if self._failures else None

    def _wait_at_barrier(self) -> bool:
        """False when the barrier broke (the requests did not come together)."""
        with self._changed:
            barrier = self._barrier
            if barrier is None:
                return True
            self._barrier_left -= 1
            if self._barrier_left == 0:
                self._barrier = None
        try:
            barrier.wait()
            return True
        except threading.BrokenBarrierError:
            self.barrier_broken = True
            return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # (5 by default: hundreds of connections at once lose SYNs)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (as a reader refusing a body does) is no error; others
        are printed as the standard server does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_state: StaticServer
    timeout = 30  # an idle keep-alive connection's thread ends after this

    def setup(self) -> None:
        super().setup()
        # as nginx's tcp_nodelay: the body does not wait for the ACK of the headers
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        state = self.server_state
        path = unquote(urlsplit(self.path).path)
        wanted = self.headers.get("Range")
        if_match = self.headers.get("If-Match")
        state._begin()
        status, sent = 500, 0
        try:
            if state.delay:
                time.sleep(state.delay)
            if state._stalled():
                self.close_connection = True
                status = 0
                return
            if not state._wait_at_barrier():
                status = self._empty(500)
                return
            failure = state._next_failure()
            if failure is not None:
                status = self._empty(failure)
                return
            status, sent = self._serve(path, wanted, if_match, body)
        finally:
            state._record(Logged(self.command, path, wanted, if_match, status, sent))

    def _empty(self, status: int, headers: dict[str, str] | None = None) -> int:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return status

    def _serve(
        self, path: str, wanted: str | None, if_match: str | None, body: bool
    ) -> tuple[int, int]:
        state = self.server_state
        local = os.path.join(state.root, path.lstrip("/"))
        if ".." in path.split("/") or not os.path.isfile(local):
            return self._empty(404), 0
        with open(local, "rb") as f:
            st = os.fstat(f.fileno())
            etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
            if state.weak_etags:
                etag = "W/" + etag
            headers = {
                "ETag": etag,
                "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
                "Accept-Ranges": "bytes",
            }
            strong = not etag.startswith("W/")  # If-Match compares strongly: W/ never matches
            matches = if_match is None or if_match.strip() == "*" or (strong and if_match == etag)
            if not matches and not state.ignore_if_match:
                return self._empty(412, headers), 0
            start, end, status = 0, st.st_size, 200
            m = _RANGE.match(wanted or "")
            if m and not state.ignore_range and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1))
                    end = min(int(m.group(2)) + 1, st.st_size) if m.group(2) else st.st_size
                else:
                    start = max(st.st_size - int(m.group(2)), 0)
                if start >= st.st_size or end <= start:
                    headers["Content-Range"] = f"bytes */{st.st_size}"
                    return self._empty(416, headers), 0
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{st.st_size}"
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            return status, self._send_body(f, start, end) if body else 0

    def _send_body(self, f: Any, start: int, end: int) -> int:
        sent = 0
        f.seek(start)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < end - start:
                chunk = f.read(min(_CHUNK, end - start - sent))
                self.wfile.write(chunk)
                sent += len(chunk)
        if sent < end - start:
            self.close_connection = True
        return sent


@contextlib.contextmanager
def serving_directory(root: str) -> Iterator[StaticServer]:
    """A :class:`StaticServer` of ``root``, started and stopped around the block."""
    with StaticServer(root) as server:
        yield server
