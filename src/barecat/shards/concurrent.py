"""Running a batch's reads on a few threads at once, for storage where each read waits.

A batch (``get_many``, ``readinto_many``) reads one ``pread`` per file or per run of
neighbours in storage, in request order. On a local disk with the bytes in the page
cache each read is a few microseconds of copying; on a network filesystem, or a disk
without the bytes in cache, each one mostly waits. ``os.pread`` lets go of the GIL
while it waits, so a few threads that each take the next read of the batch overlap the
waits. :class:`ReadPool` is those threads: made at the first batch that fans out, made
again in a forked child (a child has none of its parent's threads), shut down by the
shards' ``close``.

Threads cost a little where nothing waits (the GIL changes hands at every read), and
under load a thread that waits for the GIL looks like a read that waits, so a batch
decides at its start: when the storage can tell whether its first read would wait
(``RWF_NOWAIT`` on Linux's local filesystems: :func:`read_would_wait`, asked through
the caller's ``may_wait``) it fans out from the start or not at all; otherwise (tmpfs,
FUSE, NFS) it starts on the calling thread and fans out from its first read that took
longer than :data:`WAITING_READ_NS` and in that time slept (the thread's voluntary context
switches, ``RUSAGE_THREAD``, where the system counts them): a read from a network
filesystem sleeps while it waits, where a read answered from memory that took as long did
not wait but ran (a copy into new memory, or the CPU given to other processes on a loaded
machine), and threads would only add the GIL's hand-overs to it.

A batch's result does not depend on any of this: each task writes its own slot, and
when reads fail the error raised is the one the same reads made one after another would
have raised first (the lowest task number), so errors keep their order too. Imports
nothing of barecat.
"""

from __future__ import annotations

import itertools
import os
import resource
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (imported at the first concurrent batch: opening an archive is quick)
    from concurrent.futures import Future, ThreadPoolExecutor

DEFAULT_READ_CONCURRENCY = 16
"""Threads a batch reads on by default: enough to overlap the waits of a network
filesystem (a millisecond a read), few enough to cost nothing that matters when every
read is answered from the page cache."""

MIN_CONCURRENT_READS = 4
"""A batch of fewer reads than this runs on the calling thread alone."""

WAITING_READ_NS = 100_000
"""A read that took longer than this (100 µs) waited for its storage: the rest of its
batch fans out to the threads. Copying and checking 64 KiB from the page cache takes
15-45 µs (the more when its memory is new); a read from a network filesystem takes
200 µs to milliseconds."""


SPAN_READS = 32
"""The most reads the calling thread makes in one go before it asks whether its thread
slept (where the storage cannot tell a cached read): a system call per 32 reads."""

_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)


def sleeps_so_far() -> int | None:
    """How many times the calling thread has slept so far (its voluntary context
    switches: a read that waited for its storage slept), or None where the system does
    not count them per thread."""
    if _RUSAGE_THREAD is None:
        return None
    return resource.getrusage(_RUSAGE_THREAD).ru_nvcsw


def read_would_wait(fd: int, offset: int) -> bool | None:
    """Whether reading ``fd`` at ``offset`` would wait for its storage: a read of one
    byte that the kernel answers only from the page cache (``RWF_NOWAIT``).

    Returns:
        True: it would wait; False: the page is in memory; None: this system or
        filesystem cannot tell (no ``RWF_NOWAIT``: tmpfs, FUSE, NFS, other systems).
    """
    if _RWF_NOWAIT is None:
        return None
    try:
        os.preadv(fd, [bytearray(1)], offset, _RWF_NOWAIT)
    except BlockingIOError:
        return True
    except OSError:  # (EOPNOTSUPP, EINVAL: not here)
        return None
    return False


class ReadPool:
    """Up to ``workers`` threads that run a batch's reads (see the module doc); 1 or less
    runs every batch on the calling thread."""

    def __init__(
        self, workers: int = DEFAULT_READ_CONCURRENCY, waiting_read_ns: int = WAITING_READ_NS
    ) -> None:
        self.workers = max(1, int(workers))
        self.waiting_read_ns = waiting_read_ns
        """How long a read takes before the rest of its batch fans out (0: every batch
        fans out from its start)."""
        self._executor: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def run(
        self,
        count: int,
        task: Callable[[int], None],
        may_wait: Callable[[], bool | None] | None = None,
    ) -> None:
        """Call ``task(k)`` for every ``k`` in ``range(count)``; concurrently when the
        batch is large enough, there are workers and its reads wait (see the module doc).

        Args:
            count: how many tasks.
            task: does the ``k``-th read (and stores its result itself).
            may_wait: whether the first read would wait for its storage (None: it
                cannot tell); asked once, for a batch large enough.

        Raises:
            Exception: what the lowest-numbered failing task raised (the first a loop
                would have met); the tasks after it may not have run.
        """
        self.run_as(self.fans_out(count, may_wait), count, task)

    def fans_out(
        self, count: int, may_wait: Callable[[], bool | None] | None = None
    ) -> bool | None:
        """How a batch of ``count`` reads runs (see the module doc), decided before its
        first read.

        Args:
            count: how many reads.
            may_wait: whether the first read would wait for its storage (None: it
                cannot tell); asked at most once, only for a batch large enough.

        Returns:
            False: on the calling thread alone; True: on the threads from the first
            read; None: on the calling thread until a read waits (the storage cannot
            tell).
        """
        if min(self.workers, count) < 2 or count < MIN_CONCURRENT_READS:
            return False
        if self.waiting_read_ns <= 0:
            return True
        return may_wait() if may_wait is not None else None

    def run_as(
        self,
        fans_out: bool | None,
        count: int,
        task: Callable[[int], None],
        span: Callable[[int, int], None] | None = None,
    ) -> None:
        """:meth:`run` as :meth:`fans_out` decided it.

        Args:
            fans_out: what :meth:`fans_out` answered for this batch.
            count: how many tasks.
            task: does the ``k``-th read (and stores its result itself).
            span: ``span(a, b)`` does tasks ``a`` to ``b - 1`` in order, as one loop
                on the calling thread (quicker than a call of ``task`` each); None: task
                by task.

        Raises:
            Exception: as :meth:`run`.
        """
        if fans_out is False:
            if span is not None:
                span(0, count)
            else:
                for k in range(count):
                    task(k)
            return
        if fans_out:
            first: int | None = 0
        elif span is not None and _RUSAGE_THREAD is not None:  # (sleeps are counted)
            first = self._until_a_span_waits(count, span)
        else:
            first = self._until_a_read_waits(count, task)
        if first is not None and first < count:
            self._fan_out(first, count, min(self.workers, count - first), task)

    def _until_a_read_waits(self, count: int, task: Callable[[int], None]) -> int | None:
        """Run tasks on the calling thread until one waits: took over ``waiting_read_ns``
        and the thread slept since the batch began (where the system counts sleeps,
        asked only after a slow read: a sleep of a quicker read counts too, as storage
        that made one read wait); returns the next one's number (None when none waited:
        the batch is done)."""
        clock, limit = time.perf_counter_ns, self.waiting_read_ns
        slept = sleeps_so_far()
        for k in range(count):
            started = clock()
            task(k)
            if clock() - started > limit:
                if slept is None:
                    return k + 1
                now = sleeps_so_far()
                if now != slept:
                    return k + 1
        return None

    def _until_a_span_waits(self, count: int, span: Callable[[int, int], None]) -> int | None:
        """As :meth:`_until_a_read_waits`, where sleeps are counted: the reads in spans of
        1, 2, 4 ... :data:`SPAN_READS` on the calling thread, until a span took over
        ``waiting_read_ns`` and the thread slept since the batch began (a read that
        waits does both at the first read, as before; page-cache reads never sleep)."""
        clock, limit = time.perf_counter_ns, self.waiting_read_ns
        slept = sleeps_so_far()
        a, size = 0, 1
        while a < count:
            b = min(count, a + size)
            started = clock()
            span(a, b)
            if clock() - started > limit and sleeps_so_far() != slept:
                return b
            a, size = b, min(2 * size, SPAN_READS)
        return None

    def _fan_out(self, first: int, count: int, threads: int, task: Callable[[int], None]) -> None:
        """Tasks ``first`` to ``count - 1`` on ``threads`` threads, the caller's among
        them (see :meth:`run` for the errors)."""
        numbers = itertools.count(first)  # (next() of a count is atomic: each k is taken once)
        failed: dict[int, BaseException] = {}

        def work() -> None:
            while True:
                k = next(numbers)
                if k >= count or (failed and k > min(failed)):
                    return
                try:
                    task(k)
                except BaseException as e:  # re-raised below, in the caller's thread
                    failed[k] = e

        helpers: list[Future[None]] = []
        if threads > 1:  # (one read left: the caller's)
            executor = self._executor_here()
            helpers = [executor.submit(work) for _ in range(threads - 1)]
        work()  # the calling thread reads too
        for helper in helpers:
            helper.result()
        if failed:
            raise failed[min(failed)]

    def _executor_here(self) -> ThreadPoolExecutor:
        """This process's threads (a forked child makes its own)."""
        from concurrent.futures import ThreadPoolExecutor

        pid = os.getpid()
        with self._lock:
            if self._executor is None or self._pid != pid:
                self._executor = ThreadPoolExecutor(self.workers - 1, "barecat-read")
                self._pid = pid
            return self._executor

    def close(self) -> None:
        """Stop the threads (after the batch running now, if any); a later batch makes
        new ones."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None and self._pid == os.getpid():
            executor.shutdown(wait=True)


__all__ = [
    "DEFAULT_READ_CONCURRENCY",
    "MIN_CONCURRENT_READS",
    "WAITING_READ_NS",
    "SPAN_READS",
    "ReadPool",
    "read_would_wait",
    "sleeps_so_far",
]
