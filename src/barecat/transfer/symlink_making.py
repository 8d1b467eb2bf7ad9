"""Symbolic links made at the end of an extraction, none leading outside its target.

Owns the rule that a run's links are judged together before any is made: where each
leads is walked as the kernel would walk it (:mod:`barecat.transfer.link_walk`), through
the links on disk and all those the run makes, and one leading outside the target is
left out (recorded in its writer's result) unless the writer allows it. Works for the
writers of :mod:`barecat.transfer.extraction`; never prints.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Sequence
from typing import Protocol

from barecat.archive.readable import ReadableArchive
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.transfer.link_walk import LinkWalk, loop_error


class LinkResult(Protocol):
    """Where a writer records its links (``extraction.ExtractResult`` is one)."""

    links: int
    """Links made."""
    failures: list[tuple[str, Exception]]
    """Entries not written: (path in the archive, reason)."""
    outside_links: list[tuple[str, str]]
    """Links not made because they lead outside: (path in the archive, target)."""


class LinkWriter(Protocol):
    """What the links ask of their writer (``extraction.DirectoryWriter`` is one; it
    imports this module, so this one names only what it uses)."""

    root: str
    """The directory written below."""
    allow_outside_links: bool
    """Whether links leading outside ``root`` are made too."""
    safe_dirs: set[str]
    """Real directories below ``root`` made or checked by the writer."""

    @property
    def bc(self) -> ReadableArchive:
        """The archive the links' targets are read from."""
        ...

    @property
    def result(self) -> LinkResult:
        """What was written and what was not."""
        ...

    def ensure_dir(self, dest: str) -> None:
        """Make ``dest`` a real directory chain below the root."""
        ...

    def restated(self, path: str, error: Exception) -> Exception:
        """``error`` named by the entry's archive path."""
        ...

    def make_link(self, f: BarecatFileInfo, dest: str, target: str, replace: bool) -> bool:
        """Make one symbolic link; a failure is recorded (False)."""
        ...


LinkJob = tuple[LinkWriter, BarecatFileInfo, str]
"""A link to make: the writer (its archive and root), the link's entry, its destination."""


def make_links(jobs: Sequence[LinkJob], on_made: Callable[[int], None] | None = None) -> None:
    """Make symbolic links, after everything else a run writes below one root, none of
    them leading outside it (unless its writer allows that): where each leads is walked
    as the kernel would walk it, through the links on disk and all of ``jobs`` at once
    (:mod:`barecat.transfer.link_walk`), before any is made. A link not made is recorded
    in its writer's result: in ``outside_links`` if it leads outside, else as a failure
    (a loop of links, its target unreadable, a directory in the way). If making one
    failed, the links made are walked again over the disk as it is, and any leading
    outside is removed. ``on_made`` gets the index in ``jobs`` of each link left made.
    """
    if not jobs:
        return
    root = jobs[0][0].root
    targets: dict[int, str] = {}
    there: set[int] = set()
    for k, (writer, f, dest) in enumerate(jobs):
        assert writer.root == root
        try:
            writer.ensure_dir(os.path.dirname(dest))  # first: no directory replaces a link later
            if _there(dest):
                there.add(k)
            targets[k] = os.fsdecode(writer.bc.read(f))
        except (OSError, BarecatError) as e:
            writer.result.failures.append((f.path, writer.restated(f.path, e)))
    writers = {id(w): w for w, _, _ in jobs}.values()
    real = set().union(*(w.safe_dirs for w in writers))
    walk = LinkWalk(root, {jobs[k][2]: target for k, target in targets.items()}, real)
    made: list[int] = []
    failed = False
    for k, target in targets.items():
        writer, f, dest = jobs[k]
        if writer.allow_outside_links or _leads_inside(walk, writer, f, dest, target):
            if writer.make_link(f, dest, target, k in there):
                made.append(k)
            else:
                failed = True
    if failed:  # the disk is not what the walks took it for: walked again as it is
        _unmake_outward(jobs, targets, made)
    if on_made is not None:
        for k in made:
            on_made(k)


def _there(dest: str) -> bool:
    """Whether something is at ``dest`` for a link to replace.

    Raises:
        IsADirectoryError: a directory is in the way (not replaced).
    """
    try:
        mode = os.lstat(dest).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "a directory is in the way", dest)
    return True


def _leads_inside(
    walk: LinkWalk, writer: LinkWriter, f: BarecatFileInfo, dest: str, target: str
) -> bool:
    """Whether the link ``dest`` -> ``target`` leads inside, as ``walk`` finds it; if
    not, the refusal is recorded in ``writer``'s result."""
    refused = walk.check(dest)
    if refused == "loop":
        writer.result.failures.append((f.path, loop_error(f.path, target)))
    elif refused is not None:
        writer.result.outside_links.append((f.path, target))
    return refused is None


def _unmake_outward(jobs: Sequence[LinkJob], targets: dict[int, str], made: list[int]) -> None:
    """Walk the links ``made`` over the disk as it is (one that failed is not there to
    lead where the first walk took it) and remove those that lead outside, until none
    does; ``made`` keeps the rest."""
    while True:
        walk = LinkWalk(jobs[0][0].root, {})
        outward = [
            k
            for k in made
            if not jobs[k][0].allow_outside_links and not _leads_inside(walk, *jobs[k], targets[k])
        ]
        if not outward:
            return
        for k in outward:
            made.remove(k)
            jobs[k][0].result.links -= 1
            with contextlib.suppress(OSError):
                os.unlink(jobs[k][2])


__all__ = ["LinkJob", "LinkResult", "LinkWriter", "make_links"]
