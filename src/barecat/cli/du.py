"""``barecat du``, ``index-to-csv`` and ``to-ncdu-json``: sizes and whole-index exports.

``du`` prints apparent sizes in bytes (the bytes stored; ``-H`` for GNU's human
format) from the statistics the index keeps per directory, so a directory's total costs
nothing however many files lie below it. The exports stream: neither holds the index in
memory, so they work on archives of any size. ``to-ncdu-json`` writes ncdu's export
format (``ncdu -f FILE``). On a terminal, ``du`` shows a character of a name that
cannot be printed as ``?`` (as ``find`` does), so no name talks to the terminal.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable
from typing import TextIO

from barecat import __version__
from barecat.archive import Barecat
from barecat.cli.listing import children, display, is_link, name_key
from barecat.cli.names import question_marks, shown_on
from barecat.cli.parsing import Declared, add_archive_argument, registering
from barecat.cli.sealing import open_archive
from barecat.cli.terminal import human_size
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order

CSV_EXAMPLE = "barecat index-to-csv photos.barecat > index.csv"
NCDU_JSON_EXAMPLE = "barecat to-ncdu-json photos.barecat > tree.json && ncdu -f tree.json"
DU_EXAMPLES = """
barecat du -h -d 1 photos.barecat
barecat du -s photos.barecat train/
barecat du -a photos.barecat train/cat/ | sort -n | tail
"""


def _du_arguments(du: argparse.ArgumentParser) -> None:
    add_archive_argument(du)
    du.add_argument("path", nargs="?", default="", help="Where to start (default: root)")
    du.add_argument("-a", "--all", action="store_true", help="Files too, not just directories")
    du.add_argument("-s", "--summarize", action="store_true", help="Only the total of PATH")
    du.add_argument(
        "-h", "-H", "--human-readable", action="store_true", help="Sizes like 1.5K, 20M"
    )
    du.add_argument("-d", "--max-depth", type=int, metavar="N", help="Show at most N levels deep")


# -- du -------------------------------------------------------------------------------------


def print_du(
    bc: Barecat,
    path: str,
    out: TextIO,
    *,
    all_files: bool = False,
    summarize: bool = False,
    human: bool = False,
    max_depth: int | None = None,
) -> None:
    """Sizes of ``path`` and what is below it, deepest first, the start last (like du)."""
    fmt: Callable[[int], str] = human_size if human else str
    shown = shown_on(out, question_marks)  # (GNU du leaves names raw even on a terminal)
    if summarize:
        max_depth = 0

    def visit(info: BarecatEntryInfo, depth: int) -> None:
        if isinstance(info, BarecatDirInfo):
            if max_depth is None or depth < max_depth:  # deeper totals are in the index
                below = (
                    children(bc, info.path)
                    if all_files
                    else sorted(bc.subdirs_of(info.path), key=name_key)
                )
                for child in below:
                    visit(child, depth + 1)
            size = info.size_tree or 0
        else:
            assert isinstance(info, BarecatFileInfo)
            size = info.size or 0
        out.write(f"{fmt(size)}\t{shown(display(info.path))}\n")

    visit(bc.stat(path), 0)


def run_du(args: argparse.Namespace) -> int:
    with open_archive(args.archive, args) as bc:
        print_du(
            bc,
            args.path,
            sys.stdout,
            all_files=args.all,
            summarize=args.summarize,
            human=args.human_readable,
            max_depth=args.max_depth,
        )
    return 0


# -- exports --------------------------------------------------------------------------------


def run_index_to_csv(args: argparse.Namespace) -> int:
    """Same columns, quoting, order and CRLF line ends (the csv module's) as the reference,
    byte for byte, so tools reading its CSV still work."""
    writer = csv.writer(sys.stdout, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\r\n")
    writer.writerow(["path", "shard", "offset", "size", "crc32c"])
    with open_archive(args.archive, args) as bc:
        for f in bc.iter_fileinfos(Order.PATH):
            crc = "" if f.crc32c is None else f.crc32c
            writer.writerow([f.path, f.shard, f.offset, f.stored_size, crc])
    return 0


def _ncdu_item(info: BarecatEntryInfo, name: str) -> str:
    item: dict[str, object] = {"name": name}
    if isinstance(info, BarecatDirInfo):
        item["asize"] = 0
    else:
        assert isinstance(info, BarecatFileInfo)
        item["asize"] = item["dsize"] = info.size or 0
        if is_link(info):
            item["notreg"] = True
    if info.mtime_ns is not None:
        item["mtime"] = info.mtime_ns // 1_000_000_000
    return json.dumps(item, ensure_ascii=False)


def _write_ncdu_dir(bc: Barecat, info: BarecatDirInfo, name: str, out: TextIO) -> None:
    out.write("[" + _ncdu_item(info, name))
    for child in children(bc, info.path):
        out.write(",\n")
        if isinstance(child, BarecatDirInfo):
            _write_ncdu_dir(bc, child, child.name, out)
        else:
            out.write(_ncdu_item(child, child.name))
    out.write("]")


def run_to_ncdu_json(args: argparse.Namespace) -> int:
    out = sys.stdout
    meta = {"progname": "barecat", "progver": __version__, "timestamp": int(time.time())}
    with open_archive(args.archive, args) as bc:
        out.write(f"[1,1,{json.dumps(meta)},\n")
        root = bc.stat("")
        assert isinstance(root, BarecatDirInfo)
        _write_ncdu_dir(bc, root, bc.path, out)
        out.write("]\n")
    return 0


register = registering(
    Declared("du", run_du, _du_arguments, DU_EXAMPLES, short_help=False),
    Declared("index-to-csv", run_index_to_csv, add_archive_argument, CSV_EXAMPLE),
    Declared("to-ncdu-json", run_to_ncdu_json, add_archive_argument, NCDU_JSON_EXAMPLE),
)
