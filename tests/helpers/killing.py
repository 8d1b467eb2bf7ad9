"""The kill -9 harness: a real ``barecat`` process on a real archive, SIGKILLed once it
reaches a chosen state, and the checks every command must pass afterwards.

States are observed, never guessed from the clock: lines the child printed (``create -v``
lists files once committed), a file that appeared or grew to a size, a file the command
changed (a shard a defrag reached). The watcher polls for the state, kills at once, and
says whether the kill cut the run short or came after it ended.

After a kill, :func:`check_after_kill`: the archive opens (or the target is absent, for
commands that build under a temporary name), ``barecat repair`` and then ``barecat
verify`` pass, and every file committed before the kill is there byte for byte;
:func:`finish` re-runs (or resumes) the command and checks the whole expected content.
:func:`start_with_one_page_stdout` holds a command at its next page of output, so that a
signal sent meanwhile (a Ctrl-C) lands in the middle of its run; commands meant to be
interrupted start under :func:`children_take_ctrl_c`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import barecat
from barecat.cli import main
from barecat.layout import archive_exists

STATE_TIMEOUT = 60.0
"""Seconds a child may take to reach its state (a busy machine; normally well under 1)."""


def barecat_with(prelude: str) -> list[str]:
    """The ``barecat`` command run by this interpreter after ``prelude`` (Python code, say
    smaller rounds for a defrag, so that a small archive gives many moments to die in)."""
    code = f"import sys\n{prelude}\nfrom barecat.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code]


@dataclass
class Child:
    """A running command; a thread collects what it prints on stdout, line by line."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))


State = Callable[[Child], bool]


def printed(n: int) -> State:
    """The child printed at least ``n`` lines."""
    return lambda child: len(child.lines) >= n


def appeared(path: str | Callable[[Child], str]) -> State:
    """``path`` exists (a callable gets the child, for names made of its process id)."""
    return grown(path, 0)


def grown(path: str | Callable[[Child], str], size: int) -> State:
    """``path`` exists and holds at least ``size`` bytes."""

    def reached(child: Child) -> bool:
        where = path(child) if callable(path) else path
        try:
            return os.path.getsize(where) >= size
        except FileNotFoundError:
            return False

    return reached


def committed_files(path: str, n: int) -> State:
    """A reader of the archive ``path`` sees at least ``n`` files (committed ones)."""

    def reached(child: Child) -> bool:
        try:
            with barecat.Barecat(path) as reader:
                return len(reader) >= n
        except barecat.BarecatError:  # (not made yet, or locked a moment)
            return False

    return reached


def changed(path: str) -> State:
    """``path`` was written to, renamed over, cut or deleted since the state was made."""
    before = _signature(path)
    return lambda child: _signature(path) != before


def _signature(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class Killed:
    """What a killed run left: its output, and whether the kill cut it short."""

    lines: list[str]
    cut_short: bool


def start(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Child:
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=None if env is None else {**os.environ, **env},
        start_new_session=True,  # its own process group, to clean up what outlives it
    )
    child = Child(proc)
    child.reader = threading.Thread(target=child._collect, daemon=True)
    child.reader.start()
    return child


def reach(child: Child, state: State) -> None:
    """Wait until ``child`` reaches ``state`` (polled every millisecond) or ends."""
    deadline = time.monotonic() + STATE_TIMEOUT
    while not state(child) and child.proc.poll() is None:
        if time.monotonic() > deadline:
            child.proc.kill()
            child.proc.wait()
            raise AssertionError(f"{child.proc.args!r} never reached its state")
        time.sleep(0.001)


def kill_when(child: Child, state: State) -> Killed:
    """SIGKILL ``child`` as soon as ``state`` holds (polled every millisecond)."""
    reach(child, state)
    if child.proc.poll() is None:
        child.proc.send_signal(signal.SIGKILL)
    code = child.proc.wait()
    assert child.reader is not None
    child.reader.join(STATE_TIMEOUT)  # every line read: no process of the run is left
    if child.reader.is_alive():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # (only the test's own leftovers)
        raise AssertionError("processes of the killed run outlived it, holding its stdout")
    assert child.proc.stdout is not None
    child.proc.stdout.close()
    assert code in (0, -signal.SIGKILL), f"{child.proc.args!r} failed with {code}"
    return Killed(list(child.lines), code == -signal.SIGKILL)


def kill_at(argv: Sequence[str], state: State, env: Mapping[str, str] | None = None) -> Killed:
    """Start ``argv`` and SIGKILL it once it reaches ``state``."""
    return kill_when(start(argv, env), state)


@contextlib.contextmanager
def environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """``env`` set in this process for in-process commands (a passphrase, say)."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def barecat_cli(*argv: str, env: Mapping[str, str] | None = None) -> int:
    """``barecat ARGV`` in this process (quiet); its exit code."""
    with environment(env):
        return main(list(argv))


def contents(path: str, passphrase: str | None = None) -> dict[str, bytes]:
    with barecat.Barecat(path, passphrase=passphrase) as bc:
        return dict(bc.items())


def check_after_kill(
    path: str,
    committed: Mapping[str, bytes],
    *,
    absent_ok: bool = False,
    env: Mapping[str, str] | None = None,
) -> dict[str, bytes] | None:
    """The checks after every kill; returns what the archive holds (None: absent).

    The archive opens read-only (which rolls back a crashed writer's journal),
    ``barecat repair`` then ``barecat verify`` pass, repair kept every file, and each
    of ``committed`` is there with its bytes. With ``absent_ok`` the target may also not
    exist at all (commands that build under a temporary name and rename at the end).
    """
    if not archive_exists(path):
        assert absent_ok, f"{path} is gone after the kill"
        return None
    passphrase = (env or {}).get("BARECAT_PASSPHRASE")
    before = contents(path, passphrase)
    assert barecat_cli("repair", "-q", path, env=env) == 0
    assert barecat_cli("verify", "-q", path, env=env) == 0
    after = contents(path, passphrase)
    assert after == before, "repair must keep every file"
    missing = [p for p in committed if p not in after]
    assert not missing, f"committed files lost: {missing[:5]}"
    assert all(after[p] == data for p, data in committed.items()), "committed bytes changed"
    return after


def finish(
    argv: Sequence[str],
    path: str,
    expected: Mapping[str, bytes],
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``argv`` (the same command again, or its ``--resume``) to the end: it succeeds,
    the archive verifies and holds exactly ``expected``."""
    env = None if env is None else {**os.environ, **env}
    done = subprocess.run(list(argv), capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert barecat_cli("verify", "-q", path, env=env) == 0
    assert contents(path, (env or {}).get("BARECAT_PASSPHRASE")) == dict(expected)


def numbered_file(i: int) -> tuple[str, bytes]:
    """File ``i`` of a writer that writes files one by one: its path and contents."""
    return f"d{i % 5}/f{i:05d}", bytes([i % 251]) * (100 + i * 37 % 5000)


def hidden_leftovers(folder: str) -> list[str]:
    """Names in ``folder`` that start with a dot: temporary builds left behind."""
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


@contextlib.contextmanager
def children_take_ctrl_c() -> Iterator[None]:
    """Processes started inside this block take SIGINT as Ctrl-C, even where the tests run
    with SIGINT ignored (a background job of a shell) or blocked, either of which a child
    would inherit (a handler, unlike those, is reset to the default at exec)."""
    default = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, default)


def start_with_one_page_stdout(
    argv: list[str | Path], **options: Any
) -> tuple[subprocess.Popen[bytes], BinaryIO]:
    """Start ``argv`` with stdout a pipe of one page (4 KiB), returning the process and
    the pipe's unbuffered reading end: once the test stops reading, the command blocks at
    its next page of output, so one that prints more cannot finish meanwhile."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    try:
        proc = subprocess.Popen(argv, stdout=write_end, **options)
    finally:
        os.close(write_end)
    return proc, os.fdopen(read_end, "rb", buffering=0)
