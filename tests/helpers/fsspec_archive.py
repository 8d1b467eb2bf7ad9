"""The ``barecat://`` fsspec filesystem read through fsspec's API only, as a
:class:`barecat.ReadableArchive`, so the conformance suite's assertions run through it.

Each primitive is one fsspec call (``info``, ``ls``, ``cat_file``, ``open``, ``find``,
``glob``) with fsspec's answers turned back into records and fsspec's builtin errors
into the archive's. Two things fsspec cannot say: storage order (``iter_fileinfos`` gives
path order whatever is asked; its records carry no addresses) and ``glob.glob``'s
spelling, which ``glob`` puts back from fsspec's matches (a ``/`` after the directories
a pattern ending in ``/`` matches, and after the base of a trailing ``**``, whose match
includes the base itself; fsspec's ``**`` is always recursive).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

from barecat import (
    BarecatDirInfo,
    BarecatEntryInfo,
    BarecatFileInfo,
    FileNotFoundBarecatError,
    NotADirectoryBarecatError,
    Order,
    ReadableArchive,
)


def _entry(record: dict[str, Any]) -> BarecatEntryInfo:
    """The record behind one of the filesystem's ``info`` dictionaries."""
    common = {k: record.get(k) for k in ("mode", "uid", "gid", "mtime_ns")}
    if record["type"] == "directory":
        return BarecatDirInfo(
            record["name"],
            **common,
            num_subdirs=record.get("num_subdirs"),
            num_files=record.get("num_files"),
            size_tree=record.get("size_tree"),
            num_files_tree=record.get("files"),
        )
    return BarecatFileInfo(record["name"], **common, size=record["size"], crc32c=record["crc32c"])


def _path(item: BarecatFileInfo | str) -> str:
    return item.path if isinstance(item, BarecatFileInfo) else item


class FsspecArchive(ReadableArchive):
    """``fs`` (a ``BarecatFileSystem`` of the archive at ``location``) as a ReadableArchive."""

    def __init__(self, fs: Any, location: str) -> None:
        self.fs = fs
        self.location = location

    @property
    def path(self) -> str:
        return self.location

    @property
    def num_files(self) -> int:
        return int(self.fs.info("")["files"])

    def lookup(self, path: str) -> BarecatEntryInfo:
        try:
            return _entry(self.fs.info(path))
        except FileNotFoundError as e:
            raise FileNotFoundBarecatError(path) from e

    def listdir_infos(self, path: str = "") -> list[BarecatEntryInfo]:
        if isinstance(self.lookup(path), BarecatFileInfo):  # (fsspec's ls lists a file)
            raise NotADirectoryBarecatError(f"Not a directory: {path}")
        return [_entry(record) for record in self.fs.ls(path, detail=True)]

    def read(self, item: BarecatFileInfo | str, offset: int = 0, size: int = -1) -> bytes:
        end = None if size < 0 else offset + size
        try:
            data: bytes = self.fs.cat_file(_path(item), start=offset or None, end=end)
        except FileNotFoundError as e:
            raise FileNotFoundBarecatError(_path(item)) from e
        return data

    def __getitem__(self, path: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(path)
        except FileNotFoundError as e:
            raise KeyError(path) from e
        return data

    def open(self, item: BarecatFileInfo | str, mode: str = "rb") -> IO[Any]:
        try:
            stream: IO[Any] = self.fs.open(_path(item), mode)
        except FileNotFoundError as e:
            raise FileNotFoundBarecatError(_path(item)) from e
        return stream

    def read_many(self, paths: Iterable[str]) -> list[bytes]:
        return [self.read(p) for p in paths]

    def iter_fileinfos(self, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        for record in self.fs.find("", withdirs=False, detail=True).values():
            entry = _entry(record)
            assert isinstance(entry, BarecatFileInfo)
            yield entry

    def glob(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        if "**" in pattern and not recursive:
            raise ValueError("fsspec's ** is always recursive")
        found = self.fs.glob(pattern, detail=True, include_hidden=include_hidden)
        if pattern.endswith("/"):
            return sorted(p + "/" for p, r in found.items() if r["type"] == "directory")
        matches = set(found)
        if pattern == "**":
            matches.add("")
        elif pattern.endswith("/**"):
            bases = self.fs.glob(pattern[:-3], detail=True, include_hidden=include_hidden)
            for base, record in bases.items():
                if record["type"] == "directory":
                    matches.discard(base)
                    matches.add(base + "/")
        return sorted(matches)

    def close(self) -> None:
        """Nothing: the filesystem holds the archive (the fixture closes it)."""
