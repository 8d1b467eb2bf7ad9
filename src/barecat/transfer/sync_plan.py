"""The pure half of sync: what each command-line side names, what differs, in what order.

A sync lists both sides as flat maps of relative path to :class:`Entry`; :func:`plan_sync`
compares them (no I/O, so every rsync rule is unit-testable) into a list of
:class:`Action` objects that ``sync_trees`` carries out. Comparison is rsync's quick
check (size and mtime) unless checksums are asked for or an mtime is unknown; then
CRC32C decides. Deletion follows rsync: only inside directories that take part in the
transfer, deepest first. Imports only pure layers; never prints.
"""

from __future__ import annotations

import enum
import os
import stat
from dataclasses import dataclass, field

from barecat.entries import BarecatEntryInfo
from barecat.layout import archive_exists, base_path, index_path, is_sqlite_file
from barecat.paths import normalize

ARCHIVE_SUFFIX = ".barecat"
"""A destination ``NAME.barecat:...`` names an archive to create even before it exists."""


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
    delete: bool = False
    checksum: bool = False
    update: bool = False


def parent_of(rel: str) -> str:
    return rel[: rel.rfind("/")] if "/" in rel else ""


def content_differs(src: Entry, dst: Entry, checksum: bool) -> bool:
    """rsync's decision to transfer a file: size, then mtime, or CRC32C when asked for
    (or when an mtime is unknown, so an archive without mtimes still syncs idempotently)."""
    if src.kind is Kind.LINK:
        return src.target != dst.target
    if src.size != dst.size:
        return True
    if checksum or src.mtime_ns is None or dst.mtime_ns is None:
        return src.crc32c is None or src.crc32c != dst.crc32c
    return src.mtime_ns != dst.mtime_ns


def needs_checksum(src: Entry, dst: Entry, checksum: bool) -> bool:
    """True if :func:`content_differs` will look at the CRC32C of these two entries."""
    if src.kind is not Kind.FILE or dst.kind is not Kind.FILE or src.size != dst.size:
        return False
    return checksum or src.mtime_ns is None or dst.mtime_ns is None


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
        elif content_differs(s, d, options.checksum):
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


# -- where each side is ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Location:
    """One command-line side: a local path, or a path inside an archive.

    ``contents`` is rsync's trailing-slash rule: the directory's contents go to the
    destination, instead of the directory under its own name.
    """

    path: str
    archive: str | None = None
    contents: bool = False
    creates_archive: bool = field(default=False, compare=False)

    @property
    def is_archive(self) -> bool:
        return self.archive is not None

    @property
    def name(self) -> str:
        """The name the entry takes at the destination when sent without a slash."""
        if self.archive is not None:
            return self.path.rsplit("/", 1)[-1]
        return os.path.basename(os.path.normpath(self.path))


def is_archive(path: str) -> bool:
    """True if ``path`` is an existing barecat archive (its index is an SQLite file)."""
    return bool(path) and archive_exists(path) and is_sqlite_file(index_path(base_path(path)))


def _colons(arg: str) -> list[int]:
    """Positions of ':' not escaped by a backslash."""
    out, i = [], 0
    while i < len(arg):
        if arg[i] == "\\" and i + 1 < len(arg):
            i += 2
            continue
        if arg[i] == ":":
            out.append(i)
        i += 1
    return out


def _unescape(text: str) -> str:
    return text.replace("\\:", ":").replace("\\\\", "\\")


def parse_location(arg: str, *, destination: bool = False) -> Location:
    """Decide whether ``arg`` is ``ARCHIVE:path`` or a local path (the rule README.md documents).

    ``ARCHIVE:`` is recognized at the first unescaped ':' whose left part is an existing
    archive; for the destination also at the first ':' whose left part ends in
    ``.barecat`` (the archive is created). ``ARCHIVE::path``, the reference's spelling,
    is accepted too. Anything else is local; ``\\:`` writes a literal ':'.
    """
    colons = _colons(arg)
    for i in colons:
        if is_archive(_unescape(arg[:i])):
            return _archive_location(_unescape(arg[:i]), arg[i + 1 :], False)
    if destination and colons:
        head = _unescape(arg[: colons[0]])
        if head.endswith(ARCHIVE_SUFFIX) and not os.path.lexists(head):
            return _archive_location(head, arg[colons[0] + 1 :], True)
    local = _unescape(arg)
    base = os.path.basename(os.path.normpath(local))
    contents = local.endswith("/") or base in ("", ".", "..")
    return Location(local, None, contents)


def _archive_location(archive: str, inner: str, creates: bool) -> Location:
    inner = _unescape(inner[1:] if inner.startswith(":") else inner)
    path = normalize(inner.strip("/")) if inner.strip("/") else ""
    return Location(path, archive, inner.endswith("/") or not path, creates)


__all__ = [
    "Action",
    "Entry",
    "Kind",
    "Listing",
    "Location",
    "Op",
    "SyncOptions",
    "attrs_differ",
    "content_differs",
    "is_archive",
    "needs_checksum",
    "parse_location",
    "plan_sync",
]
