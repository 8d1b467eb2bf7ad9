"""Storing a plan: reading source files ahead on threads and adding them in batches.

Small files are read on a thread pool a bounded window ahead (reads release the GIL, so
they overlap each other and the archive's writes) and added with ``Barecat.add_many``,
whose batches are atomic; big files are streamed in the calling thread so memory stays
bounded whatever the sizes. A file that cannot be read, or whose path already exists in
the archive, is reported and skipped, and the rest goes on. Progress is reported only
for files whose batch is in the index, so an interrupted run has stored every file it
reported. Uses only the public :class:`Barecat` API; never prints.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from barecat.archive import Barecat
from barecat.entries import BarecatFileInfo
from barecat.exceptions import FileExistsBarecatError
from barecat.paths import normalize
from barecat.transfer.sources import IngestPlan, Source, plan_tree

STREAM_THRESHOLD = 16 << 20
"""Files above this size are streamed from disk instead of read whole on a worker."""
READ_CHUNK = 128
"""Files per thread-pool task: enough to amortize the task overhead."""
DEFAULT_WORKERS = 2
"""Reader threads. More only add GIL hand-offs: on 2 cores, 2 beat 4 by 10-15% on both
small-file trees (/usr/share) and 1-64 KiB image trees."""
BATCH_FILES = 2048
BATCH_BYTES = 64 << 20

OnAdded = Callable[[list[str], int], None]
"""Called with the archive paths of a stored batch and its total bytes."""


@dataclass(slots=True)
class IngestResult:
    """What a run stored, and what it had to leave out (with the reason)."""

    files: int = 0
    bytes: int = 0
    dirs: int = 0
    skipped: int = 0
    """Files left out because their path was already in the archive (``skip_existing``)."""
    failures: list[tuple[str, OSError]] = field(default_factory=list)


_Read = tuple[Source, BarecatFileInfo, bytes | None, OSError | None]


def _read_source(source: Source) -> _Read:
    info = BarecatFileInfo(source.store_path)
    try:
        if source.as_link:
            info.fill_from_statresult(os.lstat(source.disk_path))
            return source, info, os.fsencode(os.readlink(source.disk_path)), None
        fd = os.open(source.disk_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            info.fill_from_statresult(st)
            if st.st_size > STREAM_THRESHOLD:
                return source, info, None, None
            parts = []
            remaining = st.st_size
            while True:
                chunk = os.read(fd, max(remaining, 1 << 16))
                if not chunk:
                    break
                parts.append(chunk)
                remaining -= len(chunk)
            return source, info, parts[0] if len(parts) == 1 else b"".join(parts), None
        finally:
            os.close(fd)
    except OSError as e:
        return source, info, None, e


def _read_chunk(sources: list[Source]) -> list[_Read]:
    return [_read_source(s) for s in sources]


class _Batcher:
    """Collects read files and adds them in atomic batches, reporting after each one."""

    def __init__(self, bc: Barecat, result: IngestResult, on_added: OnAdded | None) -> None:
        self.bc = bc
        self.result = result
        self.on_added = on_added
        self.pending: list[tuple[BarecatFileInfo, bytes]] = []
        self.pending_bytes = 0

    def fail(self, path: str, error: OSError) -> None:
        self.result.failures.append((path, error))

    def take(self, item: _Read) -> None:
        source, info, data, error = item
        if error is not None:
            self.fail(source.disk_path, error)
            return
        if data is None:
            self.flush()
            self._stream(source, info)
            return
        self.pending.append((info, data))
        self.pending_bytes += len(data)
        if len(self.pending) >= BATCH_FILES or self.pending_bytes >= BATCH_BYTES:
            self.flush()

    def _stream(self, source: Source, info: BarecatFileInfo) -> None:
        try:
            with open(source.disk_path, "rb") as f:
                self.bc.add(info, fileobj=f)
        except OSError as e:
            self.fail(source.disk_path, e)
            return
        self._report([info.path], os.path.getsize(source.disk_path))

    def flush(self) -> None:
        if not self.pending:
            return
        batch, nbytes = self.pending, self.pending_bytes
        self.pending, self.pending_bytes = [], 0
        self.bc.add_many(batch, batch_size=len(batch))
        self._report([info.path for info, _ in batch], nbytes)

    def _report(self, paths: list[str], nbytes: int) -> None:
        self.result.files += len(paths)
        self.result.bytes += nbytes
        if self.on_added is not None:
            self.on_added(paths, nbytes)


def ingest(
    bc: Barecat,
    plan: IngestPlan,
    *,
    workers: int = DEFAULT_WORKERS,
    on_added: OnAdded | None = None,
    skip_existing: bool = False,
) -> IngestResult:
    """Store everything in ``plan``; returns counts and the sources that failed.

    Directories are stored first (existing ones take the source's metadata). If the
    archive already holds files, paths are checked before anything is read: one that
    exists is reported as a failure (rather than aborting its whole batch), or with
    ``skip_existing`` counted in ``skipped`` — which lets an interrupted run be repeated
    to finish the job without duplicates.
    """
    result = IngestResult(failures=list(plan.failures))
    bc.add_dirs(plan.dirs)
    result.dirs = len(plan.dirs)
    files = plan.files
    if bc.num_files > 0:
        files = _leave_out_existing(bc, files, result, skip_existing)
    batcher = _Batcher(bc, result, on_added)
    chunks = [files[i : i + READ_CHUNK] for i in range(0, len(files), READ_CHUNK)]
    pool = ThreadPoolExecutor(max(1, workers))
    try:
        window: deque[Future[list[_Read]]] = deque()
        for chunk in chunks:
            window.append(pool.submit(_read_chunk, chunk))
            if len(window) > 2 * workers:
                for item in window.popleft().result():
                    batcher.take(item)
        while window:
            for item in window.popleft().result():
                batcher.take(item)
        batcher.flush()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return result


def _leave_out_existing(
    bc: Barecat, files: list[Source], result: IngestResult, skip: bool
) -> list[Source]:
    present: set[int] = set()
    for start in range(0, len(files), 1000):
        chunk = [s.store_path for s in files[start : start + 1000]]
        present.update(start + row[0] for row in bc.index.locate_many(chunk))
    if not present:
        return files
    for i in sorted(present):
        if skip:
            result.skipped += 1
        else:
            path = files[i].store_path
            result.failures.append(
                (files[i].disk_path, FileExistsBarecatError(path, "Archive path"))
            )
    return [s for i, s in enumerate(files) if i not in present]


def add_directory(
    bc: Barecat,
    source_directory: str,
    prefix: str = "",
    *,
    workers: int = DEFAULT_WORKERS,
    follow_symlinks: bool = False,
) -> int:
    """Store the tree under ``source_directory`` at ``prefix`` in the archive.

    Returns the number of files added. A file that exists already in the archive, or
    cannot be read, raises (use :func:`ingest` with a plan to collect such failures).
    """
    plan = plan_tree(source_directory, normalize(prefix), follow_symlinks=follow_symlinks)
    if plan.failures:
        raise plan.failures[0][1]
    result = ingest(bc, plan, workers=workers)
    if result.failures:
        raise result.failures[0][1]
    return result.files


__all__ = ["DEFAULT_WORKERS", "IngestResult", "add_directory", "ingest"]
