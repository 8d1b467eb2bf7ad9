"""An archive as an fsspec filesystem, protocol ``barecat`` (registered as an entry point),
so anything fsspec-aware reads from archives:

    fsspec.open("barecat::/data/ds.barecat/train/cat/001.jpg")        # chained URL
    fsspec.open("barecat://train/cat/001.jpg::/data/ds.barecat")      # the same
    fsspec.filesystem("barecat", fo="/data/ds.barecat").ls("train")
    pandas.read_csv("barecat://tables/a.csv", storage_options={"fo": "/data/ds.barecat"})
    fsspec.open("barecat://train/cat/001.jpg::s3://bucket/ds.barecat", s3={...})  # on S3

Read-only. Listings, ``info`` and ``glob`` are answered by the index (no whole-tree
cache, so a million-file archive opens at once); ``cat_file`` with a range and ``open``
(seekable) read only what is asked. ``info`` records carry the archive's metadata
(``mode``, ``uid``, ``gid``, ``mtime_ns``; a directory's ``num_subdirs``, ``num_files``
and ``size_tree`` as well). ``glob`` takes ``include_hidden`` (default True). The
filesystem reads through :class:`~barecat.archive.ReadableArchive` only. Imports fsspec
and the archive layer.
"""

from __future__ import annotations

import io
import re
from typing import Any

from barecat.exceptions import (
    BarecatError,
    CorruptIndexBarecatError,
    FileNotFoundBarecatError,
    MissingDependencyBarecatError,
)

with MissingDependencyBarecatError.when_missing(
    "barecat.integrations.fsspec needs fsspec", "fsspec"
):
    from fsspec.spec import AbstractFileSystem

try:  # newer fsspec: a chained URL hands such a filesystem the whole path as ``fo``
    from fsspec.implementations.chained import ChainedFileSystem as _Layer
except ImportError:  # older fsspec: chained URLs name the inner path explicitly
    _Layer = AbstractFileSystem

from barecat.archive import Barecat
from barecat.archive.readable import ReadableArchive
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.paths import normalize

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/+")
"""A URL's scheme and its slashes (``http://``, or ``http:/`` as fsspec may pass it)."""


class BarecatFileSystem(_Layer):  # type: ignore[misc]
    """The files of the archive ``fo``: a local path, or an archive on another fsspec
    filesystem (``s3://bucket/ds.barecat``, or chained: ``barecat://PATH::s3://bucket/ds.barecat``
    with the store's options as ``target_options``)."""

    protocol = "barecat"
    root_marker = ""

    def __init__(
        self,
        fo: str = "",
        *,
        passphrase: str | None = None,
        target_protocol: str | None = None,
        target_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not fo:
            raise ValueError("give the archive: fsspec.filesystem('barecat', fo=PATH)")
        location = str(fo)
        if target_protocol not in (None, "file", "local") and "://" not in location:
            location = f"{target_protocol}://{location}"
        opened = self._open_within(location, passphrase, target_options, cache_dir)
        self.archive: ReadableArchive = opened
        self._own_path = self._strip_protocol(self.archive.path.split("://", 1)[-1])

    @staticmethod
    def _open_within(
        location: str,
        passphrase: str | None,
        storage_options: dict[str, Any] | None,
        cache_dir: str | None,
    ) -> Barecat:
        """The archive at ``location`` or at the longest prefix of it that is one (so
        ``barecat::/data/ds.barecat/train/1.jpg`` finds ``/data/ds.barecat``)."""
        candidate = location.rstrip("/")
        first: BarecatError | None = None
        while True:
            try:
                return Barecat(candidate, threadsafe=True, passphrase=passphrase,
                               storage_options=storage_options, cache_dir=cache_dir)  # fmt: skip
            except (FileNotFoundBarecatError, CorruptIndexBarecatError) as e:
                first = first or e  # what is wrong with the location as given
                head = candidate.rpartition("/")[0]
                if not head or head.endswith(":/"):
                    raise first from None
                candidate = head

    def _inner(self, path: Any) -> str:
        """A path inside the archive; a path that starts with the archive's own location
        (as fsspec passes for ``barecat::/data/ds.barecat/a.jpg``) is taken as full."""
        text = self._strip_protocol(path)
        if text == self._own_path:
            return ""
        if text.startswith(self._own_path + "/"):
            return text[len(self._own_path) + 1 :]
        return text

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        text = str(path)
        if text.startswith("barecat://"):
            text = text[len("barecat://") :]
        # (an http:// archive's paths come as given, or with the slashes run together)
        return _SCHEME.sub("", text.split("::", 1)[0]).strip("/")

    def _record(self, info: BarecatEntryInfo) -> dict[str, Any]:
        common = {"mode": info.mode, "uid": info.uid, "gid": info.gid,
                  "mtime_ns": info.mtime_ns, "mtime": _seconds(info.mtime_ns)}  # fmt: skip
        if isinstance(info, BarecatDirInfo):
            return {"name": info.path, "size": 0, "type": "directory",
                    "files": info.num_files_tree, "num_subdirs": info.num_subdirs,
                    "num_files": info.num_files, "size_tree": info.size_tree,
                    **common}  # fmt: skip
        assert isinstance(info, BarecatFileInfo)
        return {"name": info.path, "size": info.size or 0, "type": "file",
                "crc32c": info.crc32c, **common}  # fmt: skip

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return self._record(self.archive.lookup(self._inner(path)))
        except FileNotFoundBarecatError as e:
            raise FileNotFoundError(path) from e

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        inner = normalize(self._inner(path))
        if self.archive.isfile(inner):
            entries: list[BarecatEntryInfo] = [self.archive.lookup_file(inner)]
        else:
            try:
                entries = self.archive.listdir_infos(inner)
            except FileNotFoundBarecatError as e:
                raise FileNotFoundError(path) from e
        records = [self._record(e) for e in entries]
        return records if detail else [r["name"] for r in records]

    def glob(self, path: str, maxdepth: int | None = None, **kwargs: Any) -> Any:
        pattern = self._inner(path)
        hidden = bool(kwargs.get("include_hidden", True))
        found = self.archive.glob_entries(pattern, recursive="**" in pattern, include_hidden=hidden)
        if kwargs.get("detail"):
            return {p: self.info(p) for p in found}
        return found

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        inner = self._inner(path)
        if start is None and end is None:
            try:
                return self.archive[inner]
            except KeyError as e:
                raise FileNotFoundError(path) from e
        size = self.info(inner)["size"]
        first = _absolute(start or 0, size)
        last = size if end is None else _absolute(end, size)
        return self.archive.read(inner, first, max(0, last - first))

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> io.BufferedReader:
        if mode != "rb":
            raise NotImplementedError("barecat:// is read-only; write through barecat.Barecat")
        inner = self._inner(path)
        try:
            raw = self.archive.open(inner, "rb")
        except FileNotFoundBarecatError as e:
            raise FileNotFoundError(path) from e
        return io.BufferedReader(raw)  # type: ignore[arg-type]

    def ukey(self, path: str) -> str:
        info = self.info(path)
        return f"{info['name']}:{info.get('crc32c')}:{info['size']}"


def _seconds(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e9


def _absolute(position: int, size: int) -> int:
    return max(0, size + position) if position < 0 else min(position, size)


__all__ = ["BarecatFileSystem"]
