"""The reference's module-level functions, kept so old scripts keep working.

``open`` with file-like modes, a cached reader, archive existence/removal by path, and
the dict-shaped ``read_index``/``write_index``. New code uses :class:`Barecat` directly.
Sits beside ``archive`` and uses only its public API and ``layout``.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

from barecat.archive import Barecat
from barecat.archive.auto_codec import AUTO_CODEC_DEPRECATED, decode_by_extension
from barecat.entries import BarecatFileInfo
from barecat.layout import archive_exists, archive_not_found, remove_archive

_MODES = {
    "r": {"readonly": True},
    "r+": {"readonly": False, "exist_ok": True},
    "a+": {"readonly": False, "exist_ok": True},
    "w+": {"readonly": False, "overwrite": True},
    "x+": {"readonly": False, "exist_ok": False},
}


def open(
    path: str | os.PathLike[str],
    mode: str = "r",
    auto_codec: bool = False,
    threadsafe_reader: bool = True,
) -> Barecat:
    """Open an archive with a file-like mode: r, r+, a+, w+ (overwrite), x+ (must not exist).

    ``auto_codec=True`` is deprecated, as in 0.3.x: the dict API then encodes and decodes
    by extension (see ``Barecat``); wrap the archive in ``DecodedView`` instead."""
    if mode not in _MODES:
        raise ValueError(f"Invalid mode {mode!r}; expected one of {', '.join(_MODES)}")
    if mode == "r+" and not archive_exists(path):
        raise archive_not_found(path)
    options: dict[str, Any] = dict(_MODES[mode])
    bc = Barecat(path, threadsafe=threadsafe_reader and mode == "r", **options)
    if auto_codec:  # warned here, so that the warning names the caller's line
        warnings.warn(AUTO_CODEC_DEPRECATED, DeprecationWarning, stacklevel=2)
        decode_by_extension(bc)
    return bc


_CACHED_READER_DEFAULT = (
    "get_cached_reader() currently defaults to auto_codec=True, but this default will "
    "change to False in version 1.0. Pass auto_codec=True explicitly to keep the current "
    "behavior, or auto_codec=False (and use DecodedView) to adopt the new default."
)


def get_cached_reader(path: str, auto_codec: bool | None = None) -> Barecat:
    """A read-only, thread-safe archive shared by all callers in this process.

    Args:
        path: the archive.
        auto_codec: ``False`` gives the files' bytes; ``True`` (deprecated) decodes them
            by extension, as ``Barecat(auto_codec=True)``; ``None`` does what 0.3.x's
            default did: decodes, with its ``FutureWarning`` about the default.

    Returns:
        One archive per (path, auto_codec), opened on first use.
    """
    if auto_codec is None:
        warnings.warn(_CACHED_READER_DEFAULT, FutureWarning, stacklevel=2)
        auto_codec = True
    elif auto_codec:
        warnings.warn(AUTO_CODEC_DEPRECATED, DeprecationWarning, stacklevel=2)
    return _cached_reader(path, auto_codec)


@functools.lru_cache(maxsize=16)
def _cached_reader(path: str, auto_codec: bool) -> Barecat:
    bc = Barecat(path, readonly=True, threadsafe=True)
    if auto_codec:
        decode_by_extension(bc)
    return bc


def exists(path: str | os.PathLike[str]) -> bool:
    """True if an archive (either index naming) exists at ``path``."""
    return archive_exists(path)


def remove(path: str | os.PathLike[str]) -> None:
    """Delete an archive's index and shards from disk."""
    remove_archive(path)


def read_index(path: str | os.PathLike[str]) -> dict[str, tuple[int, int, int]]:
    """The archive's files as ``{path: (shard, offset, size)}``."""
    with Barecat(path) as bc:
        return {f.path: (*f.address[:2], f.size or 0) for f in bc.iter_fileinfos()}


def write_index(
    dictionary: dict[str, tuple[int, int, int]], target_path: str | os.PathLike[str]
) -> None:
    """Create an index (no CRCs) for shards written by other means."""
    with Barecat(target_path, readonly=False, overwrite=True) as bc:
        bc.add_placed(
            [
                BarecatFileInfo(path, shard=shard, offset=offset, size=size)
                for path, (shard, offset, size) in dictionary.items()
            ]
        )
