"""Screenshots of ``barecat view`` for the docs: docs/images/viewer.png (a folder's grid)
and docs/images/viewer-full.png (an image with transparent pixels in the full view).

Builds a small, realistic tree (photos, transparent icons, pixel-art sprites, a CSV and
a README) in a temporary archive, serves it with ``barecat view --no-browser`` and
photographs the page in the system's headless Chromium through Playwright. Run from the
repository with the project's environment::

    PYTHONPATH=src .venv/bin/python tools/screenshot_viewer.py
"""

from __future__ import annotations

import io
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw
from playwright.sync_api import sync_playwright

import barecat

DOCS_IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _encoded(image: Image.Image, kind: str) -> bytes:
    out = io.BytesIO()
    image.save(out, kind, **({"quality": 88} if kind == "JPEG" else {}))
    return out.getvalue()


def _photo(seed: int) -> Image.Image:
    """A landscape-like picture: a sky gradient, a sun, hills."""
    w, h = 320, 220
    image = Image.new("RGB", (w, h))
    draw = ImageDraw.Draw(image)
    top = (40 + seed * 23 % 80, 90 + seed * 17 % 90, 160 + seed * 11 % 90)
    for y in range(h):
        t = y / h
        draw.line([(0, y), (w, y)], fill=tuple(int(c * (1 - t) + 235 * t) for c in top))
    sun = 40 + seed * 37 % 220
    draw.ellipse([sun, 30, sun + 44, 74], fill=(255, 214, 90))
    for layer, shade in enumerate(((70, 120, 60), (40, 90, 45))):
        points = [
            (x, 150 + layer * 30 + 18 * math.sin(x / (27 + seed + layer * 9)))
            for x in range(0, w + 8, 8)
        ]
        draw.polygon([(0, h), *points, (w, h)], fill=shade)
    return image


def _icon(seed: int) -> Image.Image:
    """A flat icon on a transparent background (some dark, as logos often are)."""
    image = Image.new("RGBA", (128, 128), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    colour = [(30, 30, 40, 255), (220, 70, 60, 255), (40, 120, 220, 255), (20, 20, 20, 255)][
        seed % 4
    ]
    if seed % 3 == 0:
        draw.ellipse([14, 14, 114, 114], outline=colour, width=14)
    elif seed % 3 == 1:
        star = [(64 + 54 * math.cos(a * math.pi / 5 - math.pi / 2) * (1 if a % 2 == 0 else 0.45),
                 64 + 54 * math.sin(a * math.pi / 5 - math.pi / 2) * (1 if a % 2 == 0 else 0.45))
                for a in range(10)]  # fmt: skip
        draw.polygon(star, fill=colour)
    else:
        draw.rounded_rectangle([20, 34, 108, 94], radius=14, fill=colour)
        draw.polygon([(40, 94), (40, 118), (62, 94)], fill=colour)
    return image


def _sprite(seed: int) -> Image.Image:
    """A 16x16 pixel-art sprite, mirrored left to right, on transparency."""
    image = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    colour = [(120, 200, 80, 255), (240, 160, 40, 255), (170, 90, 220, 255)][seed % 3]
    state = seed * 7919 + 13
    for y in range(2, 14):
        for x in range(2, 8):
            state = (state * 1103515245 + 12345) % 2**31
            if state % 3:
                image.putpixel((x, y), colour)
                image.putpixel((15 - x, y), colour)
    return image


def build(path: str) -> None:
    with barecat.Barecat(path, readonly=False) as bc:
        for i in range(12):
            bc[f"photos/2024/trip_{i:03d}.jpg"] = _encoded(_photo(i), "JPEG")
        for i in range(12):  # named by what _icon draws: ring-navy.png is a navy ring
            name = f"{('ring', 'star', 'chat')[i % 3]}-{('navy', 'red', 'blue', 'black')[i % 4]}"
            bc[f"assets/icons/{name}.png"] = _encoded(_icon(i), "PNG")
        for i in range(9):
            bc[f"assets/sprites/hero_{i}.png"] = _encoded(_sprite(i), "PNG")
        bc["assets/icons/LICENSE.txt"] = b"Icons drawn for the barecat docs; public domain.\n"
        bc["labels.csv"] = b"path,label\n" + b"".join(
            f"photos/2024/trip_{i:03d}.jpg,{'sunny' if i % 2 else 'cloudy'}\n".encode()
            for i in range(12)
        )
        bc["README.txt"] = b"A small tree for the viewer's screenshots.\n"


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        archive = str(Path(tmp) / "dataset.barecat")
        build(archive)
        proc = subprocess.Popen(
            [sys.executable, "-m", "barecat.cli", "view", "--no-browser", archive],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split(" at ")[1].split()[0]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 720})
                page.goto(url)
                page.locator("nav span", has_text="assets").click()
                page.wait_for_selector("nav span:text-is('icons')")
                page.locator(".cell.dir", has_text="icons/").click()
                _settle(page, 13)
                page.keyboard.press("ArrowRight")
                page.keyboard.press("ArrowRight")
                page.screenshot(path=str(DOCS_IMAGES / "viewer.png"))
                page.keyboard.press("Enter")
                page.wait_for_selector("#full.loaded")
                page.wait_for_function(
                    "document.querySelector('#meta').innerText.includes('dimensions')"
                )
                page.screenshot(path=str(DOCS_IMAGES / "viewer-full.png"))
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"wrote {DOCS_IMAGES / 'viewer.png'} and {DOCS_IMAGES / 'viewer-full.png'}")
    return 0


def _settle(page: object, cells: int) -> None:
    """Wait until the grid holds ``cells`` entries and every thumbnail is drawn."""
    page.wait_for_function(f"document.querySelectorAll('.cell').length == {cells}")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "[...document.querySelectorAll('.cell img')].every(i => i.classList.contains('checkered'))"
    )


if __name__ == "__main__":
    sys.exit(main())
