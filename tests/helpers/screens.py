"""What a terminal interface shows, as text: the lines of a Textual app's screen (from its
own SVG screenshot) and of a real terminal (tmux), and display columns within them."""

from __future__ import annotations

import html
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len, get_character_cell_size

import barecat
from helpers import wait_for

_TEXT = re.compile(
    r'<text [^>]*?x="([\d.]+)" [^>]*?clip-path="url\(#[\w-]+-line-(\d+)\)">([^<]*)</text>'
)
_CELL_PX = 12.2  # Rich's SVG export: 20px Fira Code, 0.61em a cell


def screen_lines(app: Any) -> list[str]:
    """The app's screen as it is drawn now, one string per terminal row.

    Read from ``app.export_screenshot()`` (what Textual would save as a screenshot): each
    piece of text is put at the cell its x position says, so a wide (CJK, emoji) character
    takes the two cells it takes on a terminal, and ``column`` finds where things are.
    """
    rows: dict[int, dict[int, str]] = {}
    for x, line, text in _TEXT.findall(app.export_screenshot()):
        cells = rows.setdefault(int(line), {})
        at = round(float(x) / _CELL_PX)
        for char in html.unescape(text).replace("\xa0", " ").replace("\n", ""):
            cells[at] = char
            at += get_character_cell_size(char) or 1
    lines = []
    for y in range(app.size.height):
        cells = rows.get(y, {})
        out, at = [], 0
        for start in sorted(cells):
            if start < at:
                continue
            out.append(" " * (start - at) + cells[start])
            at = start + cell_len(cells[start])
        lines.append("".join(out))
    return lines


def column(line: str, text: str) -> int:
    """The terminal column (in cells, from 0) where ``text`` starts in ``line``."""
    index = line.index(text)
    return cell_len(line[:index])


class Tmux:
    """A command running in a tmux session of its own (a private server socket)."""

    def __init__(self, socket: Path) -> None:
        self.socket = str(socket)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def screen(self) -> str:
        """The pane's visible text now."""
        return self.tmux("capture-pane", "-p", "-t", "tui")

    def wait_for_text(self, *texts: str) -> str:
        """Wait until every one of ``texts`` is on the screen; return the screen."""
        wait_for(lambda: all(t in self.screen() for t in texts), f"{texts!r} on the terminal")
        return self.screen()

    def press(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "tui", *keys)

    def pane(self, variable: str) -> str:
        """One of tmux's variables for the pane (``pane_title``, ``pane_dead``...)."""
        return self.tmux("display-message", "-p", "-t", "tui", f"#{{{variable}}}").strip()

    def wait_exited(self) -> str:
        """Wait until the command has exited (its pane kept: ``keep``); return all it
        showed, the lines scrolled into the pane's history too."""
        wait_for(lambda: self.pane("pane_dead") == "1", "the command to exit")
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", "tui")


@contextmanager
def barecat_in_tmux(
    socket: Path, *args: str, width: int = 100, height: int = 30, keep: bool = False
) -> Iterator[Tmux]:
    """``barecat ARGS`` (this checkout's) on a real ``width`` x ``height`` terminal in tmux;
    skips when tmux is not installed. ``keep``: the pane stays, as the command left it,
    after the command exits (``remain-on-exit``, set before it starts). The session's
    server is killed at the end."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (./run test installs it with apt where it can)")
    src = os.path.dirname(os.path.dirname(os.path.abspath(barecat.__file__)))
    command = [
        "env",
        f"PYTHONPATH={src}",
        "TERM=xterm-256color",
        sys.executable,
        "-m",
        "barecat.cli",
        *args,
    ]
    session = Tmux(socket)
    config = ["-f", str(socket) + ".conf"] if keep else []
    if keep:
        Path(config[1]).write_text("set -g remain-on-exit on\n")
    session.tmux(
        *config, "new-session", "-d", "-s", "tui", "-x", str(width), "-y", str(height),
        shlex.join(command),
    )  # fmt: skip
    try:
        yield session
    finally:
        subprocess.run(["tmux", "-S", session.socket, "kill-server"], capture_output=True)
