"""Talking to the storage that holds a remote archive: URLs, the fsspec filesystem behind
them, object versions, ranged reads and downloads, and how many requests they cost.

Any fsspec URL works (``s3://``, ``gs://``, ``http://``, ``memory://``, ...); credentials
and endpoints come from ``storage_options`` or from fsspec's own configuration
(``FSSPEC_S3_ENDPOINT_URL`` and the like), so barecat adds no protocol of its own. The
filesystem object is made again in a forked child, because async filesystems (s3fs) are
bound to their parent's event loop. Failures of the store become
``RemoteStorageBarecatError`` (an ``OSError``), a missing object ``FileNotFoundError``.
Imports ``exceptions`` only; fsspec is imported when a remote archive is opened.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from barecat.exceptions import FileNotFoundBarecatError, RemoteStorageBarecatError, install_hint

_LOCAL_PROTOCOLS = ("file", "local")


def url_protocol(path: str | os.PathLike[str]) -> str | None:
    """The protocol of ``path`` if it is a URL (``s3`` for ``s3://b/k``), else None."""
    text = os.fspath(path)
    head, sep, _ = text.partition("://")
    if not sep or not head or not head.replace("+", "").replace("-", "").isalnum():
        return None
    return head.lower()


def is_remote_url(path: str | os.PathLike[str]) -> bool:
    """True for URLs of storage other than this machine's files (``file://`` is local)."""
    protocol = url_protocol(path)
    return protocol is not None and protocol not in _LOCAL_PROTOCOLS


def local_path_of(path: str | os.PathLike[str]) -> str:
    """``path`` without a ``file://`` prefix (so such URLs open like plain paths)."""
    text = os.fspath(path)
    protocol = url_protocol(text)
    if protocol in _LOCAL_PROTOCOLS:
        return text.split("://", 1)[1]
    return text


@dataclass(slots=True)
class TransferStats:
    """What talking to the store has cost so far: requests sent (metadata lookups, ranged
    reads, uploads, server-side copies, deletions), bytes received and bytes sent (a
    server-side copy sends none). Cache hits cost nothing."""

    requests: int = 0
    bytes_fetched: int = 0
    bytes_sent: int = 0
    rounds: int = 0
    """Round trips: batches of requests sent together, each batch one round trip when
    nothing fails (a retry's wait is not counted as another)."""


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One object as the store describes it now; ``version`` changes whenever its bytes
    do (the ETag where the store has one), so copies made of it can be told apart."""

    url: str
    size: int
    version: str


class ObjectStore:
    """The fsspec filesystem for one protocol and its options, counting what it costs."""

    def __init__(self, protocol: str, storage_options: dict[str, Any] | None = None) -> None:
        self.protocol = protocol
        self.storage_options = dict(storage_options or {})
        self.stats = TransferStats()
        self._lock = threading.Lock()
        self._fs: Any = None
        self._fs_pid = -1

    @property
    def filesystem(self) -> Any:
        if self._fs is None or self._fs_pid != os.getpid():
            try:
                import fsspec
            except ImportError as e:
                raise RemoteStorageBarecatError(
                    f"Reading archives from {self.protocol}:// needs fsspec (and, for s3://, "
                    f"s3fs): {install_hint('remote')}"
                ) from e
            try:
                options = _with_room_for_rounds(self.protocol, self.storage_options)
                self._fs = fsspec.filesystem(self.protocol, **options)
            except ImportError as e:
                raise RemoteStorageBarecatError(
                    f"fsspec has no driver installed for {self.protocol}:// ({e}); for S3: "
                    f"{install_hint('remote')}"
                ) from e
            self._fs_pid = os.getpid()
        return self._fs

    def _count(self, requests: int, received: int, sent: int = 0, rounds: int = 1) -> None:
        with self._lock:
            self.stats.requests += requests
            self.stats.bytes_fetched += received
            self.stats.bytes_sent += sent
            self.stats.rounds += rounds

    def describe(self, url: str) -> ObjectVersion:
        """Size and version of the object at ``url`` (one metadata request)."""
        self._count(1, 0)
        try:
            info = self.filesystem.info(url)
        except FileNotFoundError:
            raise FileNotFoundBarecatError(url, "Remote object") from None
        except Exception as e:
            raise _failure(f"Could not look up {url}", e) from e
        if info.get("type") not in (None, "file"):
            raise FileNotFoundBarecatError(url, "Remote object (found a directory)")
        return ObjectVersion(url, int(info.get("size") or 0), _version_of(info))

    def fetch_ranges(self, url: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes ``[start, end)`` of each range of ``url``, one request each, sent
        together (concurrently where the filesystem is asynchronous)."""
        return self.fetch_spans([(url, start, end) for start, end in ranges])

    def fetch_spans(self, spans: Sequence[tuple[str, int, int]]) -> list[bytes]:
        """The bytes ``[start, end)`` of each ``(url, start, end)``, whatever objects they
        read: one request each, sent together (one round trip where the filesystem is
        asynchronous)."""
        if not spans:
            return []
        urls = [s[0] for s in spans]
        starts = [s[1] for s in spans]
        ends = [s[2] for s in spans]
        try:
            if len(spans) == 1:
                parts: list[Any] = [self.filesystem.cat_file(urls[0], start=starts[0], end=ends[0])]
            else:
                parts = self.filesystem.cat_ranges(urls, starts, ends, on_error="return")
        except FileNotFoundError:
            raise FileNotFoundBarecatError(urls[0], "Remote object") from None
        except Exception as e:
            raise _failure(f"Could not read {urls[0]}", e) from e
        for url, part in zip(urls, parts, strict=True):
            if isinstance(part, FileNotFoundError):
                raise FileNotFoundBarecatError(url, "Remote object")
            if isinstance(part, BaseException):
                raise _failure(f"Could not read {url}", part) from part
        self._count(len(spans), sum(len(p) for p in parts))
        for (url, start, end), part in zip(spans, parts, strict=True):
            if len(part) != end - start:
                raise RemoteStorageBarecatError(
                    f"{url} answered {len(part)} bytes for range {start}-{end}: the object is "
                    "shorter than the index says (truncated, or replaced while open)"
                )
        return parts

    def download(self, url: str, local_path: str) -> int:
        """Copy the whole object to ``local_path``; returns its size."""
        with _store_errors(f"Could not download {url}", url):
            self.filesystem.get_file(url, local_path)
        size = os.path.getsize(local_path)
        self._count(1, size)
        return size

    def exists(self, url: str) -> bool:
        """Whether an object is at ``url`` (one metadata request)."""
        self._count(1, 0)
        try:
            return bool(self.filesystem.exists(url))
        except Exception as e:
            raise _failure(f"Could not look up {url}", e) from e

    def upload(self, local_path: str, url: str) -> None:
        """Copy the local file to the object ``url`` (replacing any object there)."""
        try:
            self.filesystem.put_file(local_path, url)
        except Exception as e:
            raise _failure(f"Could not upload {local_path} to {url}", e) from e
        self._count(1, 0, os.path.getsize(local_path))

    def copy(self, source: str, url: str) -> None:
        """Copy the object ``source`` to ``url`` on the store's side (S3's CopyObject, in
        parts for big objects): no byte passes through this process."""
        with _store_errors(f"Could not copy {source} to {url}", source):
            self.filesystem.copy(source, url)
        self._count(1, 0)

    def remove(self, urls: Sequence[str]) -> None:
        """Delete the objects (those missing are no error)."""
        for url in urls:
            try:
                self.filesystem.rm_file(url)
            except FileNotFoundError:
                pass
            except Exception as e:
                raise _failure(f"Could not delete {url}", e) from e
            self._count(1, 0)

    def remove_tree(self, url: str) -> None:
        """Delete every object under the prefix ``url/`` (none there is no error)."""
        try:
            self.filesystem.invalidate_cache()  # (others may have written there meanwhile)
            self.filesystem.rm(url, recursive=True)
        except FileNotFoundError:
            pass
        except Exception as e:
            raise _failure(f"Could not delete {url}/", e) from e
        self._count(1, 0)

    def names_with_prefix(self, url: str) -> list[str]:
        """The URLs of the objects (and prefixes ending in ``/``, as folders, without it)
        whose names start with ``url``'s, sorted, as the store lists them now."""
        self._count(1, 0)
        try:
            self.filesystem.invalidate_cache()  # (others may have written there meanwhile)
            found = self.filesystem.glob(url.replace("[", "[[]") + "*")
        except Exception as e:
            raise _failure(f"Could not list {url}*", e) from e
        prefix = f"{self.protocol}://"
        return sorted(f if "://" in f else prefix + f for f in found)


PARALLEL_CONNECTIONS = 256
"""Connections to a store kept open at once, unless the storage options say otherwise:
botocore keeps 10 and aiohttp 100, which would send a round of 256 ranged requests
(``get_many`` of 256 files) in 26 or 3 waves rather than at once."""


def _with_room_for_rounds(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with :data:`PARALLEL_CONNECTIONS` where they set no limit of their own
    (S3: ``config_kwargs["max_pool_connections"]``; HTTP(S): aiohttp's connector)."""
    options = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("max_pool_connections", PARALLEL_CONNECTIONS)
        options["config_kwargs"] = config
    elif (
        protocol in ("http", "https")
        and "get_client" not in options
        and "connector" not in (options.get("client_kwargs") or {})
    ):
        options["get_client"] = _http_session
    return options


async def _http_session(**kwargs: Any) -> Any:
    """fsspec's HTTP session (``get_client``), with room for :data:`PARALLEL_CONNECTIONS`
    (made on the filesystem's event loop, as the connector must be)."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=PARALLEL_CONNECTIONS)
    return aiohttp.ClientSession(connector=connector, **kwargs)


def _version_of(info: dict[str, Any]) -> str:
    for key in ("ETag", "etag", "VersionId", "md5Hash", "generation"):
        value = info.get(key)
        if value:
            return f"{key}:{str(value).strip(chr(34))}"
    stamp = info.get("LastModified") or info.get("mtime") or info.get("created") or ""
    return f"size-mtime:{info.get('size')}:{stamp}"


@contextlib.contextmanager
def _store_errors(what: str, url: str) -> Iterator[None]:
    """The store's errors as barecat's: a missing ``url`` as ``FileNotFoundBarecatError``,
    any other failure as ``RemoteStorageBarecatError`` saying ``what`` failed."""
    try:
        yield
    except FileNotFoundError:
        raise FileNotFoundBarecatError(url, "Remote object") from None
    except Exception as e:
        raise _failure(what, e) from e


def _failure(what: str, e: BaseException) -> RemoteStorageBarecatError:
    return RemoteStorageBarecatError(f"{what}: {type(e).__name__}: {e}")


__all__ = [
    "ObjectStore",
    "ObjectVersion",
    "TransferStats",
    "is_remote_url",
    "local_path_of",
    "url_protocol",
]
