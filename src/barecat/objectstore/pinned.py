"""Ranged reads of one object version, pinned at the first answer: whatever the store
holds later, a reader gets the bytes of the version it first saw, or an error saying the
object changed, never a mix of two versions.

The first response pins the object's validator (ETag, else version id, else
Last-Modified and size) and its size (from ``Content-Range``); every later request sends
``If-Match`` with the ETag, and a 412 or a response with another validator or size
raises ``RemoteStorageBarecatError`` ("changed while open"). Every range is one request;
the ranges of a call, of one object or of several (:func:`read_many`), are all sent at
once. Failures worth another try (connection errors, timeouts, 5xx, 429) are retried a
bounded number of times with jittered exponential backoff (:class:`Retries`). S3 goes
through s3fs's own client, HTTP(S) through fsspec's aiohttp session, so storage options,
endpoint variables and credentials work as for ``ObjectStore``; any other fsspec protocol
goes through ``ObjectStore.describe`` and ``fetch_ranges``, where the pin is one info()
at pin time and a change shows only as a changed size. Requests and bytes are counted in
``store.stats``. Imports ``exceptions`` and this package's modules; fsspec lazily.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, overload

from barecat.exceptions import (
    BarecatError,
    FileNotFoundBarecatError,
    RemoteStorageBarecatError,
)
from barecat.objectstore.location import ObjectStore, ObjectVersion
from barecat.objectstore.range_requests import (
    Pin,
    Reply,
    TransientError,
    check_pin,
    http_get,
    s3_get,
)

_S3 = ("s3", "s3a")
_HTTP = ("http", "https")


@dataclass(frozen=True, slots=True)
class Retries:
    """How often a failed request is tried again: ``attempts`` in all (so
    ``attempts - 1`` retries), waiting ``first_delay`` seconds before the second, doubling
    each time, each wait multiplied by a random factor in [0.5, 1.5). An HTTP(S) request
    that connects or receives nothing for ``stall_timeout`` seconds has failed (unless
    the storage options set aiohttp's ``timeout``); on S3, botocore's ``read_timeout``
    and ``connect_timeout`` (``config_kwargs``) say it."""

    attempts: int = 4
    first_delay: float = 0.05
    stall_timeout: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0 for the first)."""
        return float(self.first_delay * 2**attempt * (0.5 + random.random()))


class PinnedObject:
    """Ranged reads of the object at ``url`` through ``store``, pinned at the first
    answer. Safe to share between threads.

    Args:
        store: The store (protocol, storage options, stats) the object is read through.
        url: The object's URL (``s3://bucket/key``, ``https://host/path``, ...).
        retries: The retry bound (default: 4 attempts, from 50 ms).
    """

    def __init__(self, store: ObjectStore, url: str, retries: Retries | None = None) -> None:
        self.store = store
        self.url = url
        self.retries = retries or Retries()
        self._pin: Pin | None = None
        self._lock = threading.Lock()
        protocol = store.protocol
        self._get: Callable[..., Awaitable[Reply]] | None = (
            s3_get if protocol in _S3 else http_get if protocol in _HTTP else None
        )

    def __repr__(self) -> str:
        return f"PinnedObject({self.url!r}, {self._pin!r})"

    @property
    def pinned(self) -> bool:
        """Whether a response has pinned the object yet."""
        return self._pin is not None

    @property
    def size(self) -> int:
        """The object's size (pinning it first if no request has yet: one request)."""
        return self._pinned().size

    @property
    def validator(self) -> str:
        """The version pinned (pinning it first if no request has yet: one request)."""
        return self._pinned().validator

    @property
    def version(self) -> ObjectVersion:
        """The pinned version as ``ObjectStore.describe`` would give it (same ``version``
        text), e.g. to name a local copy in ``ArchiveCache``."""
        pin = self._pinned()
        return ObjectVersion(self.url, pin.size, pin.validator)

    def pin(self) -> None:
        """Pin the object now, unless a response already did: a ranged GET of its first
        byte (an info() request on protocols other than S3 and HTTP).

        Raises:
            FileNotFoundBarecatError: there is no object at the URL.
            RemoteStorageBarecatError: the store failed (after the retries), or ignores
                ``Range``.
        """
        self._pinned()

    def _pinned(self) -> Pin:
        if self._pin is None:
            if self._get is None:
                version = self.store.describe(self.url)
                self._accept(Pin(version.version, version.size, None))
            else:
                self.read(0, 1)
        assert self._pin is not None
        return self._pin

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the pinned version (fewer where the object ends).

        Raises:
            FileNotFoundBarecatError: there is no object at the URL.
            RemoteStorageBarecatError: the store failed (after the retries), ignores
                ``Range``, or the object changed since it was pinned.
        """
        return self.read_ranges([(start, end)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Bytes of each ``[start, end)`` range, in the order given: one request per
        non-empty range, all sent at once, no coalescing. Raises as :meth:`read`."""
        return read_many([(self, start, end) for start, end in ranges])

    def download(
        self,
        local_path: str,
        chunk_size: int = 8 << 20,
        parallel: int = 4,
        stopped: Callable[[], bool] | None = None,
    ) -> int:
        """Write the pinned version to ``local_path`` (created or truncated), in ranges
        of ``chunk_size`` bytes, ``parallel`` at a time (memory: their product), each sent
        with ``If-Match``: the file holds exactly the version pinned, or this raises.
        The caller names the file (a temporary name, renamed when this returns).
        ``stopped`` is asked before each round of requests: True ends the download
        there, the file incomplete.

        Returns:
            The object's size (the bytes written), or -1 when stopped.

        Raises:
            FileNotFoundBarecatError: there is no object at the URL.
            RemoteStorageBarecatError: as :meth:`read`; the file is then incomplete.
        """
        size = self.size
        spans = [(s, min(s + chunk_size, size)) for s in range(0, size, chunk_size)]
        fd = os.open(local_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            for i in range(0, len(spans), max(parallel, 1)):
                if stopped is not None and stopped():
                    return -1
                window = spans[i : i + max(parallel, 1)]
                for (start, _), data in zip(window, self.read_ranges(window), strict=True):
                    os.pwrite(fd, data, start)
        finally:
            os.close(fd)
        return size

    # --- inside read_many ----------------------------------------------------------------

    def _accept(self, pin: Pin) -> Pin:
        """Pin ``pin`` if nothing is pinned yet, else check it is the pinned version."""
        with self._lock:
            if self._pin is None:
                self._pin = pin
            else:
                check_pin(self.url, self._pin, pin)
            return self._pin

    def _clip(self, start: int, end: int) -> tuple[int, int]:
        """The range within the object, as far as the pin tells."""
        start = max(start, 0)
        end = max(end, start)
        if self._pin is not None:
            start = min(start, self._pin.size)
            end = min(end, self._pin.size)
        return start, end

    def _loop(self) -> Any:
        if self._get is None:
            import fsspec.asyn

            return fsspec.asyn.get_loop()
        return self.store.filesystem.loop

    async def _read(self, start: int, end: int) -> bytes:
        start, end = self._clip(start, end)
        if self._get is None:
            return await asyncio.to_thread(self._read_through_fsspec, start, end)
        if end > start:
            return await self._read_with_retries(self._get, self.store.filesystem, start, end)
        if self._pin is None:  # nothing to read, but a pin asked for: its first byte
            await self._read_with_retries(self._get, self.store.filesystem, 0, 1)
        return b""

    async def _read_with_retries(
        self, get: Callable[..., Awaitable[Reply]], fs: Any, start: int, end: int
    ) -> bytes:
        failure: TransientError | None = None
        for attempt in range(max(self.retries.attempts, 1)):
            if attempt:
                await asyncio.sleep(self.retries.delay(attempt - 1))
            expected = self._pin
            try:
                reply = await get(fs, self.url, start, end, expected, self.retries.stall_timeout)
            except TransientError as e:
                self.store._count(1, 0, rounds=0)
                failure = e
                continue
            except BarecatError:
                self.store._count(1, 0, rounds=0)
                raise
            except Exception as e:  # the client refused (no credentials, a bad name...)
                self.store._count(1, 0, rounds=0)
                raise RemoteStorageBarecatError(
                    f"Could not read {self.url}: {type(e).__name__}: {e}"
                ) from e
            self.store._count(reply.requests, len(reply.data), rounds=0)
            self._accept(reply.pin)
            return reply.data
        raise RemoteStorageBarecatError(
            f"Could not read {self.url} (tried {self.retries.attempts} times): {failure}"
        )

    def _read_through_fsspec(self, start: int, end: int) -> bytes:
        pin = self._pinned()
        start, end = min(start, pin.size), min(end, pin.size)
        return self.store.fetch_ranges(self.url, [(start, end)])[0] if end > start else b""


@overload
def read_many(
    reads: Sequence[tuple[PinnedObject, int, int]], *, missing_ok: Literal[False] = False
) -> list[bytes]: ...


@overload
def read_many(
    reads: Sequence[tuple[PinnedObject, int, int]], *, missing_ok: Literal[True]
) -> list[bytes | FileNotFoundBarecatError]: ...


def read_many(
    reads: Sequence[tuple[PinnedObject, int, int]], *, missing_ok: bool = False
) -> list[bytes] | list[bytes | FileNotFoundBarecatError]:
    """Bytes ``[start, end)`` of each ``(object, start, end)``, in the order given, all
    requests sent at once (one round trip when nothing fails), whatever objects they
    read. An object not pinned yet is pinned by its first answer, so opening an archive
    is e.g. ``read_many([(index, 0, 100), (sidecar, 0, 256 << 10)], missing_ok=True)``:
    both headers in one round trip, a missing sidecar an answer rather than an error.

    Args:
        reads: (object, start, end) triples; a range is clipped to its object.
        missing_ok: Return a missing object's ``FileNotFoundBarecatError`` in its place
            rather than raise it.

    Returns:
        The bytes of each read (or, with ``missing_ok``, the error of a missing object).

    Raises:
        FileNotFoundBarecatError: an object is missing (without ``missing_ok``).
        RemoteStorageBarecatError: a request failed after its retries, a server ignores
            ``Range``, or an object changed since it was pinned.
    """
    if not reads:
        return []
    groups: dict[int, tuple[Any, list[int]]] = {}
    for i, (obj, _, _) in enumerate(reads):
        loop = obj._loop()
        groups.setdefault(id(loop), (loop, []))[1].append(i)
    results: list[bytes | BaseException] = [b""] * len(reads)

    def run(loop: Any, members: list[int]) -> None:
        import fsspec.asyn

        async def gather() -> list[bytes | BaseException]:
            tasks = [reads[i][0]._read(reads[i][1], reads[i][2]) for i in members]
            return await asyncio.gather(*tasks, return_exceptions=True)

        for i, result in zip(members, fsspec.asyn.sync(loop, gather), strict=True):
            results[i] = result

    for store in {id(obj.store): obj.store for obj, _, _ in reads}.values():
        store._count(0, 0, rounds=1)  # (all of a call's requests go out together)
    if len(groups) == 1:
        run(*next(iter(groups.values())))
    else:
        with ThreadPoolExecutor(len(groups)) as pool:
            for future in [pool.submit(run, *group) for group in groups.values()]:
                future.result()
    return _answers(results, missing_ok)


def _answers(
    results: list[bytes | BaseException], missing_ok: bool
) -> list[bytes | FileNotFoundBarecatError]:
    """The results of :func:`read_many`, raising the first error that is not a missing
    object the caller accepts."""
    errors = [r for r in results if isinstance(r, BaseException)]
    missing = [e for e in errors if isinstance(e, FileNotFoundBarecatError)]
    others = [e for e in errors if not isinstance(e, FileNotFoundBarecatError)]
    if others:
        raise others[0]
    if missing and not missing_ok:
        raise missing[0]
    return [r for r in results if isinstance(r, (bytes, FileNotFoundBarecatError))]


__all__ = ["PinnedObject", "Retries", "read_many"]
