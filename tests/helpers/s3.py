"""A real S3-protocol server (moto's server mode, a separate process on 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REGION = "eu-west-1"  # not us-east-1: creating a bucket there takes no location constraint


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """moto's S3 server as its own process; ``stop`` and ``start`` to test outages.
    ``command`` replaces the program (its arguments ``-H 127.0.0.1 -p PORT`` follow)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = Path(sys.executable).with_name("moto_server")
        command = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
        command = self.command or command
        self.process = subprocess.Popen(
            [*command, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("moto_server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
            self.process = None

    def options(self, attempts: int = 3) -> dict[str, Any]:
        return {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": REGION},
            "config_kwargs": {"retries": {"max_attempts": attempts}},
        }


def upload(fs: Any, local_base: str, url: str) -> None:
    """Put every file of the local archive at ``local_base`` under ``url``'s name."""
    directory, name = os.path.split(local_base)
    for entry in sorted(os.listdir(directory)):
        if entry.startswith(name) and not entry.endswith("-lookup"):
            fs.put_file(os.path.join(directory, entry), url + entry[len(name) :])
    fs.invalidate_cache()


class Bucket:
    """A new, empty bucket of the server, with a filesystem to look at it."""

    def __init__(self, server: S3Server, name: str) -> None:
        import s3fs

        self.name = name
        self.options = server.options()
        self.fs = s3fs.S3FileSystem(**self.options, skip_instance_cache=True)
        self.fs.mkdir(name)

    def url(self, key: str) -> str:
        return f"s3://{self.name}/{key}"

    def objects(self) -> list[str]:
        """The names of every object in the bucket, as the store lists them now."""
        self.fs.invalidate_cache()
        return sorted(p.split("/", 1)[1] for p in self.fs.find(self.name))


def wait_for_objects(options: dict[str, Any], pattern: str, seconds: float = 60) -> None:
    """Return once an object's name matches the glob ``pattern`` (``bucket/...``), looking
    again and again (in a task: another task's upload is the state waited for).

    Raises:
        AssertionError: none after ``seconds``.
    """
    import s3fs

    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fs.invalidate_cache()
        if fs.glob(pattern):
            return
        time.sleep(0.02)
    raise AssertionError(f"nothing matched {pattern}")
