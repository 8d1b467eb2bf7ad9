"""Directory trees into archives and archives into directory trees.

Ingest walks the tree in sorted order, reads files on a small thread pool (reads release
the GIL, so they overlap with each other and with the archive's writes) a bounded window
ahead, and hands them to ``Barecat.add_many``; directories, empty ones included, keep
their metadata, and symbolic links are stored as link entries (mode says link, bytes are
the target) unless asked to follow them.

Extraction restores what the index knows: file bytes, permission bits, mtimes of files
and directories, and empty directories. Every destination is checked to lie inside the
target directory, so an archive written by another tool with '..' in a path cannot write
outside it. Uses only the public :class:`Barecat` API; never prints (progress goes to an
optional callback).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from barecat.archive import Barecat
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import InvalidPathBarecatError
from barecat.paths import normalize

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
        if f.is_symlink_entry:
            _make_link(bc, f, dest, root)
        else:
            _write_file(bc, f, dest)
            _apply_metadata(dest, f)
        count += 1
        if on_file is not None:
            on_file(f)
    for d in reversed(dirs):  # deepest first, so writing children cannot move a parent's mtime
        _apply_metadata(_destination(root, d.path), d)
    return count


def _make_link(bc: Barecat, f: BarecatFileInfo, dest: str, root: str) -> None:
    """Recreate a stored symbolic link, refusing one that would point outside ``root``."""
    target = os.fsdecode(bc.read(f))
    resolved = os.path.normpath(os.path.join(os.path.dirname(dest), target))
    if resolved != root and not resolved.startswith(root + os.sep):
        raise InvalidPathBarecatError(
            f"Symbolic link {f.path!r} -> {target!r} would point outside {root}"
        )
    os.symlink(target, dest)
    if f.mtime_ns is not None:
        os.utime(dest, ns=(f.mtime_ns, f.mtime_ns), follow_symlinks=False)


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


FileBatch = list[tuple[BarecatFileInfo, bytes]]
Source = tuple[str, str, bool]  # path on disk, path in the archive, store as a link
READ_CHUNK = 128  # files per thread-pool task: enough to amortize the task overhead


def _read_entry(source: str, store: str, as_link: bool) -> tuple[BarecatFileInfo, bytes]:
    info = BarecatFileInfo(store)
    if as_link:
        info.fill_from_statresult(os.lstat(source))
        return info, os.fsencode(os.readlink(source))
    fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        info.fill_from_statresult(st)
        parts = []
        remaining = st.st_size
        while True:
            chunk = os.read(fd, max(remaining, 1 << 16))
            if not chunk:
                break
            parts.append(chunk)
            remaining -= len(chunk)
        return info, parts[0] if len(parts) == 1 else b"".join(parts)
    finally:
        os.close(fd)


def _read_batch(sources: list[Source]) -> FileBatch:
    return [_read_entry(*source) for source in sources]


def _scan(
    root: str, prefix: str, follow_symlinks: bool
) -> tuple[list[BarecatDirInfo], list[Source]]:
    """Directories (with metadata) and the files to read, in sorted order."""
    dirs: list[BarecatDirInfo] = []
    files: list[Source] = []
    stack = [(root, prefix)]
    while stack:
        directory, stored = stack.pop()
        info = BarecatDirInfo(stored)
        info.fill_from_statresult(os.stat(directory))
        dirs.append(info)
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            child = f"{stored}/{entry.name}" if stored else entry.name
            if entry.is_dir(follow_symlinks=follow_symlinks):
                subdirs.append((entry.path, child))
            else:
                files.append((entry.path, child, not follow_symlinks and entry.is_symlink()))
        stack.extend(reversed(subdirs))
    return dirs, files


def add_directory(
    bc: Barecat,
    source_directory: str,
    prefix: str = "",
    *,
    workers: int = 4,
    follow_symlinks: bool = False,
    on_file: Callable[[BarecatFileInfo], None] | None = None,
) -> int:
    """Store the tree under ``source_directory`` at ``prefix`` in the archive.

    Returns the number of files added. Existing files are not overwritten (the batch that
    meets one fails with ``FileExistsBarecatError``); existing directories get the
    source's metadata.
    """
    root = os.path.abspath(source_directory)
    dirs, files = _scan(root, normalize(prefix), follow_symlinks)
    for d in dirs:
        bc.add(d, dir_exist_ok=True)
    chunks = [files[i : i + READ_CHUNK] for i in range(0, len(files), READ_CHUNK)]

    def batches() -> Iterator[tuple[BarecatFileInfo, bytes]]:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            window: deque[Future[FileBatch]] = deque()
            for chunk in chunks:
                window.append(pool.submit(_read_batch, chunk))
                if len(window) > 2 * workers:
                    yield from _emit(window.popleft().result(), on_file)
            while window:
                yield from _emit(window.popleft().result(), on_file)

    return bc.add_many(batches())


def _emit(
    batch: FileBatch, on_file: Callable[[BarecatFileInfo], None] | None
) -> Iterator[tuple[BarecatFileInfo, bytes]]:
    for info, data in batch:
        if on_file is not None:
            on_file(info)
        yield info, data


def extract(barecat_path: str, target_directory: str) -> None:
    """Extract a whole archive into ``target_directory`` (the reference's function)."""
    with Barecat(barecat_path) as bc:
        extract_to_directory(bc, target_directory)


__all__ = ["add_directory", "extract", "extract_to_directory"]
