"""What ``ncdu`` and ``browse`` put on the screen for hard names: markup-like names shown
as themselves, bars drawn, wide (CJK, emoji) names whole with the columns after them in
line, long names shortened in the middle, a 17,000-entry directory, an empty archive.
Every assertion reads the rendered screen (Textual's own screenshot, as text), and one
test reads a real terminal (tmux)."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

import barecat

textual = pytest.importorskip("textual", reason="the tui extra (textual) is not installed")

from barecat.cli.tui.browse import BrowseApp  # noqa: E402
from barecat.cli.tui.ncdu import NcduApp  # noqa: E402
from helpers import REPO  # noqa: E402
from helpers.screens import barecat_in_tmux, column, screen_lines  # noqa: E402

WIDTH, HEIGHT = 100, 24
LONG = "very-long-name-" + "x" * 150 + "-the-end.txt"
CJK = "日本語のファイル名.txt"
EMOJI = "🎉party🎉.txt"
MANY = 17_000
DOCS = Path(REPO) / "docs"


@pytest.fixture
def names(tmp_path: Path) -> str:
    """Names a terminal gets wrong: markup, wide characters, a 180-character name, control
    characters."""
    path = str(tmp_path / "names.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc["[bold]x"] = b"b" * 20_000
        bc["[red]dir/[i]inner.txt"] = b"[bold]not bold[/bold]\n" + b"r" * 9_977
        bc[LONG] = b"l" * 5_000
        bc[CJK] = b"c" * 300
        bc[EMOJI] = b"e" * 200
        bc["plain.txt"] = b"p" * 100
        bc["tab\there\x1b[31m.txt"] = b"t" * 50  # control characters: no terminal codes
    return path


def look(app: Any, *keys: str) -> list[str]:
    """Start ``app`` on a WIDTH x HEIGHT screen, press ``keys``, return the screen's lines."""
    seen: list[str] = []

    async def run() -> None:
        async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
            await pilot.press(*keys)
            await pilot.pause()
            seen.extend(screen_lines(app))

    asyncio.run(run())
    return seen


def row(lines: list[str], name: str) -> str:
    found = [line for line in lines if name in line]
    assert found, f"{name!r} is not on the screen:\n" + "\n".join(lines)
    return found[0]


def test_ncdu_draws_bars_in_proportion_and_names_as_typed(names: str) -> None:
    with barecat.Barecat(names) as bc:
        lines = look(NcduApp(bc))
    bold, red, long = row(lines, "[bold]x"), row(lines, "[red]dir/"), row(lines, "very-long")
    assert "[####################]" in bold  # 20,000 bytes: the largest fills the bar
    assert "[##########          ]" in red  # 10,000 bytes: half
    assert "[#####               ]" in long  # 5,000 bytes: a quarter
    assert row(lines, "plain.txt").count("#") == 0  # 100 bytes: rounds to nothing
    assert "tab?here?[31m.txt" in row(lines, "tab?here")  # as ncdu shows them


def test_ncdu_keeps_wide_names_whole_and_shortens_long_ones_in_the_middle(names: str) -> None:
    with barecat.Barecat(names) as bc:
        lines = look(NcduApp(bc))
    starts = {column(row(lines, n), n) for n in ("[bold]x", CJK, EMOJI, "plain.txt")}
    assert len(starts) == 1  # every name starts in the same column
    long = row(lines, "very-long")
    assert "..." in long and long.rstrip().endswith("x-the-end.txt")  # start ... end
    assert column(long, "very-long") in starts
    assert all(cell_len(line) <= WIDTH for line in lines)  # nothing wraps or overflows


def test_ncdu_opens_a_markup_directory_and_shows_its_path_as_typed(names: str) -> None:
    with barecat.Barecat(names) as bc:
        lines = look(NcduApp(bc), "down", "enter")  # [red]dir is second by size
    assert lines[0].strip().startswith("/[red]dir   total")
    assert "[i]inner.txt" in row(lines, "inner.txt")


def test_browse_shows_names_previews_and_sizes_as_typed_and_aligned(names: str) -> None:
    with barecat.Barecat(names) as bc:
        lines = look(BrowseApp(bc))  # [red]dir/ first: directories come first
        assert row(lines, "[red]dir/")  # highlighted; the preview lists its file as typed
        assert row(lines, "inner.txt").rstrip().endswith(" [i]inner.txt")
        sizes = [("[bold]x", "20KB"), (CJK, "300B"), (EMOJI, "200B"), ("plain.txt", "100B")]
        ends = [column(row(lines, name), size) + len(size) for name, size in sizes]
        assert len(set(ends)) == 1  # the size column lines up after wide names
        long = row(lines, "very-long")
        assert "..." in long and "the-end.txt" in long and column(long, "4.9KB") + 5 == ends[0]
        lines = look(BrowseApp(bc), "l")  # into [red]dir/: the text file's preview
        assert lines[0].strip() == "/[red]dir"
        assert "[bold]not bold[/bold]" in row(lines, "not bold")


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("many") / "many.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc.add_many((f"big/f{i:05d}.bin", b"x" * (i % 7)) for i in range(MANY))
    return path


@pytest.mark.parametrize("app", [NcduApp, BrowseApp])
def test_a_17000_entry_directory_shows_its_first_rows_then_its_last(
    many: str, app: Callable[[barecat.Barecat, str], Any]
) -> None:
    with barecat.Barecat(many) as bc:
        by_name = ("n",) if app is NcduApp else ()
        lines = look(app(bc, "big"), *by_name)
        assert "f00000.bin" in row(lines, "f00000.bin") and "f00001.bin" in "".join(lines)
        lines = look(app(bc, "big"), *by_name, "end")
        assert f"f{MANY - 1:05d}.bin" in row(lines, f"f{MANY - 1:05d}.bin")
        assert "f00000.bin" not in "".join(lines)


@pytest.mark.parametrize("app", [NcduApp, BrowseApp])
def test_an_empty_archive_says_so(tmp_path: Path, app: Callable[[barecat.Barecat], Any]) -> None:
    path = str(tmp_path / "empty.barecat")
    barecat.Barecat(path, readonly=False).close()
    with barecat.Barecat(path) as bc:
        lines = look(app(bc), "down", "enter", "end")
    assert "This archive is empty" in "".join(lines)


def test_ncdu_on_a_real_terminal_shows_bars_and_markup_names(names: str, tmp_path: Path) -> None:
    with barecat_in_tmux(tmp_path / "tmux.sock", "ncdu", names) as terminal:
        screen = terminal.wait_for_text("[bold]x", "[red]dir/", "sorted by size")
        bold = row(screen.splitlines(), "[bold]x")
        assert "[####################]" in bold
        assert "[##########          ]" in row(screen.splitlines(), "[red]dir/")
        terminal.press("Down", "Enter")
        screen = terminal.wait_for_text("/[red]dir", "[i]inner.txt")


def test_the_docs_show_screenshots_of_ncdu_and_browse_as_drawn_now() -> None:
    page = (DOCS / "viewers.md").read_text()
    for name in ("ncdu", "browse"):
        assert f"](images/{name}.svg)" in page
        picture = html.unescape((DOCS / "images" / f"{name}.svg").read_text())
        assert "[draft]\xa0results.md" in picture  # a name in brackets, as typed
    ncdu = html.unescape((DOCS / "images" / "ncdu.svg").read_text())
    assert ">####################<" in ncdu  # the largest entry's bar, drawn
