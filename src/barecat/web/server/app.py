"""``barecat serve``'s HTTP application: archives' files, listings and stats over HTTP.

Each served archive is under ``/a/NAME`` (NAME: the archive's file name without
``.barecat``):

- ``GET|HEAD /a/NAME/files/PATH``: the file's bytes; ``Range: bytes=A-B`` gives 206, an
  ``ETag`` (the stored CRC32C and size) answers ``If-None-Match`` with 304, and
  ``X-Barecat-CRC32C`` is the CRC32C of the whole file's content, for clients to check;
- ``PUT /a/NAME/files/PATH`` (``--writable``): the body becomes the file (created or
  replaced) only once it has arrived whole, so a client killed mid-upload leaves nothing;
  ``DELETE`` removes it. Writes from any number of clients go through the archive's one
  writer, one at a time, and are committed before they are answered (201, 204), writes
  that arrive meanwhile sharing a commit; a full disk answers 507;
- ``GET /a/NAME/list/PATH`` and ``/a/NAME/stat/PATH``: JSON; ``GET /a/NAME/glob?pattern=``
  (``include_hidden=0`` leaves names starting with ``.`` to literal components);
- ``GET /a/NAME/index/PATH?order=path|address``: the record of every file below the
  directory PATH (all of them without PATH), one JSON object a line, in path or storage
  order;
- ``POST /a/NAME/batch`` with ``{"paths": [...]}``: many files in one response, each as an
  8-byte little-endian length and its bytes, in request order;
- ``GET /archives`` and ``GET /openapi.json``.

Paths go through the archive's normalization (``..`` out of the archive or NUL: 400).
With a token, every request needs ``Authorization: Bearer TOKEN`` (the scheme's name in
any case; 401 otherwise).
Requests are bounded (``Limits``): bigger uploads and batches get 413, a body as soon as
it is known to be too big, without reading the rest; a batch body that is not
``{"paths": [strings]}`` (nested too deep for the JSON parser included) gets 400.
"""

from __future__ import annotations

import hmac
import json
import struct
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from barecat.archive import Barecat
from barecat.archive.readable import ReadableArchive
from barecat.checksum import crc32c
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import (
    ReadOnlyBarecatError,
)
from barecat.paths import normalize
from barecat.web.asgi_serving import HTTPError, answered

_LENGTH = struct.Struct("<Q")
_ORDERS = {"path": Order.PATH, "address": Order.ADDRESS, "any": Order.ANY}
T = TypeVar("T")
READ_ONLY = "this archive is served read-only (barecat serve --writable)"
"""Why a change to an archive served without ``--writable`` is refused."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may ask for; a request over a limit gets 413, a body as soon as
    it is known to be over (from its ``Content-Length``, before any of it is read, or
    once that much has arrived), the connection then closed."""

    upload_bytes: int = 1 << 30
    """A PUT body (spooled to a temporary file, never held in memory whole)."""
    batch_files: int = 10_000
    """Paths in one batch."""
    batch_bytes: int = 256 << 20
    """The files of one batch, together."""
    batch_request_bytes: int = 16 << 20
    """The JSON body of one batch request (held in memory to be parsed)."""


class ServedArchive:
    """One archive behind the server: any :class:`ReadableArchive`, read-only and shared
    by threads; or a ``Barecat`` opened for writing, with every operation under one lock
    (the archive has one writer)."""

    def __init__(self, bc: ReadableArchive) -> None:
        self.bc = bc
        self._writer = bc if isinstance(bc, Barecat) and not bc.readonly else None
        self.writable = self._writer is not None
        self._lock = threading.Lock() if self.writable else None

    def run(self, work: Callable[[ReadableArchive], T]) -> T:
        """``work`` on the archive (under the lock of a writable one)."""
        if self._lock is None:
            return work(self.bc)
        with self._lock:
            return work(self.bc)

    def write(self, work: Callable[[Barecat], T]) -> T:
        """``work`` on the writable archive, under its lock.

        Raises:
            ReadOnlyBarecatError: the archive is served read-only.
        """
        if self._writer is None or self._lock is None:
            raise ReadOnlyBarecatError(READ_ONLY)
        with self._lock:
            return work(self._writer)

    def commit(self, transaction: int) -> None:
        """Make a write's transaction durable before the write is answered; writes of
        other requests made meanwhile share the commit (``Barecat.commit_transaction``).

        Raises:
            BarecatError: the commit failed, or an earlier failure rolled the write back
                (``NotEnoughSpaceBarecatError`` for a full disk).
        """
        if self._writer is None:
            raise ReadOnlyBarecatError("this archive is served read-only")
        self._writer.commit_transaction(transaction)


def entry_json(info: BarecatEntryInfo) -> dict[str, Any]:
    common = {"path": info.path, "mode": info.mode, "uid": info.uid, "gid": info.gid,
              "mtime_ns": info.mtime_ns}  # fmt: skip
    if isinstance(info, BarecatDirInfo):
        return {**common, "type": "dir", "num_files_tree": info.num_files_tree,
                "size_tree": info.size_tree, "num_subdirs": info.num_subdirs,
                "num_files": info.num_files}  # fmt: skip
    assert isinstance(info, BarecatFileInfo)
    return {**common, "type": "file", "size": info.size, "crc32c": info.crc32c}


def _etag(info: BarecatFileInfo) -> str:
    return f'"{info.crc32c or 0:08x}-{info.stored_size:x}"'


def _content_crc(info: BarecatFileInfo, data: bytes) -> int:
    """The CRC32C of a file's content: the index's for plain files, computed for sealed
    ones (whose index CRC is that of the sealed bytes)."""
    if info.sealed_size is None and info.crc32c is not None:
        return info.crc32c
    return crc32c(data)


async def _capped_body(request: Request, limit: int, what: str) -> AsyncIterator[bytes]:
    """The request body's parts as they arrive; 413 (see :class:`Limits`) once it is known
    to be over ``limit`` bytes. Stops reading there: the connection is closed after the
    answer, so the rest is never taken in."""
    too_big = HTTPError(413, f"{what} are limited to {limit} bytes", close=True)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise too_big
        yield chunk


def _batch_paths(body: bytes) -> list[str]:
    """The paths of a batch request's JSON body ``{"paths": [...]}``.

    Raises:
        HTTPError: 400 for a body that is not that (JSON nested too deep included).
    """
    try:
        request = json.loads(body)
    except (ValueError, RecursionError) as e:  # (UnicodeDecodeError is a ValueError)
        raise HTTPError(400, f'the body must be JSON: {{"paths": [...]}} ({e})') from None
    paths = request.get("paths") if isinstance(request, dict) else None
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise HTTPError(400, 'the body must be JSON: {"paths": [...]}, a list of strings')
    return paths


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a single ``bytes=`` range; None for none or several."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].strip().partition("-")
    try:
        if not first:  # the last N bytes
            start, end = max(0, size - int(last)), size
        else:
            start = int(first)
            end = min(size, int(last) + 1) if last else size
    except ValueError:
        return None
    if start >= size or start >= end:
        raise HTTPError(416, f"range {header} is outside the file's {size} bytes")
    return start, end


DEFAULT_LIMITS = Limits()


def create_app(archives: Mapping[str, ReadableArchive], token: str | None = None,
               limits: Limits = DEFAULT_LIMITS) -> Starlette:  # fmt: skip
    """The application serving ``archives`` (by name); those that are a ``Barecat``
    opened for writing take PUT and DELETE."""
    served = {name: ServedArchive(bc) for name, bc in archives.items()}

    def archive_of(request: Request) -> ServedArchive:
        found = served.get(request.path_params["name"])
        if found is None:
            raise HTTPError(404, f"no archive named {request.path_params['name']!r}")
        return found

    def writable_archive_of(request: Request) -> ServedArchive:
        archive = archive_of(request)
        if not archive.writable:
            raise ReadOnlyBarecatError(READ_ONLY)
        return archive

    def path_of(request: Request) -> str:
        return normalize(request.path_params.get("path", ""))

    @answered
    async def get_file(request: Request) -> Response:
        archive, path = archive_of(request), path_of(request)
        info = await run_in_threadpool(archive.run, lambda bc: bc.lookup_file(path))
        etag = _etag(info)
        headers = {"ETag": etag, "Accept-Ranges": "bytes"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        size = info.size or 0
        span = _byte_range(request.headers.get("range"), size)
        if request.method == "HEAD":
            return Response(headers={**headers, "Content-Length": str(size)})
        if span is None:
            data = await run_in_threadpool(archive.run, lambda bc: bc.read(info))
            headers["X-Barecat-CRC32C"] = f"{_content_crc(info, data):08x}"
            return Response(data, media_type="application/octet-stream", headers=headers)
        start, end = span
        part = await run_in_threadpool(archive.run, lambda bc: bc.read(info, start, end - start))
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        return Response(part, 206, media_type="application/octet-stream", headers=headers)

    @answered
    async def put_file(request: Request) -> Response:
        archive, path = writable_archive_of(request), path_of(request)
        spool = tempfile.SpooledTemporaryFile(8 << 20)  # noqa: SIM115 (closed below)
        try:
            try:
                async for chunk in _capped_body(request, limits.upload_bytes, "uploads"):
                    spool.write(chunk)
            except ClientDisconnect:
                return Response(status_code=400)  # nothing was stored

            def store(bc: Barecat) -> tuple[dict[str, Any], int]:
                spool.seek(0)  # (streamed into the archive: a big upload is not read whole)
                with bc.exclusive():  # (the transaction read right after the change)
                    if bc.isfile(path):
                        bc.update_file(path, fileobj=spool)  # type: ignore[arg-type]
                    else:
                        info = BarecatFileInfo(path, 0o100644, mtime_ns=time.time_ns())
                        bc.add(info, fileobj=spool)  # type: ignore[arg-type]
                    return entry_json(bc.lookup_file(path)), bc.transaction

            entry, transaction = await run_in_threadpool(archive.write, store)
            await run_in_threadpool(archive.commit, transaction)
            return JSONResponse(entry, status_code=201)
        finally:
            spool.close()

    @answered
    async def delete_file(request: Request) -> Response:
        archive, path = writable_archive_of(request), path_of(request)

        def remove(bc: Barecat) -> int:
            with bc.exclusive():
                bc.remove(path)
                return bc.transaction

        transaction = await run_in_threadpool(archive.write, remove)
        await run_in_threadpool(archive.commit, transaction)
        return Response(status_code=204)

    @answered
    async def listing(request: Request) -> Response:
        archive, path = archive_of(request), path_of(request)

        def listed(bc: ReadableArchive) -> dict[str, Any]:
            bc.lookup_dir(path)
            return {
                "path": path,
                "dirs": [entry_json(d) for d in bc.subdirs_of(path)],
                "files": [entry_json(f) for f in bc.files_in(path)],
            }

        return JSONResponse(await run_in_threadpool(archive.run, listed))

    @answered
    async def stat(request: Request) -> Response:
        archive, path = archive_of(request), path_of(request)
        info = await run_in_threadpool(archive.run, lambda bc: bc.lookup(path))
        return JSONResponse(entry_json(info))

    @answered
    async def glob(request: Request) -> Response:
        archive = archive_of(request)
        pattern = request.query_params.get("pattern", "*")
        recursive = request.query_params.get("recursive", "0") not in ("0", "false", "")
        only_files = request.query_params.get("only_files", "0") not in ("0", "false", "")
        hidden = request.query_params.get("include_hidden", "1") not in ("0", "false", "")
        found = await run_in_threadpool(
            archive.run,
            lambda bc: (bc.globfiles if only_files else bc.glob)(pattern, recursive, hidden),
        )
        return JSONResponse({"pattern": pattern, "paths": found})

    @answered
    async def file_index(request: Request) -> Response:
        archive, path = archive_of(request), path_of(request)
        name = request.query_params.get("order", "path")
        order = _ORDERS.get(name)
        if order is None:
            raise HTTPError(400, f"order must be one of {', '.join(_ORDERS)}, not {name!r}")

        def records(bc: ReadableArchive) -> bytes:
            if path:
                bc.lookup_dir(path)  # 404 for a missing directory
            below = f"{path}/"
            return b"".join(
                json.dumps(entry_json(f)).encode() + b"\n"
                for f in bc.iter_fileinfos(order)
                if not path or f.path.startswith(below)
            )

        body = await run_in_threadpool(archive.run, records)
        return Response(body, media_type="application/x-ndjson")

    @answered
    async def batch(request: Request) -> Response:
        archive = archive_of(request)
        limit = limits.batch_request_bytes
        body = b"".join([c async for c in _capped_body(request, limit, "batch requests")])
        paths = _batch_paths(body)
        if len(paths) > limits.batch_files:
            raise HTTPError(413, f"batches are limited to {limits.batch_files} files")

        def gathered(bc: ReadableArchive) -> list[bytes]:
            wanted = [normalize(p) for p in paths]
            sizes = [bc.lookup_file(p).size or 0 for p in wanted]
            if sum(sizes) > limits.batch_bytes:
                raise HTTPError(413, f"batches are limited to {limits.batch_bytes} bytes")
            return bc.read_many(wanted)

        datas = await run_in_threadpool(archive.run, gathered)
        body = b"".join(_LENGTH.pack(len(d)) + d for d in datas)
        return Response(body, media_type="application/x-barecat-batch")

    async def list_archives(request: Request) -> Response:
        return JSONResponse(
            {name: {"writable": a.writable, "files": a.bc.num_files} for name, a in served.items()}
        )

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    routes = [
        Route("/archives", list_archives),
        Route("/openapi.json", openapi),
        Route("/a/{name}/files/{path:path}", get_file, methods=["GET", "HEAD"]),
        Route("/a/{name}/files/{path:path}", put_file, methods=["PUT"]),
        Route("/a/{name}/files/{path:path}", delete_file, methods=["DELETE"]),
        Route("/a/{name}/list/{path:path}", listing),
        Route("/a/{name}/list", listing),
        Route("/a/{name}/stat/{path:path}", stat),
        Route("/a/{name}/glob", glob),
        Route("/a/{name}/index/{path:path}", file_index),
        Route("/a/{name}/index", file_index),
        Route("/a/{name}/batch", batch, methods=["POST"]),
    ]
    middleware = [Middleware(_TokenCheck, token=token)] if token else []
    return Starlette(routes=routes, middleware=middleware)


class _TokenCheck(BaseHTTPMiddleware):
    """``Authorization: Bearer TOKEN``; the scheme's name in any case (RFC 7235, 2.1)."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.expected = token.encode()

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        scheme, _, credentials = request.headers.get("authorization", "").strip().partition(" ")
        given = credentials.strip().encode() if scheme.lower() == "bearer" else b""
        if not hmac.compare_digest(given, self.expected):
            return JSONResponse(
                {"error": "a valid token is needed"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        response: Response = await call_next(request)
        return response


def _path_parameter(description: str) -> dict[str, Any]:
    return {"name": "path", "in": "path", "required": True, "description": description,
            "schema": {"type": "string"}}  # fmt: skip


_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"},
         "description": "the archive's name (its file name without .barecat)"}  # fmt: skip
_ERRORS = {
    "400": {"description": "a path that leaves the archive, or a malformed request"},
    "401": {"description": "missing or wrong token"},
    "404": {"description": "no such archive or path"},
    "413": {"description": "over the server's limits"},
}
_PATHS = {"type": "object",
          "properties": {"paths": {"type": "array", "items": {"type": "string"}}}}  # fmt: skip
OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "barecat serve", "version": "1"},
    "components": {
        "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
    },
    "paths": {
        "/archives": {"get": {"summary": "The served archives", "responses": {"200": {
            "description": "{name: {writable, files}}"}}}},
        "/a/{name}/files/{path}": {
            "parameters": [_NAME, _path_parameter("a file's path in the archive")],
            "get": {"summary": "A file's bytes (Range and If-None-Match honored)",
                    "responses": {"200": {"description": "the bytes"},
                                  "206": {"description": "the requested range"},
                                  "304": {"description": "unchanged (ETag)"}, **_ERRORS}},
            "head": {"summary": "A file's size and ETag", "responses": {"200": {
                "description": "headers only"}, **_ERRORS}},
            "put": {"summary": "Store the body as the file (--writable)",
                    "requestBody": {"content": {"application/octet-stream": {}}},
                    "responses": {"201": {"description": "the stored file's record"},
                                  "405": {"description": "served read-only"}, **_ERRORS}},
            "delete": {"summary": "Remove the file (--writable)",
                       "responses": {"204": {"description": "removed"}, **_ERRORS}},
        },
        "/a/{name}/list/{path}": {
            "parameters": [_NAME, _path_parameter("a directory (empty: the root)")],
            "get": {"summary": "A directory's subdirectories and files",
                    "responses": {"200": {"description": "{path, dirs, files}"}, **_ERRORS}},
        },
        "/a/{name}/stat/{path}": {
            "parameters": [_NAME, _path_parameter("a file or directory")],
            "get": {"summary": "An entry's record", "responses": {"200": {
                "description": "the record"}, **_ERRORS}},
        },
        "/a/{name}/glob": {
            "parameters": [_NAME,
                           {"name": "pattern", "in": "query", "schema": {"type": "string"}},
                           {"name": "recursive", "in": "query", "schema": {"type": "boolean"}},
                           {"name": "only_files", "in": "query", "schema": {"type": "boolean"}},
                           {"name": "include_hidden", "in": "query",
                            "schema": {"type": "boolean", "default": True}}],
            "get": {"summary": "Paths matching a glob (hidden names included by default)",
                    "responses": {"200": {"description": "{pattern, paths}"}, **_ERRORS}},
        },
        "/a/{name}/index/{path}": {
            "parameters": [_NAME, _path_parameter("a directory (empty: the root)"),
                           {"name": "order", "in": "query",
                            "schema": {"enum": ["path", "address", "any"]}}],
            "get": {"summary": "Every file's record below the directory, one JSON object a "
                               "line, in path or storage order",
                    "responses": {"200": {"description": "application/x-ndjson"},
                                  **_ERRORS}},
        },
        "/a/{name}/batch": {
            "parameters": [_NAME],
            "post": {"summary": "Many files in one response: for each, a u64 LE length and "
                                "the bytes, in request order",
                     "requestBody": {"content": {"application/json": {"schema": _PATHS}}},
                     "responses": {"200": {"description": "application/x-barecat-batch"},
                                   **_ERRORS}},
        },
    },
}  # fmt: skip


__all__ = ["DEFAULT_LIMITS", "OPENAPI", "Limits", "create_app", "entry_json"]
