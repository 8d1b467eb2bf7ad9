"""What the viewer's tests share: a running ``barecat view`` over an archive, and the
system Chromium driven by Playwright (the tests that need it skip without it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (the system's), one per test: Playwright's synchronous API
    keeps an event loop running in the thread while it is open, which other tests'
    ``asyncio.run`` would trip over."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (./run test installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (1280x900, device pixels = CSS pixels)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
    try:
        yield context.new_page()
    finally:
        context.close()
