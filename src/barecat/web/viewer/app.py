"""The image viewer's web application: a page, and a JSON/bytes API over one archive.

Routes (all GET):

- ``/``: the page (``page.html``): folder tree, thumbnail grid, full-size view;
- ``/api/dir?path=P&offset=N&limit=M``: a directory's subdirectories (with their totals
  from the index) and one page of its files, so a directory of a million files is shown
  a page at a time;
- ``/api/file?path=P``: a file's metadata;
- ``/raw?path=P``: a file's bytes (CRC-checked), typed by its extension;
- ``/thumb?path=P&size=S``: a JPEG thumbnail at most S pixels wide or high (Pillow),
  kept in a small cache.

Every path goes through the archive's normalization: one that climbs out of the archive
(``..``) or holds a NUL is answered 400, a missing one 404. The archive is only read.
Works on any :class:`~barecat.archive.ReadableArchive` (a local archive, one on object
storage, one served over HTTP). Built on Starlette (served by uvicorn, see ``serving``);
imports the archive layer's read protocol.
"""

from __future__ import annotations

import functools
import io
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

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")
PAGE_LIMIT = 200
"""Files per page of a listing (the page asks for the next one as it scrolls)."""
MAX_PAGE = 1000
THUMB_SIZES = (64, 128, 256, 512)
THUMB_CACHE = 4096


def _path_argument(request: Request, name: str = "path") -> str:
    try:
        return normalize(request.query_params.get(name, ""))
    except InvalidPathBarecatError as e:
        raise HTTPError(400, str(e)) from e


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def _file_json(info: BarecatFileInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "path": info.path,
        "size": info.size or 0,
        "mtime_ns": info.mtime_ns,
        "mode": info.mode,
        "image": is_image(info.name),
    }


def _dir_json(info: BarecatDirInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "path": info.path,
        "files": info.num_files_tree or 0,
        "subdirs": info.num_subdirs or 0,
        "size": info.size_tree or 0,
    }


def create_app(bc: ReadableArchive) -> Starlette:
    """The viewer of the archive ``bc`` (only read; thread-safe)."""
    page = resources.files("barecat.web.viewer").joinpath("page.html").read_text(encoding="utf-8")

    @functools.lru_cache(maxsize=THUMB_CACHE)
    def thumbnail(path: str, size: int) -> bytes:
        from PIL import Image

        with Image.open(io.BytesIO(bc[path])) as image:
            image.thumbnail((size, size))
            out = io.BytesIO()
            image.convert("RGB").save(out, "JPEG", quality=85)
        return out.getvalue()

    async def index_page(request: Request) -> Response:
        return HTMLResponse(page.replace("{{archive}}", _html_escape(bc.path)))

    @answered
    async def directory(request: Request) -> Response:
        path = _path_argument(request)
        info = bc.lookup_dir(path)
        offset = max(0, int(request.query_params.get("offset", 0)))
        limit = min(MAX_PAGE, max(1, int(request.query_params.get("limit", PAGE_LIMIT))))
        dirs = sorted(bc.subdirs_of(path), key=lambda d: d.name)
        files = bc.files_page(path, offset, limit)
        return JSONResponse(
            {
                "path": path,
                "name": info.name,
                "parent": None if not path else path.rpartition("/")[0],
                "dirs": [_dir_json(d) for d in dirs] if offset == 0 else [],
                "files": [_file_json(f) for f in files],
                "total_files": info.num_files or 0,
                "offset": offset,
            }
        )

    @answered
    async def file_info(request: Request) -> Response:
        return JSONResponse(_file_json(bc.lookup_file(_path_argument(request))))

    @answered
    async def raw(request: Request) -> Response:
        path = _path_argument(request)
        data = bc.read(bc.lookup_file(path))
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        return Response(data, media_type=kind, headers={"Cache-Control": "max-age=3600"})

    @answered
    async def thumb(request: Request) -> Response:
        path = _path_argument(request)
        asked = int(request.query_params.get("size", 256))
        size = min((s for s in THUMB_SIZES if s >= asked), default=THUMB_SIZES[-1])
        bc.lookup_file(path)  # 404 before Pillow sees anything
        try:
            data = thumbnail(path, size)
        except (OSError, ValueError, SyntaxError) as e:  # what Pillow raises for non-images
            raise HTTPError(415, f"{path}: not an image Pillow can read ({e})") from e
        return Response(data, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})

    return Starlette(
        routes=[
            Route("/", index_page),
            Route("/api/dir", directory),
            Route("/api/file", file_info),
            Route("/raw", raw),
            Route("/thumb", thumb),
        ]
    )


def _html_escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


__all__ = ["create_app", "is_image"]
