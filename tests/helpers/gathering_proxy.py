"""A TCP proxy on 127.0.0.1 in front of another server (moto's S3 server), which can hold
the next ``n`` connections until all ``n`` are open: proof that a client had that many
requests in flight at once (a client that keeps fewer connections never gets there)."""

from __future__ import annotations

import contextlib
import socket
import threading


class GatheringProxy:
    """Forwards ``http://127.0.0.1:PORT`` (``endpoint``) to ``upstream_port``; a context
    manager."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._barrier: threading.Barrier | None = None
        self._left = 0
        self.barrier_broken = False
        self.connections = 0
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> GatheringProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()
        self._thread.join(timeout=10)

    def gather(self, n: int, timeout: float) -> None:
        """Hold each of the next ``n`` connections until all ``n`` are open; if they never
        are, ``barrier_broken`` is set after ``timeout`` seconds and they go on."""
        with self._lock:
            self._barrier = threading.Barrier(n, timeout=timeout)
            self._left = n

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the proxy stops
                return
            with self._lock:
                self.connections += 1
                self._sockets.append(client)
                barrier = self._barrier
                if barrier is not None:
                    self._left -= 1
                    if self._left == 0:
                        self._barrier = None
            threading.Thread(target=self._serve, args=(client, barrier), daemon=True).start()

    def _serve(self, client: socket.socket, barrier: threading.Barrier | None) -> None:
        if barrier is not None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                self.barrier_broken = True
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets.append(upstream)
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until ``source`` ends, then end ``sink``'s sending."""
    with contextlib.suppress(OSError):
        while data := source.recv(1 << 16):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
