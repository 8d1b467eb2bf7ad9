"""``barecat serve``: archives over HTTP for other processes and machines."""

from __future__ import annotations

import argparse
import os

from barecat.cli.parsing import (
    Declared,
    add_address_options,
    add_allowed_host_option,
    add_passphrase_option,
    registering,
    size,
)
from barecat.cli.sealing import passphrase_source

EXAMPLES = """
barecat serve photos.barecat                     # http://127.0.0.1:PORT/a/photos/files/...
barecat serve --port 8000 train.barecat val.barecat
barecat serve --host 0.0.0.0 --writable inbox.barecat    # prints the token to use
python -c "import barecat; print(barecat.connect('http://127.0.0.1:8000/a/train').listdir())"
"""
TOKEN_ENV = "BARECAT_TOKEN"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("archives", nargs="+", help="Archives to serve (each at /a/NAME)")
    add_address_options(parser)
    parser.add_argument(
        "--writable", action="store_true", help="Accept PUT and DELETE (one writer per archive)"
    )
    parser.add_argument(
        "--max-upload", type=size, default=1 << 30, metavar="SIZE", help="Largest PUT body"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="Close a connection whose next request has not arrived in SECONDS (default 10)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="Answer 408 and close when a request body stalls for SECONDS (default 30)",
    )
    add_allowed_host_option(parser)
    add_passphrase_option(parser)


def run_serve(args: argparse.Namespace) -> int:
    # (serving first: without Starlette or uvicorn, it says which extra installs them)
    from barecat.web.server.serving import serve_archives  # noqa: I001
    from barecat.web.asgi_serving import Timeouts
    from barecat.web.server.app import Limits

    def ready(url: str, token: str | None) -> None:
        names = ", ".join(f"{url}a/{name}" for name in _names(args.archives))
        print(f"Serving {names} (Ctrl-C to stop)", flush=True)
        if token and not os.environ.get(TOKEN_ENV):
            print(f"token: {token}", flush=True)

    serve_archives(
        args.archives,
        args.host,
        args.port,
        writable=args.writable,
        token=os.environ.get(TOKEN_ENV) or None,
        passphrase=passphrase_source(args),
        limits=Limits(upload_bytes=args.max_upload),
        timeouts=Timeouts(idle=args.idle_timeout, body=args.body_timeout),
        allowed_hosts=args.allowed_host,
        on_ready=ready,
    )
    return 0


def _names(paths: list[str]) -> list[str]:
    from barecat.web.server.serving import archive_name

    return [archive_name(p) for p in paths]


register = registering(Declared("serve", run_serve, _arguments, EXAMPLES))
