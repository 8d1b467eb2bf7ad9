"""Real FUSE mounts: whether this machine can mount, and ``barecat mount -f`` as a process."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import BarecatError
from barecat.mount import check_fuse, is_mounted
from helpers import BARECAT, wait_for

FUSE_PROBLEM: str
"""Why this machine cannot mount ('' when it can); FUSE tests skip with it."""

try:
    check_fuse()
    FUSE_PROBLEM = ""
except BarecatError as e:
    FUSE_PROBLEM = str(e)


def server_log(mountpoint: Path) -> Path:
    """Where ``served`` writes the stderr of the server of ``mountpoint`` (beside it)."""
    return mountpoint.parent / f"{mountpoint.name}.log"


@contextlib.contextmanager
def served(archive: str | Sequence[str], mountpoint: Path, *extra: str,
           env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """``barecat mount -f`` as a process of its own, unmounted (even if dead) at the end
    (``archive``: one path, or several, such as tar files mounted together)."""
    mountpoint.mkdir(exist_ok=True)
    log = server_log(mountpoint)
    archives = [archive] if isinstance(archive, str) else list(archive)
    with open(log, "wb") as errors:
        server = subprocess.Popen(
            [BARECAT, "mount", "-f", *extra, *archives, str(mountpoint)],
            stderr=errors,
            env={**os.environ, **(env or {})},
        )
    try:
        wait_for(lambda: is_mounted(str(mountpoint)) or server.poll() is not None, "the mount")
        if server.poll() is not None:
            pytest.fail(f"the server stopped: {log.read_text()}")
        yield server
    finally:
        if is_mounted(str(mountpoint)):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)
        try:
            server.wait(timeout=30)  # it closes the archive (commits) after the unmount
        except subprocess.TimeoutExpired:
            server.kill()
            raise


def logged_requests(log: Path) -> tuple[list[str], int]:
    """The requests the kernel sent a ``--debug`` server, and how many files the server
    stored in the kernel's cache unasked (libfuse logs each as a notification, code 4)."""
    text = log.read_text()
    return re.findall(r"opcode: ([A-Z]+)", text), text.count("NOTIFY: code=4 ")


def numbered_files(
    archive: str, count: int, folder: str = "d/", **options: str
) -> dict[str, bytes]:
    """Files ``{folder}000.bin``, ... of distinct sizes and random bytes, stored in a new
    archive at ``archive`` (``options`` passed to it); returns them by path."""
    files = {f"{folder}{i:03d}.bin": os.urandom(1500 + 97 * i) for i in range(count)}
    with barecat.Barecat(archive, readonly=False, **options) as bc:  # type: ignore[arg-type]
        bc.add_many(files.items())
    return files
