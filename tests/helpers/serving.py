"""``barecat serve`` as a process of its own on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def serving(*argv: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """``barecat serve ARGV`` in a process of its own; yields its base URL and the lines it
    printed first (the address, and a token if it made one)."""
    with server_process(*argv, env=env) as (_, url, lines):
        yield url, lines


@contextlib.contextmanager
def server_process(
    *argv: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """As :func:`serving`, yielding the process too (to kill it); stopped at the end if
    it still runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "barecat.cli", "serve", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    if "http://" not in first:
        proc.kill()
        pytest.fail(f"the server did not start: {first}{proc.stderr.read()}")
    lines = [first]
    if "0.0.0.0" in " ".join(argv):
        lines.append(proc.stdout.readline())
    url = first.split()[1].rsplit("/a/", 1)[0]
    try:
        yield proc, url, lines
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


def memory_peak(proc: subprocess.Popen[str]) -> int:
    """The most resident memory the process has used so far, in bytes (Linux: VmHWM)."""
    with open(f"/proc/{proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")
