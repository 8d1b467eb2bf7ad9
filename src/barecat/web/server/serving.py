"""Running ``barecat serve``: archives opened for serving, a token when the server is
reachable from other machines, uvicorn on the chosen address."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence

from barecat.archive import Barecat, Passphrase
from barecat.exceptions import BarecatError, MissingDependencyBarecatError
from barecat.layout import base_path

with MissingDependencyBarecatError.when_missing(
    "Serving archives needs Starlette and uvicorn", "server"
):
    import uvicorn  # noqa: F401 (serve_asgi's, imported there on use: named here if missing)

    from barecat.web.asgi_serving import DEFAULT_TIMEOUTS, Timeouts, is_loopback, serve_asgi
    from barecat.web.server.app import DEFAULT_LIMITS, Limits, create_app


def archive_name(path: str) -> str:
    name = os.path.basename(base_path(path).rstrip("/"))
    return name[: -len(".barecat")] if name.endswith(".barecat") else name


def serve_archives(
    paths: Sequence[str],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    writable: bool = False,
    token: str | None = None,
    passphrase: Passphrase | None = None,
    limits: Limits = DEFAULT_LIMITS,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    allowed_hosts: Sequence[str] = (),
    on_ready: Callable[[str, str | None], None] | None = None,
) -> None:
    """Serve the archives at ``paths`` until interrupted. Off loopback a token is required:
    given, or drawn here and passed to ``on_ready(url, token)``. Clients that stall (no
    request head, or a body that stops coming) are cut off after ``timeouts``; requests
    naming a host other than ``host`` and ``allowed_hosts`` are refused with 421
    (:class:`~barecat.web.asgi_serving.AllowedHosts`)."""
    if not is_loopback(host) and token is None:
        token = secrets.token_urlsafe(24)
    archives: dict[str, Barecat] = {}
    try:
        for path in paths:
            name = archive_name(path)
            if name in archives:
                raise BarecatError(f"two archives are named {name!r}; serve them separately")
            archives[name] = Barecat(
                path, readonly=not writable, threadsafe=True, passphrase=passphrase
            )
        app = create_app(archives, token, limits)
        serve_asgi(
            app,
            host,
            port,
            lambda url: on_ready(url, token) if on_ready else None,
            timeouts,
            allowed_hosts,
        )
    finally:
        for bc in archives.values():
            bc.close()


__all__ = ["archive_name", "is_loopback", "serve_archives"]
