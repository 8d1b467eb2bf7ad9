"""A TCP proxy on 127.0.0.1 that adds a fixed delay to every HTTP request, and counts.

It stands between an HTTP client and a server (moto's S3 server, in the benchmarks) as a
process of its own, so the client's interpreter lock never delays it. The delay rule, per
connection: a chunk the client sends *starts a request* when it is the connection's first
or when the server has answered since the client last sent (an interim ``100 Continue``
does not count as an answer); such a chunk is held ``delay`` seconds before it is passed
on, and what the client sends after it on that connection queues behind it. A request's
body, sent in more chunks, is not held again, and responses are passed on at once. So
each HTTP request on a keep-alive connection costs one ``delay`` more, as a store
``delay`` away would make it; requests on different connections wait side by side. With
``bandwidth``, answers share a link of that many bytes a second (all connections
together, as one machine's network): each chunk waits its turn on it.

Counted: connections accepted; per request its connection, the time its first byte came
(``time.monotonic``, comparable across processes on Linux), its request line, the time
the first byte of its answer came, and the bytes each way (headers included). Bytes are
passed on exactly as they came.

    proxy = SlowProxy("127.0.0.1", 9000, delay=0.020); proxy.start()
    ... requests to proxy.endpoint ...
    mark = proxy.mark(); ...; requests = proxy.requests_since(mark); waves(requests)
    proxy.stop()

Run as a program it is the proxy process (``--target HOST:PORT --delay S``): it prints
``listening PORT`` and answers lines on stdin (``mark``, ``since N``, ``connections``)
with one JSON line each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_REQUEST_LINE = re.compile(rb"[A-Z]{3,10} ")
_CONTINUE = re.compile(rb"HTTP/1\.[01] 100 ")
_CHUNK = 1 << 20


@dataclass(slots=True)
class Request:
    """One HTTP request as the proxy saw it."""

    connection: int
    start: float
    line: str
    answered: float | None = None
    sent: int = 0
    received: int = 0


def waves(requests: list[Request]) -> int:
    """Round trips the requests took: taken in order of arrival, a request starts a new
    wave when it came after the first answer to any request of the current wave (it may
    have waited for that answer); requests sent together make one wave.

    Returns:
        the number of waves (0 for no requests).
    """
    count = 0
    first_answer = float("inf")
    for request in sorted(requests, key=lambda r: r.start):
        if count == 0 or request.start >= first_answer:
            count += 1
            first_answer = float("inf")
        if request.answered is not None:
            first_answer = min(first_answer, request.answered)
    return count


class _Proxy:
    """The proxy's own process: the asyncio server and its records."""

    def __init__(self, host: str, port: int, delay: float, bandwidth: float = 0.0) -> None:
        self.target = (host, port)
        self.delay = delay
        self.bandwidth = bandwidth
        self.link_free_at = 0.0  # when the shared link has sent what it was given
        self.connections = 0
        self.requests: list[Request] = []
        self.serving: set[asyncio.Task[None]] = set()  # (a task nothing refers to is lost)

    async def serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        task = asyncio.current_task()
        if task is not None:
            self.serving.add(task)
            task.add_done_callback(self.serving.discard)
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        current: list[Request] = []  # the connection's request being answered
        answered = [True]  # the server answered since the client last sent

        async def upstream() -> None:
            while chunk := await client_r.read(_CHUNK):
                if answered[0] and _REQUEST_LINE.match(chunk) is not None:
                    answered[0] = False
                    line = chunk.split(b"\r\n", 1)[0].decode("latin-1")
                    request = Request(number, time.monotonic(), line)
                    self.requests.append(request)
                    current[:] = [request]
                    await asyncio.sleep(self.delay)
                if current:
                    current[0].sent += len(chunk)
                server_w.write(chunk)
                await server_w.drain()
            if server_w.can_write_eof():
                server_w.write_eof()

        async def downstream() -> None:
            while chunk := await server_r.read(_CHUNK):
                if current:
                    request = current[0]
                    if request.answered is None:
                        request.answered = time.monotonic()
                    request.received += len(chunk)
                if _CONTINUE.match(chunk) is None:
                    answered[0] = True
                if self.bandwidth:
                    await asyncio.sleep(self.link_time(len(chunk)))
                client_w.write(chunk)
                await client_w.drain()
            client_w.close()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, OSError):
            pass
        finally:
            server_w.close()
            client_w.close()

    def link_time(self, size: int) -> float:
        """Seconds until ``size`` more bytes are through the shared link (``bandwidth``
        bytes a second for all connections together, as one machine's network)."""
        now = time.monotonic()
        self.link_free_at = max(self.link_free_at, now) + size / self.bandwidth
        return self.link_free_at - now

    def answer(self, command: str) -> object:
        word, _, arg = command.partition(" ")
        if word == "mark":
            return len(self.requests)
        if word == "since":
            return [
                [r.connection, r.start, r.line, r.answered, r.sent, r.received]
                for r in self.requests[int(arg) :]
            ]
        if word == "connections":
            return self.connections
        return None


def _control(proxy: _Proxy, loop: asyncio.AbstractEventLoop) -> None:
    """Answer the commands on stdin (in the loop's thread, so records are read whole)."""
    for line in sys.stdin:
        reply = asyncio.run_coroutine_threadsafe(_answer(proxy, line.strip()), loop).result()
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    loop.call_soon_threadsafe(loop.stop)


async def _answer(proxy: _Proxy, command: str) -> object:
    return proxy.answer(command)


def _run(target: str, delay: float, port: int, bandwidth: float) -> None:
    host, _, target_port = target.rpartition(":")
    proxy = _Proxy(host, int(target_port), delay, bandwidth)
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(proxy.serve, "127.0.0.1", port))
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    threading.Thread(target=_control, args=(proxy, loop), daemon=True).start()
    loop.run_forever()
    os._exit(0)  # (open connections end with the process, their tasks unfinished)


class SlowProxy:
    """The proxy process, driven from another process (see the module doc).

    Args:
        host, port: the server the proxy passes requests to.
        delay: seconds each request is held.
        bandwidth: bytes a second the answers of all connections share (0: no limit).
    """

    def __init__(self, host: str, port: int, delay: float = 0.020, bandwidth: float = 0.0) -> None:
        self.target = f"{host}:{port}"
        self.delay = delay
        self.bandwidth = bandwidth
        self.port = 0
        self._process: subprocess.Popen[str] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--target", self.target]
        self._process = subprocess.Popen(
            [*command, "--delay", str(self.delay), "--bandwidth", str(self.bandwidth)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        first = self._process.stdout.readline().split()
        if first[:1] != ["listening"]:
            self.stop()
            raise RuntimeError("the proxy did not start")
        self.port = int(first[1])

    def _ask(self, command: str) -> Any:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        process.stdin.write(command + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    def mark(self) -> int:
        """A mark: the number of requests seen so far."""
        return int(self._ask("mark"))

    def requests_since(self, mark: int = 0) -> list[Request]:
        """The requests seen since ``mark``, in order of arrival."""
        rows = self._ask(f"since {mark}")
        return [Request(*row) for row in rows]

    @property
    def connections(self) -> int:
        """Connections accepted so far."""
        return int(self._ask("connections"))

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def __enter__(self) -> SlowProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", required=True, help="HOST:PORT of the server")
    parser.add_argument("--delay", type=float, default=0.020)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bandwidth", type=float, default=0.0, help="bytes/s, shared (0: any)")
    args = parser.parse_args()
    _run(args.target, args.delay, args.port, args.bandwidth)
