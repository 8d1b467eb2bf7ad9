"""The exception tree of barecat.

Every error the library raises on purpose is a :class:`BarecatError`. Each concrete
class also derives from the builtin exception a caller would expect from the same
mistake on a real filesystem (``FileNotFoundBarecatError`` is a ``FileNotFoundError``
with ``errno == ENOENT``), so code written for ``os`` and the FUSE layer can rely on
``errno`` without knowing barecat. Imports nothing from the package.
"""

from __future__ import annotations

import errno as _errno


class BarecatError(Exception):
    """Base class of every error barecat raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class _OSBarecatError(BarecatError, OSError):
    """A barecat error that is also an ``OSError`` carrying a meaningful ``errno``.

    The message stays the only argument so ``str(exc)`` reads like the reference's
    messages, while ``exc.errno`` still tells FUSE and ``os``-style callers what went wrong.
    """

    errno_code: int = 0

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = self.errno_code
        self.strerror = message

    def __str__(self) -> str:
        return str(self.args[0])


class FileNotFoundBarecatError(_OSBarecatError, FileNotFoundError):
    """A file or directory does not exist in the archive (or an archive is not where it
    was looked for: ``instead`` then says what is there, e.g. "a directory, not a
    barecat archive", and the message says it in place of "not found")."""

    errno_code = _errno.ENOENT

    def __init__(self, path: str, what: str = "File", instead: str | None = None) -> None:
        super().__init__(f"{what} not found: {path}" if instead is None else f"{path} is {instead}")
        self.filename = path


class FileExistsBarecatError(_OSBarecatError, FileExistsError):
    """The target path is already taken; barecat never overwrites silently."""

    errno_code = _errno.EEXIST

    def __init__(self, path: str, what: str = "File") -> None:
        super().__init__(f"{what} already exists: {path}")
        self.filename = path


class IsADirectoryBarecatError(_OSBarecatError, IsADirectoryError):
    """A file operation was given a directory."""

    errno_code = _errno.EISDIR

    def __init__(self, path: str) -> None:
        super().__init__(f"Is a directory: {path}")
        self.filename = path


class NotADirectoryBarecatError(_OSBarecatError, NotADirectoryError):
    """A directory operation was given a file, or a file stands where a directory must be."""

    errno_code = _errno.ENOTDIR


class NotADirectoryLookupBarecatError(NotADirectoryBarecatError, FileNotFoundBarecatError):
    """A lookup that goes through a file: ``listdir('f.txt')``, ``lookup_file('f.txt/x')``.

    Both a :class:`NotADirectoryBarecatError` (``errno`` ENOTDIR, what ``os`` raises
    there) and a :class:`FileNotFoundBarecatError` (what barecat 0.3.1 raised, so code
    catching that keeps working). Edits that would put an entry below a file raise a
    plain :class:`NotADirectoryBarecatError`, as 0.3.1 does.
    """

    def __init__(self, message: str, path: str) -> None:
        _OSBarecatError.__init__(self, message)
        self.filename = path


class MergeConflictBarecatError(BarecatError, ValueError):
    """A merge would put a file where the target has a directory, or needs a directory
    where the target has a file. A ``ValueError`` because barecat 0.3.1 raised one."""


class FileOverDirectoryBarecatError(IsADirectoryBarecatError, MergeConflictBarecatError):
    """A merge's source has a file where the target has a directory."""

    def __init__(self, path: str) -> None:
        _OSBarecatError.__init__(self, f"Source file {path!r} conflicts with target directory")
        self.filename = path


class DirectoryOverFileBarecatError(NotADirectoryBarecatError, MergeConflictBarecatError):
    """A merge needs a directory (one of the source's, or the prefix or a directory above
    it, named by ``prefix``) where the target has a file."""

    def __init__(self, path: str, prefix: str | None = None) -> None:
        if prefix is None:
            message = f"Source directory {path!r} conflicts with target file"
        else:
            message = f"Cannot use prefix {prefix!r}: {path!r} exists as a file"
        _OSBarecatError.__init__(self, message)
        self.filename = path


class DirectoryNotEmptyBarecatError(_OSBarecatError):
    """``rmdir`` of a directory that still has entries."""

    errno_code = _errno.ENOTEMPTY

    def __init__(self, path: str) -> None:
        super().__init__(f"Directory not empty: {path}")
        self.filename = path


class InvalidPathBarecatError(BarecatError, ValueError):
    """A path that cannot name an entry: NUL bytes, ``..`` climbing above the root, lone
    surrogates (text that is not Unicode, as ``os.fsdecode`` makes of non-UTF-8 bytes), or
    more components than an archive can hold."""


class OutOfRangeBarecatError(BarecatError, OverflowError, ValueError):
    """A number in an entry's record (mode, owner, time, size, place) that the index's
    64-bit integers cannot hold; the message names the entry's path. Nothing is stored."""


class PathTypeBarecatError(BarecatError, TypeError):
    """Something that is not a path (``bytes``, a number) where a path (``str``) belongs."""


class BarecatIntegrityError(BarecatError, ValueError):
    """Stored bytes do not match their CRC32C, or a shard is shorter than the index says.

    A ``ValueError`` because the reference documents checksum mismatches as such.
    """


class ArchiveClosedBarecatError(BarecatError, ValueError):
    """An archive used after its ``close()`` (or a read that began as it closed): a
    ``ValueError``, as an I/O operation on a closed file is."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Archive {path} is closed")
        self.filename = path


class KeyDerivationCostBarecatError(BarecatError, ValueError):
    """Key-derivation costs read from a file are above the ceiling barecat derives under
    (a damaged or hostile file would otherwise make opening it take minutes)."""


class DamagedEntryBarecatError(BarecatIntegrityError):
    """An index row that cannot say where a file's bytes are: text, a real number, a blob
    or NULL where a number belongs, a negative offset or size, a CRC32C that is not 32
    bits. ``filename`` is the file's path and ``reason`` what is wrong with its row."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Damaged index entry {path!r}: {reason}")
        self.filename = path
        self.reason = reason


class FileTooLargeBarecatError(_OSBarecatError, ValueError):
    """A single file is larger than the archive's shard size limit (or than the room a
    caller's buffer has left for it, in ``readinto_many``).

    Also a ValueError, as in 0.3.1, for code that catches that.
    """

    errno_code = _errno.EFBIG


class NotEnoughSpaceBarecatError(_OSBarecatError):
    """The disk filled up while writing; the partial bytes were rolled back."""

    errno_code = _errno.ENOSPC


class CommitFailedBarecatError(_OSBarecatError):
    """A commit failed (an I/O error): the changes since the last commit were rolled back
    and are not stored. ``errno`` is the failure's (EIO when it had none)."""

    errno_code = _errno.EIO


class ReadOnlyBarecatError(_OSBarecatError, PermissionError):
    """A write was attempted on an archive opened read-only, or the system refused a
    writer's write to its index (its directory made unwritable, its filesystem remounted
    read-only)."""

    errno_code = _errno.EROFS


class WrongPassphraseBarecatError(_OSBarecatError, PermissionError):
    """The passphrase (or key) does not unlock an encrypted archive."""

    errno_code = _errno.EACCES


class ArchiveLockedBarecatError(_OSBarecatError, BlockingIOError):
    """Another writer holds the archive (two writers would interleave bytes), or holds
    SQLite's lock on its index longer than a reader waits: busy, not broken."""

    errno_code = _errno.EAGAIN


class RemoteStorageBarecatError(_OSBarecatError):
    """Object storage (or another fsspec filesystem) holding an archive failed to answer;
    nothing was read from it, and retrying later is safe."""

    errno_code = _errno.EIO


class RangeIgnoredBarecatError(RemoteStorageBarecatError):
    """A web server answered a request for some bytes of an object with all of them: it
    ignores ``Range``, so nothing can be read from it lazily (only downloaded whole)."""


class RemoteModeBarecatError(BarecatError, ValueError):
    """An unknown reader mode for a remote archive (``remote_mode=``,
    ``BARECAT_REMOTE_MODE``)."""


class SchemaVersionBarecatError(BarecatError):
    """The index uses a schema this version cannot read or write safely."""


class CorruptIndexBarecatError(BarecatError):
    """The index file is not a readable barecat index (not SQLite, or tables missing)."""


class ForeignSchemaBarecatError(CorruptIndexBarecatError):
    """The index holds schema objects (triggers, views, tables, indexes) that barecat
    did not make and that could run inside its statements; ``barecat repair`` removes
    them. ``index`` is the index file, ``objects`` describes each (``trigger 'x' on
    files``)."""

    def __init__(self, message: str, index: str, objects: list[str]) -> None:
        super().__init__(message)
        self.index = index
        self.objects = objects


class NotStoredBarecatError(BarecatError):
    """Some of what a session was given to write is not in the archive, and each caller
    concerned got the error when it wrote (a writable mount's files, on a full disk
    say). ``summary`` says so in a line; ``lines`` name each entry and why, a line each
    (the message is all of them, one per line)."""

    def __init__(self, summary: str, lines: list[str]) -> None:
        super().__init__("\n".join([summary, *lines]))
        self.summary = summary
        self.lines = lines


class DamagedInputBarecatError(BarecatError, ValueError):
    """A tar or zip file given to convert, wrap or mount is corrupt or truncated; the
    message names the file and, when known, the member."""


class DamagedIndexBarecatError(CorruptIndexBarecatError, BarecatIntegrityError):
    """An index that opened but cannot be read on: a damaged page, schema or config row,
    text that is not UTF-8, found by a later query. ``filename`` is the index file and
    ``reason`` what SQLite (or barecat) found. A ``BarecatIntegrityError`` (a
    ``ValueError``): like damaged bytes, it is not cured by trying again."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Damaged index {path}: {reason}")
        self.filename = path
        self.reason = reason


class IndexIOBarecatError(_OSBarecatError):
    """The system failed to read or write the index file (SQLite's disk I/O error):
    not damage that barecat can see, and trying again may work."""

    errno_code = _errno.EIO


def install_hint(extra: str) -> str:
    """How to install barecat's optional ``extra``: the one place its words are, for every
    message about a missing optional package. This project installs from a checkout, as
    the README says (the ``barecat`` on the package index is the older 0.3.1, which has
    none of these extras: ``pip install 'barecat[EXTRA]'`` would install that one)."""
    return f"pip install '.[{extra}]' in a checkout of barecat (the '{extra}' extra)"


class MissingDependencyBarecatError(BarecatError, ModuleNotFoundError):
    """An optional package a feature needs is not installed: the message says what needs
    it, what Python could not import, and how to install the extra that brings it."""

    def __init__(self, needs: str, extra: str, cause: ImportError) -> None:
        """``needs``: what needs what, e.g. "barecat.integrations.torch needs PyTorch";
        ``extra``: the extra that installs it; ``cause``: the failed import."""
        super().__init__(f"{needs} ({cause}): {install_hint(extra)}")
        self.name = cause.name
        self.extra = extra

    @classmethod
    def when_missing(cls, needs: str, extra: str) -> _ImportsOfExtra:
        """A ``with`` block whose failed import raises this error (``needs`` and
        ``extra`` as for the constructor): the imports of an optional extra, at the top
        of the module that needs it.

        Returns:
            The context manager.
        """
        return _ImportsOfExtra(needs, extra)


class _ImportsOfExtra:
    """See :meth:`MissingDependencyBarecatError.when_missing`."""

    def __init__(self, needs: str, extra: str) -> None:
        self.needs = needs
        self.extra = extra

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: object
    ) -> None:
        if isinstance(error, ImportError):
            raise MissingDependencyBarecatError(self.needs, self.extra, error) from error


__all__ = [
    "ArchiveClosedBarecatError",
    "ArchiveLockedBarecatError",
    "BarecatError",
    "BarecatIntegrityError",
    "CommitFailedBarecatError",
    "CorruptIndexBarecatError",
    "DamagedEntryBarecatError",
    "DamagedInputBarecatError",
    "DamagedIndexBarecatError",
    "DirectoryNotEmptyBarecatError",
    "DirectoryOverFileBarecatError",
    "FileExistsBarecatError",
    "FileNotFoundBarecatError",
    "FileOverDirectoryBarecatError",
    "FileTooLargeBarecatError",
    "ForeignSchemaBarecatError",
    "IndexIOBarecatError",
    "InvalidPathBarecatError",
    "IsADirectoryBarecatError",
    "KeyDerivationCostBarecatError",
    "MergeConflictBarecatError",
    "MissingDependencyBarecatError",
    "NotADirectoryBarecatError",
    "NotADirectoryLookupBarecatError",
    "NotEnoughSpaceBarecatError",
    "NotStoredBarecatError",
    "OutOfRangeBarecatError",
    "PathTypeBarecatError",
    "ReadOnlyBarecatError",
    "RangeIgnoredBarecatError",
    "RemoteModeBarecatError",
    "RemoteStorageBarecatError",
    "SchemaVersionBarecatError",
    "install_hint",
    "WrongPassphraseBarecatError",
]
