"""One ranged GET of one object, over S3 (s3fs's own aiobotocore client) or HTTP(S)
(fsspec's aiohttp session): the status and headers are judged before the body is read
(a 412, a changed validator, a server that ignores ``Range``), and every failure is
sorted into missing (``FileNotFoundBarecatError``), final (``RemoteStorageBarecatError``)
or worth another try (``TransientError``, for the caller's retry loop). What a pin is
(validator, size, the ETag sent as ``If-Match``) lives here too. Imports ``exceptions``
and ``location``; aiohttp and botocore are imported when a request is made.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from barecat.exceptions import (
    FileNotFoundBarecatError,
    RangeIgnoredBarecatError,
    RemoteStorageBarecatError,
)
from barecat.objectstore.location import _version_of

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+)\s*$", re.IGNORECASE)
_UNSATISFIED_RANGE = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Pin:
    """What one response said about the object: its ``validator`` (the ETag, else the
    version id, else Last-Modified and size: the same text ``ObjectStore.describe``
    gives as a version), its ``size``, and the ETag to send as ``If-Match`` (None when
    the server gave none, or a weak one, which ``If-Match`` never matches)."""

    validator: str
    size: int
    etag: str | None


@dataclass(frozen=True, slots=True)
class Reply:
    """A ranged GET's body and the pin its headers gave; ``requests`` counts the
    requests it took (2 when a range past the end needed a HEAD to pin the object)."""

    data: bytes
    pin: Pin
    requests: int = 1


class TransientError(Exception):
    """A failure another attempt may cure (connection, timeout, 5xx, 429); never leaves
    ``objectstore``: the retry loop turns the last one into a RemoteStorageBarecatError."""


def changed_error(url: str, detail: str) -> RemoteStorageBarecatError:
    return RemoteStorageBarecatError(f"{url} changed while open ({detail}); open the archive again")


def check_pin(url: str, expected: Pin | None, seen: Pin) -> None:
    """Raises:
    RemoteStorageBarecatError: ``seen`` is not the version ``expected``."""
    if expected is None:
        return
    if seen.validator != expected.validator:
        raise changed_error(url, f"was {expected.validator}, now {seen.validator}")
    if seen.size != expected.size:
        raise changed_error(url, f"was {expected.size} bytes, now {seen.size}")


def _make_pin(size: int, etag: str | None, version_id: str | None, modified: Any) -> Pin:
    info = {"ETag": etag, "VersionId": version_id, "size": size, "LastModified": modified}
    strong = etag if etag and not etag.startswith("W/") else None
    return Pin(_version_of(info), size, strong)


def _ranged_size(
    url: str, start: int, end: int, status: int, content_range: str | None, length: int | None
) -> int:
    """The object's size from a response's status and headers, before its body is read.

    A 200 (the whole object) is accepted only when it is what was asked for: a range
    from 0 that covers the object. Raises RemoteStorageBarecatError otherwise, or when
    the 206's range is not the one asked for."""
    if status == 200:
        if start == 0 and length is not None and length <= end:
            return length
        raise RangeIgnoredBarecatError(
            f"{url}: the server ignores Range requests (it answered a request for bytes "
            f"{start}-{end - 1} with the whole object); read it with remote_mode='download'"
        )
    m = _CONTENT_RANGE.match(content_range or "")
    if m is None:
        raise RemoteStorageBarecatError(
            f"{url}: the server answered a Range request with no usable Content-Range "
            f"({content_range!r})"
        )
    first, last, size = (int(g) for g in m.groups())
    if first != start or last != min(end, size) - 1 or last < first:
        raise RemoteStorageBarecatError(
            f"{url}: asked for bytes {start}-{end - 1}, the server answered {first}-{last}/{size}"
        )
    return size


def _expect_length(url: str, data: bytes, wanted: int) -> bytes:
    if len(data) != wanted:
        raise TransientError(f"{url} answered {len(data)} bytes of {wanted}")
    return data


def _unsatisfied_size(content_range: str | None) -> int | None:
    m = _UNSATISFIED_RANGE.match(content_range or "")
    return int(m.group(1)) if m else None


def _status_failure(url: str, status: int, reason: str) -> Exception:
    """The error a non-success status means (404, 412, 429 and 5xx; the rest final)."""
    if status == 404:
        return FileNotFoundBarecatError(url, "Remote object")
    if status == 412:
        return changed_error(url, "If-Match failed: HTTP 412")
    if status == 429 or status >= 500:
        return TransientError(f"HTTP {status} {reason}".strip())
    return RemoteStorageBarecatError(f"Could not read {url}: HTTP {status} {reason}".strip())


# --- S3 -------------------------------------------------------------------------------------


async def s3_get(
    fs: Any, url: str, start: int, end: int, expected: Pin | None, stall: float
) -> Reply:
    """GET bytes ``[start, end)`` (``end > start``) of the S3 object ``url`` through the
    s3fs filesystem ``fs`` (its credentials, endpoint, ``requester_pays`` and SSE-C
    settings), sending ``If-Match`` when ``expected`` has an ETag. Runs on ``fs.loop``.
    botocore's own retries and timeouts (``config_kwargs``: ``retries``,
    ``read_timeout``) apply inside this one call, so ``stall`` is not used."""
    boto = _botocore()
    bucket, key, version_id = fs.split_path(url)
    params: dict[str, Any] = {"Bucket": bucket, "Key": key, "Range": f"bytes={start}-{end - 1}"}
    if version_id:
        params["VersionId"] = version_id
    if expected is not None and expected.etag:
        params["IfMatch"] = expected.etag
    try:
        await fs.set_session()
        s3 = await fs.get_s3(bucket)
        response = await s3.get_object(**fs._get_s3_method_kwargs(s3.get_object, **params))
    except boto.ClientError as e:
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        error = e.response.get("Error", {})
        if status == 416 and expected is None:
            return await _s3_past_the_end(fs, url, params, error.get("ActualObjectSize"))
        if error.get("Code") in ("SlowDown", "Throttling", "RequestTimeout"):
            raise TransientError(f"{error.get('Code')}: {error.get('Message')}") from e
        raise _status_failure(url, status, f"{error.get('Code')}: {error.get('Message')}") from e
    except _s3_transient_errors() as e:
        raise TransientError(f"{type(e).__name__}: {e}") from e
    body = response["Body"]
    try:
        status = int(response["ResponseMetadata"]["HTTPStatusCode"])
        length = response.get("ContentLength")
        size = _ranged_size(url, start, end, status, response.get("ContentRange"), length)
        pin = _make_pin(
            size, response.get("ETag"), response.get("VersionId"), response.get("LastModified")
        )
        check_pin(url, expected, pin)
        data = await body.read()
    except _s3_transient_errors() as e:
        raise TransientError(f"{type(e).__name__}: {e}") from e
    finally:
        body.close()
    return Reply(_expect_length(url, data, min(end, pin.size) - start), pin)


async def _s3_past_the_end(fs: Any, url: str, params: dict[str, Any], size: Any) -> Reply:
    """A range from past the end of an object not yet pinned (an empty object, read from
    0): one HEAD pins it, and the range holds no bytes."""
    head = {k: v for k, v in params.items() if k in ("Bucket", "Key", "VersionId")}
    try:
        s3 = await fs.get_s3(head["Bucket"])
        response = await s3.head_object(**fs._get_s3_method_kwargs(s3.head_object, **head))
    except _botocore().ClientError as e:
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        raise _status_failure(url, status, str(e.response.get("Error", {}))) from e
    except _s3_transient_errors() as e:
        raise TransientError(f"{type(e).__name__}: {e}") from e
    length = int(response.get("ContentLength") or size or 0)
    pin = _make_pin(
        length, response.get("ETag"), response.get("VersionId"), response.get("LastModified")
    )
    return Reply(b"", pin, requests=2)


def _botocore() -> Any:
    """``botocore.exceptions`` (installed with s3fs)."""
    import botocore.exceptions  # type: ignore[import-untyped]

    return botocore.exceptions


def _s3_transient_errors() -> tuple[type[BaseException], ...]:
    import aiohttp

    boto = _botocore()
    return (
        boto.HTTPClientError,
        boto.ConnectionError,
        boto.IncompleteReadError,
        aiohttp.ClientError,
        asyncio.TimeoutError,
    )


# --- HTTP(S) --------------------------------------------------------------------------------


async def http_get(
    fs: Any, url: str, start: int, end: int, expected: Pin | None, stall: float
) -> Reply:
    """GET bytes ``[start, end)`` (``end > start``) of ``url`` through fsspec's
    HTTPFileSystem ``fs`` (its aiohttp session: ``client_kwargs``; its request options:
    ``headers`` and the like), sending ``If-Match`` when ``expected`` has a strong ETag.
    A body the server would not send as asked (ignored ``Range``) is never read: the
    connection is closed. Unless the storage options set a ``timeout``, connecting or
    receiving nothing for ``stall`` seconds fails the request. Runs on ``fs.loop``."""
    import aiohttp

    options = dict(fs.kwargs)
    if "timeout" not in options and "timeout" not in fs.client_kwargs:
        options["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=stall, sock_read=stall)
    headers = dict(options.pop("headers", None) or {})
    headers.update({"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"})
    if expected is not None and expected.etag:
        headers["If-Match"] = expected.etag
    try:
        session = await fs.set_session()
        async with session.get(fs.encode_url(url), headers=headers, **options) as r:
            if r.status == 416 and expected is None:
                size = _unsatisfied_size(r.headers.get("Content-Range"))
                if size is not None and size <= start:
                    return await _http_past_the_end(fs, url, options, headers)
            if r.status not in (200, 206):
                raise _status_failure(url, r.status, r.reason or "")
            try:
                size = _ranged_size(
                    url, start, end, r.status, r.headers.get("Content-Range"), r.content_length
                )
                pin = _make_pin(size, r.headers.get("ETag"), None, r.headers.get("Last-Modified"))
                check_pin(url, expected, pin)
                _check_encoding(url, r.headers.get("Content-Encoding"))
            except BaseException:
                r.close()  # the body is not wanted: drop the connection, read nothing
                raise
            data = await r.read()
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        raise TransientError(f"{type(e).__name__}: {e}") from e
    return Reply(_expect_length(url, data, min(end, pin.size) - start), pin)


def _check_encoding(url: str, encoding: str | None) -> None:
    if encoding and encoding.lower() != "identity":
        raise RemoteStorageBarecatError(
            f"{url}: the server sent its bytes with Content-Encoding {encoding}, so byte "
            "ranges do not address the object's bytes"
        )


async def _http_past_the_end(
    fs: Any, url: str, options: dict[str, Any], headers: dict[str, str]
) -> Reply:
    """As :func:`_s3_past_the_end`, with an HTTP HEAD."""
    plain = {k: v for k, v in headers.items() if k not in ("Range", "If-Match")}
    session = await fs.set_session()
    async with session.head(fs.encode_url(url), headers=plain, **options) as r:
        if r.status != 200:
            raise _status_failure(url, r.status, r.reason or "")
        size = int(r.headers.get("Content-Length") or 0)
        pin = _make_pin(size, r.headers.get("ETag"), None, r.headers.get("Last-Modified"))
    return Reply(b"", pin, requests=2)


__all__ = ["Pin", "Reply", "TransientError", "changed_error", "check_pin", "http_get", "s3_get"]
