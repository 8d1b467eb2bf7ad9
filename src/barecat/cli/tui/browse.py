"""``barecat browse``: a ranger-like browser of an archive in three columns.

Left: the parent directory; middle: the current one (directories first, then files);
right: a preview of the highlighted entry — a directory's contents and totals, a text
file's beginning, an image's format and dimensions (with Pillow), or a hex dump. The
middle column shows each file's size and each directory's entry count at its right edge,
as ranger does; names and previews are plain text (``rows``). Keys: up/down (k/j), Page
Up/Down and Home/End move, Enter/right (l) opens, Backspace/left (h) goes up, ``/`` filters the
current directory by a substring, ``g`` jumps to a path, Escape clears a filter, ``q``
quits. Listings and totals come from the index; a preview reads at most
``PREVIEW_BYTES`` of a file.
"""

from __future__ import annotations

import datetime
import io
import stat
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Input, Static

from barecat.archive.readable import ReadableArchive
from barecat.cli.terminal import human_size
from barecat.cli.tui.rows import ArchiveApp, RowList, cell, printable
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.paths import normalize, parent

PREVIEW_BYTES = 4096
PREVIEW_ENTRIES = 200
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")


def entries_of(bc: ReadableArchive, path: str) -> list[BarecatEntryInfo]:
    """A directory's entries as the browser lists them: directories first, by name."""
    dirs: list[BarecatEntryInfo] = sorted(bc.subdirs_of(path), key=_name)
    files: list[BarecatEntryInfo] = sorted(bc.files_in(path), key=_name)
    return dirs + files


def _name(info: BarecatEntryInfo) -> str:
    return info.name


def label(info: BarecatEntryInfo) -> str:
    """The entry's name as listed: printable, a directory's with a ``/``."""
    name = printable(info.name)
    return name + "/" if isinstance(info, BarecatDirInfo) else name


def draw_entry(info: BarecatEntryInfo, width: int, with_size: bool) -> Text:
    """One line of a column, ``width`` cells wide: the name (shortened in the middle when
    too long), then, with ``with_size``, a file's size or a directory's entry count at the
    right edge, as ranger shows them.

    Args:
        info: The entry.
        width: The terminal cells the line has.
        with_size: Whether to show the size.

    Returns:
        Plain text (no markup is read from the name); directories in bold.
    """
    style = "bold" if isinstance(info, BarecatDirInfo) else ""
    if not with_size:
        return Text(" " + cell(label(info), max(width - 1, 1)), style=style)
    if isinstance(info, BarecatDirInfo):
        size = f"{info.num_entries:,}"
    else:
        assert isinstance(info, BarecatFileInfo)
        size = human_size(info.size or 0) + "B"
    room = max(width - 2 - len(size) - 1, 1)
    return Text(f" {cell(label(info), room)} {size} ", style=style)


def preview(bc: ReadableArchive, info: BarecatEntryInfo) -> str:
    """What the right column shows for ``info``."""
    if isinstance(info, BarecatDirInfo):
        names = [label(e) for e in entries_of(bc, info.path)[:PREVIEW_ENTRIES]]
        head = (
            f"{info.num_files_tree or 0:,} files, {human_size(info.size_tree or 0)}B "
            f"({info.num_subdirs or 0} directories here)"
        )
        return "\n".join([head, "", *names])
    assert isinstance(info, BarecatFileInfo)
    lines = [f"{human_size(info.size or 0)}B ({info.size or 0:,} bytes)"]
    if info.mode is not None:
        kind = stat.S_IFLNK if info.is_symlink_entry else stat.S_IFREG
        lines.append(
            f"mode {stat.filemode(info.mode if stat.S_IFMT(info.mode) else kind | info.mode)}"
        )
    if info.mtime_ns is not None:
        moment = datetime.datetime.fromtimestamp(info.mtime_ns / 1e9)
        lines.append(f"modified {moment:%Y-%m-%d %H:%M:%S}")
    try:
        start = bc.read(info, 0, PREVIEW_BYTES)
    except BarecatError as e:  # an encrypted archive without its key, damaged bytes
        return "\n".join([*lines, "", f"(cannot read: {e})"])
    if info.is_symlink_entry:
        target = printable(start.decode(errors="replace"))
        return "\n".join([*lines, "", f"-> {target}"])
    return "\n".join([*lines, "", *_describe_content(info, start)])


def _describe_content(info: BarecatFileInfo, head: bytes) -> list[str]:
    if info.path.lower().endswith(IMAGE_SUFFIXES):
        return _image_lines(info, head)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\0" not in text:
        return [printable(line.expandtabs(4)) for line in text.splitlines()[:100]]
    return [
        " ".join(f"{b:02x}" for b in head[i : i + 16]) for i in range(0, min(len(head), 256), 16)
    ]


def _image_lines(info: BarecatFileInfo, head: bytes) -> list[str]:
    try:
        from PIL import Image
    except ModuleNotFoundError:
        return ["image (install Pillow to see its dimensions)"]
    try:
        with Image.open(io.BytesIO(head)) as image:  # the header is at the start
            return [f"image: {image.format}, {image.width} x {image.height}, {image.mode}"]
    except Exception:  # Pillow raises many kinds for what it cannot parse
        return ["image (its header could not be read)"]


class BrowseApp(ArchiveApp):
    """The three-column browser of one archive."""

    TITLE = "barecat browse"
    CSS = """
    #columns { height: 1fr; }
    #parent { width: 1fr; }
    #current { width: 2fr; }
    #preview { width: 3fr; padding: 0 1; overflow-y: auto; }
    #where { background: $boost; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #preview { text-wrap: nowrap; text-overflow: ellipsis; }
    Input { dock: bottom; display: none; }
    Input.shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("right,l", "open", "Open"),
        Binding("left,h,backspace", "up", "Up"),
        Binding("slash", "ask('filter')", "Filter"),
        Binding("g", "ask('jump')", "Go to"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, bc: ReadableArchive, start: str = "") -> None:
        super().__init__(bc, start)
        self.filter = ""
        self.shown: list[BarecatEntryInfo] = []
        self.siblings: list[BarecatEntryInfo] = []
        self.asking = ""

    def compose(self) -> ComposeResult:
        yield Static(id="where")
        with Horizontal(id="columns"):
            yield RowList(self.draw_parent, id="parent")
            yield RowList(self.draw_current, id="current")
            yield Static(id="preview")
        yield Input(id="ask")
        yield Footer()

    def on_mount(self) -> None:  # (then ArchiveApp's shows the start)
        self.query_one("#parent", RowList).can_focus = False

    def draw_current(self, index: int, width: int) -> Text:
        return draw_entry(self.shown[index], width, with_size=True)

    def draw_parent(self, index: int, width: int) -> Text:
        return draw_entry(self.siblings[index], width, with_size=False)

    # -- what is shown ------------------------------------------------------------------------

    def show(self, path: str, select: str | None = None) -> None:
        self.path = path
        entries = entries_of(self.bc, path)
        if self.filter:
            entries = [e for e in entries if self.filter.lower() in e.name.lower()]
        self.shown = entries
        names = [e.name for e in entries]
        at = names.index(select) if select in names else 0
        empty = "This archive is empty" if not path and not self.filter else "Empty directory"
        if self.filter:
            empty = f"Nothing here matches {self.filter!r}"
        current = self.query_one("#current", RowList)
        current.show(len(entries), cursor=at, empty=empty)
        current.focus()
        self.siblings = entries_of(self.bc, parent(path)) if path else []
        here = [e.name for e in self.siblings].index(path.rsplit("/", 1)[-1]) if path else 0
        self.query_one("#parent", RowList).show(len(self.siblings), cursor=here)
        shown_filter = f"   filter: {self.filter!r}" if self.filter else ""
        self.say_where(f"/{printable(path)}{shown_filter}")
        self.update_preview()

    def highlighted(self) -> BarecatEntryInfo | None:
        index = self.query_one("#current", RowList).cursor
        return self.shown[index] if 0 <= index < len(self.shown) else None

    def update_preview(self) -> None:
        info = self.highlighted()
        text = "" if info is None else preview(self.bc, info)
        self.query_one("#preview", Static).update(Text(text))

    def on_row_list_highlighted(self, event: RowList.Highlighted) -> None:
        if event.row_list.id == "current":
            self.update_preview()

    def on_row_list_selected(self, event: RowList.Selected) -> None:
        if event.row_list.id == "current":
            self.action_open()

    # -- moving -------------------------------------------------------------------------------

    def action_open(self) -> None:
        info = self.highlighted()
        if isinstance(info, BarecatDirInfo):
            self.filter = ""
            self.show(info.path)

    def action_up(self) -> None:
        if self.path:
            self.filter = ""
            self.show(parent(self.path), select=self.path.rsplit("/", 1)[-1])

    def action_ask(self, what: str) -> None:
        self.asking = what
        ask = self.query_one("#ask", Input)
        ask.placeholder = "filter: part of a name" if what == "filter" else "go to: a path"
        ask.value = self.filter if what == "filter" else self.path
        ask.add_class("shown")
        ask.focus()

    def action_clear_filter(self) -> None:
        ask = self.query_one("#ask", Input)
        if ask.has_class("shown"):
            ask.remove_class("shown")
        self.filter = ""
        self.show(self.path)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("shown")
        if self.asking == "filter":
            self.filter = event.value.strip()
            self.show(self.path)
        else:
            self.jump(event.value)

    def jump(self, where: str) -> None:
        """Go to a directory, or to the directory holding a file with the file selected."""
        try:
            target = normalize(where)
        except BarecatError:
            self.notify(f"not a valid path: {printable(where)!r}", severity="error", markup=False)
            return
        if self.bc.isdir(target):
            self.filter = ""
            self.show(target)
        elif self.bc.isfile(target):
            self.filter = ""
            self.show(parent(target), select=target.rsplit("/", 1)[-1])
        else:
            self.notify(f"not in the archive: {printable(where)}", severity="error", markup=False)
            self.show(self.path)


__all__ = ["BrowseApp", "draw_entry", "entries_of", "preview"]
