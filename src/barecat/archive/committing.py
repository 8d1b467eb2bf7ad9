"""When a writer's changes are committed, and what became of them: its background
committer, and the numbers of its transactions.

Time commits. A writer's changes are committed every ``commit_interval`` seconds, busy
or idle, by its committer: one daemon thread per writer, started by the writer's first
change left uncommitted, that sleeps until the uncommitted changes are due (the last
commit plus ``commit_interval``) and then commits, holding the archive's write lock, on
the writer's own SQLite connection (never a second writer). It takes the lock without
waiting: when an operation holds it, the committer marks the changes due, and the
writer's next change commits them (``OpenArchive.maybe_commit``, which so reads no clock
per change); the committer looks again a little later, in case none comes. What a
commit raises is the archive's to keep and report (``commit_in_background``); the thread
never dies of it. The thread holds the archive only while it commits (a weak reference
otherwise), so an archive dropped without ``close()`` is collected as before and its
committer ends. ``stop`` ends the thread, after the commit it may be making; a forked
child inherits no committer (fork waits for a commit under way, so the child never
inherits a write lock held by a thread it does not have).

:class:`Transactions` numbers a writer's index transactions: each commit, and each
failure that rolls the open transaction back, starts the next, and a lost one keeps the
error that says so. A caller that read the number right after its change (holding the
write lock) learns from it whether that change was committed, is still to commit, or
was lost (``OpenArchive.commit_transaction``: group commits). Imports the standard library
and ``exceptions``.
"""

from __future__ import annotations

import errno
import os
import threading
import weakref
from typing import Protocol

from barecat.exceptions import CommitFailedBarecatError, NotEnoughSpaceBarecatError

RETRY_SECONDS = 0.05
"""How soon the committer looks again when the writer was busy in an operation."""

NotStored = CommitFailedBarecatError | NotEnoughSpaceBarecatError
"""The error that tells a writer its uncommitted changes were rolled back."""


class CommittingArchive(Protocol):
    """What the committer asks of the archive it commits."""

    @property
    def write_lock(self) -> threading.RLock | None:
        """Held by every change of the writer."""
        ...

    def seconds_until_commit(self) -> float | None:
        """Seconds until the uncommitted changes are due (0 or less: now); None: none."""
        ...

    def commit_in_background(self) -> None:
        """Commit if still due, holding the write lock; keep any error for the writer."""
        ...

    def mark_commit_due(self) -> None:
        """The changes are due while an operation holds the lock: its next change commits."""
        ...


_live: weakref.WeakSet[BackgroundCommitter] = weakref.WeakSet()
_forking = threading.local()
"""The committers a thread's fork holds (``held``), from before it to after it."""


class BackgroundCommitter:
    """The committer of one writer (see the module doc)."""

    def __init__(self, archive: CommittingArchive) -> None:
        self._archive = weakref.ref(archive)
        self._cond = threading.Condition(threading.RLock())  # (re-entrant: see stop_soon)
        self._guard = threading.RLock()
        """Held while committing; fork takes it, so no commit is under way at a fork."""
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._pid = os.getpid()
        weakref.finalize(archive, self.stop_soon)
        _live.add(self)

    def wake(self) -> bool:
        """Changes began after a commit: start the thread, or have it compute when they
        are due. Returns False when no thread watches them (none can be started, as at
        interpreter shutdown, or this is a forked child's copy)."""
        with self._cond:
            if self._stopped or self._pid != os.getpid():
                return False
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="barecat-commit", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # ("can't start new thread")
                    return False
                self._thread = thread
            else:
                self._cond.notify()
            return True

    def stop_soon(self) -> None:
        """Have the thread end without waiting for it (also from the thread itself)."""
        if self._pid != os.getpid():
            return
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def stop(self) -> None:
        """End the thread; a commit it is making is finished first. Call it without
        holding the write lock, or while holding it (the thread takes the lock without
        waiting, so it never blocks this)."""
        self.stop_soon()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        retry = False
        with self._cond:
            while not self._stopped:
                archive = self._archive()
                if archive is None:
                    return
                delay = archive.seconds_until_commit()
                if delay is not None and retry:
                    delay = max(delay, RETRY_SECONDS)
                if delay is None or delay > 0:
                    archive = None  # (held only while committing)
                    self._cond.wait(delay)
                    retry = False
                    continue
                self._cond.release()
                try:
                    retry = not self._commit(archive)
                finally:
                    archive = None
                    self._cond.acquire()

    def _commit(self, archive: CommittingArchive) -> bool:
        """Commit if the writer is not in an operation; False if it was."""
        lock = archive.write_lock
        if lock is None:
            return True
        with self._guard:
            if not lock.acquire(blocking=False):
                archive.mark_commit_due()
                return False
            try:
                archive.commit_in_background()
            finally:
                lock.release()
        return True

    def _forget_after_fork(self) -> None:
        """In a forked child: no thread here, nothing to commit (the child cannot write)."""
        self._thread = None
        self._stopped = True
        self._cond = threading.Condition(threading.RLock())


class Transactions:
    """The numbers of a writer's index transactions and what became of them (see the
    module doc)."""

    def __init__(self) -> None:
        self.number = 0
        """The open transaction's: it holds the changes not yet committed."""
        self._lost: dict[int, NotStored] = {}
        self.rollbacks_seen = 0
        """The index's count of rollbacks (``Index.rollbacks``) already accounted for."""

    def committed(self) -> None:
        """The open transaction was committed: the next one begins."""
        self.number += 1

    def lose(self, why: NotStored) -> None:
        """The open transaction was rolled back: ``why`` is raised for it from now on."""
        self._lost[self.number] = why
        self.number += 1

    def is_open(self, number: int) -> bool:
        """Whether transaction ``number`` is the open one (False: it was committed).

        Raises:
            NotEnoughSpaceBarecatError: it was rolled back after the disk filled up.
            CommitFailedBarecatError: it was rolled back after another error.
        """
        lost = self._lost.get(number)
        if lost is not None:
            failure = type(lost)(str(lost))
            failure.errno = lost.errno
            raise failure
        return number >= self.number


def not_stored(error: BaseException | None, path: str) -> NotStored:
    """The error that tells the writer of ``path`` that what it had not committed was
    rolled back after ``error`` (kept as it is when it says so already)."""
    if isinstance(error, NotEnoughSpaceBarecatError) and "not stored" in str(error):
        return error
    message = (
        f"{error or 'an error'}; the changes since the last commit of {path} are not "
        "stored (rolled back)"
    )
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return NotEnoughSpaceBarecatError(message)
    failure = CommitFailedBarecatError(message)
    if isinstance(error, OSError) and error.errno:
        failure.errno = error.errno
    return failure


def _before_fork() -> None:
    _forking.held = list(_live)
    for committer in _forking.held:
        committer._guard.acquire()


def _after_fork_in_parent() -> None:
    for committer in _forking.__dict__.pop("held", []):
        committer._guard.release()


def _after_fork_in_child() -> None:
    for committer in _forking.__dict__.pop("held", []):
        committer._guard.release()
        committer._forget_after_fork()


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)


__all__ = [
    "RETRY_SECONDS",
    "BackgroundCommitter",
    "CommittingArchive",
    "NotStored",
    "Transactions",
    "not_stored",
]
