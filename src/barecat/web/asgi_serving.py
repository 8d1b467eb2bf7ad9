"""What the image viewer and ``barecat serve`` share: the archive's errors as HTTP
statuses (``answered``), and uvicorn serving on a socket bound here, so that port 0 (a
free port) works and the address is known before the first request.

No client can hold a connection open by sending nothing or half a request (``Timeouts``):
a request's head must arrive within ``idle`` seconds of connecting or of the previous
response (uvicorn's keep-alive timer only starts after a response and stops at the first
byte, so a half-open connection or a slowly dripped head would stay forever), and a
request body that stops arriving for ``body`` seconds is answered 408 and its connection
closed; the application sees the client disconnect, so nothing half-received is kept.
Requests are answered only for the host names the server serves (``AllowedHosts``), so a
web page cannot reach it through DNS rebinding. Starlette and uvicorn are optional
extras: this module is imported only by those two."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import math
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)

Handler = Callable[[Request], Awaitable[Response]]


class HTTPError(Exception):
    """An answer with this status and message (as JSON ``{"error": ...}``); ``close``
    ends the connection after it (for a request body left unread)."""

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.headers = {"Connection": "close"} if close else None


def answered(handler: Handler) -> Handler:
    """Turn what a route raises into its HTTP status: 400 for a path that leaves the
    archive, 404 missing (``"type": "not_a_directory"`` when a file stands in the way),
    409 a directory where a file is wanted (or the reverse, or one that exists), 405 a
    read-only archive, 507 a full disk, 500 other archive errors; for damaged bytes the
    JSON says ``"type": "integrity"``, so a client raises what a local read would."""

    @functools.wraps(handler)
    async def call(request: Request) -> Response:
        status, headers = 500, None
        try:
            return await handler(request)
        except HTTPError as e:
            status, message, headers = e.status, str(e), e.headers
        except ClientDisconnect:
            status, message = 400, "the request body did not arrive whole; nothing was kept"
        except InvalidPathBarecatError as e:
            status, message = 400, str(e)
        except (FileNotFoundBarecatError, KeyError) as e:
            if isinstance(e, NotADirectoryBarecatError):  # a lookup through a file
                body = {"error": f"not found: {e}", "type": "not_a_directory"}
                return JSONResponse(body, status_code=404)
            status, message = 404, f"not found: {e}"
        except (IsADirectoryBarecatError, NotADirectoryBarecatError, FileExistsBarecatError) as e:
            status, message = 409, str(e)
        except ReadOnlyBarecatError as e:
            status, message = 405, str(e)
        except NotEnoughSpaceBarecatError as e:  # nothing of the request was kept
            status, message = 507, str(e)
        except BarecatIntegrityError as e:  # damaged bytes: clients raise the same error
            return JSONResponse({"error": str(e), "type": "integrity"}, status_code=500)
        except BarecatError as e:
            message = str(e)
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    return call


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long, in seconds, a client may keep the server waiting (see the module doc)."""

    idle: float = 10.0
    """For a request's head: after connecting, and after each response."""
    body: float = 30.0
    """Between two parts of a request's body."""


DEFAULT_TIMEOUTS = Timeouts()


Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTimeout:
    """ASGI middleware: a request body that stops arriving for ``seconds`` gets 408 with
    ``Connection: close`` (so the server drops the connection), and the application,
    reading on, gets ``http.disconnect``; what it answers to that is not sent."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = timed_out = started = False

        async def timed_receive() -> Message:
            nonlocal body_done, timed_out
            if timed_out:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.seconds)
            except asyncio.TimeoutError:
                timed_out = True
                if not started:
                    await _send_408(send, self.seconds)
                return {"type": "http.disconnect"}
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the 408 (or the app's own start) went out; the connection is going
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, timed_receive, tracked_send)


async def _send_408(send: Send, seconds: float) -> None:
    body = json.dumps({"error": f"no part of the request body came for {seconds:g} s"}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 408, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True, slots=True)
class AllowedHosts:
    """The host names a server answers to, against DNS rebinding: a page from another
    site, its name pointed at this machine's address after it loaded, would otherwise
    read (and on a writable server, write) through the visitor's browser, which sends
    that site's name as ``Host``.

    Allowed: the address the server is bound to; ``localhost`` when that is a loopback
    address; for an address of every interface (``0.0.0.0``, ``::``), any IP address,
    ``localhost`` and this machine's host name; and the ``names`` given (``*``: any).
    Ports are not compared. A request without ``Host`` (HTTP/1.0; browsers always send
    one) is allowed.
    """

    bound: str
    names: tuple[str, ...] = ()

    def allows(self, host: str) -> bool:
        """Whether a request whose ``Host`` header is ``host`` is answered."""
        name = host_name(host)
        bound = host_name(self.bound)
        extra = {host_name(n) for n in self.names}
        if not name or "*" in extra or name in extra or name == bound:
            return True
        if bound in ("0.0.0.0", "::", ""):
            return _is_ip(name) or name in ("localhost", socket.gethostname().lower())
        return name == "localhost" and is_loopback(bound)


def host_name(host: str) -> str:
    """The name in a ``Host`` header (or an address given to listen on), lower case,
    without port, brackets or a final dot."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this machine's loopback."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class HostCheck:
    """ASGI middleware: requests whose ``Host`` the :class:`AllowedHosts` do not allow
    get 421 (Misdirected Request) saying which name to allow, and nothing else runs."""

    def __init__(self, app: Any, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not self.allowed.allows(host):
                name = host_name(host)
                message = (
                    f"this server does not answer to the host name {name!r} (a guard against "
                    f"DNS rebinding); start it with --allowed-host {name} if that name is meant"
                )
                await JSONResponse({"error": message}, status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _protocol_with_head_timeout(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose next request head has not
    arrived ``seconds`` after it was opened or after the last response."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeoutH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _waiting_after: object = None  # the request cycle that was current when waiting began

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._unless_head_came()

        def on_response_complete(self) -> None:
            self._await_head()
            super().on_response_complete()  # (may start a pipelined request at once)
            self._unless_head_came()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._stop_waiting()
            self._waiting_after = self.cycle
            self._head_timer = self.loop.call_later(seconds, self._no_head)

        def _unless_head_came(self) -> None:
            if self._head_timer is not None and self.cycle is not self._waiting_after:
                self._stop_waiting()  # a new request's head was parsed

        def _stop_waiting(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _no_head(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeadTimeoutH11Protocol


def serve_asgi(
    app: Any,
    host: str,
    port: int,
    on_ready: Callable[[str], None] | None = None,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted; ``on_ready(url)`` once listening.
    Clients that stall are cut off after ``timeouts`` (see the module doc); requests
    naming another host than ``host`` (and ``allowed_hosts``) get 421 (see
    :class:`AllowedHosts`).

    Raises:
        BarecatError: the address cannot be listened on.
    """
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
    config = uvicorn.Config(
        HostCheck(BodyTimeout(app, timeouts.body), AllowedHosts(host, tuple(allowed_hosts))),
        log_level="warning",
        access_log=False,
        http=_protocol_with_head_timeout(timeouts.idle),
        timeout_keep_alive=max(1, math.ceil(timeouts.idle)),  # (the head timer is exact)
    )
    server = uvicorn.Server(config)

    def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            threading.Event().wait(0.02)
        if on_ready is not None:
            on_ready(url)

    threading.Thread(target=announce, daemon=True).start()
    server.run(sockets=[sock])


__all__ = [
    "DEFAULT_TIMEOUTS",
    "AllowedHosts",
    "BodyTimeout",
    "HTTPError",
    "HostCheck",
    "Timeouts",
    "answered",
    "host_name",
    "is_loopback",
    "serve_asgi",
]
