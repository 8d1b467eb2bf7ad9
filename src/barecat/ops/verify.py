"""Checking an archive: the index's own consistency and every file's bytes against CRC32C.

Works on an (Index, Sharder) pair, reads files in storage order (sequential shard reads)
and reports every problem instead of stopping at the first. Library code: results come
back as a dataclass, progress through an optional callback. No SQL and no shard I/O of
its own: both halves are used through their public methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from barecat.entries import BarecatFileInfo, Order
from barecat.exceptions import BarecatError, FileNotFoundBarecatError
from barecat.index import Index
from barecat.shards import Sharder


@dataclass(slots=True)
class VerifyReport:
    """What a verification found; ``ok`` when nothing."""

    files_checked: int = 0
    bytes_checked: int = 0
    index_problems: list[str] = field(default_factory=list)
    bad_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.index_problems and not self.bad_files


def verify_archive(
    index: Index,
    sharder: Sharder,
    quick: bool = False,
    on_file: Callable[[BarecatFileInfo], None] | None = None,
) -> VerifyReport:
    """Index consistency plus the CRC32C of every file (``quick``: only the last one,
    which catches truncation and unfinished writes)."""
    report = VerifyReport(index_problems=index.find_inconsistencies())
    files: Iterable[BarecatFileInfo]
    if quick:
        try:
            files = [index.get_last_file()]
        except FileNotFoundBarecatError:
            files = []
    else:
        files = index.iter_all_fileinfos(Order.ADDRESS)
    for f in files:
        if not _bytes_match(sharder, f):
            report.bad_files.append(f.path)
        report.files_checked += 1
        report.bytes_checked += f.size or 0
        if on_file is not None:
            on_file(f)
    return report


def _bytes_match(sharder: Sharder, f: BarecatFileInfo) -> bool:
    if f.crc32c is None:
        return True
    try:
        return sharder.crc_of_range(f.shard or 0, f.offset or 0, f.size or 0) == f.crc32c
    except BarecatError:  # missing shard, truncated bytes
        return False
