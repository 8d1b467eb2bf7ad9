"""Archives written back to directory trees: bytes, metadata, empty directories, links.

Extraction restores what the index knows: file bytes (CRC32C-verified while copied, in
storage order so the shards are read sequentially), permission bits, owners (when run as
root, as tar does), mtimes of files and directories, empty directories, and symbolic
links. It is defensive against hostile archives: every destination is checked to lie in
the target directory before anything is written, files are opened without following a
final symlink, and links are created only after all files, so no entry can be written
through a link. A link whose target leaves the target directory is refused unless asked.
Uses only the public :class:`Barecat` API; never prints.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from barecat.archive import Barecat
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import InvalidPathBarecatError
from barecat.glob import PathFilter
from barecat.paths import is_within

COPY_CHUNK = 1 << 20
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class ExtractResult:
    """What was written, and entries refused or failed (path in the archive, reason)."""

    files: int = 0
    bytes: int = 0
    links: int = 0
    failures: list[tuple[str, Exception]] = field(default_factory=list)


class DirectoryWriter:
    """Safe writes of archive entries below one target directory (shared with sync).

    Destinations are checked to stay below ``root``, files are opened without following a
    final link, links in the way are replaced instead of written through, and links
    pointing outside ``root`` are refused (recorded in ``result.failures``) unless allowed.
    """

    def __init__(self, bc: Barecat, root: str, allow_outside_links: bool, owners: bool) -> None:
        self.bc = bc
        self.root = root
        self.allow_outside_links = allow_outside_links
        self.owners = owners
        self.result = ExtractResult()
        self.safe_dirs: set[str] = {root}

    def ensure_dir(self, dest: str) -> None:
        """Make ``dest`` a real directory chain below the root, as tar does: a symbolic
        link in the way (left by an earlier extraction) is replaced, never followed."""
        if dest in self.safe_dirs:
            return
        self.ensure_dir(os.path.dirname(dest))
        try:
            st = os.lstat(dest)
        except FileNotFoundError:
            os.mkdir(dest, 0o700)
        else:
            if stat.S_ISLNK(st.st_mode):
                os.unlink(dest)
                os.mkdir(dest, 0o700)
            elif not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "a file is in the way", dest)
        self.safe_dirs.add(dest)

    def destination(self, path: str) -> str:
        dest = os.path.normpath(os.path.join(self.root, path))
        if not self.inside(dest):
            raise InvalidPathBarecatError(
                f"Archive entry {path!r} would be written outside {self.root}"
            )
        return dest

    def inside(self, dest: str) -> bool:
        return dest == self.root or dest.startswith(self.root + os.sep)

    def metadata(self, dest: str, info: BarecatEntryInfo, link: bool = False) -> None:
        if self.owners and info.uid is not None and info.gid is not None:
            os.chown(dest, info.uid, info.gid, follow_symlinks=not link)
        if info.mode is not None and not link:
            os.chmod(dest, stat.S_IMODE(info.mode))
        if info.mtime_ns is not None:
            os.utime(dest, ns=(info.mtime_ns, info.mtime_ns), follow_symlinks=not link)

    def write_file(self, f: BarecatFileInfo, dest: str) -> None:
        if os.path.islink(dest):
            os.unlink(dest)  # replace a link instead of writing through it
        fd = os.open(dest, _CREATE_FLAGS, 0o600)
        with open(fd, "wb", closefd=True) as out:
            copy_file_to(self.bc, f, out)
        self.metadata(dest, f)
        self.result.files += 1
        self.result.bytes += f.size or 0

    def make_link(self, f: BarecatFileInfo, dest: str) -> None:
        target = os.fsdecode(self.bc.read(f))
        resolved = os.path.normpath(os.path.join(os.path.dirname(dest), target))
        if not self.allow_outside_links and not self.inside(resolved):
            self.result.failures.append(
                (f.path, InvalidPathBarecatError(f"link to {target!r} points outside {self.root}"))
            )
            return
        if os.path.lexists(dest):
            if os.path.isdir(dest) and not os.path.islink(dest):
                raise IsADirectoryError(errno.EISDIR, "a directory is in the way", dest)
            os.unlink(dest)
        os.symlink(target, dest)
        self.metadata(dest, f, link=True)
        self.result.links += 1


def copy_file_to(bc: Barecat, item: BarecatFileInfo | str, out: BinaryIO) -> None:
    """Write one file's bytes to ``out``, CRC32C-verified, in bounded memory."""
    with open_verified(bc, item) as source:
        shutil.copyfileobj(source, out, COPY_CHUNK)


def open_verified(bc: Barecat, item: BarecatFileInfo | str) -> BinaryIO:
    """A stored file to read, whose bytes are known to match their CRC32C.

    A small file is read and checked at once; a big one is checked first and then
    streamed, so a damaged file raises before any of its bytes are passed on.
    """
    f = bc.index.lookup_file(item) if isinstance(item, str) else item
    if type(f.size) is not int or f.size <= COPY_CHUNK:  # (a damaged row: read names it)
        return io.BytesIO(bc.read(f))
    if not bc.check_crc32c(f):
        bc.read(f)  # raises the integrity error naming the damage
    return cast(BinaryIO, bc.open(f, "rb"))


def extract_to_directory(
    bc: Barecat,
    target_directory: str,
    paths: Iterable[str] | None = None,
    *,
    path_filter: PathFilter | None = None,
    allow_outside_links: bool = False,
    restore_owners: bool | None = None,
    on_file: Callable[[BarecatFileInfo], None] | None = None,
) -> ExtractResult:
    """Write the archive's entries (all, or those under ``paths``) below ``target_directory``.

    ``paths`` name files or directories (a directory brings its subtree); a path not in the
    archive raises ``FileNotFoundBarecatError`` before anything is written. ``path_filter``
    narrows the selection further. Owners are restored when ``restore_owners`` is true
    (default: when running as root). Links that point outside the target are not created
    and are listed in the result's ``failures`` instead, unless ``allow_outside_links``.
    """
    root = os.path.abspath(target_directory)
    wanted = None if paths is None else [bc.index.lookup(p).path for p in paths]
    owners = os.geteuid() == 0 if restore_owners is None else restore_owners
    ex = DirectoryWriter(bc, root, allow_outside_links, owners)

    def selected(path: str, is_dir: bool) -> bool:
        if wanted is not None and not any(not w or is_within(path, w) for w in wanted):
            return False
        return path_filter is None or path_filter.selects(path, is_dir)

    dirs: list[BarecatDirInfo] = [
        d for d in bc.index.iter_all_dirinfos(Order.PATH) if selected(d.path, True)
    ]
    files = [f for f in bc.index.iter_all_fileinfos(Order.ADDRESS) if selected(f.path, False)]
    for entry in (*dirs, *files):
        ex.destination(entry.path)  # refuse a hostile archive before writing anything
    os.makedirs(root, exist_ok=True)
    for d in dirs:
        ex.ensure_dir(ex.destination(d.path))
    links = []
    for f in files:
        dest = ex.destination(f.path)
        ex.ensure_dir(os.path.dirname(dest))
        if f.is_symlink_entry:
            links.append((f, dest))
            continue
        ex.write_file(f, dest)
        if on_file is not None:
            on_file(f)
    for f, dest in links:
        ex.make_link(f, dest)
        if on_file is not None:
            on_file(f)
    for d in reversed(dirs):  # deepest first, so writing children cannot move a parent's mtime
        ex.metadata(ex.destination(d.path), d)
    return ex.result


def extract(barecat_path: str, target_directory: str) -> None:
    """Extract a whole archive into ``target_directory`` (the reference's function).

    Raises the first refusal (a link pointing outside) after extracting everything else.
    """
    with Barecat(barecat_path) as bc:
        result = extract_to_directory(bc, target_directory)
    if result.failures:
        raise result.failures[0][1]


__all__ = ["DirectoryWriter", "ExtractResult", "copy_file_to", "extract", "extract_to_directory"]
