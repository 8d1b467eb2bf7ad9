"""Real full disks: a small tmpfs mounted for a test (root only; tests skip elsewhere),
and filling one up to its last byte."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(parent: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``1m``, ``8m``) mounted in ``parent`` for the block, unmounted
    after it (lazily, so a process still using it cannot keep it up)."""
    mnt = parent / f"disk-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with a file (returned: delete it to free them)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        block = b"\0" * 65536
        while True:
            try:
                os.write(fd, block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                if len(block) == 1:
                    break
                block = block[: len(block) // 2]
    finally:
        os.close(fd)
    return filler
