"""Serving an ASGI application with uvicorn on a socket bound here, so that port 0 (a
free port) works and the address is known before the first request: for the image viewer
and ``barecat serve``. uvicorn is imported when a server starts (an optional extra)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from barecat.exceptions import BarecatError


def serve_asgi(
    app: Any, host: str, port: int, on_ready: Callable[[str], None] | None = None
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted; ``on_ready(url)`` once listening."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise BarecatError(f"cannot listen on {host}:{port}: {e.strerror}") from e
    bound = sock.getsockname()[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))

    def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            threading.Event().wait(0.02)
        if on_ready is not None:
            on_ready(url)

    threading.Thread(target=announce, daemon=True).start()
    server.run(sockets=[sock])


__all__ = ["serve_asgi"]
