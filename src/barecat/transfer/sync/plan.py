"""The pure half of sync: what differs between two listings, and in what order to act.

A sync lists both sides as flat maps of relative path to :class:`Entry`; :func:`plan_sync`
compares them (no I/O, so every rsync rule is unit-testable) into a list of
:class:`Action` objects that ``sync.trees`` carries out. Comparison is rsync's quick
check (size and mtime) unless checksums are asked for or an mtime is unknown; then
CRC32C decides. Deletion follows rsync: only inside directories that take part in the
transfer, deepest first. Imports only pure layers; never prints.
"""

from __future__ import annotations

import dataclasses
import enum
import stat
from dataclasses import dataclass

from barecat.entries import BarecatEntryInfo


class Kind(enum.Enum):
    FILE = "file"
    LINK = "link"
    DIR = "dir"


@dataclass(slots=True)
class Entry:
    """One file, link or directory on either side, as far as comparing them needs."""

    kind: Kind
    size: int = 0
    mtime_ns: int | None = None
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    crc32c: int | None = None
    """Filled for archive files from the index; for local files only when compared by it."""
    target: bytes | None = None
    """A link's target."""
    origin: str = ""
    """Where the entry lives: a path on disk, or the path inside its archive."""
    info: BarecatEntryInfo | None = None
    """The archive's own record, for archive entries."""


Listing = dict[str, Entry]
"""Entries by path relative to the transfer root ('' is the root directory itself)."""


class Op(enum.Enum):
    DELETE = "delete"
    MKDIR = "mkdir"
    COPY = "copy"
    UPDATE = "update"
    ATTRS = "attrs"
    """Only mode and mtime change (also used to restore a directory's mtime at the end)."""


@dataclass(slots=True)
class Action:
    op: Op
    path: str
    entry: Entry
    """The source entry (for DELETE: the destination entry going away)."""

    @property
    def display(self) -> str | None:
        """The line ``rsync -v`` would print for this action, or None for metadata only."""
        name = self.path or "."
        if self.op is Op.ATTRS:
            return None
        if self.op is Op.DELETE:
            return f"deleting {name}/" if self.entry.kind is Kind.DIR else f"deleting {name}"
        return f"{name}/" if self.entry.kind is Kind.DIR else name


@dataclass(slots=True)
class SyncOptions:
    """rsync's options that decide what is transferred (``--delete``, ``-c``, ...)."""

    delete: bool = False
    checksum: bool = False
    update: bool = False
    """Skip files whose destination copy is newer."""
    existing: bool = False
    """Only update what the destination has; create nothing new."""
    ignore_existing: bool = False
    """Only create what the destination lacks; leave what it has as it is."""
    size_only: bool = False
    """Files of equal size count as unchanged (unless ``checksum``)."""
    max_size: int | None = None
    """Skip files bigger than this many bytes."""
    min_size: int | None = None
    """Skip files smaller than this many bytes."""

    @classmethod
    def of(cls, options: object) -> SyncOptions:
        """These options read from the attributes of the same names of ``options`` (the
        arguments of ``barecat rsync``, 0.3.1's ``RsyncOptions``), which may have more.

        Raises:
            AttributeError: ``options`` lacks one of them.
        """
        return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)})

    def skips_size(self, entry: Entry) -> bool:
        """True if ``--max-size``/``--min-size`` leave this source file out."""
        if entry.kind is not Kind.FILE:
            return False
        too_big = self.max_size is not None and entry.size > self.max_size
        return too_big or (self.min_size is not None and entry.size < self.min_size)


def parent_of(rel: str) -> str:
    return rel[: rel.rfind("/")] if "/" in rel else ""


def content_differs(src: Entry, dst: Entry, checksum: bool, size_only: bool = False) -> bool:
    """rsync's decision to transfer a file: size, then mtime, or CRC32C when asked for
    (or when an mtime is unknown, so an archive without mtimes still syncs idempotently);
    with ``size_only``, the size alone (unless ``checksum``)."""
    if src.kind is Kind.LINK:
        return src.target != dst.target
    if src.size != dst.size:
        return True
    if size_only and not checksum:
        return False
    if checksum or src.mtime_ns is None or dst.mtime_ns is None:
        return src.crc32c is None or src.crc32c != dst.crc32c
    return src.mtime_ns != dst.mtime_ns


def needs_checksum(src: Entry, dst: Entry, options: SyncOptions) -> bool:
    """True if :func:`content_differs` will look at the CRC32C of these two entries."""
    if src.kind is not Kind.FILE or dst.kind is not Kind.FILE or src.size != dst.size:
        return False
    if options.checksum:
        return True
    return not options.size_only and (src.mtime_ns is None or dst.mtime_ns is None)


def attrs_differ(src: Entry, dst: Entry) -> bool:
    """Mode (not for links, whose mode Linux cannot change) or mtime differ."""
    if (
        src.kind is not Kind.LINK
        and src.mode is not None
        and (dst.mode is None or stat.S_IMODE(src.mode) != stat.S_IMODE(dst.mode))
    ):
        return True
    return src.mtime_ns is not None and src.mtime_ns != dst.mtime_ns


def _newer_on_dest(src: Entry, dst: Entry) -> bool:
    return src.mtime_ns is not None and dst.mtime_ns is not None and dst.mtime_ns > src.mtime_ns


def _extraneous(src: Listing, dst: Listing) -> list[str]:
    """Destination paths absent from the source inside directories the source sends."""
    gone: set[str] = set()
    for rel in sorted(dst):
        if not rel or rel in src:
            continue
        up = parent_of(rel)
        sent = src.get(up)
        if up in gone or (sent is not None and sent.kind is Kind.DIR):
            gone.add(rel)
    return sorted(gone, reverse=True)  # descendants sort after ancestors: reversed, first


def _subtree(dst: Listing, rel: str) -> list[str]:
    inside = [p for p in dst if p.startswith(rel + "/")] if rel else [p for p in dst if p]
    return sorted([*inside, rel], reverse=True)


def plan_sync(src: Listing, dst: Listing, options: SyncOptions) -> list[Action]:
    """The changes that make ``dst`` match ``src``, in the order to apply them.

    Deletions first (deepest first), then new directories (parents first), then file
    contents, then file metadata, and last the metadata of every directory that was
    created, changed or had a child changed, deepest first, so writing children cannot
    move a parent's mtime after it was set.
    """
    deletes: list[Action] = []
    mkdirs: list[Action] = []
    copies: list[Action] = []
    file_attrs: list[Action] = []
    dir_attrs: dict[str, Entry] = {}
    for rel in sorted(src):
        s, d = src[rel], dst.get(rel)
        if options.skips_size(s) or (options.existing and d is None):
            continue
        if options.ignore_existing and d is not None and s.kind is not Kind.DIR:
            continue
        if d is not None and d.kind is not s.kind:
            deletes.extend(Action(Op.DELETE, p, dst[p]) for p in _subtree(dst, rel) if p in dst)
            d = None
        if d is None:
            if s.kind is Kind.DIR:
                mkdirs.append(Action(Op.MKDIR, rel, s))
                dir_attrs[rel] = s
            else:
                copies.append(Action(Op.COPY, rel, s))
        elif s.kind is Kind.DIR:
            if attrs_differ(s, d):
                dir_attrs[rel] = s
        elif s.kind is Kind.FILE and options.update and _newer_on_dest(s, d):
            continue
        elif content_differs(s, d, options.checksum, options.size_only):
            copies.append(Action(Op.UPDATE, rel, s))
        elif attrs_differ(s, d):
            file_attrs.append(Action(Op.ATTRS, rel, s))
    if options.delete:
        deletes.extend(Action(Op.DELETE, p, dst[p]) for p in _extraneous(src, dst))
    for action in (*deletes, *mkdirs, *copies):
        if action.path:
            up = parent_of(action.path)
            if up in src and src[up].kind is Kind.DIR:
                dir_attrs.setdefault(up, src[up])
    deletes.sort(key=lambda a: a.path, reverse=True)
    finals = [Action(Op.ATTRS, p, dir_attrs[p]) for p in sorted(dir_attrs, reverse=True)]
    return [*_unique(deletes), *mkdirs, *copies, *file_attrs, *finals]


def _unique(actions: list[Action]) -> list[Action]:
    seen: set[str] = set()
    out = []
    for a in actions:
        if a.path not in seen:
            seen.add(a.path)
            out.append(a)
    return out


__all__ = [
    "Action",
    "Entry",
    "Kind",
    "Listing",
    "Op",
    "SyncOptions",
    "attrs_differ",
    "content_differs",
    "needs_checksum",
    "plan_sync",
]
