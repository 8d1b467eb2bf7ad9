"""What the image viewer and ``barecat serve`` share: the archive's errors as HTTP
statuses (``answered``), and uvicorn serving on a socket bound here, so that port 0 (a
free port) works and the address is known before the first request. Starlette and
uvicorn are optional extras: this module is imported only by those two."""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from barecat.exceptions import (
    BarecatError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    ReadOnlyBarecatError,
)

Handler = Callable[[Request], Awaitable[Response]]


class HTTPError(Exception):
    """An answer with this status and message (as JSON ``{"error": ...}``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def answered(handler: Handler) -> Handler:
    """Turn what a route raises into its HTTP status: 400 for a path that leaves the
    archive, 404 missing, 409 a directory where a file is wanted (or the reverse, or one
    that exists), 405 a read-only archive, 500 other archive errors (damaged bytes)."""

    @functools.wraps(handler)
    async def call(request: Request) -> Response:
        status = 500
        try:
            return await handler(request)
        except HTTPError as e:
            status, message = e.status, str(e)
        except InvalidPathBarecatError as e:
            status, message = 400, str(e)
        except (FileNotFoundBarecatError, KeyError) as e:
            status, message = 404, f"not found: {e}"
        except (IsADirectoryBarecatError, NotADirectoryBarecatError, FileExistsBarecatError) as e:
            status, message = 409, str(e)
        except ReadOnlyBarecatError as e:
            status, message = 405, str(e)
        except BarecatError as e:
            message = str(e)
        return JSONResponse({"error": message}, status_code=status)

    return call


def serve_asgi(
    app: Any, host: str, port: int, on_ready: Callable[[str], None] | None = None
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted; ``on_ready(url)`` once listening."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: without, a response written as headers then body
    # waits out the client's delayed ACK (about 40 ms a request)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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


__all__ = ["HTTPError", "answered", "serve_asgi"]
