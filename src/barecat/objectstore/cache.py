"""The local cache directory of a remote archive: a copy of its index, and block caches
of its shards, each named by the object version it was made from.

A copy is named after the version the store gave for its object (the ETag on S3), so a
changed object is never served from an old copy: it simply gets a new name, and older
versions are deleted when a newer one is made (processes still reading them keep their
open files). Downloads land under a temporary name and are renamed when complete, so
concurrent openers and killed downloads leave no half copy behind. Imports the
``remote`` package's own modules.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil

from barecat.exceptions import RemoteStorageBarecatError
from barecat.layout import abandoned_pids
from barecat.objectstore.block_cache import BlockCache
from barecat.objectstore.location import ObjectStore, ObjectVersion

_DIGEST_CHARS = 16


def default_cache_root() -> str:
    """``$BARECAT_CACHE_DIR``, else ``$XDG_CACHE_HOME/barecat``, else ``~/.cache/barecat``."""
    explicit = os.environ.get("BARECAT_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "barecat")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_CHARS]


def _object_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1] or "archive"


def trim_cache(root: str, limit: int, keep: str) -> list[str]:
    """Delete the caches of the archives used longest ago until those under ``root`` take
    at most ``limit`` bytes of disk; ``keep`` (the directory in use) stays whatever its
    size. Processes still reading a deleted cache keep their open files. Returns the
    directories deleted."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    sizes: dict[str, int] = {}
    for name in names:
        directory = os.path.join(root, name)
        if os.path.isdir(directory) and not os.path.islink(directory):
            sizes[directory] = _disk_usage(directory)
    total = sum(sizes.values())
    deleted = []
    for directory in sorted(sizes, key=_last_used):
        if total <= limit:
            break
        if os.path.abspath(directory) == os.path.abspath(keep):
            continue
        shutil.rmtree(directory, ignore_errors=True)
        total -= sizes[directory]
        deleted.append(directory)
    return deleted


def _disk_usage(directory: str) -> int:
    """Bytes the files of ``directory`` take on disk (sparse block caches count only the
    blocks they hold)."""
    used = 0
    for entry in os.scandir(directory):
        with contextlib.suppress(FileNotFoundError):
            used += entry.stat(follow_symlinks=False).st_blocks * 512
    return used


def _last_used(directory: str) -> float:
    try:
        return os.stat(directory).st_mtime
    except FileNotFoundError:
        return 0.0


class ArchiveCache:
    """Where copies of the remote archive at ``url`` are kept, under ``root``; opening one
    marks it as used now (for ``trim_cache``)."""

    def __init__(self, root: str, url: str) -> None:
        self.root = root
        self.directory = os.path.join(root, f"{_object_name(url)}-{_digest(url)}")
        with contextlib.suppress(FileNotFoundError):
            os.utime(self.directory)

    def _path_of(self, obj: ObjectVersion, layout: str = "") -> str:
        name = f"{_object_name(obj.url)}-{_digest(obj.version + layout)}"
        return os.path.join(self.directory, name)

    def path_of(self, obj: ObjectVersion) -> str:
        """Where the whole copy of this version of the object is kept (see
        :meth:`copy_of`; a background download puts it there too)."""
        return self._path_of(obj)

    def forget_other_versions(self, keep_path: str, obj: ObjectVersion) -> None:
        """Delete the copies and block caches of other versions of ``obj`` (processes
        still reading them keep their open files)."""
        keep = os.path.basename(keep_path)
        pattern = re.compile(
            re.escape(_object_name(obj.url)) + rf"-[0-9a-f]{{{_DIGEST_CHARS}}}(\.map|-lookup)?$"
        )
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.directory):
                if pattern.match(name) and not name.startswith(keep):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(os.path.join(self.directory, name))

    def copy_of(self, store: ObjectStore, obj: ObjectVersion) -> str:
        """A local copy of the whole object (downloaded unless this version is here)."""
        path = self._path_of(obj)
        with contextlib.suppress(FileNotFoundError):
            if os.path.getsize(path) == obj.size:
                return path
        os.makedirs(self.directory, exist_ok=True)
        self._remove_abandoned_downloads(path)
        partial = f"{path}.part-{os.getpid()}"
        try:
            got = store.download(obj.url, partial)
            if got != obj.size:
                raise RemoteStorageBarecatError(
                    f"{obj.url} changed while it was being downloaded ({got} bytes, not "
                    f"{obj.size}); open the archive again"
                )
            os.replace(partial, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)
        self.forget_other_versions(path, obj)
        return path

    def _remove_abandoned_downloads(self, path: str) -> None:
        """Partial downloads of ``path`` whose process is gone (killed mid-download)."""
        prefix = os.path.basename(path) + ".part-"
        for pid in abandoned_pids(self.directory, prefix):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.directory, f"{prefix}{pid}"))

    def blocks_of(self, obj: ObjectVersion, block_size: int) -> BlockCache:
        """The block cache of this version of the object (empty when new)."""
        path = self._path_of(obj, f":blocks-of-{block_size}")
        fresh = not os.path.exists(path)
        cache = BlockCache(path, obj.size, block_size)
        if fresh:
            self.forget_other_versions(path, obj)
        return cache


__all__ = ["ArchiveCache", "default_cache_root", "trim_cache"]
