"""Extracting an archive (or part of it) into a directory on disk.

Restores what the index knows: file bytes, permission bits, mtimes of files and
directories, and empty directories. Every destination is checked to lie inside the
target directory, so an archive written by another tool with '..' in a path cannot write
outside it. Uses only the public :class:`Barecat` API; never prints (progress goes to an
optional callback).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable

from barecat.archive import Barecat
from barecat.entries import BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import InvalidPathBarecatError

COPY_CHUNK = 1 << 20


def _destination(root: str, path: str) -> str:
    dest = os.path.normpath(os.path.join(root, path))
    if dest != root and not dest.startswith(root + os.sep):
        raise InvalidPathBarecatError(f"Archive entry {path!r} would be written outside {root}")
    return dest


def _apply_metadata(dest: str, info: BarecatEntryInfo) -> None:
    if info.mode is not None:
        os.chmod(dest, stat.S_IMODE(info.mode))
    if info.mtime_ns is not None:
        os.utime(dest, ns=(info.mtime_ns, info.mtime_ns))


def extract_to_directory(
    bc: Barecat,
    target_directory: str,
    paths: Iterable[str] | None = None,
    on_file: Callable[[BarecatFileInfo], None] | None = None,
) -> int:
    """Write the archive's files (all, or those under ``paths``) below ``target_directory``.

    Files are read in storage order (sequential shard reads) and CRC32C-verified as they
    are copied. Returns the number of files written.
    """
    root = os.path.abspath(target_directory)
    os.makedirs(root, exist_ok=True)
    wanted = None if paths is None else [bc.index.lookup(p).path for p in paths]

    def selected(path: str) -> bool:
        return wanted is None or any(not w or path == w or path.startswith(w + "/") for w in wanted)

    dirs = [d for d in bc.index.iter_all_dirinfos(Order.PATH) if selected(d.path)]
    for d in dirs:
        os.makedirs(_destination(root, d.path), exist_ok=True)
    count = 0
    for f in bc.index.iter_all_fileinfos(Order.ADDRESS):
        if not selected(f.path):
            continue
        dest = _destination(root, f.path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _write_file(bc, f, dest)
        _apply_metadata(dest, f)
        count += 1
        if on_file is not None:
            on_file(f)
    for d in reversed(dirs):  # deepest first, so writing children cannot move a parent's mtime
        _apply_metadata(_destination(root, d.path), d)
    return count


def _write_file(bc: Barecat, f: BarecatFileInfo, dest: str) -> None:
    if (f.size or 0) <= COPY_CHUNK:
        data = bc.read(f)
        with open(dest, "wb") as out:
            out.write(data)
        return
    if not bc.check_crc32c(f):
        bc.read(f)  # raises the integrity error naming the damage
    with bc.open(f, "rb") as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, COPY_CHUNK)


def extract(barecat_path: str, target_directory: str) -> None:
    """Extract a whole archive into ``target_directory`` (the reference's function)."""
    with Barecat(barecat_path) as bc:
        extract_to_directory(bc, target_directory)


__all__ = ["extract", "extract_to_directory"]
