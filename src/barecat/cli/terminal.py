"""Everything the CLI says to a person: progress bars, human sizes, error lines.

The only place that knows whether stderr is a terminal. Progress bars (tqdm) appear only
there and only for long work; messages are one line, prefixed with the program name, so
scripts can grep them, with the bytes of names that are not UTF-8 and the control
characters a name may hold shown escaped (``\\xff``, ``\\x1b``): a name in a message
never talks to the terminal or breaks the line; an error that lists entries is said in a
line each. Imports only the pure ``barecat.paths`` and ``barecat.exceptions``.
"""

from __future__ import annotations

import io
import math
import os
import re
import select
import sys
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TextIO

from barecat.exceptions import NotStoredBarecatError
from barecat.paths import shown

PROG = "barecat"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""C0 and C1 control characters and DEL: what a terminal acts on instead of showing."""


def error(message: str, *, command: str | None = None, stream: TextIO | None = None) -> None:
    """Print one error line on stderr: ``barecat CMD: message`` (bytes of a name that
    are not UTF-8, and control characters, shown as ``\\xNN``)."""
    prefix = f"{PROG} {command}" if command else PROG
    print(f"{prefix}: {one_line(message)}", file=stream or sys.stderr)


def one_line(message: str) -> str:
    """``message`` as a line any terminal or log shows as it reads: bytes that are not
    UTF-8 and control characters (escape sequences, carriage returns, newlines inside a
    name) as ``\\xNN``."""
    text = shown(message)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def error_lines(exc: BaseException) -> list[str]:
    """The lines an exception is said in: one (:func:`describe`), or for an error that
    lists entries (``NotStoredBarecatError``) its summary and a line per entry."""
    if isinstance(exc, NotStoredBarecatError):
        return [exc.summary, *exc.lines]
    return [describe(exc)]


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """``did you mean 'extract'?`` for a mistyped ``word``: the nearest of ``choices``
    (up to three, by difflib's ratio, leading dashes of options not compared), or None
    if none is near."""
    import difflib  # only for a mistyped word

    bare = {choice.lstrip("-"): choice for choice in choices}
    near = difflib.get_close_matches(word.lstrip("-"), list(bare), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(bare[n]) for n in near)}?" if near else None


def describe(exc: BaseException) -> str:
    """One line for an exception, naming the file when the OS error carries one."""
    if type(exc).__module__ == "barecat.exceptions":
        return str(exc)  # already names the path
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return text or type(exc).__name__


def failure_line(path: str, exc: BaseException) -> str:
    """``PATH: reason`` for one entry a run went on without, naming it once: an error that
    names a file itself (an OS error's file name, a message starting with ``PATH:``) is
    said as it is."""
    text = describe(exc)
    named = isinstance(exc, OSError) and exc.filename is not None and bool(exc.strerror)
    return text if named or text.startswith(f"{path}: ") else f"{path}: {text}"


def write_lines(lines: list[str]) -> None:
    """Write whole lines to stdout, never half a one: a Ctrl-C while a reader leaves a
    pipe full (``| less``) interrupts between lines, so every line out names a path.

    Python's buffer is flushed first; then the lines go out in groups of at most
    ``PIPE_BUF`` bytes, each of which a pipe takes whole or not at all. A longer line is
    written alone (and may be cut).
    """
    try:
        sys.stdout.flush()
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # not a real stream
        sys.stdout.write("".join(lines))
        return
    encoding = sys.stdout.encoding or "utf-8"
    group = bytearray()
    for line in lines:
        data = line.encode(encoding, "surrogateescape")
        if group and len(group) + len(data) > select.PIPE_BUF:
            _write_all(fd, group)
            group.clear()
        group += data
    _write_all(fd, group)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def human_size(n: int) -> str:
    """Sizes as GNU ``du -h`` prints them: powers of 1024, rounded up, one decimal below 10."""
    if n < 1024:
        return str(n)
    value = float(n)
    for unit in "KMGTPE":
        value /= 1024
        if value < 1024 or unit == "E":
            if value < 10:
                rounded = math.ceil(value * 10) / 10
                if rounded < 10:
                    return f"{rounded:.1f}{unit}"
                value = rounded
            whole = math.ceil(value)
            if whole < 1024 or unit == "E":
                return f"{whole}{unit}"
            value = whole
    raise AssertionError("unreachable")


_UNITS = ("kB", "MB", "GB", "TB", "PB", "EB")


def byte_count(n: int) -> str:
    """Bytes for a person, in powers of 1000: ``0 bytes``, ``999 bytes``, ``1.2 kB``,
    ``437 MB``, ``1.2 GB``.

    Args:
        n: a number of bytes (not negative).

    Returns:
        The count with its unit, one decimal below 10 units.
    """
    if n < 1000:
        return f"{n} byte" + ("" if n == 1 else "s")
    value = float(n)
    for unit in _UNITS:
        value /= 1000
        if value < 999.5 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}" if value < 9.95 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # not a real stream, or closed
        return False


def wants_progress(quiet: bool = False) -> bool:
    return not quiet and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


LISTING_INTERVAL = 0.1
"""Seconds between the times lines listed beside a progress bar are printed above it."""


class Progress:
    """A progress bar over files (rate, ETA) that also shows bytes, as the closing summary
    counts them (:func:`byte_count`); silent off a terminal. Its last frame, drawn when it
    closes, shows every file and byte advanced. Lines listed beside it (``-v``) go above
    it on the terminal (:meth:`print_lines`), none of them on the bar's line."""

    def __init__(self, description: str, total_files: int | None, enabled: bool) -> None:
        self.files = 0
        self.bytes = 0
        self._bar: Any = None
        self._above: list[str] | None = None
        """Lines waiting to be printed above the bar, when stdout is the bar's terminal."""
        self._listed_at = 0.0
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total_files, desc=description, unit=" files", dynamic_ncols=True)
            if _is_terminal(sys.stdout) and _is_terminal(sys.stderr):
                self._above = []

    def print_lines(
        self, lines: list[str], write: Callable[[list[str]], None] = write_lines
    ) -> None:
        """Print whole lines (each ending in a newline) on stdout with ``write``.

        When stdout is the terminal the bar is drawn on, the lines go above the bar: they
        are gathered and printed at most every :data:`LISTING_INTERVAL` seconds (and when
        the bar closes), the bar's line cleared first and the bar drawn again below them,
        so that no line starts on the bar's line and the bar is not redrawn per line.
        """
        if self._above is None:
            write(lines)
            return
        self._above += lines
        now = time.monotonic()
        if now - self._listed_at >= LISTING_INTERVAL:
            self._listed_at = now
            self._print_above()

    def _print_above(self) -> None:
        lines, self._above = self._above, []
        if lines:
            self._bar.clear()
            sys.stderr.flush()
            write_lines(lines)
            self._bar.refresh()

    def advance(self, files: int, nbytes: int) -> None:
        self.files += files
        self.bytes += nbytes
        if self._bar is not None:
            self._bar.set_postfix_str(byte_count(self.bytes), refresh=False)
            self._bar.update(files)

    def close(self) -> None:
        if self._bar is not None:
            if self._above:
                self._print_above()
            self._bar.close()
            self._bar = None
            self._above = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
