"""The two kinds of sync side: a directory on disk and a subtree of an archive.

Each tree lists itself as a flat :data:`Listing` (links never followed below the root),
computes CRC32C of its files when the plan compares by content, and, as a destination,
carries out a plan. Archive destinations store new files through the batched ingest
path (local sources) or ``add_many`` (archive sources) and replace changed ones with
``update_file``; directory destinations write through :class:`DirectoryWriter`, so a
sync is exactly as careful as an extraction. Uses only the public :class:`Barecat` API;
never prints.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, BinaryIO, cast

from barecat.archive import Barecat
from barecat.checksum import crc32c
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.glob import PathFilter
from barecat.paths import is_utf8
from barecat.transfer.extraction import DirectoryWriter, outside_link_error
from barecat.transfer.ingest.sources import IngestPlan, Source, not_utf8_error
from barecat.transfer.ingest.threads import STREAM_THRESHOLD, ingest
from barecat.transfer.symlink_making import make_links
from barecat.transfer.sync.plan import Action, Entry, Kind, Listing, Op

OnDone = Callable[[Action, int], None]
"""Called after each applied action with the bytes it transferred."""
_READ = 1 << 20


@dataclass(slots=True)
class ApplyResult:
    done: int = 0
    bytes: int = 0
    failures: list[tuple[str, Exception]] = field(default_factory=list)


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base and name else base or name


def _keep(path_filter: PathFilter | None, rel: str, is_dir: bool) -> bool:
    if path_filter is None or not rel:
        return True
    if is_dir:
        return not path_filter.prunes(rel, True)
    return path_filter.selects(rel, False)


def trim_unselected_dirs(listing: Listing, path_filter: PathFilter | None) -> None:
    """With include rules, keep only directories they cover or that lead to a kept entry."""
    if path_filter is None or not path_filter.include:
        return
    needed = {""}
    for rel, entry in listing.items():
        if entry.kind is not Kind.DIR or path_filter.is_included(rel, True):
            while rel:
                needed.add(rel)
                rel = rel[: rel.rfind("/")] if "/" in rel else ""
    for rel in [r for r, e in listing.items() if e.kind is Kind.DIR and r not in needed]:
        del listing[rel]


# -- local directories -------------------------------------------------------------------


def _local_entry(path: str, st: os.stat_result) -> Entry | None:
    if stat.S_ISDIR(st.st_mode):
        kind = Kind.DIR
    elif stat.S_ISLNK(st.st_mode):
        kind = Kind.LINK
    elif stat.S_ISREG(st.st_mode):
        kind = Kind.FILE
    else:
        return None  # sockets, FIFOs, devices: nothing an archive holds
    entry = Entry(kind, 0, st.st_mtime_ns, st.st_mode, st.st_uid, st.st_gid, origin=path)
    if kind is Kind.FILE:
        entry.size = st.st_size
    elif kind is Kind.LINK:
        entry.target = os.fsencode(os.readlink(path))
        entry.size = len(entry.target)
    return entry


def list_local(
    path: str,
    rel: str,
    path_filter: PathFilter | None,
    *,
    follow_root: bool = False,
    bad_names: list[tuple[str, Exception]] | None = None,
) -> Listing:
    """The entry at ``path`` (named ``rel``) and, for a directory, everything below it.

    With ``bad_names`` (a source, whose names become archive paths), an entry whose name
    is not UTF-8 is left out (a directory with all it holds) and recorded there.
    """
    listing: Listing = {}
    if bad_names is not None and not is_utf8(rel):
        bad_names.append((path, not_utf8_error(path)))
        return listing
    try:
        st = os.stat(path) if follow_root else os.lstat(path)
    except FileNotFoundError:
        return listing
    root = _local_entry(path, st)
    if root is None or not _keep(path_filter, rel, root.kind is Kind.DIR):
        return listing
    listing[rel] = root
    stack = [(path, rel)] if root.kind is Kind.DIR else []
    while stack:
        directory, base = stack.pop()
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
        for child in children:
            if bad_names is not None and not is_utf8(child.name):
                bad_names.append((child.path, not_utf8_error(child.path)))
                continue
            entry = _local_entry(child.path, child.stat(follow_symlinks=False))
            name = _join(base, child.name)
            if entry is None or not _keep(path_filter, name, entry.kind is Kind.DIR):
                continue
            listing[name] = entry
            if entry.kind is Kind.DIR:
                stack.append((child.path, name))
    trim_unselected_dirs(listing, path_filter)
    return listing


def _crc32c_of_stream(f: IO[bytes]) -> int:
    value = 0
    while chunk := f.read(_READ):
        value = crc32c(chunk, value=value)
    return value


def local_crc32c(path: str) -> int:
    with open(path, "rb") as f:
        return _crc32c_of_stream(f)


# -- archives --------------------------------------------------------------------------


def _archive_entry(bc: Barecat, info: BarecatEntryInfo) -> Entry:
    if isinstance(info, BarecatFileInfo):
        kind = Kind.LINK if info.is_symlink_entry else Kind.FILE
        entry = Entry(kind, info.size or 0, info.mtime_ns, info.mode, info.uid, info.gid)
        entry.crc32c = info.crc32c if info.sealed_size is None else None  # sealed: of the seal
        if kind is Kind.LINK:
            entry.target = bc.read(info)
    else:
        entry = Entry(Kind.DIR, 0, info.mtime_ns, info.mode, info.uid, info.gid)
    entry.origin, entry.info = info.path, info
    return entry


def _walk_archive(bc: Barecat, top: str) -> Iterator[BarecatEntryInfo]:
    for directory, _subdirs, files in bc.walk_infos(top):
        yield directory
        yield from files


def list_archive(bc: Barecat, inner: str, rel: str, path_filter: PathFilter | None) -> Listing:
    """The archive entry at ``inner`` (named ``rel``) and, for a directory, its subtree."""
    listing: Listing = {}
    if not bc.exists(inner):
        return listing
    if bc.isfile(inner):
        infos: Iterator[BarecatEntryInfo] = iter([bc.lookup_file(inner)])
    else:
        infos = _walk_archive(bc, inner)
    cut = len(inner) + 1 if inner else 0
    for info in infos:
        name = _join(rel, info.path[cut:]) if info.path != inner else rel
        is_dir = not isinstance(info, BarecatFileInfo)
        if _keep(path_filter, name, is_dir) and (is_dir or _keep(path_filter, name, False)):
            listing[name] = _archive_entry(bc, info)
    if path_filter is not None:
        for name in [n for n in listing if n and path_filter.prunes(n, False)]:
            del listing[name]  # below an excluded directory the walk did not prune
    trim_unselected_dirs(listing, path_filter)
    return listing


def archive_crc32c(bc: Barecat, entry: Entry) -> int:
    if entry.crc32c is not None:
        return entry.crc32c
    with bc.open(entry.origin, "rb") as f:
        return _crc32c_of_stream(f)


# -- applying a plan ---------------------------------------------------------------------


@dataclass(slots=True)
class Sourced:
    """An action together with the archive its source entry lives in (None: on disk)."""

    action: Action
    source: Barecat | None


class ArchiveDestination:
    """Carries out a plan below ``prefix`` in a writable archive."""

    def __init__(self, bc: Barecat, prefix: str, on_done: OnDone) -> None:
        self.bc = bc
        self.prefix = prefix
        self.on_done = on_done
        self.result = ApplyResult()

    def store(self, rel: str) -> str:
        return _join(self.prefix, rel)

    def report(self, action: Action, nbytes: int = 0) -> None:
        self.result.done += 1
        self.result.bytes += nbytes
        self.on_done(action, nbytes)

    def dir_info(self, rel: str, e: Entry) -> BarecatDirInfo:
        return BarecatDirInfo(self.store(rel), e.mode, e.uid, e.gid, e.mtime_ns)

    def file_info(self, rel: str, e: Entry) -> BarecatFileInfo:
        return BarecatFileInfo(self.store(rel), e.mode, e.uid, e.gid, e.mtime_ns)

    def apply(self, plan: list[Sourced]) -> ApplyResult:
        if self.prefix and not self.bc.isdir(self.prefix):
            self.bc.makedirs(self.prefix, exist_ok=True)
        for item in plan:
            if item.action.op is Op.DELETE:
                self._guard(item.action, self.delete)
        mkdirs = [i.action for i in plan if i.action.op is Op.MKDIR]
        self.bc.add_dirs(self.dir_info(a.path, a.entry) for a in mkdirs)
        for action in mkdirs:
            self.report(action)
        self.copy_new([i for i in plan if i.action.op is Op.COPY])
        for item in plan:
            if item.action.op is Op.UPDATE:
                self._guard(item.action, functools.partial(self.update, source=item.source))
            elif item.action.op is Op.ATTRS:
                self._guard(item.action, self.attrs)
        return self.result

    def _guard(self, action: Action, body: Callable[[Action], None]) -> None:
        try:
            body(action)
        except (OSError, KeyError, ValueError) as e:
            self.result.failures.append((action.path, e))

    def delete(self, action: Action) -> None:
        path = self.store(action.path)
        if action.entry.kind is not Kind.DIR:
            self.bc.remove(path)
        elif self.bc.listdir(path):
            return  # holds excluded entries: left in place, as rsync does
        else:
            self.bc.rmdir(path)
        self.report(action)

    def attrs(self, action: Action) -> None:
        e = action.entry
        if e.kind is Kind.DIR:
            self.bc.add_dirs([self.dir_info(action.path, e)])
        else:
            if e.mode is not None:
                self.bc.chmod(self.store(action.path), e.mode)
            if e.mtime_ns is not None:
                self.bc.utime(self.store(action.path), ns=(e.mtime_ns, e.mtime_ns))
        self.report(action)

    def update(self, action: Action, source: Barecat | None) -> None:
        e, info = action.entry, self.file_info(action.path, action.entry)
        if e.target is not None:
            self.bc.update_file(info.path, info, data=e.target)
        elif source is not None:
            with source.open(e.origin, "rb") as f:
                self.bc.update_file(info.path, info, fileobj=cast(BinaryIO, f), size=e.size)
        else:
            with open(e.origin, "rb") as f:
                self.bc.update_file(info.path, info, fileobj=f, size=e.size)
        self.report(action, e.size)

    def copy_new(self, items: list[Sourced]) -> None:
        by_store = {self.store(i.action.path): i.action for i in items}
        local = [i.action for i in items if i.source is None]
        plan = IngestPlan(
            files=[
                Source(a.entry.origin, self.store(a.path), a.entry.kind is Kind.LINK) for a in local
            ]
        )

        def on_added(paths: list[str], _nbytes: int) -> None:
            for p in paths:
                self.report(by_store[p], by_store[p].entry.size)

        if plan.files:
            self.result.failures.extend(ingest(self.bc, plan, on_added=on_added).failures)
        self._copy_from_archives([i for i in items if i.source is not None])

    def _copy_from_archives(self, items: list[Sourced]) -> None:
        batch: list[tuple[BarecatFileInfo, bytes]] = []
        for item in items:
            a, source = item.action, item.source
            assert source is not None
            info = self.file_info(a.path, a.entry)
            if a.entry.size > STREAM_THRESHOLD:
                with source.open(a.entry.origin, "rb") as f:
                    self.bc.add(info, fileobj=cast(BinaryIO, f))
                self.report(a, a.entry.size)
                continue
            data = a.entry.target if a.entry.target is not None else source.read(a.entry.origin)
            batch.append((info, data))
        self.bc.add_many(batch)
        for item in items:
            if item.action.entry.size <= STREAM_THRESHOLD:
                self.report(item.action, item.action.entry.size)


class DirectoryDestination:
    """Carries out a plan below ``root`` on disk, writing archive entries safely."""

    def __init__(self, root: str, on_done: OnDone) -> None:
        self.root = os.path.abspath(root)
        self.on_done = on_done
        self.result = ApplyResult()
        self.owners = os.geteuid() == 0
        self.writers: dict[int, DirectoryWriter] = {}

    def writer(self, bc: Barecat) -> DirectoryWriter:
        if id(bc) not in self.writers:
            self.writers[id(bc)] = DirectoryWriter(bc, self.root, False, self.owners)
        return self.writers[id(bc)]

    def report(self, action: Action, nbytes: int = 0) -> None:
        self.result.done += 1
        self.result.bytes += nbytes
        self.on_done(action, nbytes)

    def apply(self, plan: list[Sourced]) -> ApplyResult:
        os.makedirs(self.root, exist_ok=True)
        first_writer = next((self.writer(i.source) for i in plan if i.source), None)
        for item in plan:
            if first_writer is not None:
                first_writer.destination(item.action.path)  # refuse hostile paths up front
        # Links last, so no file is ever written through one, and judged all together;
        # metadata after everything.
        links = [i for i in plan if self._is_link(i)]
        attrs = [i for i in plan if i.action.op is Op.ATTRS]
        rest = [i for i in plan if not self._is_link(i) and i.action.op is not Op.ATTRS]
        for item in rest:
            self._attempt(item)
        self._make_links(links)
        for item in attrs:
            self._attempt(item)
        for writer in self.writers.values():
            self.result.failures.extend(writer.result.failures)
            self.result.failures.extend(
                (path, outside_link_error(path, target, self.root))
                for path, target in writer.result.outside_links
            )
        return self.result

    @staticmethod
    def _is_link(item: Sourced) -> bool:
        """A link to make (created or updated)."""
        return item.action.entry.kind is Kind.LINK and item.action.op in (Op.COPY, Op.UPDATE)

    def _attempt(self, item: Sourced) -> None:
        try:
            self.apply_one(item)
        except (OSError, BarecatError) as e:  # e.g. a damaged file: the rest goes on
            self.result.failures.append((item.action.path, e))

    def _make_links(self, items: list[Sourced]) -> None:
        jobs = []
        for item in items:
            if item.source is None:
                self._attempt(item)  # (says why it cannot be applied)
                continue
            info = item.action.entry.info
            assert isinstance(info, BarecatFileInfo)
            dest = os.path.join(self.root, item.action.path)
            jobs.append((self.writer(item.source), info, dest, item))
        make_links(
            [(writer, info, dest) for writer, info, dest, _ in jobs],
            lambda k: self.report(jobs[k][3].action, jobs[k][3].action.entry.size),
        )

    def apply_one(self, item: Sourced) -> None:
        action, source = item.action, item.source
        dest = os.path.join(self.root, action.path) if action.path else self.root
        if action.op is Op.DELETE:
            self.delete(action, dest)
            return
        if source is None:
            raise OSError(errno.EINVAL, "local source with a local destination", dest)
        writer = self.writer(source)
        info = action.entry.info
        assert info is not None
        if action.op is Op.MKDIR:
            writer.ensure_dir(dest)
        elif action.op is Op.ATTRS:
            writer.metadata(dest, info, link=action.entry.kind is Kind.LINK)
        else:
            writer.ensure_dir(os.path.dirname(dest))
            if action.op is Op.UPDATE and os.path.lexists(dest):
                os.unlink(dest)  # a read-only file is replaced, as rsync does
            writer.write_file(info, dest)  # type: ignore[arg-type]
        self.report(action, action.entry.size if action.op is not Op.ATTRS else 0)

    def delete(self, action: Action, dest: str) -> None:
        if action.entry.kind is Kind.DIR:
            try:
                os.rmdir(dest)
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise
                return  # holds excluded entries: left in place, as rsync does
        else:
            os.unlink(dest)
        self.report(action)


__all__ = [
    "ApplyResult",
    "ArchiveDestination",
    "DirectoryDestination",
    "Sourced",
    "archive_crc32c",
    "list_archive",
    "list_local",
    "local_crc32c",
]
