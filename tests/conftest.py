"""Shared fixtures: archive factories over real files in a temporary directory.

Shared functions and constants are in the ``helpers`` package (``tests/helpers/``).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import barecat
from barecat.cli import main
from helpers import PASSPHRASE, Run


@pytest.fixture
def archive_path(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(os.fspath(tmp_path), "test.barecat")


@pytest.fixture
def writable(archive_path: str) -> Iterator[barecat.Barecat]:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        yield bc


@pytest.fixture
def make_archive(tmp_path: os.PathLike[str]) -> Callable[..., str]:
    """Build an archive from ``{path: bytes}`` and return its path."""
    counter = iter(range(10**6))

    def build(files: dict[str, bytes], **kwargs: object) -> str:
        path = os.path.join(os.fspath(tmp_path), f"made{next(counter)}.barecat")
        with barecat.Barecat(path, readonly=False, **kwargs) as bc:  # type: ignore[arg-type]
            for p, data in files.items():
                bc[p] = data
        return path

    return build


@pytest.fixture
def pw_file(tmp_path: Path) -> str:
    """A ``--passphrase-file`` holding :data:`PASSPHRASE`."""
    path = tmp_path / "pw.txt"
    path.write_text(PASSPHRASE + "\n")
    return str(path)


@pytest.fixture
def run(capfdbinary: pytest.CaptureFixture[bytes]) -> Run:
    """Run ``barecat ARGV`` in-process; returns (exit code, stdout, stderr)."""

    def call(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        capfdbinary.readouterr()
        old_stdin = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        try:
            code = main(list(argv))
        finally:
            sys.stdin = old_stdin
        out, err = capfdbinary.readouterr()
        return code, out.decode("utf-8", "surrogateescape"), err.decode()

    return call


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop torch's cache of storages received from DataLoader workers while torch is
    whole: left to the interpreter's exit, its entries are freed after the module they
    call into is torn down, and each prints 'Exception ignored in StorageWeakRef.__del__'
    (186 tracebacks after a whole run, when the doc tests import barecat's modules)."""
    reductions = sys.modules.get("torch.multiprocessing.reductions")
    if reductions is not None:
        reductions.shared_cache.clear()
