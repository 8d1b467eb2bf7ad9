"""SQLite's errors as barecat's: why an index could not be opened, what a query of an
open index met (damage, a full disk, a directory no longer writable, a lock), and which
rule an insert broke (a path taken by a directory or a file, a duplicate).

After an index opens, every public method of its parts (``IndexConnection``,
``IndexLookups`` and its base, ``IndexListing``, ``IndexEdits`` and its base) is guarded
(:func:`guard_public_methods`): what SQLite raises in it, or while its returned iterator
is consumed, leaves as barecat's error naming the index file (:func:`index_error`),
never as ``sqlite3``'s own or as the ``UnicodeDecodeError`` that ``sqlite3`` raises for
a message that is not UTF-8. Errors
of the caller's own making (``sqlite3.ProgrammingError``: a closed connection, a value
SQLite cannot bind) and changes the index refused (``sqlite3.IntegrityError``) pass
unchanged. The read hot paths guard themselves inline
(:func:`guards_itself`), which costs nothing until an error comes.

The schema's triggers name the rule they enforce in their messages (``sql/*.sql``);
older indexes use the reference's wording, so both are recognized. Imports
``exceptions`` and ``barecat.index.connection``.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
import types
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from barecat.exceptions import (
    ArchiveLockedBarecatError,
    BarecatError,
    CorruptIndexBarecatError,
    DamagedIndexBarecatError,
    FileExistsBarecatError,
    IndexIOBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    NotEnoughSpaceBarecatError,
    OutOfRangeBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index.connection import is_busy
from barecat.layout import foreign_archive

FAULTS = (sqlite3.DatabaseError, UnicodeDecodeError)
"""What a query of a damaged or unreachable index raises (``ProgrammingError`` and
``IntegrityError``, ``DatabaseError`` s too, are told apart by :func:`raise_index_error`)."""
_FULL, _IOERR, _NOLFS = 13, 10, 22
_REFUSED = {3, 8, 14, 23}  # SQLITE_PERM, _READONLY, _CANTOPEN, _AUTH

_DIR_TAKEN = ("barecat: a directory already has this path", "Path already exists as directory")
_FILE_TAKEN = ("barecat: a file already has this path", "Path already exists as file")


def open_error(path: str, e: sqlite3.DatabaseError | UnicodeDecodeError) -> BarecatError:
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
    if isinstance(e, UnicodeDecodeError):
        return index_error(path, e)
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
    foreign = foreign_archive(path)
    if foreign is not None:
        return CorruptIndexBarecatError(f"{path} is {foreign}")
    return CorruptIndexBarecatError(f"{path} is not a readable barecat index: {e}")


def index_error(path: str, e: sqlite3.Error | UnicodeDecodeError) -> BarecatError:
    """What a query of the open index at ``path`` met, as barecat's error naming it.

    Args:
        path: the index file.
        e: what ``sqlite3`` raised (one of :data:`FAULTS`).

    Returns:
        :class:`ArchiveLockedBarecatError` for another program's lock,
        :class:`NotEnoughSpaceBarecatError` for a full disk, :class:`ReadOnlyBarecatError`
        when the system refuses to write (or open) the index or its journal,
        :class:`IndexIOBarecatError` for an I/O error, and
        :class:`DamagedIndexBarecatError` for everything else: a damaged page, schema or
        value, text that is not UTF-8.
    """
    if isinstance(e, UnicodeDecodeError):  # (sqlite3's own report was not UTF-8 text)
        text = e.object.decode("utf-8", "backslashreplace") if isinstance(e.object, bytes) else ""
        return DamagedIndexBarecatError(path, f"text that is not UTF-8: {text[:200]!r}")
    code = _primary_code(e)
    if is_busy(e):
        return ArchiveLockedBarecatError(
            f"{path} is locked by another program writing it ({e}); try again when it is done"
        )
    if code == _FULL:
        return NotEnoughSpaceBarecatError(f"Disk full while updating the index {path}: {e}")
    if code in _REFUSED:
        return ReadOnlyBarecatError(
            f"The index {path} or its journal cannot be written ({e}): is its directory "
            "still writable? (If a writer crashed, open the archive once for writing to "
            "roll its journal back.)"
        )
    if code in (_IOERR, _NOLFS):
        return IndexIOBarecatError(f"I/O error on the index {path}: {e}")
    return DamagedIndexBarecatError(path, str(e))


def _primary_code(e: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``e`` (from its message before Python 3.11)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    words = {"full": _FULL, "readonly": 8, "unable to open": 14, "disk I/O": _IOERR}
    return next((c for w, c in words.items() if w in str(e)), None)


def raise_index_error(path: str, e: sqlite3.Error | UnicodeDecodeError) -> NoReturn:
    """Raise :func:`index_error` for ``e`` from it. Raised again as it is: a
    ``sqlite3.ProgrammingError`` (the caller's misuse, not the index's state) and a
    ``sqlite3.IntegrityError`` (a change the index refused: the edits that can meet one
    word it themselves, :func:`integrity_error`; the rest are the refusals of barecat's
    own triggers, such as an encrypted archive's list of files changed without its key).

    Raises:
        BarecatError: the error :func:`index_error` makes.
        sqlite3.ProgrammingError: ``e`` itself.
        sqlite3.IntegrityError: ``e`` itself.
    """
    if isinstance(e, (sqlite3.ProgrammingError, sqlite3.IntegrityError)):
        raise e
    raise index_error(path, e) from e


_F = TypeVar("_F", bound=Callable[..., Any])
_UNGUARDED = frozenset({"__init__", "conn", "cursor", "settled_conn", "close"})
"""Methods left as they are: opening (``open_error`` words its failures), and the
connection handed to SQL of the caller's own, whose errors are the caller's."""
_DUNDERS = frozenset({"__len__", "__iter__", "__contains__"})
_LAZY = frozenset({types.GeneratorType, map, filter, zip, itertools.chain, sqlite3.Cursor})
"""Results consumed after the method returns: their iteration is guarded too."""


def guards_itself(method: _F) -> _F:
    """Mark ``method`` as catching :data:`FAULTS` itself (a hot path: a ``try`` inline
    costs nothing, a wrapper a call): :func:`guard_public_methods` leaves it alone."""
    method.__guarded__ = True  # type: ignore[attr-defined]
    return method


def guard_public_methods(cls: type[Any], index_path: Callable[[Any], str]) -> None:
    """Guard every public method and property defined in ``cls`` itself (see the module
    doc); ``index_path(self)`` names the index file in the errors."""
    for name, value in list(vars(cls).items()):
        if name in _UNGUARDED or (name.startswith("_") and name not in _DUNDERS):
            continue
        if isinstance(value, property) and value.fget is not None:
            fget = _guarded(value.fget, index_path)
            setattr(cls, name, property(fget, value.fset, value.fdel, value.__doc__))
        elif isinstance(value, types.FunctionType):
            setattr(cls, name, _guarded(value, index_path))


def _guarded(method: _F, index_path: Callable[[Any], str]) -> _F:
    if getattr(method, "__guarded__", False):
        return method

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = method(self, *args, **kwargs)
        except FAULTS as e:
            raise_index_error(index_path(self), e)
        if type(result) in _LAZY and getattr(result, "gi_code", None) is not _ITERATION:
            return _guarded_iteration(result, index_path(self))
        return result

    call.__guarded__ = True  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


def _guarded_iteration(items: Iterator[Any], path: str) -> Iterator[Any]:
    try:
        yield from items
    except FAULTS as e:
        raise_index_error(path, e)


_ITERATION = _guarded_iteration.__code__


_INT64 = range(-(1 << 63), 1 << 63)
_NUMBERS = ("mode", "uid", "gid", "mtime_ns", "size", "stored_size", "shard", "offset")


def out_of_range(subject: object, e: OverflowError) -> OutOfRangeBarecatError:
    """The error for an edit whose values ``sqlite3`` could not bind (``OverflowError``:
    an integer beyond 64 bits), naming the entry.

    Args:
        subject: what the edit was given first: a path, an entry's record, or records.
        e: what ``sqlite3`` raised.

    Returns:
        The error, naming the first record with a number out of range (or the path).
    """
    records = subject if isinstance(subject, (list, tuple)) else [subject]
    for record in records:
        path = record if isinstance(record, str) else getattr(record, "path", None)
        numbers = {name: getattr(record, name, 0) for name in _NUMBERS}
        bad = [n for n, v in numbers.items() if isinstance(v, int) and v not in _INT64]
        if path is not None and (bad or len(records) == 1):
            which = ", ".join(f"{n}={numbers[n]}" for n in bad) or str(e)
            return OutOfRangeBarecatError(f"{path}: out of the index's 64-bit range: {which}")
    return OutOfRangeBarecatError(f"A number out of the index's 64-bit range: {e}")


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
