"""SQLite's errors as barecat's: why an index could not be opened, a full disk, and
which rule an insert broke (a path taken by a directory or a file, a duplicate).

The schema's triggers name the rule they enforce in their messages (``sql/*.sql``);
older indexes use the reference's wording, so both are recognized. Imports
``exceptions`` and ``barecat.index.connection``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from barecat.exceptions import (
    ArchiveLockedBarecatError,
    BarecatError,
    CorruptIndexBarecatError,
    FileExistsBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index.connection import is_busy

_DIR_TAKEN = ("barecat: a directory already has this path", "Path already exists as directory")
_FILE_TAKEN = ("barecat: a file already has this path", "Path already exists as file")


def open_error(path: str, e: sqlite3.DatabaseError) -> BarecatError:
    """Why an index could not be opened, as barecat's error.

    Args:
        path: the index file.
        e: what SQLite raised while opening or first reading it.

    Returns:
        :class:`ArchiveLockedBarecatError` for a lock held by another program (busy, not
        broken), :class:`ReadOnlyBarecatError` for a crashed writer's journal a reader
        cannot roll back, :class:`CorruptIndexBarecatError` for a file that is no
        readable index.
    """
    if is_busy(e):
        return ArchiveLockedBarecatError(
            f"{path} is locked by another program writing it ({e}); try again when it is done"
        )
    if isinstance(e, sqlite3.OperationalError) and "readonly" in str(e):
        return ReadOnlyBarecatError(
            f"{path} holds an unfinished transaction of a crashed writer; open it once "
            "with write access (readonly=False) so SQLite can roll it back"
        )
    if isinstance(e, sqlite3.OperationalError):
        return CorruptIndexBarecatError(f"{path} cannot be read: {e}")
    return CorruptIndexBarecatError(f"{path} is not a readable barecat index: {e}")


def disk_full_or(e: sqlite3.OperationalError, where: str) -> Exception:
    """SQLite's SQLITE_FULL as barecat's disk-full error naming ``where`` (the index
    file); any other error unchanged."""
    if "full" in str(e):
        return NotEnoughSpaceBarecatError(f"Disk full while updating the index {where}: {e}")
    return e


def integrity_error(
    e: sqlite3.IntegrityError, path: str, is_file: bool, isfile: Callable[[str], bool]
) -> BarecatError:
    """The error for an insert of ``path`` (a file if ``is_file``, else a directory)
    that the index refused.

    Args:
        e: SQLite's error.
        path: the normalized path inserted.
        is_file: whether a file row was inserted.
        isfile: tells whether a path is a file in the index (asked only for a
            directory refused because a file is in the way).

    Returns:
        ``IsADirectoryBarecatError`` (a file where a directory is),
        ``FileExistsBarecatError`` (the path is taken), ``NotADirectoryBarecatError``
        (an ancestor is a file), or a plain ``BarecatError`` quoting SQLite.
    """
    msg = str(e)
    if any(m in msg for m in _DIR_TAKEN):
        return (
            IsADirectoryBarecatError(path) if is_file else FileExistsBarecatError(path, "Directory")
        )
    if any(m in msg for m in _FILE_TAKEN):
        if not is_file and isfile(path):
            return FileExistsBarecatError(path, "File")
        return NotADirectoryBarecatError(f"A parent of {path!r} is a file")
    if "UNIQUE" in msg:
        return FileExistsBarecatError(path, "File" if is_file else "Directory")
    return BarecatError(f"Index refused {path!r}: {msg}")
