"""Opening an archive on object storage (or a web server) without downloading its index.

How a remote archive is read is its reader mode (``remote_mode=``, else
``$BARECAT_REMOTE_MODE``, else the entry point's default):

- ``download``: the whole index is copied into the cache directory (once per version of
  it) and read locally (``objectstore.py``).
- ``lazy``: SQLite reads the index's pages on demand, by ranged requests, through
  ``index/remote_pages.py``, into a bounded page cache. A *published* archive (``barecat
  publish``) has a sidecar that makes this fast: the pages every open needs arrive with
  its first request, every interior b-tree page with one more, and its lookup buckets
  answer "where is this file?" in one ranged request, so a file costs two requests (its
  bucket, its bytes) and a batch two rounds of parallel requests.
- ``hydrate``: lazy at once, while a background thread downloads the index (pinned to
  the version being read) into the cache; from then on pages are read from the local
  copy, and the next open in any mode finds it there.
- ``auto``: lazy for a published archive whose sidecar is fresh, download otherwise.

An archive that is not published (no sidecar, or a stale one) is read lazily only when
``lazy`` is asked for by name (every page then costs a request); ``auto`` and
``hydrate`` download its index first.

Every object is pinned to the version its first answer came from (``pinned.py``): one
that changes while open raises, naming it. A sidecar that does not match the index (the
index was written after ``publish``) is never used: a warning says so, and lazy reads go
through SQLite pages alone. Imports ``index``, ``shards``, ``objectstore``, ``layout``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from barecat.entries import Address
from barecat.exceptions import FileNotFoundBarecatError, RemoteModeBarecatError
from barecat.index import ReadOnlyIndex
from barecat.index.remote_pages import RemotePages
from barecat.index.sidecar_format import HEAD_GUESS, INDEX_HEADER_SIZE, SidecarHead
from barecat.layout import OLD_INDEX_SUFFIX, SIDECAR_SUFFIX, shard_path
from barecat.objectstore import ArchiveCache, ObjectStore, ObjectVersion, StoredObject
from barecat.objectstore.page_cache import PageCache
from barecat.objectstore.pinned import PinnedObject, read_many
from barecat.shards.objectstore import DEFAULT_BLOCK_SIZE, ObjectStoreSharder

MODES = ("auto", "download", "lazy", "hydrate")
"""The reader modes of a remote archive (see the module doc)."""
MODE_ENV = "BARECAT_REMOTE_MODE"
LOOK_AGAIN_SECONDS = 1.0
"""How often a hydrating reader whose copy another process downloads looks for it."""
HYDRATE_CHUNK = 8 << 20
"""Bytes per request of a background download (a few in flight at once)."""


def resolve_mode(explicit: str | None, default: str = "auto") -> str:
    """The reader mode: ``explicit``, else ``$BARECAT_REMOTE_MODE``, else ``default``.

    Raises:
        RemoteModeBarecatError: the mode is none of :data:`MODES`.
    """
    mode = explicit or os.environ.get(MODE_ENV) or default
    if mode not in MODES:
        source = "remote_mode" if explicit else MODE_ENV
        raise RemoteModeBarecatError(f"{source}={mode!r}: the reader modes are {', '.join(MODES)}")
    return mode


@dataclass
class _Opened:
    """What the first round of requests found: the index (pinned) and its header, and
    the sidecar's head if it is there and fresh."""

    index: PinnedObject
    header: bytes
    sidecar: PinnedObject | None
    head: SidecarHead | None


class SidecarLookup:
    """Where files are, from a published archive's sidecar buckets (one ranged request
    per bucket not yet cached): the final answer for every file of the index."""

    def __init__(self, head: SidecarHead, sidecar: PinnedObject, cache: PageCache) -> None:
        self.head = head
        self.sidecar = sidecar
        self.cache = cache

    def _buckets(self, spans: list[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        found: dict[tuple[int, int], bytes] = {}
        missing = []
        for span in dict.fromkeys(spans):
            data = self.cache.get(("bucket", span))
            if data is None:
                missing.append(span)
            else:
                found[span] = data
        if missing:
            for span, data in zip(missing, self.sidecar.read_ranges(missing), strict=True):
                self.cache.put(("bucket", span), data)
                found[span] = data
        return found

    def find(self, path: str) -> Address | None:
        span = self.head.bucket_span(path)
        return self.head.find(path, self._buckets([span])[span])

    def find_many(self, paths: list[str]) -> list[tuple[int, Address]]:
        spans = [self.head.bucket_span(p) for p in paths]
        buckets = self._buckets(spans)
        located = []
        for i, (path, span) in enumerate(zip(paths, spans, strict=True)):
            address = self.head.find(path, buckets[span])
            if address is not None:
                located.append((i, address))
        located.sort(key=lambda item: (item[1].shard, item[1].offset))
        return located


class HydratingSource:
    """The index object's bytes: ranged requests until a background download of the
    whole object (pinned to the version being read) completes, a local file after."""

    def __init__(self, remote: PinnedObject, local_path: str | None) -> None:
        self.remote = remote
        self.local_path = local_path
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        """What stopped the background download (reads went on remotely)."""
        self._lock_fd: int | None = None
        self._done = threading.Event()
        self._watching = False
        self._look_again = 0.0
        self.on_local: Callable[[], None] | None = None
        """Called once reads are local (the lookups then go to SQLite)."""
        self.on_copied: Callable[[], None] | None = None
        """Called once this process's download is in place (older copies are deleted)."""

    @property
    def size(self) -> int:
        return self.remote.size

    @property
    def local(self) -> bool:
        return self._fd is not None

    def read(self, start: int, end: int) -> bytes:
        if self._watching and time.monotonic() >= self._look_again:
            self._look()
        fd = self._fd
        if fd is not None:
            return os.pread(fd, end - start, start)
        return self.remote.read(start, end)

    def start(self) -> None:
        """Use the local copy if it is complete; else download it in the background,
        unless another process (a DataLoader worker's sibling) already is: then look for
        its copy now and then (at reads, and in :meth:`wait_until_local`), switch to it
        once complete, and take the download over if that process ended without it."""
        if self.local_path is None or self._thread is not None:
            return
        os.makedirs(os.path.dirname(self.local_path), exist_ok=True)
        self._lock_fd = os.open(self.local_path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        self._look()

    def _look(self) -> None:
        """Use the copy if it is complete, else download it if no other process is."""
        assert self.local_path is not None and self._lock_fd is not None
        self._look_again = time.monotonic() + LOOK_AGAIN_SECONDS
        if self._use_if_complete():
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._watching = True
            return
        self._watching = False
        if not self._use_if_complete():  # (the other process may have just finished)
            self._thread = threading.Thread(
                target=self._download, name="barecat-hydrate", daemon=True
            )
            self._thread.start()

    def _use_if_complete(self) -> bool:
        assert self.local_path is not None
        try:
            if os.path.getsize(self.local_path) != self.size:
                return False
        except FileNotFoundError:
            return False
        self._use(self.local_path)
        return True

    def _use(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._watching = False
        if self.on_local is not None:
            self.on_local()
        self._done.set()

    def wait_until_local(self, timeout: float | None = None) -> bool:
        """Wait until reads are local: this process's download finished (or failed), or
        another process's copy is complete (looked for now and then, and taken over if
        that process ended without it).

        Args:
            timeout: seconds to wait at most (None: as long as it takes).

        Returns:
            True once reads are local (False: not hydrating, or the time ran out).

        Raises:
            BaseException: what stopped this process's download.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.local_path is not None and not self._done.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            step = LOOK_AGAIN_SECONDS if left is None else min(left, LOOK_AGAIN_SECONDS)
            if not self._done.wait(step) and self._watching:
                self._look()
        if self.failure is not None:
            raise self.failure
        return self.local

    def _download(self) -> None:
        assert self.local_path is not None
        partial = f"{self.local_path}.part-{os.getpid()}"
        try:
            if self.remote.download(partial, HYDRATE_CHUNK, stopped=self._stop.is_set) < 0:
                return
            fd = os.open(partial, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)  # (a copy renamed into place is whole, even after a crash)
            finally:
                os.close(fd)
            os.replace(partial, self.local_path)
            if self.on_copied is not None:
                self.on_copied()
            self._use(self.local_path)
        except BaseException as e:  # (reads go on remotely; the failure is kept)
            self.failure = e
            self._done.set()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = None


def _first_round(store: ObjectStore, url: str) -> _Opened:
    """Pin the index and read its header, and read the sidecar's head, in one round."""
    index = PinnedObject(store, url)
    sidecar = PinnedObject(store, url + SIDECAR_SUFFIX)
    header, head_bytes = read_many(
        [(index, 0, INDEX_HEADER_SIZE), (sidecar, 0, HEAD_GUESS)], missing_ok=True
    )
    if isinstance(header, FileNotFoundBarecatError):
        index = PinnedObject(store, url + OLD_INDEX_SUFFIX)  # (barecat 0.3.1's older naming)
        try:
            header = index.read(0, INDEX_HEADER_SIZE)
        except FileNotFoundBarecatError:
            raise FileNotFoundBarecatError(url, "Archive") from None
    if isinstance(head_bytes, FileNotFoundBarecatError):
        return _Opened(index, header, None, None)
    head = _parse_head(head_bytes, sidecar)
    if not head.matches(header, index.size):
        warnings.warn(
            f"{url + SIDECAR_SUFFIX} does not match the index (it was written after "
            "`barecat publish`): it is not used; publish the archive again",
            stacklevel=4,
        )
        return _Opened(index, header, None, None)
    return _Opened(index, header, sidecar, head)


def _parse_head(first: bytes, sidecar: PinnedObject) -> SidecarHead:
    """The sidecar's head from its first bytes (and, for a head longer than the first
    request took, one more request)."""
    needed = SidecarHead.needed(first)
    if needed > len(first):
        first += sidecar.read(len(first), needed)
    return SidecarHead.parse(first, sidecar.url)


def _page_size(header: bytes) -> int:
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def open_remote_halves(
    url: str,
    store: ObjectStore,
    cache: ArchiveCache,
    mode: str,
    page_cache: PageCache,
    block_cache: bool,
    threadsafe: bool,
    download: Callable[[ObjectVersion | None], tuple[ReadOnlyIndex, ObjectStoreSharder]],
) -> tuple[ReadOnlyIndex, ObjectStoreSharder]:
    """The index and shards of the remote archive at ``url``, read in ``mode``
    (``download`` is how the download mode opens, for ``auto`` on an unpublished archive;
    given the index's version when a request already pinned it).
    """
    if mode == "download":
        return download(None)
    opened = _first_round(store, url)  # (a server that ignores Range fails here, clearly)
    if opened.head is None and mode != "lazy":  # (unpublished: lazy only when asked)
        return download(opened.index.version)
    source = HydratingSource(
        opened.index,
        cache.path_of(opened.index.version) if mode == "hydrate" else None,
    )
    if source.local_path is not None:
        copy = source.local_path
        source.on_copied = lambda: cache.forget_other_versions(copy, opened.index.version)
    head = opened.head
    known: Mapping[int, bytes] = head.eager_pages if head is not None else {}
    more = None
    if head is not None:
        sidecar = opened.sidecar
        assert sidecar is not None
        more = lambda: head.parse_interior(sidecar.read(*head.interior_span))  # noqa: E731
    pages = RemotePages(source, _page_size(opened.header), known, page_cache, more)
    index = ReadOnlyIndex(
        url, readonly=True, threadsafe=threadsafe, lookup_table=False, pages=pages
    )
    try:
        if head is not None and opened.sidecar is not None:
            index.lookups.answer_files_from(SidecarLookup(head, opened.sidecar, page_cache))
            source.on_local = lambda: index.lookups.answer_files_from(None)
        sharder = _sharder(url, store, cache, index, head, block_cache, opened)
        source.start()
    except BaseException:
        index.close()
        raise
    return index, sharder


def _sharder(
    url: str,
    store: ObjectStore,
    cache: ArchiveCache,
    index: ReadOnlyIndex,
    head: SidecarHead | None,
    block_cache: bool,
    opened: _Opened,
) -> ObjectStoreSharder:
    if head is None:  # (an unpublished archive: each shard is looked up once)
        return ObjectStoreSharder(
            url, store, index.lookups.num_used_shards, cache if block_cache else None
        )
    # Shards are named and sized by the sidecar; their block caches by the index they
    # were published with, so a new publish never reuses an old block.
    identity = hashlib.sha256(opened.header).hexdigest()[:16]

    def shard_object(number: int) -> StoredObject:
        shard_url = shard_path(url, number)
        version = ObjectVersion(shard_url, head.shard_sizes[number], f"published:{identity}")
        blocks = cache.blocks_of(version, DEFAULT_BLOCK_SIZE) if block_cache else None
        pinned = PinnedObject(store, shard_url)
        return StoredObject(store, version, blocks, pinned)

    return ObjectStoreSharder(
        url, store, len(head.shard_sizes), cache if block_cache else None,
        shard_objects=shard_object,
    )  # fmt: skip


__all__ = [
    "MODES",
    "MODE_ENV",
    "HydratingSource",
    "SidecarLookup",
    "open_remote_halves",
    "resolve_mode",
]
