"""What the tests share, in modules by job (fixtures stay in ``tests/conftest.py``).

``pyproject.toml`` puts ``tests/`` on ``sys.path`` (pytest's ``pythonpath``), so a test
imports ``from helpers import Run`` or ``from helpers.trees import make_tree``; no test
imports another test module, nor ``conftest``.

This module: where things are, and the names every kind of test uses.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The repository's root (a str)."""

TESTS = Path(REPO) / "tests"
DATA = TESTS / "data"
"""Checked-in archives of older releases and of the reference (see its README.md)."""

BIN = Path(sys.executable).parent
"""Where this interpreter's console scripts (``barecat``, ``barecat-merge``...) are."""

BARECAT = str(BIN / "barecat")


Run = Callable[..., tuple[int, str, str]]

PASSPHRASE = "sealed test passphrase"
"""The passphrase of the encrypted archives tests make (``pw_file`` holds it)."""


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll until ``condition()`` is true (a state, never a fixed wait); fail naming
    ``what`` after ``timeout`` seconds."""
    import pytest

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def mapped_here(path: str) -> bool:
    """Whether this process has ``path`` memory-mapped (Linux's ``/proc/self/maps``)."""
    with open("/proc/self/maps") as maps:
        return any(line.rstrip().endswith(path) for line in maps)
