"""The terminal interfaces driven as a person would: keys pressed through Textual's pilot,
assertions on what the screen shows."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

import barecat

textual = pytest.importorskip("textual", reason="the tui extra (textual) is not installed")

from textual.widgets import Input, Static  # noqa: E402

from barecat.cli.tui.browse import BrowseApp  # noqa: E402
from barecat.cli.tui.ncdu import NcduApp  # noqa: E402
from barecat.cli.tui.rows import RowList  # noqa: E402

SIZE = (120, 40)


@pytest.fixture
def archive(tmp_path: Path) -> str:
    path = str(tmp_path / "t.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        for i in range(30):
            bc[f"big/{i:02d}.bin"] = os.urandom(10_000)
        bc["big/nested/deep.txt"] = b"deep down\n"
        bc["small/a.txt"] = b"alpha\nbeta\n"
        bc["small/b.bin"] = bytes(range(64))
        bc["readme.md"] = b"# Title\n\nSome text.\n"
        bc["pics/cat.png"] = _png(7, 5)
    return path


def _png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(out, "PNG")
    return out.getvalue()


def drive(app: Any, steps: Callable[[Any], Coroutine[Any, Any, None]]) -> None:
    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await steps(pilot)

    asyncio.run(run())


def table_rows(app: NcduApp) -> list[list[str]]:
    """The listing's rows as drawn: size, bar, file count, name."""
    rows = []
    for i in range(len(app.rows)):
        line = app.draw(i, 80).plain
        size, rest = line.split("[", 1)
        bar, rest = rest.split("]", 1)
        files, name = rest.split(None, 1)
        rows.append([size.strip(), "[" + bar + "]", files, name.strip()])
    return rows


def labels(app: BrowseApp) -> list[str]:
    """The current column's entries as drawn (without their sizes)."""
    return [app.draw_current(i, 60).plain.split()[0] for i in range(len(app.shown))]


def text_of(app: Any, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


def test_ncdu_sorts_by_size_and_drills_down_and_back(archive: str) -> None:
    with barecat.Barecat(archive) as bc:
        app = NcduApp(bc)

        async def steps(pilot: Any) -> None:
            rows = table_rows(app)
            assert [r[3] for r in rows] == ["big/", "pics/", "small/", "readme.md"][: len(rows)]
            assert rows[0][2] == "31"  # files in big/, from the dirs table
            assert "#" * 20 in rows[0][1]  # the largest entry fills the bar
            assert "total" in text_of(app, "#where")
            await pilot.press("enter")  # into big/
            assert text_of(app, "#where").startswith("/big")
            names = [r[3] for r in table_rows(app)]
            assert "nested/" in names and len(names) == 31
            await pilot.press("n")  # by name: directories first
            assert table_rows(app)[0][3] == "nested/"
            await pilot.press("left")  # back up, big/ still selected
            assert text_of(app, "#where").startswith("/ ")
            assert app.selected() is not None and app.selected().name == "big"  # type: ignore[union-attr]
            await pilot.press("j", "j", "l")  # down twice (name order: big, pics, small)
            assert text_of(app, "#where").startswith("/small")
            await pilot.press("q")

        drive(app, steps)


def test_browse_previews_moves_filters_and_jumps(archive: str) -> None:
    with barecat.Barecat(archive) as bc:
        app = BrowseApp(bc)

        async def steps(pilot: Any) -> None:
            current = app.query_one("#current", RowList)
            assert labels(app) == ["big/", "pics/", "small/", "readme.md"]
            assert "31 files" in text_of(app, "#preview")  # big/ highlighted
            await pilot.press("k")  # stays at the top
            await pilot.press("down", "down", "down")
            assert "# Title" in text_of(app, "#preview")  # text preview of readme.md
            await pilot.press("up", "up", "l")  # into pics/
            assert "image: PNG, 7 x 5" in text_of(app, "#preview")
            parent_list = app.query_one("#parent", RowList)
            assert parent_list.count == 4  # the parent column shows the root
            await pilot.press("h", "slash")
            assert app.query_one("#ask", Input).has_class("shown")
            await pilot.press(*"sma", "enter")
            assert labels(app) == ["small/"] and "filter: 'sma'" in text_of(app, "#where")
            await pilot.press("escape")
            assert current.count == 4
            await pilot.press("g", *"/small/b.bin", "enter")  # jump to a file
            assert text_of(app, "#where").startswith("/small")
            assert "00 01 02 03" in text_of(app, "#preview")  # hex dump of the binary
            await pilot.press("g", *"no/such", "enter")
            assert text_of(app, "#where").startswith("/small")  # stays; a notice says why
            await pilot.press("q")

        drive(app, steps)


def test_tui_commands_refuse_a_missing_directory(archive: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "barecat.cli", "ncdu", archive, "no/such/dir"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "no/such/dir" in done.stderr
