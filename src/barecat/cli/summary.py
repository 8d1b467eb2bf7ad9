"""The one line every long command ends with: what it did, how much, how long, what it left out.

``extracted 12,345 files, 1.2 GB into out in 3.4 s (skipped 2: 1 permission denied,
1 link outside)``: on stderr, after the progress bar and after the lines naming each
entry left out, so stdout keeps only data (listings, ``-v`` names, ``--stdout`` streams).
Like the progress bars it is for a person: written when stderr is a terminal, so a
script's stderr holds only errors; ``-q`` leaves it out there too. Bytes are counted in
decimal units here and on the progress bars (``terminal.byte_count``), so the bar's last
frame and this line show the same totals.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

from barecat.cli.terminal import byte_count
from barecat.exceptions import BarecatIntegrityError, InvalidPathBarecatError


def duration(seconds: float) -> str:
    """``0.4 s``, ``12.3 s``, ``2 min 05 s``, ``1 h 02 min``."""
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def failure_reason(exc: BaseException) -> str:
    """A short reason for an entry left out because of ``exc``, to count alike failures
    under one name: the OS's words (``permission denied``), ``damaged`` or ``invalid path``.
    """
    if isinstance(exc, BarecatIntegrityError):
        return "damaged"
    if isinstance(exc, InvalidPathBarecatError):
        return "invalid path"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return "error"


def reason_kind(reason: str) -> str:
    """The kind of a reason given in words (``a device: an archive of bytes cannot hold
    it`` -> ``a device``): its text up to the first ':', ',' or '('."""
    end = len(reason)
    for mark in (":", ",", "("):
        at = reason.find(mark)
        if at > 0:
            end = min(end, at)
    return reason[:end].strip() or reason


class Summary:
    """The closing line of one run of a command; started when the command starts.

    Args:
        verb: what the command did, in the past tense (``extracted``).
        quiet: say nothing (``-q``).
        stream: where the line goes (default: stderr); nothing is said unless it is a
            terminal.
    """

    def __init__(self, verb: str, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.verb = verb
        self.quiet = quiet
        self.stream = stream
        self.started = time.monotonic()
        self.skipped: Counter[str] = Counter()

    def skip(self, reason: str, count: int = 1) -> None:
        """Count ``count`` entries left out for ``reason`` (a short phrase)."""
        if count:
            self.skipped[reason] += count

    def line(self, files: int, nbytes: int, where: str = "") -> str:
        """The summary: ``VERB N files, SIZE[ WHERE] in TIME[ (skipped ...)]``.

        Args:
            files: files the command handled.
            nbytes: their bytes.
            where: what goes before the time (``into out``).

        Returns:
            The line, without a newline.
        """
        text = f"{self.verb} {files:,} file{'' if files == 1 else 's'}, {byte_count(nbytes)}"
        if where:
            text += f" {where}"
        text += f" in {duration(time.monotonic() - self.started)}"
        if self.skipped:
            reasons = ", ".join(f"{n:,} {why}" for why, n in self.skipped.most_common())
            text += f" (skipped {sum(self.skipped.values()):,}: {reasons})"
        return text

    def finish(self, files: int, nbytes: int, where: str = "") -> None:
        """Print the line on a terminal (unless quiet); see :meth:`line`."""
        stream = self.stream or sys.stderr
        if not self.quiet and stream.isatty():
            print(self.line(files, nbytes, where), file=stream, flush=True)


def timed(sentence: str, started: float, stream: TextIO | None = None) -> str:
    """A result sentence that a command prints on stdout (``Verified 12 files (3MB), all
    checksums OK.``, as barecat 0.3.1 words it) with `` in TIME`` before its full stop when
    ``stream`` (default: stdout) is a terminal: a person sees how long it took, a script
    reads the sentence it always read.

    Args:
        sentence: the line, ending in ``.``.
        started: ``time.monotonic()`` when the command started.
        stream: where the line goes.

    Returns:
        The line to print.
    """
    if not (stream or sys.stdout).isatty():
        return sentence
    took = f" in {duration(time.monotonic() - started)}"
    return sentence[:-1] + took + "." if sentence.endswith(".") else sentence + took
