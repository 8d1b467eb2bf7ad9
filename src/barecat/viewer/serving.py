"""Serving the viewer: uvicorn on a loopback port, and a browser opened on it when there
is one to open (else the address is printed by the caller).

Starlette, uvicorn and Pillow are the ``viewer`` extra, imported when a viewer starts.
"""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable

from barecat.archive import Barecat
from barecat.exceptions import BarecatError


def serve_viewer(
    bc: Barecat,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    open_browser: bool = True,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``bc``'s viewer until interrupted (Ctrl-C). ``port`` 0 takes a free one;
    ``on_ready(url)`` is called once it listens."""
    try:
        import uvicorn

        from barecat.viewer.app import create_app
    except ModuleNotFoundError as e:
        raise BarecatError(f"The image viewer needs {e.name}: pip install 'barecat[viewer]'") from e
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        raise BarecatError(f"cannot listen on {host}:{port}: {e.strerror}") from e
    bound = sock.getsockname()[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"
    config = uvicorn.Config(create_app(bc), log_level="warning", access_log=False)
    server = uvicorn.Server(config)

    def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            threading.Event().wait(0.02)
        if on_ready is not None:
            on_ready(url)
        if open_browser:
            _open_browser(url)

    threading.Thread(target=announce, daemon=True).start()
    server.run(sockets=[sock])


def _open_browser(url: str) -> None:
    try:
        webbrowser.get()
    except webbrowser.Error:  # no browser here: the printed address is the way in
        return
    webbrowser.open(url)


__all__ = ["serve_viewer"]
