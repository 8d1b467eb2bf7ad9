"""Reading ahead across files: a directory read file after file has its next files pushed
into the kernel's page cache before they are asked for.

Through a mount each small file costs one request, a round trip from the reading process
through the kernel to this Python server and back, which costs more than reading the file
(a do-nothing Python server on the same binding takes 2.6x a plain directory for ``cat``
of small files). The kernel reads ahead within a file, never across files; this module
does. The serving threads report each read of a file's start (``read_seen``) and keep,
per directory, only the latest one. A read that sorts after the one before it is handed
to a worker thread, which asks the index whether it is the very next file in listing
order (the order ``find``, ``os.walk`` and ``cp -r`` read them); a reader found shuffled
is asked about less and less often (one read in 2, 4, ... 64), so it costs next to
nothing. Once two consecutive files were read, the worker reads the files that follow,
checks each one whole (CRC32C, or the sealed blocks' tags), and hands the bytes to the
kernel with libfuse's ``fuse_lowlevel_notify_store``: reads of them are page-cache hits
that never reach the server.

As the kernel does with its readahead marker, one file of each window is left out: its
read is the signal that the reader got there, and fetches the next window (``GROWTH``
times as many files, up to ``MAX_WINDOW`` files or ``WINDOW_BYTES``) while the reader goes
through the rest of the current one. A reader that catches up with the worker gets the
next few files to read itself, so the two do not store and read the same file at once.
A damaged file is never stored, so its own read fails with EIO as before.

The notification names the kernel's node id of the file. libfuse's high-level API does
not expose it, but reports it as every file's inode number (``st_ino``) unless the
``use_ino`` option is given, which barecat's mounts never do; the worker checks that the
mount's root says 1, the root's node id, and does nothing otherwise. It takes each file's
attributes by its full path from the kernel's caches only (``barecat.mount.cached_stat``),
so it never sends its own server a request. Any walk on the mount holds it (for a few
microseconds) and ``umount`` fails with EBUSY while one does, so the worker walks only
while a reader is sure to hold the mount too: while a serving thread is inside a read
that reported to it, not yet answered (the reader waits for that read, its file open).
That thread waits until the worker has taken its report and walked to the files it
queued (``LENT_FOR`` at most; files not walked by then wait for the next report), so no
walk outlives the reads a reader made, and ``fusermount3 -u`` right after a reader stopped
unmounts. A file whose name the kernel does not hold (dropped under memory pressure, or
listed without attributes: ``--plain-listings``) is not stored, nor one whose device, size
or type disagrees.

With debug logging on (``barecat mount -f --debug``) the serving threads log each read
they hand to the worker, and the worker logs each time it has taken every one and stored
all it had to (``read-ahead idle after N reports``): the state a reader can wait for.
With it off, each costs a test of a flag set when the worker starts.

Read-only mounts only, libfuse 3 only. Imports the archive layer and mfusepy (the ``mount``
extra).
"""

from __future__ import annotations

import collections
import ctypes
import logging
import queue
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import mfusepy

from barecat.archive.readable import ReadableArchive
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.mount.cached_stat import CachedStat, cached_stat

FIRST_WINDOW = 8
"""Files fetched once two consecutive files were read."""
GROWTH = 4
"""Each window has this many times the files of the one before (fewer left-out files)."""
MAX_WINDOW = 512
"""Most files in one window."""
WINDOW_BYTES = 16 << 20
"""Most bytes in one window (at least one file)."""
LARGEST_STORED = 1 << 20
"""Bigger files are left to the kernel's own readahead (one request per 128 KiB read
costs little next to the bytes)."""
DIRECTORIES_FOLLOWED = 64
"""Directories the worker follows at once."""
PROBED_DIRECTORIES = 4096
"""Directories whose latest read the serving threads keep, to tell a reader going file
after file."""
MAX_DOUBTS = 6
"""After this many failed checks, one read in 64 of a directory's is checked."""
OVERTAKEN_GAP = 3
"""Files the worker leaves to a reader that caught up with it, to get ahead again."""
LENT_FOR = 0.2
"""Seconds a serving thread that reported a read waits for the worker's walks."""
FUSE_ROOT_ID = 1

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Buffer(ctypes.Structure):
    """libfuse's ``struct fuse_buf``, a memory buffer here (``mem_size``, newer libfuse's
    last field, stays 0)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("flags", ctypes.c_int),
        ("mem", ctypes.c_char_p),  # (set from bytes: their own buffer, no copy)
        ("fd", ctypes.c_int),
        ("pos", ctypes.c_int64),
        ("mem_size", ctypes.c_size_t),
    ]


class _BufferVector(ctypes.Structure):
    """libfuse's ``struct fuse_bufvec`` with its one buffer."""

    _fields_ = [
        ("count", ctypes.c_size_t),
        ("idx", ctypes.c_size_t),
        ("off", ctypes.c_size_t),
        ("buf", _Buffer),
    ]


class KernelCache:
    """The kernel's page cache of this mount, filled with ``fuse_lowlevel_notify_store``."""

    def __init__(self, library: ctypes.CDLL, session: int) -> None:
        self._store = library.fuse_lowlevel_notify_store
        self._store.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_int64,
            ctypes.POINTER(_BufferVector),
            ctypes.c_int,
        ]
        self._store.restype = ctypes.c_int
        self._session = session
        self._vector = _BufferVector(count=1)

    @classmethod
    def of_this_mount(cls) -> KernelCache | None:
        """The cache of the mount being served; call it in a FUSE operation (``init``).
        None where it cannot be filled (libfuse 2)."""
        library = getattr(mfusepy, "_libfuse", None)
        if mfusepy.fuse_version_major != 3 or library is None:
            return None
        get_session = library.fuse_get_session
        get_session.argtypes = [ctypes.c_void_p]
        get_session.restype = ctypes.c_void_p
        session = get_session(library.fuse_get_context().contents.fuse)
        return cls(library, session) if session else None

    def store(self, node: int, data: bytes) -> None:
        """Put ``data`` as the whole content of file ``node`` into the cache (one thread at
        a time: the buffer vector is reused). A refusal (the kernel let the inode go) only
        means the file's read will ask the server."""
        buffer = self._vector.buf
        buffer.size = len(data)
        buffer.mem = data
        self._store(self._session, node, 0, ctypes.byref(self._vector), 0)


@dataclass(slots=True)
class _Probe:
    """What the serving threads know of a directory no run follows: its latest read, and
    how often checks found its reads were not file after file."""

    last: str
    doubts: int = 0
    skip: int = 0
    """Reads left before the next check."""

    def worth_asking(self) -> bool:
        """Whether to have the worker ask the index if a read is of the file after the one
        before it (the caller asks only for a read that sorts after that one: files are
        listed in the order they were added, which is sorted for most archives). After
        checks that failed (a shuffled reader), only one such read in 2, 4, ...
        ``2**MAX_DOUBTS`` is: a random reader costs next to nothing, and one that turns
        sequential is found soon."""
        if self.skip:
            self.skip -= 1
            return False
        return True

    def doubt(self) -> None:
        """Check less often: a check was asked for (and is taken to fail)."""
        self.doubts = min(self.doubts + 1, MAX_DOUBTS)
        self.skip = 2**self.doubts - 1


@dataclass(slots=True)
class _Job:
    """A file to store: its number in its run, and its node id once the worker walked to
    it (None before; 0 where it cannot be stored: the kernel does not hold its name, or
    it is not this file)."""

    number: int
    info: BarecatFileInfo
    node: int | None = None


class _UnlentError(Exception):
    """No serving thread lends the worker a reader's hold on the mount: walks wait."""


@dataclass(slots=True)
class _Run:
    """A directory read file after file: ``at`` numbers the files fetched ahead, in
    listing order, from the read that started the run."""

    at: dict[str, int] = field(default_factory=dict)
    tail: str = ""
    """The last file fetched: the next window starts after it."""
    count: int = 0
    """Files fetched so far (the next one gets this number)."""
    marker: int = -1
    """Number of the file left out of the newest window, whose read fetches the next."""
    reached: int = -1
    """Number of the furthest file read."""
    size: int = GROWTH * FIRST_WINDOW
    """Files in the next window."""
    pending: collections.deque[_Job] = field(default_factory=collections.deque)
    """Files to store, in order."""

    def number(self, files: list[BarecatFileInfo]) -> list[tuple[int, BarecatFileInfo]]:
        """Number files fetched after the others (and forget those behind the reader)."""
        if self.reached > 0:
            self.at = {path: n for path, n in self.at.items() if n >= self.reached}
        numbered = list(enumerate(files, self.count))
        self.at.update((info.path, n) for n, info in numbered)
        self.count += len(files)
        if files:
            self.tail = files[-1].path
        return numbered

    def read(self, number: int) -> None:
        """The reader got to file ``number``. If it caught up with the worker, the next
        ``OVERTAKEN_GAP`` files are left to it, so the worker gets ahead again instead of
        storing each file as it is being read (which waits for that read)."""
        self.reached = max(self.reached, number)
        pending = self.pending
        if pending and pending[0].number <= number + 1:  # (the worker would store it too late)
            while pending and pending[0].number <= number + OVERTAKEN_GAP:
                pending.popleft()


def _read_by_requests(info: BarecatFileInfo) -> bool:
    """Whether reading the file asks the server (a regular file with bytes)."""
    mode = info.mode
    regular = mode is None or stat.S_IFMT(mode) in (0, stat.S_IFREG)
    return regular and (info.size or 0) > 0


_Check = tuple[str, str, _Probe]
"""A read to check: the one before it in its directory, it, and the directory's probe."""


class ReadAhead:
    """Follows the reads the server reports (``read_seen``): the serving threads keep a
    probe per directory and pass on only what may start or continue a run, so random
    reads cost them a dictionary lookup; a worker thread checks, fetches and stores."""

    def __init__(self, mountpoint: str, archive: ReadableArchive, cache: KernelCache) -> None:
        self._mountpoint = mountpoint
        self._archive = archive
        self._cache = cache
        self._probes: dict[str, _Probe] = {}
        self._following: set[str] = set()
        """Directories the worker has a run for (it adds and removes them)."""
        self._seen: queue.SimpleQueue[tuple[str | _Check, threading.Event] | None] = (
            queue.SimpleQueue()
        )
        self._lent: list[str] = []
        """The files of the reported reads whose serving threads wait for the worker."""
        self._storing: str | None = None
        """The file the worker hands the kernel now (which waits for a read of it)."""
        self._walking = threading.Lock()
        """Held by each walk, and to change ``_lent`` and ``_storing``."""
        self._runs: dict[str, _Run] = {}
        """The worker's runs, the most recently read last."""
        self._device = -1
        """The mount's device number (what the worker stats must be on it)."""
        self._traced = log.isEnabledFor(logging.DEBUG)
        """Whether reports and idle times are logged (decided once: a flag to test)."""
        self._thread = threading.Thread(target=self._work, name="barecat-read-ahead", daemon=True)
        self._thread.start()

    def read_seen(self, path: str) -> None:
        """The server got a read of the start of ``path``. (No lock: serving threads that
        race on a probe cost at most a check more or less.)"""
        directory = path.rpartition("/")[0]
        if directory in self._following:
            self._report(path)
            return
        probe = self._probes.get(directory)
        if probe is None:
            if len(self._probes) >= PROBED_DIRECTORIES:
                self._probes.clear()
            self._probes[directory] = _Probe(path)
            return
        before, probe.last = probe.last, path
        if path <= before:  # (not even worth asking: see ``_Probe.worth_asking``)
            return
        if probe.worth_asking():
            probe.doubt()  # (until the worker finds otherwise: checks do not wait for it)
            self._report((before, path, probe))

    def _report(self, seen: str | _Check) -> None:
        """Hand a read to the worker (logged before it can be taken, so a log shows each
        report ahead of the worker's idle line that counts it), and lend it this read's
        hold on the mount: wait, the read unanswered, until it took the report and walked
        to the files it queued (``LENT_FOR`` at most). Not where the worker is storing this
        very file: the kernel waits for this read to end before it takes the bytes."""
        if self._traced:
            log.debug("read-ahead report queued: %s", seen if isinstance(seen, str) else seen[1])
        path = seen if isinstance(seen, str) else seen[1]
        walked = threading.Event()
        with self._walking:  # (not for a file being stored: that waits for this read)
            lent = path != self._storing
            if lent:
                self._lent.append(path)
        self._seen.put((seen, walked))
        if lent:
            try:
                walked.wait(LENT_FOR)
            finally:
                with self._walking:  # (after the walk under way, if any)
                    self._lent.remove(path)

    def close(self) -> None:
        """Stop the worker (after the unmount, so nothing it waits for can hang; no
        serving thread is left to lend it a hold on the mount)."""
        self._seen.put(None)
        self._thread.join(timeout=5)

    # -- the worker -------------------------------------------------------------------------

    def _work(self) -> None:
        """Take each report; while none waits, store the next file. Where files cannot be
        stored, reports are only taken (and counted)."""
        serving: bool | None = None  # (unknown until a report lends a hold on the mount)
        taken = 0
        while True:
            item = self._seen.get()  # (blocks while there is nothing to store)
            if item is None:
                return
            seen, walked = item
            taken += 1
            try:
                if serving is None:
                    serving = self._serves_node_ids()
                if serving:
                    self._guarded(self._take, seen)
                    self._guarded(self._walk_to_pending, None)
            finally:
                walked.set()  # (the reporting thread answers its read)
            while serving and self._seen.empty():  # every reported read taken
                job = self._next_job()
                if job is None:
                    break
                self._guarded(self._store, job)
            if self._traced and self._seen.empty():  # (else a report ended the stores)
                log.debug("read-ahead idle after %d reports", taken)

    def _take(self, seen: str | _Check) -> None:
        if isinstance(seen, tuple):
            self._check(*seen)
        else:
            self._follow(seen)

    @staticmethod
    def _guarded(step: Callable[[T], None], arg: T) -> None:
        """Run one step; a failure is logged and costs that step only (the worker has to
        outlive any one file: the serving threads keep reporting to it)."""
        try:
            step(arg)
        except Exception:
            log.exception("read-ahead: a step on %r failed", arg)

    def _walk(self, path: str) -> CachedStat | None:
        """``cached_stat`` of a path on the mount, made only while a serving thread lends
        a reader's hold on it (see the module doc).

        Raises:
            _UnlentError: No serving thread lends one now.
            OSError: As ``cached_stat``.
        """
        with self._walking:
            if not self._lent:
                raise _UnlentError
            return cached_stat(path)

    def _serves_node_ids(self) -> bool | None:
        """Whether files can be stored: the mount's root has node id 1 as its inode number,
        read from the kernel's cache (asking the server would wait for ``init`` to end);
        None while no report lends a hold on the mount."""
        try:
            root = self._walk(self._mountpoint)
        except _UnlentError:
            return None
        except OSError as e:
            log.info("read-ahead is off: %s", e)
            return False
        if root is None or root.ino != FUSE_ROOT_ID:
            log.info("read-ahead is off: inode numbers are not node ids on this mount")
            return False
        self._device = root.dev
        return True

    def _next_job(self) -> _Job | None:
        """The next file to store, of the directory read most recently (of those walked
        to: a run whose next file was not waits for the next report)."""
        for run in reversed(self._runs.values()):
            pending = run.pending
            while pending and pending[0].node == 0:
                pending.popleft()
            if pending and pending[0].node is not None:
                return pending.popleft()
        return None

    def _walk_to_pending(self, _: None) -> None:
        """Find the node id of each file queued and not yet walked to, the directory read
        most recently first, while the reporting thread lends its hold on the mount."""
        for run in reversed(self._runs.values()):
            for job in run.pending:
                if job.node is None:
                    try:
                        job.node = self._node_of(job.info)
                    except _UnlentError:
                        return

    def _check(self, before: str, path: str, probe: _Probe) -> None:
        """Start a run if ``path`` is the file after ``before`` in its directory."""
        directory = path.rpartition("/")[0]
        if directory in self._runs:  # (started by an earlier check of this reader)
            self._follow(path)
            return
        after = self._fetch(before, 1)
        if not after or after[0].path != path:
            return  # (the probe was doubted when the check was asked for)
        probe.doubts = probe.skip = 0
        ahead = after + self._fetch(path, FIRST_WINDOW)
        while len(self._runs) >= DIRECTORIES_FOLLOWED:
            self._stop(next(iter(self._runs)), None)
        run = self._runs[directory] = _Run()
        run.number(ahead[:1])
        self._schedule(run, ahead[1:])
        run.read(0)
        self._following.add(directory)

    def _follow(self, path: str) -> None:
        """A read in a directory with a run: continue it, or end it if the reader jumped."""
        directory = path.rpartition("/")[0]
        run = self._runs.pop(directory, None)
        number = None if run is None else run.at.get(path)
        if run is None or number is None:
            self._stop(directory, path)
            return
        self._runs[directory] = run  # the most recent last
        run.read(number)
        if number >= run.marker >= 0:  # the reader got to the left-out file
            self._schedule(run, self._fetch(run.tail, run.size))
            run.size = min(GROWTH * run.size, MAX_WINDOW)

    def _stop(self, directory: str, last: str | None) -> None:
        """End a directory's run; ``last``: the read that jumped, for the probe to
        compare the next read with."""
        self._runs.pop(directory, None)
        self._following.discard(directory)
        if last is not None:
            self._probes[directory] = _Probe(last)

    def _fetch(self, after: str, limit: int) -> list[BarecatFileInfo]:
        try:
            files = self._archive.files_after(after, limit)
        except (BarecatError, OSError) as e:  # (the server reports such errors itself)
            log.debug("read-ahead stops after %s: %s", after, e)
            return []
        total = 0
        for i, info in enumerate(files):
            total += info.size or 0
            if total > WINDOW_BYTES and i:
                return files[:i]
        return files

    def _schedule(self, run: _Run, window: list[BarecatFileInfo]) -> None:
        """Number a new window's files, leave out its first one that is read by requests
        (the marker) and queue the others worth storing."""
        run.marker = -1
        for number, info in run.number(window):
            if not _read_by_requests(info):
                continue
            if run.marker < 0:
                run.marker = number
            elif (info.size or 0) <= LARGEST_STORED:
                run.pending.append(_Job(number, info))

    def _node_of(self, info: BarecatFileInfo) -> int:
        """The file's node id, or 0 where it cannot be stored.

        Raises:
            _UnlentError: No serving thread lends a hold on the mount now.
        """
        try:  # (by its full path: a descriptor kept on the mount would block unmounting)
            st = self._walk(f"{self._mountpoint}/{info.path}")
        except OSError as e:
            log.debug("read-ahead skips %s: %s", info.path, e)
            return 0
        if st is None:
            return 0  # (the kernel does not hold its name: asking would hold the mount)
        if st.dev != self._device or st.size != info.size or not stat.S_ISREG(st.mode):
            return 0  # (something else mounted over this mount, or not this file)
        return st.ino

    def _store(self, job: _Job) -> None:
        """Hand a file to the kernel, unless its read is under way (the serving thread of
        that read waits for the worker, and the kernel waits for the read to end)."""
        path = job.info.path
        try:
            data = self._archive.read(job.info)  # checked whole; a damaged file is not stored
        except (BarecatError, OSError) as e:
            log.debug("read-ahead skips %s: %s", path, e)
            return
        with self._walking:
            if path in self._lent:
                return
            self._storing = path
        try:
            self._cache.store(job.node or 0, data)
        finally:
            with self._walking:
                self._storing = None


def start_read_ahead(mountpoint: str, archive: ReadableArchive) -> ReadAhead | None:
    """Start following the reads of the mount at ``mountpoint``; call it in ``init``, in
    the FUSE context. None where the kernel's cache cannot be filled."""
    cache = KernelCache.of_this_mount()
    return None if cache is None else ReadAhead(mountpoint, archive, cache)


__all__ = ["KernelCache", "ReadAhead", "start_read_ahead"]
