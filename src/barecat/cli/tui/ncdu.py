"""``barecat ncdu``: where an archive's space goes, directory by directory, like ncdu.

Every figure comes from the index: a directory's size and file count are its row's
statistics (kept by the triggers), so opening any directory of a million-file archive
costs one query for its subdirectories and one for its own files, nothing recursive.
Sizes are the bytes stored in the shards (for sealed archives, what compression left).
Keys: up/down (k/j) move, Enter/right (l) opens a directory, Backspace/left (h) goes up,
``s``/``n``/``c`` sort by size, name or file count, ``q`` quits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from barecat.archive.readable import ReadableArchive
from barecat.cli.terminal import human_size
from barecat.paths import join, parent

BAR_WIDTH = 20


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


class Listing(DataTable[str]):
    """The directory's rows; arrows and Enter navigate rather than move between cells."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,right,l", "app.open", "Open"),
        Binding("backspace,left,h", "app.up", "Up"),
        Binding("j", "cursor_down", show=False),
        Binding("k", "cursor_up", show=False),
    ]


class NcduApp(App[None]):
    """The ncdu-style browser of one archive."""

    TITLE = "barecat ncdu"
    CSS = "DataTable { height: 1fr; } #where { background: $boost; padding: 0 1; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("s", "sort('size')", "By size"),
        Binding("n", "sort('name')", "By name"),
        Binding("c", "sort('files')", "By count"),
    ]

    def __init__(self, bc: ReadableArchive, start: str = "") -> None:
        super().__init__()
        self.bc = bc
        self.path = start
        self.sort = "size"
        self.rows: list[Row] = []

    def compose(self) -> ComposeResult:
        yield Static(id="where")
        yield Listing(cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(Listing)
        table.add_columns("size", "share", "files", "name")
        self.show(self.path)

    def show(self, path: str, select: str | None = None) -> None:
        self.path = path
        self.rows = sorted(directory_rows(self.bc, path), key=SORTS[self.sort])
        total = sum(r.size for r in self.rows)
        largest = max((r.size for r in self.rows), default=0) or 1
        table = self.query_one(Listing)
        table.clear()
        for row in self.rows:
            filled = round(BAR_WIDTH * row.size / largest)
            table.add_row(
                f"{human_size(row.size):>7}B",
                "[" + "#" * filled + " " * (BAR_WIDTH - filled) + "]",
                f"{row.files:,}",
                row.name + ("/" if row.is_dir else ""),
            )
        if select is not None:
            names = [r.name for r in self.rows]
            if select in names:
                table.move_cursor(row=names.index(select))
        count = sum(r.files for r in self.rows)
        self.query_one("#where", Static).update(
            f"/{path}   total {human_size(total)}B in {count:,} files   (sorted by {self.sort})"
        )

    def selected(self) -> Row | None:
        table = self.query_one(Listing)
        if not self.rows or table.cursor_row < 0:
            return None
        return self.rows[table.cursor_row]

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


__all__ = ["Listing", "NcduApp", "Row", "directory_rows"]
