"""``barecat ncdu``: where an archive's space goes, directory by directory, like ncdu.

Every figure comes from the index: a directory's size and file count are its row's
statistics (kept by the triggers), so opening any directory of a million-file archive
costs one query for its subdirectories and one for its own files, nothing recursive.
Sizes are the bytes stored in the shards (for sealed archives, what compression left).
Keys: up/down (k/j), Page Up/Down and Home/End move, Enter/right (l) opens a directory,
Backspace/left (h) goes up, ``s``/``n``/``c`` sort by size, name or file count, ``q`` quits.
Rows are drawn as ncdu draws them (size, a bar against the largest entry, file count,
name), as plain text and only those on screen (``rows.RowList``), so a directory of any
size opens at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from barecat.archive.readable import ReadableArchive
from barecat.cli.terminal import human_size
from barecat.cli.tui.rows import ArchiveApp, RowList, cell, printable
from barecat.paths import join, parent

BAR_WIDTH = 20
SIZE_WIDTH = 8  # "1023.9KB" at most: human_size and a B
FILES_WIDTH = 11  # up to 999,999,999 files
PREFIX_WIDTH = SIZE_WIDTH + 1 + BAR_WIDTH + 2 + 1 + FILES_WIDTH + 2


@dataclass(frozen=True, slots=True)
class Row:
    """One entry of the directory shown: a subdirectory (with its subtree's totals) or a
    file."""

    name: str
    size: int
    files: int
    is_dir: bool


def directory_rows(bc: ReadableArchive, path: str) -> list[Row]:
    """The entries of ``path`` with the bytes they take, from the index's statistics."""
    rows = [Row(d.name, d.size_tree or 0, d.num_files_tree or 0, True) for d in bc.subdirs_of(path)]
    rows += [Row(f.name, f.stored_size, 1, False) for f in bc.files_in(path)]
    return rows


SORTS = {
    "size": lambda r: (-r.size, r.name),
    "name": lambda r: (not r.is_dir, r.name),
    "files": lambda r: (-r.files, r.name),
}


def draw_row(row: Row, largest: int, width: int) -> Text:
    """One line of the listing, ``width`` cells wide: size, bar, file count, name.

    Args:
        row: The entry.
        largest: The size the full bar stands for (the largest entry's, at least 1).
        width: The terminal cells the line has.

    Returns:
        Plain text (no markup is read from the name), the name shortened in the middle
        when it does not fit.
    """
    filled = round(BAR_WIDTH * row.size / largest)
    name = printable(row.name) + ("/" if row.is_dir else "")
    return Text.assemble(
        f"{human_size(row.size) + 'B':>{SIZE_WIDTH}} [",
        ("#" * filled, "bold"),
        " " * (BAR_WIDTH - filled),
        f"] {row.files:>{FILES_WIDTH},}  ",
        cell(name, max(width - PREFIX_WIDTH, 1)),
    )


HEADER = f"{'size':>{SIZE_WIDTH}} {'share':<{BAR_WIDTH + 2}} {'files':>{FILES_WIDTH}}  name"


class Listing(RowList):
    """The directory's rows; right/l open and left/h go up, as in ncdu."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,right,l", "app.open", "Open"),
        Binding("backspace,left,h", "app.up", "Up"),
    ]


class NcduApp(ArchiveApp):
    """The ncdu-style browser of one archive."""

    TITLE = "barecat ncdu"
    CSS = """
    Listing { height: 1fr; }
    #where { background: $boost; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #header { text-style: bold; text-wrap: nowrap; text-overflow: clip; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("s", "sort('size')", "By size"),
        Binding("n", "sort('name')", "By name"),
        Binding("c", "sort('files')", "By count"),
    ]

    def __init__(self, bc: ReadableArchive, start: str = "") -> None:
        super().__init__(bc, start)
        self.sort = "size"
        self.rows: list[Row] = []
        self.largest = 1

    def compose(self) -> ComposeResult:
        yield Static(id="where")
        yield Static(Text(HEADER), id="header")
        yield Listing(self.draw, id="listing")
        yield Footer()

    def draw(self, index: int, width: int) -> Text:
        return draw_row(self.rows[index], self.largest, width)

    def show(self, path: str, select: str | None = None) -> None:
        self.path = path
        self.rows = sorted(directory_rows(self.bc, path), key=SORTS[self.sort])
        total = sum(r.size for r in self.rows)
        self.largest = max((r.size for r in self.rows), default=0) or 1
        names = [r.name for r in self.rows]
        at = names.index(select) if select in names else 0
        empty = "This archive is empty" if not path else "Empty directory"
        listing = self.query_one(Listing)
        listing.show(len(self.rows), cursor=at, empty=empty)
        listing.focus()
        count = sum(r.files for r in self.rows)
        where = f"/{printable(path)}   total {human_size(total)}B in {count:,} files"
        self.say_where(f"{where}   (sorted by {self.sort})")

    def selected(self) -> Row | None:
        at = self.query_one(Listing).cursor
        return self.rows[at] if 0 <= at < len(self.rows) else None

    def action_open(self) -> None:
        row = self.selected()
        if row is not None and row.is_dir:
            self.show(join(self.path, row.name))

    def action_up(self) -> None:
        if self.path:
            name = self.path.rsplit("/", 1)[-1]
            self.show(parent(self.path), select=name)

    def action_sort(self, key: str) -> None:
        self.sort = key
        row = self.selected()
        self.show(self.path, select=row.name if row else None)


__all__ = ["Listing", "NcduApp", "Row", "directory_rows", "draw_row"]
