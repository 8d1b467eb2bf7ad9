"""A running ``barecat view`` for the viewer's tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest


def start_viewer(archive: str) -> Iterator[str]:
    """``barecat view --no-browser ARCHIVE`` in a process; yields its URL, then stops it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "barecat.cli", "view", "--no-browser", archive],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()  # "Serving ... at http://127.0.0.1:PORT/ ..."
    if "http://" not in line:
        proc.kill()
        pytest.fail(f"the viewer did not start: {line} {proc.stderr.read()}")
    try:
        yield line.split(" at ")[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
