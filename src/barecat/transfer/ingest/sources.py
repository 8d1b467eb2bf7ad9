"""Deciding what to store: paths on disk turned into archive paths, directories and links.

A plan is made before any byte is read, the way tar sees its command line: each source
path is stored under its own name (leading '/' and '../' removed, so nothing can land
above the archive root), directories are walked in sorted order, symbolic links are kept
as links unless asked to follow them (with loop detection when following), and
include/exclude rules prune the walk. Unreadable or vanished sources, and names that are
not UTF-8 (which no archive path can be, see ``barecat.paths``; a directory's is skipped
with all it holds), are recorded as failures instead of stopping the plan. Imports only
the pure layers; never prints.
"""

from __future__ import annotations

import array
import errno
import fcntl
import operator
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from barecat.entries import BarecatDirInfo
from barecat.glob import PathFilter
from barecat.paths import is_utf8, normalize

_FS_IOC_FIEMAP = 0xC020660B
_FIEMAP_HEADER_WORDS = 4  # fm_start, fm_length (u64) + four u32 packed as two u64


@dataclass(slots=True)
class Source:
    """One file or link to store: where it is on disk, where it goes in the archive."""

    disk_path: str
    store_path: str
    as_link: bool = False


@dataclass(slots=True)
class IngestPlan:
    """Directories (with their metadata) and files to store, and what could not be planned."""

    dirs: list[BarecatDirInfo] = field(default_factory=list)
    files: list[Source] = field(default_factory=list)
    failures: list[tuple[str, OSError]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Sockets, FIFOs and device nodes: nothing an archive of bytes can hold."""
    _planned: set[str] = field(default_factory=set, repr=False)
    """Paths already planned (directories with a leading '/', which no file path has), so a
    source named twice, as in ``find`` output, is stored once."""

    def add_dir(self, info: BarecatDirInfo) -> None:
        if ("/" + info.path) not in self._planned:
            self._planned.add("/" + info.path)
            self.dirs.append(info)

    def add_file(self, source: Source) -> None:
        if source.store_path not in self._planned:
            self._planned.add(source.store_path)
            self.files.append(source)


_entry_name = operator.attrgetter("name")


def not_utf8_error(disk_path: str) -> OSError:
    """The failure recorded for a source whose name is not UTF-8 (``EILSEQ``)."""
    reason = "name is not valid UTF-8, which an archive path must be; skipped"
    return OSError(errno.EILSEQ, reason, disk_path)


def member_name(path: str) -> str:
    """The archive path tar would store ``path`` under: lexical, without '/' or '../' lead."""
    parts = [p for p in os.path.normpath(path).split(os.sep) if p not in ("", ".")]
    while parts and parts[0] == "..":
        parts.pop(0)
    return normalize("/".join(parts)) if parts else ""


class _Planner:
    def __init__(
        self, plan: IngestPlan, follow_symlinks: bool, path_filter: PathFilter | None
    ) -> None:
        self.plan = plan
        self.follow = follow_symlinks
        self.filter = path_filter if path_filter and not path_filter.selects_everything else None

    def stat(self, disk_path: str) -> os.stat_result | None:
        try:
            return os.stat(disk_path) if self.follow else os.lstat(disk_path)
        except OSError as e:
            self.plan.failures.append((disk_path, e))
            return None

    def add_entry(self, disk_path: str, store: str, st: os.stat_result) -> None:
        """Plan one command-line source: a directory recursively, a file or link as is."""
        if stat.S_ISDIR(st.st_mode):
            if self.filter is None or not self.filter.prunes(store, True):
                self.walk(disk_path, store, st)
        elif self.filter is None or self.filter.selects(store, False):
            self.add_leaf(disk_path, store, st.st_mode)

    def add_leaf(self, disk_path: str, store: str, mode: int) -> None:
        if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            if not store:
                self.plan.failures.append((disk_path, IsADirectoryError("no name to store under")))
                return
            self.plan.add_file(Source(disk_path, store, stat.S_ISLNK(mode)))
        else:
            self.plan.skipped.append(disk_path)

    def walk(self, root: str, prefix: str, root_stat: os.stat_result) -> None:
        # Each pending directory carries the identities of its ancestors: meeting one of
        # them again (only possible through a followed link) is a loop.
        stack: list[tuple[str, str, os.stat_result, frozenset[tuple[int, int]]]]
        stack = [(root, prefix, root_stat, frozenset())]
        while stack:
            directory, stored, st, ancestors = stack.pop()
            identity = (st.st_dev, st.st_ino)
            if identity in ancestors:
                self.plan.failures.append((directory, OSError(40, "Symbolic link loop")))
                continue
            ancestors = ancestors | {identity} if self.follow else ancestors
            info = BarecatDirInfo(stored)
            info.fill_from_statresult(st)
            self.plan.add_dir(info)
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=_entry_name)
            except OSError as e:
                self.plan.failures.append((directory, e))
                continue
            subdirs = []
            follow, path_filter, planned = self.follow, self.filter, self.plan._planned
            files = self.plan.files
            for entry in entries:
                name = entry.name
                if not (name.isascii() or is_utf8(name)):
                    self.plan.failures.append((entry.path, not_utf8_error(entry.path)))
                    continue
                child = f"{stored}/{name}" if stored else name
                try:
                    is_dir = entry.is_dir(follow_symlinks=follow)
                    if not is_dir and path_filter is None:  # the common case, inline
                        link = not follow and entry.is_symlink()
                        if (link or entry.is_file(follow_symlinks=follow)) and child not in planned:
                            planned.add(child)
                            files.append(Source(entry.path, child, link))
                            continue
                    child_stat = entry.stat(follow_symlinks=follow) if is_dir else None
                    mode = child_stat.st_mode if child_stat else self._leaf_mode(entry)
                except OSError as e:
                    self.plan.failures.append((entry.path, e))
                    continue
                if path_filter is not None and path_filter.is_excluded(child, is_dir):
                    continue
                if child_stat is not None:
                    subdirs.append((entry.path, child, child_stat, ancestors))
                elif path_filter is None or path_filter.is_included(child, False):
                    self.add_leaf(entry.path, child, mode)
            stack.extend(reversed(subdirs))

    def _leaf_mode(self, entry: os.DirEntry[str]) -> int:
        if not self.follow and entry.is_symlink():
            return stat.S_IFLNK
        if entry.is_file(follow_symlinks=self.follow):
            return stat.S_IFREG
        return entry.stat(follow_symlinks=self.follow).st_mode  # broken link when following


def plan_sources(
    paths: Iterable[str],
    *,
    base_directory: str | None = None,
    follow_symlinks: bool = False,
    path_filter: PathFilter | None = None,
    physical_order: bool = False,
) -> IngestPlan:
    """Plan storing ``paths`` (relative to ``base_directory``, as ``tar -C``) by their names.

    A path named twice (``find`` output lists a directory and then its contents) is planned
    once. With include rules, a directory is kept only if a rule covers it or it holds a
    selected file.
    """
    plan = IngestPlan()
    planner = _Planner(plan, follow_symlinks, path_filter)
    for path in paths:
        disk = os.path.join(base_directory, path) if base_directory else path
        if not is_utf8(path):
            plan.failures.append((disk, not_utf8_error(disk)))
            continue
        st = planner.stat(disk)
        if st is not None:
            planner.add_entry(disk, member_name(path), st)
    if planner.filter is not None and planner.filter.include:
        _keep_dirs_leading_to_files(plan, planner.filter)
    if physical_order:
        sort_by_physical_position(plan.files)
    return plan


def plan_tree(
    directory: str,
    prefix: str = "",
    *,
    follow_symlinks: bool = False,
    path_filter: PathFilter | None = None,
) -> IngestPlan:
    """Plan storing the contents of ``directory`` below ``prefix`` in the archive."""
    plan = IngestPlan()
    planner = _Planner(plan, follow_symlinks, path_filter)
    st = _stat_dir(planner, directory)
    if st is not None:
        planner.walk(directory, normalize(prefix), st)
    if planner.filter is not None and planner.filter.include:
        _keep_dirs_leading_to_files(plan, planner.filter)
    return plan


def plan_roots(
    roots: Iterable[str], *, follow_symlinks: bool = False, physical_order: bool = False
) -> IngestPlan:
    """Plan storing the contents of each directory in ``roots`` at the archive root.

    This is how ``barecat-create-recursive`` has always stored its arguments: ``d1/a.txt``
    and ``d2/s/b.txt`` become ``a.txt`` and ``s/b.txt``. A file among ``roots`` is stored
    under its base name (a root is always entered, link or not). A path that an earlier
    root already provides is recorded as a failure (``EEXIST``, naming both sources)
    instead of silently replacing or dropping one.

    Args:
        roots: Directories (or files) on disk.
        follow_symlinks: Store what links point to rather than the links.
        physical_order: Read files in their order on disk (see :func:`physical_position`).

    Returns:
        The plan; unreadable roots are among its failures.
    """
    plan = IngestPlan()
    stored_from: dict[str, str] = {}
    for root in roots:
        part = IngestPlan()
        planner = _Planner(part, follow_symlinks, None)
        name = os.path.basename(root)
        st = _stat_dir(planner, root)
        if st is not None and stat.S_ISDIR(st.st_mode):
            planner.walk(root, "", st)
        elif st is not None and not is_utf8(name):
            part.failures.append((root, not_utf8_error(root)))
        elif st is not None:
            planner.add_leaf(root, member_name(name), st.st_mode)
        for info in part.dirs:
            plan.add_dir(info)
        for source in part.files:
            earlier = stored_from.setdefault(source.store_path, source.disk_path)
            if earlier == source.disk_path:
                plan.add_file(source)
            else:
                why = f"{source.store_path} is already stored from {earlier}"
                plan.failures.append((source.disk_path, FileExistsError(errno.EEXIST, why)))
        plan.failures.extend(part.failures)
        plan.skipped.extend(part.skipped)
    if physical_order:
        sort_by_physical_position(plan.files)
    return plan


def _stat_dir(planner: _Planner, directory: str) -> os.stat_result | None:
    try:
        return os.stat(directory)  # the root itself is always entered, link or not
    except OSError as e:
        planner.plan.failures.append((directory, e))
        return None


def _keep_dirs_leading_to_files(plan: IngestPlan, path_filter: PathFilter) -> None:
    needed = {""}
    for source in plan.files:
        path = source.store_path
        while "/" in path:
            path = path[: path.rfind("/")]
            if path in needed:
                break
            needed.add(path)
    plan.dirs = [d for d in plan.dirs if d.path in needed or path_filter.is_included(d.path, True)]


def physical_position(path: str) -> tuple[int, int]:
    """Where a file's first byte sits on its device (FIEMAP), else its inode number.

    Reading files in this order turns an HDD's seeks into one sweep.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return (1, 0)
    try:
        # struct fiemap with room for one extent (56 bytes = 7 u64); fm_extent_count = 1
        buf = array.array("Q", [0, (1 << 64) - 1, 0, 1] + [0] * 7)
        try:
            fcntl.ioctl(fd, _FS_IOC_FIEMAP, buf, True)
        except OSError:
            return (0, os.fstat(fd).st_ino)
        mapped = buf[2] >> 32
        first_physical = buf[_FIEMAP_HEADER_WORDS + 1]
        return (0, first_physical if mapped else os.fstat(fd).st_ino)
    finally:
        os.close(fd)


def sort_by_physical_position(files: list[Source]) -> None:
    keys = {s.disk_path: physical_position(s.disk_path) for s in files if not s.as_link}
    files.sort(key=lambda s: keys.get(s.disk_path, (0, 0)))


__all__ = [
    "IngestPlan",
    "Source",
    "member_name",
    "not_utf8_error",
    "physical_position",
    "plan_roots",
    "plan_sources",
    "plan_tree",
    "sort_by_physical_position",
]
