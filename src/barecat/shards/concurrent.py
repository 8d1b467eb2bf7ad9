"""Running a batch's reads on a few threads at once, for storage where each read waits.

A batch (``get_many``, ``readinto_many``) reads in storage order, one ``pread`` per file
or per run of neighbours. On a local disk with the bytes in the page cache each read is a
few microseconds of copying; on a network filesystem, or a disk without the bytes in
cache, each one mostly waits. ``os.pread`` lets go of the GIL while it waits, so a few
threads that each take the next read of the batch overlap the waits. :class:`ReadPool`
is those threads: made at the first batch big enough, made again in a forked child (a
child has none of its parent's threads), shut down by the shards' ``close``. A batch's
result does not depend on it: each task writes its own slot, and when reads fail the
error raised is the one the same reads made one after another would have raised first
(the lowest task number), so errors keep their order too. Imports nothing of barecat.
"""

from __future__ import annotations

import itertools
import os
import threading
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


class ReadPool:
    """Up to ``workers`` threads that run a batch's reads (see the module doc); 1 or less
    runs every batch on the calling thread."""

    def __init__(self, workers: int = DEFAULT_READ_CONCURRENCY) -> None:
        self.workers = max(1, int(workers))
        self._executor: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def run(self, count: int, task: Callable[[int], None]) -> None:
        """Call ``task(k)`` for every ``k`` in ``range(count)``; concurrently when the batch
        is large enough and there are workers.

        Args:
            count: how many tasks.
            task: does the ``k``-th read (and stores its result itself).

        Raises:
            Exception: what the lowest-numbered failing task raised (the first a loop
                would have met); the tasks after it may not have run.
        """
        threads = min(self.workers, count)
        if threads < 2 or count < MIN_CONCURRENT_READS:
            for k in range(count):
                task(k)
            return
        numbers = itertools.count()  # (next() of a count is atomic: each k is taken once)
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

        executor = self._executor_here()
        helpers: list[Future[None]] = [executor.submit(work) for _ in range(threads - 1)]
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


__all__ = ["DEFAULT_READ_CONCURRENCY", "MIN_CONCURRENT_READS", "ReadPool"]
