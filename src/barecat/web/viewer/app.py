"""The image viewer's web application: a page, and a JSON/bytes API over one archive.

Routes (all GET):

- ``/``: the page (``page.html``, its script ``/viewer.js``): folder tree, path bar,
  thumbnail grid, full view; the page keeps where it is in its URL (``?dir=P`` or
  ``?file=P``, with ``sort``, ``rev`` and ``filter``), so each folder and file has an
  address that back, forward and reload follow;
- ``/api/dir?path=P&offset=N&limit=M&sort=S&rev=1&filter=F``: a directory's
  subdirectories (with their totals from the index) and one page of its files, in
  name, size or date order and narrowed by a filter on names (``listing``), so a
  directory of a million files is shown a page at a time;
- ``/api/file?path=P`` (same listing arguments, and ``at=N``, where the page believes the
  file is): a file's metadata and its position in that listing;
- ``/api/preview?path=P``: a non-image file's beginning as text, or a hex dump;
- ``/raw?path=P``: a file's bytes (CRC-checked), typed by its extension, never run as a
  page of the viewer's origin (a sandboxing Content-Security-Policy);
- ``/thumb?path=P&size=S``: a thumbnail at most S pixels wide or high (``content``: WebP
  keeping the alpha of images with transparent pixels, JPEG otherwise), kept in a small
  cache.

Every path goes through the archive's normalization: one that climbs out of the archive
(``..``) or holds a NUL is answered 400, a missing one 404. The archive is only read.
Works on any :class:`~barecat.archive.ReadableArchive` (a local archive, one on object
storage, one served over HTTP). Built on Starlette (served by uvicorn, see ``serving``);
imports the archive layer's read protocol.
"""

from __future__ import annotations

import functools
import mimetypes
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from barecat.archive.readable import ReadableArchive
from barecat.entries import BarecatDirInfo, BarecatFileInfo
from barecat.exceptions import (
    InvalidPathBarecatError,
)
from barecat.paths import normalize
from barecat.web.asgi_serving import HTTPError, answered
from barecat.web.viewer.content import PREVIEW_TEXT_BYTES, NotAnImageError, preview, thumbnail
from barecat.web.viewer.listing import SORTS, ListingQuery, Listings

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")
PAGE_LIMIT = 200
"""Files per page of a listing (the page asks for the next one as it scrolls)."""
MAX_PAGE = 1000
THUMB_SIZES = (64, 128, 256, 512, 1024)
THUMB_CACHE = 4096
RAW_HEADERS = {
    "Cache-Control": "max-age=3600",
    # an archive's .html or .svg opened on its own runs nothing on the viewer's origin
    "Content-Security-Policy": "sandbox",
    "X-Content-Type-Options": "nosniff",
}


def _path_argument(request: Request, name: str = "path") -> str:
    try:
        return normalize(request.query_params.get(name, ""))
    except InvalidPathBarecatError as e:
        raise HTTPError(400, str(e)) from e


def _int_argument(request: Request, name: str, default: int) -> int:
    given = request.query_params.get(name)
    try:
        return default if given in (None, "") else int(given)
    except ValueError as e:
        raise HTTPError(400, f"{name} must be a whole number, not {given!r}") from e


def _listing_query(request: Request, path: str) -> ListingQuery:
    sort = request.query_params.get("sort") or "name"
    if sort not in SORTS:
        raise HTTPError(400, f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    reverse = request.query_params.get("rev", "") not in ("", "0", "false")
    return ListingQuery(path, sort, reverse, request.query_params.get("filter", ""))


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def _file_json(info: BarecatFileInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "path": info.path,
        "size": info.size or 0,
        "mtime_ns": info.mtime_ns,
        "mode": info.mode,
        "crc32c": info.crc32c,
        "sealed": info.sealed_size is not None,
        "image": is_image(info.name),
    }


def _dir_json(info: BarecatDirInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "path": info.path,
        "files": info.num_files_tree or 0,
        "subdirs": info.num_subdirs or 0,
        "size": info.size_tree or 0,
        "mtime_ns": info.mtime_ns,
    }


def create_app(bc: ReadableArchive) -> Starlette:
    """The viewer of the archive ``bc`` (only read).

    Args:
        bc: the archive.

    Returns:
        The ASGI application.
    """
    package = resources.files("barecat.web.viewer")
    page = package.joinpath("page.html").read_text(encoding="utf-8")
    script = package.joinpath("viewer.js").read_text(encoding="utf-8")
    listings = Listings(bc)

    @functools.lru_cache(maxsize=THUMB_CACHE)
    def cached_thumbnail(path: str, size: int) -> tuple[bytes, str]:
        return thumbnail(bc[path], size)

    async def index_page(request: Request) -> Response:
        return HTMLResponse(page.replace("{{archive}}", _html_escape(bc.path)))

    async def viewer_script(request: Request) -> Response:
        return Response(script, media_type="text/javascript")

    @answered
    async def directory(request: Request) -> Response:
        path = _path_argument(request)
        info = bc.lookup_dir(path)
        query = _listing_query(request, path)
        offset = max(0, _int_argument(request, "offset", 0))
        limit = min(MAX_PAGE, max(1, _int_argument(request, "limit", PAGE_LIMIT)))
        files, total = listings.files(query, offset, limit)
        return JSONResponse(
            {
                "path": path,
                "name": info.name,
                "parent": None if not path else path.rpartition("/")[0],
                "dirs": [_dir_json(d) for d in listings.dirs(query)] if offset == 0 else [],
                "files": [_file_json(f) for f in files],
                "total_files": total,
                "offset": offset,
            }
        )

    @answered
    async def file_info(request: Request) -> Response:
        info = bc.lookup_file(_path_argument(request))
        query = _listing_query(request, info.path.rpartition("/")[0])
        hint = _int_argument(request, "at", -1)
        position = listings.position(query, info.path, hint)
        return JSONResponse({**_file_json(info), "position": position})

    @answered
    async def file_preview(request: Request) -> Response:
        info = bc.lookup_file(_path_argument(request))
        head = bc.read(info, 0, PREVIEW_TEXT_BYTES)
        return JSONResponse(preview(head, info.size or 0))

    @answered
    async def raw(request: Request) -> Response:
        path = _path_argument(request)
        data = bc.read(bc.lookup_file(path))
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        return Response(data, media_type=kind, headers=RAW_HEADERS)

    @answered
    async def thumb(request: Request) -> Response:
        path = _path_argument(request)
        asked = _int_argument(request, "size", 256)
        size = min((s for s in THUMB_SIZES if s >= asked), default=THUMB_SIZES[-1])
        bc.lookup_file(path)  # 404 before Pillow sees anything
        try:
            data, kind = cached_thumbnail(path, size)
        except NotAnImageError as e:
            raise HTTPError(415, f"{path}: not an image Pillow can read ({e})") from e
        return Response(data, media_type=kind, headers={"Cache-Control": "max-age=3600"})

    return Starlette(
        routes=[
            Route("/", index_page),
            Route("/viewer.js", viewer_script),
            Route("/api/dir", directory),
            Route("/api/file", file_info),
            Route("/api/preview", file_preview),
            Route("/raw", raw),
            Route("/thumb", thumb),
        ]
    )


def _html_escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


__all__ = ["create_app", "is_image"]
