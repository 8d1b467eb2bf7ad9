"""Where a symbolic link made below a target directory leads: the one rule for which links
extraction, the shell's ``get``/``mget`` and rsync into a directory may make.

A link is judged by where it leads once made, found the way the kernel resolves a path,
not by the text of its target: the target is walked component by component from the
link's directory, ``..`` going to the parent of where the walk is (after the links
before it were followed, so ``l/..`` with ``l -> a/b`` is ``a``), a component that is a
symbolic link (one on disk below the target, or one about to be made in the same run)
replaced by where that link leads, an absolute target starting at ``/``. The walk must
never step out of the target directory, not even to come back (``../target/x``):
outside, what it meets is not the run's to know. A walk that follows more than 40
links (the kernel's limit, ``ELOOP``; a loop of links) is refused too, since it cannot
be told where it leads. A component that does not exist is walked through as a name,
as ``os.path.realpath`` does: such a link dangles now and leads inside if it is ever
made to resolve by what this run made (a name that is later made a link by someone else
is that person's act).

Python's ``tarfile`` data filter checks each link against the disk as it is when the
link is extracted, so a later link can turn an earlier one outward (``x ->
d1/d2/l/../../secret`` then ``d1/d2/l -> ../..``); here every link of a run is judged
against all the others at once, before any is made. Reads the target directory (lstat,
readlink) and never writes to it; imports only the exception tree.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping

from barecat.exceptions import InvalidPathBarecatError

MAX_LINKS = 40
"""Most symbolic links one path walk may follow (Linux's MAXSYMLINKS)."""


class _RefusedError(Exception):
    """A walk steps outside the target directory (``loop`` False) or follows more than
    :data:`MAX_LINKS` links (``loop`` True). Never leaves this module."""

    def __init__(self, loop: bool) -> None:
        super().__init__("a loop of links" if loop else "leads outside")
        self.loop = loop


class LinkWalk:
    """Walks link targets below ``root`` over the disk as it is and the links ``planned``.

    Args:
        root: The target directory, absolute and normalized (``os.path.abspath``).
        planned: Links about to be made: absolute path below ``root`` -> target text.
            They count as made, whatever is on disk at their place now.
        real: Paths below ``root`` known to be no links (directories and files this run
            made): not looked at on disk.
    """

    def __init__(self, root: str, planned: Mapping[str, str], real: Collection[str] = ()) -> None:
        self.root = root
        self.top = root == os.sep
        """At ``/``, ``..`` stays where it is, as the kernel has it."""
        self._prefix = root if self.top else root + os.sep
        self._root_parts = [p for p in root.split(os.sep) if p]
        self.planned = {self.relative(dest): target for dest, target in planned.items()}
        self.real = {self.relative(path) for path in real}
        self._on_disk: dict[str, str | None] = {}
        self._resolved: dict[str, tuple[list[str], int]] = {}
        """Planned or found links already walked: where each leads, and how many links
        its walk followed (itself included)."""
        self._outward: set[str] = set()
        self._walking: set[str] = set()

    def relative(self, path: str) -> str:
        """``path`` (absolute, below the root) relative to it, ``/``-separated."""
        return path[len(self._prefix) :] if path != self.root else ""

    def check(self, dest: str) -> str | None:
        """Walk the link at ``dest`` (one of ``planned``, or one on disk).

        Returns:
            None if it leads inside the root; ``"outside"`` if its walk steps outside;
            ``"loop"`` if it follows more than :data:`MAX_LINKS` links.
        """
        try:
            self._lead(self.relative(dest), 0)
        except _RefusedError as refused:
            return "loop" if refused.loop else "outside"
        return None

    def _lead(self, place: str, depth: int) -> tuple[list[str], int]:
        """Where the link at ``place`` leads (parts below the root) and how many links
        that took. A chain of links nested deeper than the limit is refused unremembered:
        its inner links may still be fine on their own."""
        known = self._resolved.get(place)
        if known is not None:
            return known
        if place in self._outward:
            raise _RefusedError(loop=False)
        if depth > MAX_LINKS or place in self._walking:
            raise _RefusedError(loop=True)
        target = self._link_at(place)
        assert target is not None
        self._walking.add(place)
        try:
            parts = place.split("/")[:-1]
            leads, hops = self._walk(parts, target, MAX_LINKS - 1, depth)
        except _RefusedError as e:
            if not e.loop:
                self._outward.add(place)
            raise
        finally:
            self._walking.discard(place)
        self._resolved[place] = (leads, hops + 1)
        return leads, hops + 1

    def _walk(
        self, parts: list[str], target: str, budget: int, depth: int
    ) -> tuple[list[str], int]:
        """Walk ``target`` from the directory ``parts``; returns where it leads and the
        links followed, at most ``budget``."""
        if target.startswith("/"):
            parts, pending = [], self._below_root(target)
        else:
            parts, pending = list(parts), target.split("/")
        pending.reverse()  # a stack: the next component last
        used = 0
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if parts:
                    parts.pop()
                elif not self.top:
                    raise _RefusedError(loop=False)
                continue
            parts.append(name)
            place = "/".join(parts)
            if self._link_at(place) is None:
                continue
            leads, hops = self._lead(place, depth + 1)
            used += hops
            if used > budget:
                raise _RefusedError(loop=True)
            parts = list(leads)
        return parts, used

    def _below_root(self, target: str) -> list[str]:
        """The components of the absolute ``target`` after the root's own, or a refusal:
        it names a place outside (its components are compared as written)."""
        names = [n for n in target.split("/") if n not in ("", ".")]
        root = self._root_parts
        if names[: len(root)] != root:
            raise _RefusedError(loop=False)
        return names[len(root) :]

    def _link_at(self, place: str) -> str | None:
        """The target of the link at ``place`` (planned, or on disk), or None."""
        target = self.planned.get(place)
        if target is not None or place in self.real:
            return target
        try:
            return self._on_disk[place]
        except KeyError:
            pass
        path = self._prefix + place.replace("/", os.sep)
        found: str | None = None
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                found = os.readlink(path)
        except (OSError, ValueError):
            found = None  # missing, or a name the file system refuses: walked as a name
        self._on_disk[place] = found
        return found


def outside_link_error(path: str, target: str, root: str) -> InvalidPathBarecatError:
    """The refusal of the link ``path`` -> ``target``, which would lead outside ``root``."""
    return InvalidPathBarecatError(f"{path}: link to {target!r} points outside {root}")


def loop_error(path: str, target: str) -> InvalidPathBarecatError:
    """The refusal of the link ``path`` -> ``target``, whose walk follows too many links."""
    return InvalidPathBarecatError(
        f"{path}: link to {target!r} not created: following it takes more than "
        f"{MAX_LINKS} links (a loop)"
    )


__all__ = ["MAX_LINKS", "LinkWalk", "loop_error", "outside_link_error"]
