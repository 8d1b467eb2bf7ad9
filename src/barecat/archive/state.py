"""One open archive, as the parts of the :class:`~barecat.archive.Barecat` facade share it:
its two halves and its sealing, its write session and writer lock, the checks every change
passes (writable, not append-only, no file open for writing) and the pacing of commits.

:class:`OpenArchive` opens (or creates) the halves and closes them; the facade owns one
and hands it to each of its parts (reading, inspecting, writing, editing, maintenance,
open files), which keep no state of their own. A writer's changes go through its write
session (``ops/writing.py``); commits are batched (every ``commit_interval`` seconds or
``COMMIT_EVERY_FILES`` files, whichever comes first, and on close) with the shards
fsynced first, so a killed writer loses at most about a second of work. A writer holds an
advisory lock on the index file, so a second writer fails at open instead of
interleaving bytes. A writer that replaces an archive (``overwrite=True``) builds the
new one under a hidden name beside it, holding the old one's lock, and puts it in place
at close (``layout.replace_archive``); every local open first finishes a replace that
a kill interrupted (``layout.finish_replace``). Also :func:`serialized`, which every
operation that changes an archive wears, so that a writer shared by threads
(``threadsafe=True``) runs them one at a time, in its one SQLite transaction; and
:func:`reading` / :func:`reading_steps`, which every read of the halves wears (the hot
ones, ``bc[path]`` and ``read``, take the same two steps inline), so that ``close`` waits
for the reads in progress before it closes descriptors and connections under them, and
later reads raise :class:`~barecat.exceptions.ArchiveClosedBarecatError`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Concatenate, NoReturn, ParamSpec, Protocol, TypeVar

from barecat.archive.sealed import Passphrase, check_source_rows, open_sealing, take_sealing
from barecat.archive.writer_lock import WriterLock
from barecat.entries import parse_size
from barecat.exceptions import (
    ArchiveClosedBarecatError,
    BarecatError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import Index
from barecat.layout import (
    archive_exists,
    base_path,
    finish_replace,
    index_path,
    remove_abandoned_builds,
    remove_archive,
    replace_archive,
    staging_path,
)
from barecat.objectstore import is_remote_url, local_path_of
from barecat.shards import BarecatReadWriteFileObject, Sharder
from barecat.shards.concurrent import DEFAULT_READ_CONCURRENCY

if TYPE_CHECKING:  # sealing and write code are imported when used, not before
    from barecat.archive.sealed import ArchiveSealing, SealedFileWriter
    from barecat.index.reading import IndexReader
    from barecat.ops.writing import WriteSession
    from barecat.sealing import SealingSettings
    from barecat.shards.reading import ShardReader

COMMIT_EVERY_FILES = 4096
"""Commit at least this often during long writes (besides every ``commit_interval``)."""

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


class _Serializable(Protocol):
    @property
    def write_lock(self) -> threading.RLock | None: ...


_S = TypeVar("_S", bound=_Serializable)


def serialized(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Run ``method`` holding the archive's write lock, when it has one (a writer opened
    with ``threadsafe=True``); otherwise call it directly. The lock is re-entrant, so an
    operation may call others (``add`` commits through ``commit``)."""

    @functools.wraps(method)
    def locked(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        lock = self.write_lock
        if lock is None:
            return method(self, *args, **kwargs)
        with lock:
            return method(self, *args, **kwargs)

    return locked


class _Reader(Protocol):
    @property
    def archive(self) -> OpenArchive: ...


_A = TypeVar("_A", bound=_Reader)


def reading(method: Callable[Concatenate[_A, _P], _R]) -> Callable[Concatenate[_A, _P], _R]:
    """Run ``method``, a read of the archive's halves by one of its parts, as a read in
    progress: ``close`` waits for it to end before closing them, and once they are
    closed it raises :class:`~barecat.exceptions.ArchiveClosedBarecatError`. It is told
    apart by its thread: a close from inside it (from a callback it runs) does not wait
    for itself."""

    @functools.wraps(method)
    def read(self: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        calls, me = self.archive.calls, threading.get_ident()
        calls.append(me)
        try:
            return method(self, *args, **kwargs)
        finally:
            calls.remove(me)

    return read


def reading_steps(
    method: Callable[Concatenate[_A, _P], Iterable[_T]],
) -> Callable[Concatenate[_A, _P], Iterator[_T]]:
    """:func:`reading` for a method that returns an iterator (a listing, a walk): making
    it and each of its steps is a read in progress, and a step after ``close`` raises
    :class:`~barecat.exceptions.ArchiveClosedBarecatError`."""

    @functools.wraps(method)
    def steps(self: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> Iterator[_T]:
        archive = self.archive
        return archive.steps_of(archive.read_now(lambda: iter(method(self, *args, **kwargs))))

    return steps


class _ClosedHalf:
    """What a closed archive's halves are: any use raises the closed-archive error."""

    __slots__ = ("_path",)

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> NoReturn:
        raise ArchiveClosedBarecatError(self._path)


class OpenArchive:
    """An open archive: its halves, its sealing, its writer's session, lock and checks
    (see the module doc; the parameters are :class:`~barecat.archive.Barecat`'s).

    Raises:
        FileNotFoundBarecatError: a reader and no archive is there.
        FileExistsBarecatError: a writer with ``exist_ok=False`` and an archive is there.
        ArchiveLockedBarecatError: another writer holds the archive.
        ReadOnlyBarecatError: a writer of an archive on object storage.
        BarecatError: ``overwrite`` without ``readonly=False``, or the sealing is refused.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shard_size_limit: int | str | None,
        readonly: bool,
        overwrite: bool,
        exist_ok: bool,
        append_only: bool,
        threadsafe: bool,
        allow_writing_symlinked_shard: bool,
        wal: bool,
        readonly_is_immutable: bool,
        commit_interval: float,
        lookup_table: bool | None,
        compression: str | None,
        compression_level: int | None,
        passphrase: Passphrase | None,
        compression_dictionary: bytes | None,
        storage_options: dict[str, Any] | None,
        cache_dir: str | None,
        block_cache: bool,
        read_concurrency: int = DEFAULT_READ_CONCURRENCY,
    ) -> None:
        self.closed = False
        self.reads: list[None] = []
        """One entry per read of the halves in progress that runs no caller's code
        (``bc[path]``, a listing's step, a stream's read): ``close`` waits for none."""
        self.calls: list[int] = []
        """The thread of each other read in progress (``reading``), which may run a
        caller's callback, and so a ``close``."""
        self.read_concurrency = read_concurrency
        self.remote = is_remote_url(path)
        self.path = os.fspath(path) if self.remote else base_path(local_path_of(path))
        self.remote_options = (storage_options, cache_dir, block_cache)
        self.readonly = readonly
        self.threadsafe = threadsafe
        self.write_lock: threading.RLock | None = (
            threading.RLock() if threadsafe and not readonly else None
        )
        """Held by every change of a writer shared by threads; None otherwise."""
        self.append_only = append_only
        self.commit_interval = commit_interval
        self.readonly_is_immutable = readonly_is_immutable
        self.lock: WriterLock | None = None
        self.location = self.path
        """Where the halves are: ``path``, or the hidden name a replacement is built at."""
        self.replacing: WriterLock | None = None
        """The lock of the archive an ``overwrite`` replaces at close, held until then."""
        self.created = False
        """This object made the archive (see ``Barecat.created``)."""
        self.writer: BarecatReadWriteFileObject | SealedFileWriter | None = None
        """The file open for writing, if any (one at a time), and its path."""
        self.writer_path = ""
        self.owner_pid = os.getpid()
        self.on_commit: Callable[[], None] | None = None
        self.index: Index
        self.sharder: ShardReader
        """The shards as every archive reads them (on object storage too); a writer's own
        ``Sharder``, which writes, is its write session's (``writes.sharder``)."""
        self.writes: WriteSession
        """A writer's write session: every new byte and the row after it go through it."""
        limit = None if shard_size_limit is None else parse_size(shard_size_limit)
        if self.remote:
            if not readonly:
                raise ReadOnlyBarecatError(
                    f"{self.path} is on remote storage, which barecat reads but does not "
                    "write: build the archive locally and upload its files"
                )
            from barecat.archive.objectstore import open_objectstore_halves

            self.index, self.sharder = open_objectstore_halves(
                self.path, storage_options, cache_dir, block_cache, threadsafe, lookup_table
            )
        else:
            self._open_local(limit, overwrite, exist_ok, wal, lookup_table,
                             allow_writing_symlinked_shard)  # fmt: skip
        self.passphrase = passphrase
        try:
            self.sealing: ArchiveSealing | None = open_sealing(
                self.index,
                self.path,
                compression,
                compression_level,
                passphrase,
                compression_dictionary,
            )
        except BaseException:
            self.abandon()
            raise
        self.last_commit = time.monotonic()
        self.uncommitted = 0

    def _open_local(
        self,
        limit: int | None,
        overwrite: bool,
        exist_ok: bool,
        wal: bool,
        lookup_table: bool | None,
        allow_writing_symlinked_shard: bool,
    ) -> None:
        """Open (or create) the index and shards on this machine; a writer locks first."""
        if self.readonly and overwrite:
            raise BarecatError("overwrite=True needs readonly=False")
        finish_replace(self.path)
        if self.readonly:
            if not archive_exists(self.path):
                raise FileNotFoundBarecatError(self.path, "Archive")
        else:
            if overwrite:
                self._stage_replacement()
            elif archive_exists(self.path) and not exist_ok:
                raise FileExistsBarecatError(self.path, "Archive")
            try:
                self.lock = WriterLock(self.location)
            except BaseException:
                self._release_writer_lock()
                raise
        try:
            self.index = Index(
                index_path(self.location),
                shard_size_limit=limit,
                readonly=self.readonly,
                wal=wal,
                readonly_is_immutable=self.readonly_is_immutable,
                threadsafe=self.threadsafe,
                lookup_table=lookup_table,
            )
            self.sharder = sharder = Sharder(
                self.location,
                shard_size_limit=self.index.shard_size_limit_at_open(),
                readonly=self.readonly,
                append_only=self.append_only,
                threadsafe=self.threadsafe,
                allow_writing_symlinked_shard=allow_writing_symlinked_shard,
                read_concurrency=self.read_concurrency,
            )
            self.created = self.index.created
            if not self.readonly:  # (readers load no write code)
                from barecat.ops.writing import WriteSession

                self.writes = WriteSession(self.index, sharder)  # places the position
        except BaseException:
            index: Index | None = getattr(self, "index", None)
            if index is not None:
                index.close()
            if self.lock is not None:
                self.lock.undo_creation(made_schema=index is not None and index.created)
            self._release_writer_lock()
            raise

    def _stage_replacement(self) -> None:
        """``overwrite``: with an archive (or any file) at ``path``, the new one is built
        at a hidden name beside it (what dead builds left there removed first) while this
        writer holds the old one's lock; with none, at ``path`` itself (files a removed
        archive left, such as stray shards, deleted)."""
        if not (archive_exists(self.path) or os.path.lexists(self.path)):
            remove_archive(self.path)
            return
        if archive_exists(self.path):
            self.replacing = WriterLock(self.path)
        remove_abandoned_builds(self.path)
        self.location = staging_path(self.path)
        remove_archive(self.location)

    # -- the checks a change passes ----------------------------------------------------

    def require_writable(self) -> None:
        """Raise unless the archive is open for writing, in this process."""
        if self.closed:
            raise ArchiveClosedBarecatError(self.path)
        if self.readonly:
            raise ReadOnlyBarecatError(f"Archive {self.path} is open read-only")
        if os.getpid() != self.owner_pid:
            raise BarecatError(
                f"Archive {self.path} was opened for writing in process {self.owner_pid}; "
                "open it again in this process"
            )

    def require_changeable(self) -> None:
        """Writable, and not ``append_only`` (which permits adding but nothing else)."""
        self.require_writable()
        self.raise_if_append_only(f"Archive {self.path} is append-only: files cannot be changed")

    def require_no_open_writer(self) -> None:
        """Raise while a file opened for writing is still open."""
        if self.writer is not None:
            raise BarecatError(
                f"{self.writer_path!r} is still open for writing; close it before other writes"
            )

    def raise_if_append_only(self, message: str) -> None:
        """Refuse an operation an append-only archive does not allow (barecat 0.3.1's
        method).

        Args:
            message: the error's message.

        Raises:
            ReadOnlyBarecatError: the archive was opened ``append_only``.
        """
        if self.append_only:
            raise ReadOnlyBarecatError(message)

    def raise_if_readonly(self, message: str) -> None:
        """Refuse an operation a read-only archive does not allow (barecat 0.3.1's
        method).

        Args:
            message: the error's message.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
        """
        if self.readonly:
            raise ReadOnlyBarecatError(message)

    # -- commits -----------------------------------------------------------------------

    @serialized
    def commit(self) -> None:
        """Make everything written so far durable: shard bytes first, then the index.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
        """
        self.require_writable()
        self.writes.checkpoint()
        self.last_commit = time.monotonic()
        self.uncommitted = 0
        if self.on_commit is not None:
            self.on_commit()

    def maybe_commit(self, changes: int = 1) -> None:
        """Count changes; commit when enough have come or enough time has passed."""
        self.uncommitted += changes
        if (
            self.uncommitted >= COMMIT_EVERY_FILES
            or time.monotonic() - self.last_commit >= self.commit_interval
        ):
            self.commit()

    def exclusive(self) -> contextlib.AbstractContextManager[object]:
        """Hold a writer shared by threads for several steps in a row: other threads'
        changes wait until the block ends (a no-op for other archives).

        Returns:
            A context manager.
        """
        return contextlib.nullcontext() if self.write_lock is None else self.write_lock

    # -- sealing -----------------------------------------------------------------------

    @serialized
    def seal_like(self, settings: SealingSettings) -> None:
        """Make this empty plain archive sealed like one whose sealed bytes it is about to
        take as they are (merge, subset); an encrypted one needs the passphrase this
        archive was opened with (the other's, whose key it takes).

        Args:
            settings: the other archive's sealing (compression, encryption, key).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, not empty and plain, or
                no passphrase for an encrypted source.
        """
        self.require_writable()
        if self.sealing is not None or self.index.num_files:
            raise BarecatError(f"{self.path}: only an empty plain archive takes a sealing")
        self.sealing = take_sealing(self.index, self.path, settings, self.passphrase)

    def check_source_rows(self, src_index: IndexReader, settings: SealingSettings) -> None:
        """Before this archive takes an encrypted archive's files as they are (merge,
        subset), check that archive's file rows against its index digest when the key is
        at hand (this archive's, or its passphrase), so that a row put back there is
        refused, not copied under this archive's own digest.

        Args:
            src_index: the other archive's index.
            settings: its sealing.

        Raises:
            BarecatIntegrityError: the other archive's rows fail its digest (naming it).
            WrongPassphraseBarecatError: this archive's passphrase does not open it.
        """
        check_source_rows(self.sealing, self.passphrase, src_index, settings)

    def prepare_file_list_edit(self) -> None:
        """Get the key of an encrypted archive now (asking its passphrase source), before
        an edit that adds, removes or renames files (remove, rename, merge, subset, repair
        ``--drop-bad``): its index digest follows them, and refuses them without the key.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) no passphrase.
            WrongPassphraseBarecatError: the passphrase is wrong.
            BarecatIntegrityError: the index digest failed its check (edits would hide
                that; ``barecat digest --reset`` trusts the rows again).
        """
        self.require_writable()
        if self.sealing is not None:
            self.sealing.before_file_list_edit()

    # -- closing -----------------------------------------------------------------------

    @serialized
    def close(self) -> None:
        """Finish and release the archive: a writer closes a file still open for writing,
        commits, trims unused shard space after the last file and gives up the writer
        lock. Closing a closed archive does nothing. Reads in progress on other threads
        end first (with the stored bytes); later ones raise ``ArchiveClosedBarecatError``.

        A writer that replaces an archive (``overwrite``) puts the new one in its place
        now; if the close fails, the old one stays and the new one is removed.

        Raises:
            NotEnoughSpaceBarecatError: the last commit found the disk full.
        """
        try:
            self._close_halves()
        except BaseException:
            self._drop_replacement()
            raise
        else:
            self._finish_replacement()
        finally:
            self._release_writer_lock()

    def abandon(self) -> None:
        """Close after a failed create: an archive this object created (``created``) that
        still holds nothing (no file, no directory but the root) is removed, so that the
        same create, corrected, succeeds; any other archive is closed as :meth:`close`
        does. A ``with`` block left by an exception calls this instead of ``close``. A
        replacement (``overwrite``) that holds nothing leaves the old archive in place.

        Raises:
            NotEnoughSpaceBarecatError: the last commit found the disk full.
        """
        lock, discard = self.lock, self._made_and_holds_nothing()
        try:
            try:
                self._close_halves()
            except BaseException:
                self._drop_replacement()
                raise
            if discard and lock is not None:
                lock.undo_creation(made_schema=True)
            else:
                self._finish_replacement()
        finally:
            self._release_writer_lock()

    def _made_and_holds_nothing(self) -> bool:
        """This writer made the archive and it holds no file and no directory but the root
        (False when the index cannot tell, after a failure of its own: the archive stays)."""
        if self.lock is None or not self.created or os.getpid() != self.owner_pid:
            return False
        try:
            return self.index.num_files == 0 and self.index.num_dirs <= 1
        except Exception:  # the index failed (the error being handled): keep the archive
            return False

    def _close_halves(self) -> None:
        """A writer's last steps, then the halves taken away (any use of them raises the
        closed-archive error) and, once the reads in progress have ended, closed."""
        if self.closed:
            return
        in_owner = os.getpid() == self.owner_pid
        index, sharder = self.index, self.sharder
        try:
            if not self.readonly and in_owner:
                self._finish_writing()
        finally:
            self.closed = True
            self.index = self.sharder = _ClosedHalf(self.path)  # type: ignore[assignment]
        self._wait_for_reads()
        if in_owner:
            index.close()
        sharder.close()

    def _finish_writing(self) -> None:
        """Close the file open for writing, commit, and trim the shards' unused tail."""
        if self.writer is not None:
            self.writer.close()
        self.commit()
        self.writes.trim_tail()
        if self.sharder.num_shards == 0 and self.index.total_size == 0:
            # An archive without bytes still gets its (empty) first shard, which
            # barecat 0.3.1 needs to open it. Made at close, as shards linked
            # or adopted into a new archive (merge, wrap) must start at 0.
            self.writes.sharder.create_first_shard()

    def _wait_for_reads(self) -> None:
        """Wait until no read of the halves is in progress (but this thread's own)."""
        me = threading.get_ident()
        while self.reads or any(thread != me for thread in list(self.calls)):
            time.sleep(0.0002)

    # -- reads ---------------------------------------------------------------------------

    def steps_of(self, steps: Iterator[_T]) -> Iterator[_T]:
        """The items of ``steps`` (an iterator over the halves, made as a read), each step
        a read in progress (see :func:`reading_steps`).

        Raises:
            ArchiveClosedBarecatError: a step after the archive closed.
        """
        reads = self.reads
        while True:
            reads.append(None)
            try:
                if self.closed:
                    raise ArchiveClosedBarecatError(self.path)
                item = next(steps)
            except StopIteration:
                return
            finally:
                del reads[-1]
            yield item

    def read_now(self, query: Callable[[], _T]) -> _T:
        """``query()``, a read of the halves that runs no caller's code, as a read in
        progress (see :func:`reading`); the facade's totals.

        Raises:
            ArchiveClosedBarecatError: the archive is closed.
        """
        reads = self.reads
        reads.append(None)
        try:
            return query()
        finally:
            del reads[-1]

    def _finish_replacement(self) -> None:
        """Put the replacement, closed, in the place of the archive it replaces."""
        if self.location != self.path and os.getpid() == self.owner_pid:
            replace_archive(self.location, self.path)
            self.location = self.path

    def _drop_replacement(self) -> None:
        """After a failed close: a replacement not put in place is removed (the archive
        it was to replace stays)."""
        if self.location != self.path and os.getpid() == self.owner_pid:
            remove_archive(self.location)

    def _release_writer_lock(self) -> None:
        for lock in (self.lock, self.replacing):
            if lock is not None:
                lock.release()
        self.lock = self.replacing = None


class ArchivePart:
    """A group of the facade's methods (reading, inspecting, writing, ...), over the
    :class:`OpenArchive` it shares with the other groups; it keeps no state of its own."""

    def __init__(self, archive: OpenArchive) -> None:
        self.archive = archive
        self.write_lock = archive.write_lock
        """The archive's (see :func:`serialized`); it never changes."""


__all__ = ["COMMIT_EVERY_FILES", "ArchivePart", "OpenArchive", "serialized"]
