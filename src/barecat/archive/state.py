"""One open archive, as the parts of the :class:`~barecat.archive.Barecat` facade share it:
its two halves and its sealing, its write session and writer lock, the checks every change
passes (writable, not append-only, no file open for writing) and the pacing of commits.

:class:`OpenArchive` opens (or creates) the halves and closes them; the facade owns one
and hands it to each of its parts (reading, inspecting, writing, editing, maintenance,
open files), which keep no state of their own. A writer's changes go through its write
session (``ops/writing.py``); commits are batched (every ``commit_interval`` seconds or
``COMMIT_EVERY_FILES`` files, whichever comes first, and on close) with the shards
fsynced first, and a writer that idles has its changes committed once they are due by its
background committer (``committing.py``), so a killed writer loses at most about a second
of work. A commit that fails rolls its transaction back, so the error always means the
same: the changes since the last commit are not stored (the transactions' numbers tell a
caller waiting for its own changes whether they were committed, ``commit_transaction``).
A writer holds an advisory lock on the index file, so a second writer fails at open
instead of interleaving bytes. A writer that replaces an archive (``overwrite=True``)
builds the new one under a hidden name beside it, holding the old one's lock, and puts it
in place at close (``layout.replace_archive``); every local open first finishes a replace
that a kill interrupted (``layout.finish_replace``). Also :func:`serialized`, which every
operation that changes an archive wears, so that its changes run one at a time, in its
one SQLite transaction, whether its threads (``threadsafe=True``) or its committer make
them; and :func:`reading` / :func:`reading_steps`, which every read of the halves wears
(the hot ones, ``bc[path]`` and ``read``, take the same two steps inline), so that
``close`` waits for the reads in progress before it closes descriptors and connections
under them, and later reads raise :class:`~barecat.exceptions.ArchiveClosedBarecatError`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Concatenate, NoReturn, ParamSpec, Protocol, TypeVar

from barecat.archive.committing import BackgroundCommitter, Transactions, not_stored
from barecat.archive.sealed import Passphrase, check_source_rows, open_sealing, take_sealing
from barecat.archive.writer_lock import WriterLock
from barecat.entries import parse_size
from barecat.exceptions import (
    ArchiveClosedBarecatError,
    ArchiveLockedBarecatError,
    BarecatError,
    CommitFailedBarecatError,
    FileExistsBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import Index, ReadOnlyIndex
from barecat.layout import (
    archive_exists,
    archive_not_found,
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
    from barecat.index.listing import IndexListing
    from barecat.index.tree_edits import IndexEdits
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
    """Run ``method`` holding the archive's write lock, when it has one (a writer: its
    threads and its background committer take turns); otherwise (a reader, which refuses
    changes) call it directly. The lock is re-entrant, so an operation may call others
    (``add`` commits through ``commit``)."""

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


def by_listing(
    method: Callable[Concatenate[IndexListing, _P], _R],
) -> Callable[Concatenate[ArchivePart, _P], _R]:
    """A part's method that is ``method`` of the archive's index listing, with the same
    arguments and documentation (wrap it in :func:`reading`)."""

    @functools.wraps(method)
    def query(self: ArchivePart, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return method(self.archive.index.listing, *args, **kwargs)

    return query


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
        remote_mode: str | None = None,
        page_cache: int | str | None = None,
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
        self.remote_options: dict[str, Any] = {
            "storage_options": storage_options,
            "cache_dir": cache_dir,
            "block_cache": block_cache,
            "remote_mode": remote_mode,
            "page_cache": page_cache,
        }
        """How a remote archive was opened (its keywords to ``Barecat``), to reopen it."""
        self.readonly = readonly
        self.threadsafe = threadsafe
        self.write_lock: threading.RLock | None = None if readonly else threading.RLock()
        """Held by every change of a writer (its threads' and its background committer's);
        None for a reader."""
        self.append_only = append_only
        self.commit_interval = commit_interval
        self.readonly_is_immutable = readonly_is_immutable
        self.lock: WriterLock | None = None
        self._home = self.path if self.remote else os.path.abspath(self.path)
        """``path``, a local one made absolute at open (where a replacement is put at
        close, whatever the working directory is then; the halves likewise open their
        files by absolute names, and name them in messages as given)."""
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
        self.uncommitted = 0
        self.commit_due = False
        """The uncommitted changes are due: the next change commits them."""
        self.transactions = Transactions()
        """The numbers of the index transactions and what became of them."""
        self.committer: BackgroundCommitter | None = None
        """A writer's background committer, made at its first change (``committing.py``)."""
        self.background_failure: BaseException | None = None
        """What a background commit raised, for the writer's next change or ``close``."""
        self.index: ReadOnlyIndex
        """The index: a reader's a :class:`ReadOnlyIndex` (no ``edits`` part: a write
        through it is a type error), a writer's an :class:`~barecat.index.Index`."""
        self.edits: IndexEdits
        """A writer's index edits (``index.edits``); a reader's refuse every edit with
        :class:`ReadOnlyBarecatError` (the archive's own checks refuse first)."""
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
                self.path, storage_options, cache_dir, block_cache, threadsafe, lookup_table,
                remote_mode, page_cache,
            )  # fmt: skip
            self.edits = self._edits_of(self.index)
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
                raise archive_not_found(self.path)
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
            self.index = index = (ReadOnlyIndex if self.readonly else Index)(
                index_path(self.location),
                shard_size_limit=limit,
                readonly=self.readonly,
                wal=wal,
                readonly_is_immutable=self.readonly_is_immutable,
                threadsafe=self.threadsafe,
                lookup_table=lookup_table,
            )
            self.edits = self._edits_of(index)
            self.sharder = sharder = Sharder(
                self.location,
                shard_size_limit=self.index.connection.shard_size_limit_at_open(),
                readonly=self.readonly,
                append_only=self.append_only,
                threadsafe=self.threadsafe,
                allow_writing_symlinked_shard=allow_writing_symlinked_shard,
                read_concurrency=self.read_concurrency,
            )
            self.created = index.connection.created
            if isinstance(index, Index):  # (a writer; readers load no write code)
                from barecat.ops.writing import WriteSession

                self.writes = WriteSession(index, sharder)  # places the position
        except BaseException:
            opened: ReadOnlyIndex | None = getattr(self, "index", None)
            if opened is not None:
                opened.close()
            if self.lock is not None:
                self.lock.undo_creation(
                    made_schema=opened is not None and opened.connection.created
                )
            self._release_writer_lock()
            raise

    @staticmethod
    def _edits_of(index: ReadOnlyIndex) -> IndexEdits:
        """A writer's index edits; for a reader's index, edits that refuse every change
        (its connection is read-only)."""
        if isinstance(index, Index):
            return index.edits
        from barecat.index.tree_edits import IndexEdits

        return IndexEdits(index.connection, index.lookups)

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
        self.location = staging_path(self._home)
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
        failure = self.background_failure
        if failure is not None:  # a background commit's, raised once
            self.background_failure = None
            raise failure

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

        A commit that fails rolls the transaction back (but for a lock another program
        holds on the index, which a later commit may outlast): the changes since the last
        commit are not stored, whatever the error.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or the commit failed (the changes since the last commit are
                rolled back).
            NotEnoughSpaceBarecatError: the disk is full (the changes since the last
                commit are rolled back).
            ArchiveLockedBarecatError: another program holds a lock on the index (the
                changes stay, for the next commit).
        """
        self.require_writable()
        self._note_rollbacks()
        try:
            self.writes.checkpoint()
        except ArchiveLockedBarecatError:
            raise
        except Exception as e:
            failure = self._rolled_back(e)
            if isinstance(e, BarecatError) and not isinstance(e, OSError):
                raise  # (a refusal that says what it is; the transaction is lost all the same)
            raise failure from e
        self.last_commit = time.monotonic()
        self.uncommitted = 0
        self.commit_due = False
        self.transactions.committed()
        if self.on_commit is not None:
            self.on_commit()

    def maybe_commit(self, changes: int = 1) -> None:
        """Count changes; commit when enough have come or enough time has passed. The
        clock is read once per commit, at the first change after it; from then on the
        background committer watches it: it commits the changes once they are due, or,
        when an operation holds the writer then, marks them due, and the next change
        commits them (so a change costs no clock reading)."""
        if not self.uncommitted:
            self._changes_began()
        self.uncommitted += changes
        if self.uncommitted >= COMMIT_EVERY_FILES or self.commit_due:
            self.commit()

    def _changes_began(self) -> None:
        """The first change since a commit: due at once if the last commit is
        ``commit_interval`` old, else the background committer watches the clock (where
        no thread can, each change commits)."""
        if time.monotonic() - self.last_commit >= self.commit_interval:
            self.commit_due = True
        committer = self.committer
        if committer is None:
            committer = self.committer = BackgroundCommitter(self)
        if not committer.wake():
            self.commit_due = True

    def seconds_until_commit(self) -> float | None:
        """Seconds until the uncommitted changes are due for a commit (0 or less: now);
        None when nothing is uncommitted (for the background committer)."""
        if not self.uncommitted or self.closed:
            return None
        return self.last_commit + self.commit_interval - time.monotonic()

    def mark_commit_due(self) -> None:
        """The changes are due but an operation holds the writer: its next change (or
        the background committer, a moment later) commits them."""
        self.commit_due = True

    def commit_in_background(self) -> None:
        """The background committer's commit, made holding the write lock: only if the
        changes are still uncommitted and due. An error is kept for the writer's next
        change (or ``close``), which raises it (the changes were rolled back)."""
        try:
            due = self.seconds_until_commit()
            if due is not None and due <= 0 and os.getpid() == self.owner_pid:
                self.commit()
        except Exception as e:
            self.background_failure = e

    @serialized
    def commit_transaction(self, transaction: int) -> None:
        """Make the changes of ``transaction`` (a number from :meth:`open_transaction`,
        read holding the write lock right after them) durable: commit it if it is still
        open; return at once if a commit already did, so callers waiting for their
        changes share one commit (a group commit).

        Raises:
            NotEnoughSpaceBarecatError: it was rolled back after the disk filled up.
            CommitFailedBarecatError: it was rolled back after another error.
            BarecatError: what :meth:`commit` raises.
        """
        self.require_writable()
        self._note_rollbacks()
        if self.transactions.is_open(transaction):
            self.commit()

    @serialized
    def open_transaction(self) -> int:
        """The number of the index transaction that holds the changes not yet committed
        (each commit, and each failure that rolls the transaction back, starts the next),
        a rollback of the index's since the last look noted first.

        Returns:
            The number.
        """
        if not self.closed and not self.readonly:
            self._note_rollbacks()
        return self.transactions.number

    def _note_rollbacks(self) -> None:
        """The index rolled its transaction back since the last look (a statement failed
        on a full disk, say): that transaction is lost, the next one begins."""
        if self.index.connection.rollbacks != self.transactions.rollbacks_seen:
            self._lose_transaction(not_stored(self.index.connection.rolled_back_by, self.path))

    def _rolled_back(self, error: Exception) -> BarecatError:
        """After a failed commit: roll the transaction back (SQLite may have), put the
        write position back after what the index holds, and say what was lost."""
        with contextlib.suppress(Exception):
            self.index.connection.rollback()
        with contextlib.suppress(Exception):
            self.writes.resync()
        failure = not_stored(error, self.path)
        self._lose_transaction(failure)
        return failure

    def _lose_transaction(self, why: CommitFailedBarecatError | NotEnoughSpaceBarecatError) -> None:
        self.transactions.rollbacks_seen = self.index.connection.rollbacks
        self.transactions.lose(why)
        self.uncommitted = 0
        self.commit_due = False
        self.last_commit = time.monotonic()

    def exclusive(self) -> contextlib.AbstractContextManager[object]:
        """Hold the writer for several steps in a row: other threads' changes and
        background commits wait until the block ends (a no-op for a reader).

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
        if self.sealing is not None or self.index.lookups.num_files:
            raise BarecatError(f"{self.path}: only an empty plain archive takes a sealing")
        self.sealing = take_sealing(self.index, self.path, settings, self.passphrase)

    def check_source_rows(self, src_index: ReadOnlyIndex, settings: SealingSettings) -> None:
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
        """Finish and release the archive: a writer stops its background committer,
        closes a file still open for writing, commits, trims unused shard space after the
        last file and gives up the writer lock. Closing a closed archive does nothing.
        The halves are closed (their descriptors too) even when the last commit fails.
        Reads in progress on other threads end first (with the stored bytes); later ones
        raise ``ArchiveClosedBarecatError``.

        A writer that replaces an archive (``overwrite``) puts the new one in its place
        now; if the close fails, the old one stays and the new one is removed.

        Raises:
            NotEnoughSpaceBarecatError: the last commit, or a background commit not yet
                reported, found the disk full (what it had not committed is not stored).
            CommitFailedBarecatError: the same after another error.
        """
        self._close(discard_if_empty=False)

    @serialized
    def abandon(self) -> None:
        """Close after a failed create: an archive this object created (``created``) that
        still holds nothing (no file, no directory but the root) is removed, so that the
        same create, corrected, succeeds; any other archive is closed as :meth:`close`
        does. A ``with`` block left by an exception calls this instead of ``close``. A
        replacement (``overwrite``) that holds nothing leaves the old archive in place.

        Raises:
            NotEnoughSpaceBarecatError: the last commit, or a background commit not yet
                reported, found the disk full (what it had not committed is not stored).
            CommitFailedBarecatError: the same after another error.
        """
        self._close(discard_if_empty=True)

    def _close(self, discard_if_empty: bool) -> None:
        """:meth:`close`, and with ``discard_if_empty`` :meth:`abandon`: the background
        committer stopped, the halves closed, the archive made and left empty removed
        (else a replacement put in place, or dropped if closing failed), the writer lock
        released, and what a background commit raised raised last."""
        failure = self._stop_committing()
        lock = self.lock
        discard = discard_if_empty and self._made_and_holds_nothing()
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
            if failure is not None:
                raise failure

    def _stop_committing(self) -> BaseException | None:
        """Stop the background committer (it takes the write lock without waiting, so it
        ends while this holds it); returns what a background commit raised that the
        writer was not yet told."""
        if self.committer is not None:
            self.committer.stop()
        failure, self.background_failure = self.background_failure, None
        return failure

    def _made_and_holds_nothing(self) -> bool:
        """This writer made the archive and it holds no file and no directory but the root
        (False when the index cannot tell, after a failure of its own: the archive stays)."""
        if self.lock is None or not self.created or os.getpid() != self.owner_pid:
            return False
        try:
            return self.index.lookups.num_files == 0 and self.index.lookups.num_dirs <= 1
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
            self.index = self.sharder = self.edits = _ClosedHalf(self.path)  # type: ignore[assignment]
            self._wait_for_reads()
            try:
                if in_owner:
                    index.close()
            finally:
                sharder.close()

    def _finish_writing(self) -> None:
        """A writer's last steps: the open file closed, the last commit, shard space past
        the last file trimmed."""
        try:
            if self.writer is not None:
                self.writer.close()
        finally:
            self.commit()
        self.writes.trim_tail()
        if self.sharder.num_shards == 0 and self.index.lookups.total_size == 0:
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
            replace_archive(self.location, self._home)
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
