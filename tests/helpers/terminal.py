"""Commands run with stderr on a pseudo-terminal, as a person sees them: progress bars
redrawn in place, then the closing summary line."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import tempfile
import termios
from dataclasses import dataclass
from pathlib import Path

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Drawn:
    """What a run drew on the terminal and wrote to stdout."""

    code: int
    raw: str
    """Every byte written to the terminal, escapes and carriage returns included."""
    stdout: str

    @property
    def lines(self) -> list[str]:
        """The lines left on the screen: a line redrawn after a carriage return shows
        only its last drawing (the bar's last frame), escape sequences dropped."""
        shown = []
        for line in _ESCAPE.sub("", self.raw).replace("\r\n", "\n").split("\n"):
            frames = [frame for frame in line.split("\r") if frame.strip()]
            if frames:
                shown.append(frames[-1].rstrip())
        return shown


def on_a_terminal(
    argv: list[str | Path],
    columns: int = 120,
    env: dict[str, str] | None = None,
    stdout_too: bool = False,
) -> Drawn:
    """Run ``argv`` with stderr on a pseudo-terminal of ``columns`` columns (TERM=xterm)
    and stdout in a file (on the terminal too with ``stdout_too``: then ``stdout`` is
    empty and ``lines`` holds both); returns once it has exited and closed the terminal."""
    if stdout_too:
        return Drawn(*_run(argv, columns, env, None), "")
    with tempfile.TemporaryFile() as out:
        code, raw = _run(argv, columns, env, out.fileno())
        out.seek(0)
        return Drawn(code, raw, out.read().decode("utf-8", "replace"))


def _run(
    argv: list[str | Path], columns: int, env: dict[str, str] | None, out: int | None
) -> tuple[int, str]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(
        [str(a) for a in argv],
        stdin=subprocess.DEVNULL,
        stdout=slave if out is None else out,
        stderr=slave,
        env={**os.environ, "TERM": "xterm", "COLUMNS": str(columns), **(env or {})},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")
