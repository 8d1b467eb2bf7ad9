"""The viewer as a person sees it: a real ``barecat view`` in the system's headless
Chromium (Playwright), checked on the screen — pixels of ``screenshot()`` decoded with
Pillow, element boxes, the URL — after clicks, keys, back and reload."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat.entries import BarecatFileInfo
from helpers.viewing import start_viewer

pytest.importorskip("PIL", reason="Pillow (the viewer extra) is not installed")
from PIL import Image

LIGHT, DARK = (0xF0, 0xF0, 0xF0), (0xC0, 0xC0, 0xC0)  # the page's checkerboard
NAVY, GREEN = (20, 30, 110), (30, 200, 60)
HOSTILE_FILE = "<img src=x onerror=window.pwned=1>.txt"
HOSTILE_DIR = "<b>bold & <i>"
NOTES = "hello viewer\nsecond line, é\n"


def _png(image: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("screen") / "tree.barecat")
    half = Image.new("RGBA", (64, 64), (0, 0, 0, 0))  # left half transparent, right navy
    half.paste((*NAVY, 255), (32, 0, 64, 64))
    with barecat.Barecat(path, readonly=False) as bc:
        bc["alpha/half.png"] = _png(half)
        bc["alpha/tiny.png"] = _png(Image.new("RGB", (16, 16), GREEN))
        bc["docs/notes.txt"] = NOTES.encode()
        bc["docs/blob.bin"] = bytes(range(256)) * 4
        for name, size, day in (("a.txt", 30, 1), ("b.txt", 10, 3), ("c.log", 20, 2)):
            info = BarecatFileInfo(f"sorted/{name}", 0o100644, mtime_ns=day * 86_400 * 10**9)
            bc.add(info, data=b"x" * size)
        for folder in ("cats", "dogs"):
            bc[f"nav/{folder}/one.png"] = _png(Image.new("RGB", (40, 30), GREEN))
        for i in range(7):
            bc[f"nav/{i:02d}.png"] = _png(Image.new("RGB", (40, 30), NAVY))
        bc["odd/broken.png"] = b"\x89PNG\r\n\x1a\nnot really"  # a signature, then junk
        scan = io.BytesIO()
        Image.new("RGB", (48, 40), NAVY).save(scan, "TIFF")  # a format browsers cannot show
        bc["odd/scan.tif"] = scan.getvalue()
        bc[f"{HOSTILE_DIR}/{HOSTILE_FILE}"] = b"<script>window.pwned=2</script>"
    return path


@pytest.fixture(scope="module")
def server(archive: str) -> Iterator[str]:
    yield from start_viewer(archive)


def _pixels(locator: Any) -> Any:
    """The element as it is on the screen, decoded (RGB)."""
    return Image.open(io.BytesIO(locator.screenshot())).convert("RGB")


def _near(found: Any, wanted: tuple[int, int, int], slack: int = 12) -> bool:
    return all(abs(a - b) <= slack for a, b in zip(found, wanted, strict=True))


def _assert_checkered_left_navy_right(shot: Any) -> None:
    w, h = shot.size
    left = {shot.getpixel((x, y)) for x in range(2, w // 2 - 2, 3) for y in range(2, h - 2, 3)}
    assert all(_near(p, LIGHT) or _near(p, DARK) for p in left), sorted(left)[:5]
    assert any(_near(p, LIGHT) for p in left) and any(_near(p, DARK) for p in left)
    for x, y in ((w * 3 // 4, h // 2), (w - 4, 4), (w // 2 + 4, h - 4)):
        assert _near(shot.getpixel((x, y)), NAVY, 20), (x, y, shot.getpixel((x, y)))


def _wait_at(page: Any, where: str) -> None:
    """Wait until the page's address ends with ``where`` (a path and query)."""
    page.wait_for_url(lambda url: url.endswith(where))


def _wait_loaded(page: Any, selector: str) -> None:
    """Wait until the images are decoded and the page's load handler (where it has one)
    has sized them."""
    page.wait_for_function(
        f"[...document.querySelectorAll({selector!r})].every(i => i.complete && i.naturalWidth"
        " && (!i.onload || i.classList.contains('checkered')))"
    )


def test_transparent_pixels_show_the_checkerboard_in_thumbnail_and_full_view(
    server: str, page: Any
) -> None:
    page.goto(server)
    page.locator(".cell", has_text="alpha/").click()
    thumb = page.locator(".cell", has_text="half.png").locator("img")
    page.wait_for_selector(".cell img")
    _wait_loaded(page, ".cell img")
    _assert_checkered_left_navy_right(_pixels(thumb))
    box = thumb.bounding_box()  # a square image fills the 130-pixel-high box
    assert box["height"] == pytest.approx(130, abs=1) and box["width"] == pytest.approx(130, abs=1)
    size = page.evaluate("[...document.querySelectorAll('.cell img')].map(i => i.naturalWidth)")
    assert size == [64, 16]  # thumbnails are never enlarged by the server
    thumb.click()
    page.wait_for_selector("#full.loaded")
    _assert_checkered_left_navy_right(_pixels(page.locator("#full")))


def test_a_small_image_is_enlarged_in_the_full_view_with_sharp_pixels(
    server: str, page: Any
) -> None:
    page.goto(server + "?file=alpha/tiny.png")  # a deep link opens the image
    page.wait_for_selector("#full.loaded")
    box = page.locator("#full").bounding_box()
    assert box["width"] > 16 * 10 and box["width"] == pytest.approx(box["height"], abs=1)
    shot = _pixels(page.locator("#full"))
    assert _near(shot.getpixel((shot.width // 2, shot.height // 2)), GREEN)
    assert "pixelated" in (page.locator("#full").get_attribute("class") or "")
    assert "16 x 16" in page.locator("#meta").inner_text()


def test_folder_and_file_icons_are_drawn_svg(server: str, page: Any) -> None:
    page.goto(server)
    page.wait_for_selector(".cell.dir")
    for selector in (".cell.dir svg.folder", ".cell.dir"):
        assert page.locator(selector).count() == 6, selector
    box = page.locator(".cell.dir svg").first.bounding_box()
    assert box["width"] > 40 and box["height"] > 40
    shot = _pixels(page.locator(".cell.dir svg").first)  # the folder's yellow is drawn
    drawn = [shot.getpixel((x, y)) for x in range(shot.width) for y in range(shot.height)]
    assert any(_near(p, (0xD9, 0xA5, 0x3F), 30) for p in drawn)
    page.goto(server + "?dir=docs")
    page.wait_for_function("document.querySelectorAll('.cell.other svg.file').length == 2")


def test_back_forward_and_reload_follow_the_url(server: str, page: Any) -> None:
    page.goto(server)
    page.locator(".cell.dir", has_text="nav/").click()
    _wait_at(page, "/?dir=nav")
    page.locator(".cell.dir", has_text="cats/").click()
    _wait_at(page, "/?dir=nav/cats")
    page.wait_for_selector(".cell.image >> text=one.png")
    page.locator(".cell.image").first.click()
    _wait_at(page, "/?file=nav/cats/one.png")
    page.wait_for_selector("#viewer.shown")
    page.go_back()
    _wait_at(page, "/?dir=nav/cats")
    page.wait_for_selector("#viewer.shown", state="detached")
    assert page.locator(".cell .name").all_inner_texts() == ["one.png"]
    page.go_back()
    _wait_at(page, "/?dir=nav")
    page.wait_for_function("document.querySelectorAll('.cell').length == 9")
    assert page.locator("#crumbs a").all_inner_texts() == ["/", "nav"]
    page.reload()
    page.wait_for_function("document.querySelectorAll('.cell').length == 9")
    page.go_forward()
    _wait_at(page, "/?dir=nav/cats")
    page.wait_for_function("document.querySelectorAll('.cell').length == 1")
    page.locator("#crumbs a", has_text="/").first.click()  # the path bar's root
    page.wait_for_function("document.querySelectorAll('.cell.dir').length == 6")
    assert page.url == server


def _press_to(page: Any, key: str, where: str) -> None:
    """Press ``key`` and wait until the page's address ends with ``where``."""
    page.keyboard.press(key)
    _wait_at(page, where)


def _selected(page: Any) -> str:
    return str(page.locator(".cell.selected .name").inner_text())


def test_the_keyboard_moves_opens_goes_up_and_closes(server: str, page: Any) -> None:
    page.goto(server + "?dir=nav")
    page.wait_for_function("document.querySelectorAll('.cell').length == 9")
    columns = page.evaluate(
        "getComputedStyle(document.querySelector('#grid')).gridTemplateColumns.split(' ').length"
    )
    assert columns == 6
    names = page.locator(".cell .name").all_inner_texts()
    page.keyboard.press("ArrowRight")  # the first press selects the first entry
    assert _selected(page) == "cats/"
    page.keyboard.press("ArrowDown")
    assert _selected(page) == names[columns]
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    assert _selected(page) == "dogs/"
    _press_to(page, "Enter", "/?dir=nav/dogs")
    page.wait_for_function("document.querySelectorAll('.cell').length == 1")
    _press_to(page, "Backspace", "/?dir=nav")
    page.wait_for_function("document.querySelectorAll('.cell').length == 9")
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    assert _selected(page) == "02.png"
    _press_to(page, "Enter", "/?file=nav/02.png")
    _press_to(page, "ArrowRight", "/?file=nav/03.png")
    page.wait_for_function("document.querySelector('#meta').innerText.includes('03.png')")
    _press_to(page, "Escape", "/?dir=nav")
    page.wait_for_selector("#viewer.shown", state="detached")
    assert _selected(page) == "03.png"  # the selection is where the full view was


def test_sort_and_filter_order_and_narrow_the_grid(server: str, page: Any) -> None:
    page.goto(server + "?dir=sorted")
    page.wait_for_function("document.querySelectorAll('.cell').length == 3")

    def names() -> list[str]:
        return list(page.locator(".cell .name").all_inner_texts())

    assert names() == ["a.txt", "b.txt", "c.log"]
    page.select_option("#sort", "size")
    _wait_at(page, "/?dir=sorted&sort=size")
    page.wait_for_function("document.querySelector('.cell .name').textContent == 'b.txt'")
    assert names() == ["b.txt", "c.log", "a.txt"]
    page.click("#reverse")
    page.wait_for_function("document.querySelector('.cell .name').textContent == 'a.txt'")
    assert names() == ["a.txt", "c.log", "b.txt"]
    page.select_option("#sort", "date")
    _wait_at(page, "?dir=sorted&sort=date&rev=1")
    page.wait_for_function("document.querySelector('.cell .name').textContent == 'b.txt'")
    assert names() == ["b.txt", "c.log", "a.txt"]
    page.reload()  # the order is in the URL
    page.wait_for_function("document.querySelectorAll('.cell').length == 3")
    assert names() == ["b.txt", "c.log", "a.txt"] and page.input_value("#sort") == "date"
    page.fill("#filter", "*.TXT")  # a glob, any case
    page.wait_for_function("document.querySelectorAll('.cell').length == 2")
    assert names() == ["b.txt", "a.txt"]
    page.fill("#filter", "c.")  # a part of a name
    page.wait_for_function("document.querySelectorAll('.cell').length == 1")
    assert names() == ["c.log"] and "filter=c." in page.url
    page.fill("#filter", "nothing")
    page.wait_for_function("document.querySelector('#empty').textContent.includes('matches')")


def test_other_files_show_text_or_hex_and_their_metadata(
    archive: str, server: str, page: Any
) -> None:
    page.goto(server + "?dir=docs")
    page.locator(".cell", has_text="notes.txt").click()
    page.wait_for_selector("#text.shown")
    assert page.locator("#text").text_content() == NOTES
    with barecat.Barecat(archive) as bc:
        crc = bc.lookup_file("docs/notes.txt").crc32c or 0
    meta = page.locator("#meta").inner_text()
    assert f"CRC32C\n{crc:08x}" in meta and f"({len(NOTES.encode())} bytes)" in meta
    assert page.locator("#full").bounding_box() is None  # no broken image
    page.keyboard.press("ArrowLeft")  # blob.bin comes before it
    page.wait_for_function("document.querySelector('#text').dataset.kind == 'hex'")
    first = page.locator("#text").inner_text().splitlines()[0]
    assert first.startswith("00000000  00 01 02 03 04 05 06 07  08 09 0a 0b")


def test_images_that_do_not_decode_are_never_broken_images(server: str, page: Any) -> None:
    page.goto(server)
    page.locator(".cell.dir", has_text="odd/").click()
    broken = page.locator(".cell", has_text="broken.png")
    broken.locator("svg.file").wait_for()  # the thumbnail failed: a file's icon instead
    assert broken.locator("img").count() == 0
    broken.click()
    page.wait_for_function("document.querySelector('#text').dataset.kind == 'hex'")
    assert "|.PNG....not real|" in page.locator("#text").inner_text()
    assert page.locator("#full").bounding_box() is None
    page.keyboard.press("ArrowRight")  # scan.tif: Chromium cannot show TIFF, Pillow can
    page.wait_for_selector("#full.loaded")
    assert not page.locator("#text").is_visible()
    shot = _pixels(page.locator("#full"))
    assert _near(shot.getpixel((shot.width // 2, shot.height // 2)), NAVY)
    assert "48 x 40" in page.locator("#meta").inner_text()


def test_hostile_names_show_literally(server: str, page: Any) -> None:
    page.goto(server)
    page.locator(".cell.dir", has_text=HOSTILE_DIR).click()
    page.wait_for_selector(".cell.other")
    assert page.locator(".cell.other .name").inner_text() == HOSTILE_FILE
    assert page.locator("#crumbs a").all_inner_texts() == ["/", HOSTILE_DIR]
    page.locator(".cell.other").click()
    page.wait_for_selector("#text.shown")
    assert HOSTILE_FILE in page.locator("#meta").inner_text()
    assert page.locator("#text").text_content() == "<script>window.pwned=2</script>"
    page.locator("nav span", has_text=HOSTILE_DIR).wait_for()
    assert page.evaluate("window.pwned") is None
    assert page.locator("#grid img, #meta img, #crumbs *:not(a):not(span)").count() == 0


def test_thumbnails_keep_alpha_only_for_transparent_images(server: str) -> None:
    httpx = pytest.importorskip("httpx", reason="the browser-tests extra is not installed")
    clear = httpx.get(server + "thumb", params={"path": "alpha/half.png", "size": 64})
    assert clear.headers["content-type"] == "image/webp"
    image = Image.open(io.BytesIO(clear.content))
    assert image.size == (64, 64) and image.mode == "RGBA"
    assert image.getpixel((8, 32))[3] == 0 and image.getpixel((56, 32))[3] == 255
    assert _near(image.getpixel((56, 32))[:3], NAVY)
    opaque = httpx.get(server + "thumb", params={"path": "alpha/tiny.png", "size": 64})
    assert opaque.headers["content-type"] == "image/jpeg"
    assert Image.open(io.BytesIO(opaque.content)).size == (16, 16)  # never enlarged
    raw = httpx.get(server + "raw", params={"path": f"{HOSTILE_DIR}/{HOSTILE_FILE}"})
    assert raw.headers["content-security-policy"] == "sandbox"  # never a page of the viewer


def test_the_docs_show_the_screenshots() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs"
    page = (docs / "viewers.md").read_text(encoding="utf-8")
    for name in ("viewer.png", "viewer-full.png"):
        assert f"](images/{name})" in page
        with Image.open(docs / "images" / name) as shot:
            assert shot.width >= 1000 and shot.height >= 600
