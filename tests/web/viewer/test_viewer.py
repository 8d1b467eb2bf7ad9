"""The image viewer in a real headless Chromium (Playwright driving /usr/bin/chromium):
the grid shows real thumbnails, navigation works, paths cannot escape the archive."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
from helpers.viewing import start_viewer

httpx = pytest.importorskip("httpx", reason="the browser-tests extra is not installed")
PIL = pytest.importorskip("PIL", reason="Pillow (the viewer extra) is not installed")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> str:
    from PIL import Image

    path = str(tmp_path_factory.mktemp("viewer") / "images.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        for cls, color in (("cat", (220, 40, 40)), ("dog", (40, 40, 220))):
            for i in range(260):  # more than one page of the listing
                out = io.BytesIO()
                Image.new("RGB", (64 + i % 32, 48), color).save(out, "PNG")
                bc[f"train/{cls}/{i:04d}.png"] = out.getvalue()
        bc["train/readme.txt"] = b"not an image"
    return path


@pytest.fixture(scope="module")
def server(archive: str) -> Iterator[str]:
    yield from start_viewer(archive)


def test_the_api_pages_listings_and_refuses_escapes(server: str) -> None:
    first = httpx.get(server + "api/dir", params={"path": "train/cat", "limit": 100}).json()
    assert first["total_files"] == 260 and len(first["files"]) == 100
    rest = httpx.get(server + "api/dir", params={"path": "train/cat", "offset": 200}).json()
    assert [f["name"] for f in rest["files"]][:2] == ["0200.png", "0201.png"]
    root = httpx.get(server + "api/dir", params={"path": ""}).json()
    assert [d["name"] for d in root["dirs"]] == ["train"] and root["dirs"][0]["files"] == 521
    for bad in ("../etc/passwd", "train/../../x", "a\0b"):
        answer = httpx.get(server + "raw", params={"path": bad})
        assert answer.status_code == 400, bad
    assert httpx.get(server + "raw", params={"path": "no/such.png"}).status_code == 404
    thumb = httpx.get(server + "thumb", params={"path": "train/dog/0003.png", "size": 128})
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
    not_image = httpx.get(server + "thumb", params={"path": "train/readme.txt"})
    assert not_image.status_code == 415
    raw = httpx.get(server + "raw", params={"path": "train/readme.txt"})
    assert raw.content == b"not an image"


def test_the_page_in_a_real_browser(server: str, page: Any) -> None:
    page.goto(server)
    page.locator("nav span", has_text="train").click()
    page.locator(".cell.dir", has_text="cat/").click()
    page.wait_for_function("document.querySelectorAll('.cell.image').length >= 120")
    page.wait_for_function(
        "[...document.querySelectorAll('.cell.image img')].slice(0, 8)"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    # a real thumbnail: the decoded pixels are the red of the cat images
    red = page.evaluate(
        """() => { const img = document.querySelector('.cell.image img');
          const c = document.createElement('canvas'); c.width = img.naturalWidth;
          c.height = img.naturalHeight; const g = c.getContext('2d');
          g.drawImage(img, 0, 0); return Array.from(g.getImageData(5, 5, 1, 1).data); }"""
    )
    assert red[0] > 180 and red[2] < 90
    assert "120 of 260 files" in page.locator("#summary").inner_text()
    page.wait_for_function(
        "[...document.querySelectorAll('.cell.image img')].slice(0, 24)"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "viewer-grid.png"))
    page.locator("#more").scroll_into_view_if_needed()  # the next page loads
    page.wait_for_function("document.querySelectorAll('.cell.image').length > 120")
    page.locator(".cell.image").nth(2).click()
    page.wait_for_selector("#viewer.shown")
    page.wait_for_function("document.querySelector('#meta').innerText.includes('0002.png')")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("document.querySelector('#meta').innerText.includes('0003.png')")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("document.querySelector('#meta').innerText.includes('0002.png')")
    page.wait_for_function("document.querySelector('#meta').innerText.includes('dimensions')")
    assert "66 x 48" in page.locator("#meta").inner_text()
    page.screenshot(path=str(ARTIFACTS / "viewer-image.png"))
    page.keyboard.press("Escape")
    page.wait_for_selector("#viewer.shown", state="detached")
    page.locator("#crumbs a", has_text="train").click()
    page.wait_for_function("document.querySelectorAll('.cell.dir').length == 2")
    assert page.locator(".cell.other").count() == 1  # readme.txt, as a document


def test_a_busy_port_is_one_line(archive: str, server: str) -> None:
    port = server.rstrip("/").rsplit(":", 1)[1]
    done = subprocess.run(
        [sys.executable, "-m", "barecat.cli", "view", "--no-browser", "--port", port, archive],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "cannot listen on 127.0.0.1" in done.stderr


def test_the_viewer_over_the_http_client_answers_as_over_the_archive(archive: str) -> None:
    """The viewer typed against ReadableArchive: over ``barecat.connect`` to a served
    archive it answers every API route as it does over the archive itself."""
    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    from barecat.web.viewer.app import create_app
    from helpers.serving import serving

    routes = [
        ("/api/dir", {"path": "train/cat", "limit": "100"}),
        ("/api/dir", {"path": "train/cat", "offset": "200"}),
        ("/api/dir", {"path": ""}),
        ("/api/dir", {"path": "no/such"}),
        ("/api/file", {"path": "train/readme.txt"}),
        ("/api/dir", {"path": "train/cat", "sort": "size", "rev": "1", "limit": "5"}),
        ("/api/dir", {"path": "train/cat", "filter": "*7.png", "offset": "3"}),
        ("/api/file", {"path": "train/cat/0017.png", "filter": "*7.png", "sort": "date"}),
        ("/api/preview", {"path": "train/readme.txt"}),
        ("/raw", {"path": "train/readme.txt"}),
        ("/raw", {"path": "no/such.png"}),
        ("/raw", {"path": "../etc/passwd"}),
        ("/thumb", {"path": "train/dog/0003.png", "size": "128"}),
        ("/thumb", {"path": "train/readme.txt"}),
        ("/", {}),
    ]

    async def answers(bc: barecat.ReadableArchive) -> list[tuple[int, bytes]]:
        """Each route's status and body (an error's wording left out: the client words
        some errors its own way)."""
        transport = httpx.ASGITransport(app=create_app(bc))
        async with httpx.AsyncClient(transport=transport, base_url="http://viewer") as client:
            found = [await client.get(route, params=params) for route, params in routes]
        return [(r.status_code, r.content if r.status_code < 400 else b"") for r in found]

    with serving(archive) as (url, _), barecat.connect(url) as remote:
        over_http = asyncio.run(answers(remote))
        page = over_http.pop()[1]
    with barecat.Barecat(archive) as local:
        here = asyncio.run(answers(local))
        here.pop()
    assert over_http == here
    assert remote.path.encode() in page  # the page names the archive's URL
