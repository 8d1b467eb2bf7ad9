"""Serving the viewer: uvicorn on a loopback port, and a browser opened on it when there
is one to open (else the address is printed by the caller).

Starlette, uvicorn and Pillow are the ``viewer`` extra; ``barecat view`` names what is
missing.
"""

from __future__ import annotations

import webbrowser
from collections.abc import Callable, Sequence

from barecat.archive.readable import ReadableArchive
from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing(
    "The image viewer needs Starlette and uvicorn", "viewer"
):
    import uvicorn  # noqa: F401 (serve_asgi's, imported there on use: named here if missing)

    from barecat.web.asgi_serving import serve_asgi


def serve_viewer(
    bc: ReadableArchive,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    open_browser: bool = True,
    on_ready: Callable[[str], None] | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve ``bc``'s viewer until interrupted (Ctrl-C). ``port`` 0 takes a free one;
    ``on_ready(url)`` is called once it listens. Requests for other host names than
    ``host`` and ``allowed_hosts`` get 421 (see
    :class:`~barecat.web.asgi_serving.AllowedHosts`)."""
    from barecat.web.viewer.app import create_app

    def ready(url: str) -> None:
        if on_ready is not None:
            on_ready(url)
        if open_browser:
            _open_browser(url)

    serve_asgi(create_app(bc), host, port, ready, allowed_hosts=allowed_hosts)


def _open_browser(url: str) -> None:
    try:
        webbrowser.get()
    except webbrowser.Error:  # no browser here: the printed address is the way in
        return
    webbrowser.open(url)


__all__ = ["serve_viewer"]
