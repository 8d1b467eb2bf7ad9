"""What ``ncdu`` and ``browse`` share: ``ArchiveApp``, the frame both are (one archive shown
a directory at a time under a line that says where), names made printable and fitted to a
number of terminal cells, and ``RowList``, a scrolling list of one-line rows that draws
only the rows on screen.

Every name is drawn as plain text (a Rich ``Text``, never a markup string), so ``[bold]x``
shows as itself. Widths are counted in terminal cells, not characters: a CJK character or an
emoji takes two, so the columns after a name stay aligned. A name too long for its room is
cut in the middle around ``...``, keeping its start and its end (as ncdu does). A
directory of any size opens at once: the list keeps a row count and a function that draws
row ``i``, asked only for the rows in view.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import ClassVar

from rich.cells import cell_len, get_character_cell_size
from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from barecat.archive.readable import ReadableArchive

ELLIPSIS = "..."


def printable(name: str) -> str:
    """``name`` with each control character (newline, tab, escape...) shown as ``?``, as
    ncdu and ls do, so that no name can move the cursor or talk to the terminal.

    Args:
        name: A name or path as stored in the archive.

    Returns:
        The same name with control characters replaced.
    """
    if name.isprintable():
        return name
    return "".join(c if unicodedata.category(c)[0] != "C" or c == "\u200d" else "?" for c in name)


def _take(text: str, cells: int) -> str:
    """The longest start of ``text`` that fits in ``cells`` terminal cells."""
    used = 0
    for i, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > cells:
            return text[:i]
    return text


def fit(name: str, width: int) -> str:
    """``name`` in at most ``width`` terminal cells: whole when it fits, else its start and
    its end around ``...`` (more of the end, which holds the extension).

    Args:
        name: A printable name (see ``printable``).
        width: The terminal cells available.

    Returns:
        The name, or its shortened form; ``cell_len`` of it is at most ``width`` (one less
        when a wide character did not fit beside the ``...``).
    """
    if cell_len(name) <= width:
        return name
    room = width - len(ELLIPSIS)
    if room < 2:
        return _take(name, max(width, 0))
    head = _take(name, room // 2)
    tail = _take(name[::-1], room - cell_len(head))[::-1]
    return head + ELLIPSIS + tail


def cell(name: str, width: int) -> str:
    """``name`` fitted to ``width`` cells and padded with spaces to exactly ``width``."""
    shown = fit(name, width)
    return shown + " " * (width - cell_len(shown))


class ArchiveApp(App[None]):
    """One archive shown a directory at a time: ``path`` (at first ``start``), which
    :meth:`show` draws when the app starts and whenever it changes, under a line
    ``#where`` that says where it is."""

    def __init__(self, bc: ReadableArchive, start: str = "") -> None:
        super().__init__()
        self.bc = bc
        self.path = start

    def on_mount(self) -> None:
        self.show(self.path)

    def show(self, path: str, select: str | None = None) -> None:
        """Draw the directory ``path``, with the entry named ``select`` under the cursor
        (else the first)."""
        raise NotImplementedError

    def say_where(self, text: str) -> None:
        """Put ``text`` on the line at the top (drawn as it is, never as markup)."""
        self.query_one("#where", Static).update(Text(text))


class RowList(ScrollView, can_focus=True):
    """A list of ``count`` one-line rows with a cursor, drawn by ``draw(index, width)``
    only for the rows on screen. It shows ``empty`` when it has no rows.

    Keys: up/down (k/j), Page Up/Down, Home/End move the cursor (it stops at the ends);
    Enter posts ``Selected``. Each move posts ``Highlighted``.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,j", "move(1)", show=False),
        Binding("up,k", "move(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("home", "move_to(0)", show=False),
        Binding("end", "move_to(-1)", show=False),
        Binding("enter", "select", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"row-list--cursor", "row-list--empty"}
    DEFAULT_CSS = """
    RowList { background: $surface; overflow-x: hidden; }
    RowList > .row-list--cursor {
        background: $block-cursor-blurred-background; text-style: bold;
    }
    RowList:focus > .row-list--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
    }
    RowList > .row-list--empty { color: $text-muted; text-style: italic; }
    """

    class Highlighted(Message):
        """The cursor moved to ``index`` (-1: there are no rows)."""

        def __init__(self, row_list: RowList, index: int) -> None:
            super().__init__()
            self.row_list = row_list
            self.index = index

    class Selected(Message):
        """Enter was pressed on row ``index``."""

        def __init__(self, row_list: RowList, index: int) -> None:
            super().__init__()
            self.row_list = row_list
            self.index = index

    def __init__(self, draw: Callable[[int, int], Text], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.draw = draw
        self.count = 0
        self.cursor = -1
        self.empty = ""

    def show(self, count: int, cursor: int = 0, empty: str = "") -> None:
        """Show ``count`` rows (from the top), the cursor on row ``cursor``.

        Args:
            count: How many rows there are; ``draw`` is asked for rows ``0..count-1``.
            cursor: The row to put the cursor on (clamped to the rows).
            empty: The line shown when ``count`` is 0.
        """
        self.count = count
        self.empty = empty
        self.virtual_size = Size(0, count)
        self.scroll_to(y=0, animate=False, immediate=True)
        self.cursor = -1
        self.move_to(cursor)
        self.refresh()

    def move_to(self, index: int) -> None:
        """Put the cursor on row ``index`` (-1: the last), scrolled into view.

        Args:
            index: A row number; out-of-range values stop at the first or last row.
        """
        if not self.count:
            target = -1
        else:
            target = self.count - 1 if index < 0 else min(index, self.count - 1)
        if target >= 0:
            self.scroll_to_region(Region(0, target, 1, 1), animate=False, immediate=True)
        if target != self.cursor:
            self.cursor = target
            self.refresh()
            self.post_message(self.Highlighted(self, target))

    def action_move(self, delta: int) -> None:
        self.move_to(max(self.cursor + delta, 0))

    def action_page(self, direction: int) -> None:
        step = max(self.scrollable_content_region.height - 1, 1)
        self.move_to(max(self.cursor + direction * step, 0))

    def action_move_to(self, index: int) -> None:
        self.move_to(index)

    def action_select(self) -> None:
        if self.cursor >= 0:
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event: Click) -> None:
        index = self.scroll_offset.y + event.y
        if 0 <= index < self.count:
            self.move_to(index)
            if event.chain > 1:
                self.action_select()

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        index = self.scroll_offset.y + y
        if self.count == 0:
            if y != 0 or not self.empty:
                return Strip.blank(width, base)
            text = Text(" " + fit(printable(self.empty), width - 1))
            style: Style = self.get_component_rich_style("row-list--empty")
            return self._strip(text, width, base + style)
        if index >= self.count:
            return Strip.blank(width, base)
        if index == self.cursor:
            base = base + self.get_component_rich_style("row-list--cursor")
        return self._strip(self.draw(index, width), width, base)

    def _strip(self, text: Text, width: int, style: Style) -> Strip:
        segments = list(text.render(self.app.console))
        return Strip(segments).adjust_cell_length(width).apply_style(style)


__all__ = ["ELLIPSIS", "RowList", "cell", "fit", "printable"]
