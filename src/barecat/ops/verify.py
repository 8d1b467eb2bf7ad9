"""Checking an archive: the index's own consistency, where files point, and their bytes.

Works on an (Index, Sharder) pair and reports every problem instead of stopping at the
first: SQLite's integrity check and directory statistics (from the index), byte ranges
that overlap or reach past the end of their shard (or into a missing shard), and every
file's CRC32C, read in storage order — split into address-ordered runs over a few
threads when asked, since reads and CRC32C release the GIL. ``quick`` checks the index,
the shard sizes and the last file only, which catches truncation and unfinished writes.

A file whose index row cannot address bytes (text or a negative number where an offset
belongs, say: ``index.query.row_problem``) is reported as bad with what is wrong, and
files without a CRC32C are counted as unchecked, not passed as checked. Library code:
results come back as a dataclass, progress through an optional callback. No SQL and no
shard I/O of its own: both halves are used through their public methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from barecat.entries import BarecatFileInfo, Order
from barecat.exceptions import BarecatError, FileNotFoundBarecatError
from barecat.index import ReadOnlyIndex
from barecat.index.query import row_problem
from barecat.shards.reading import ShardReader

OnFile = Callable[[BarecatFileInfo], None]


@dataclass(slots=True)
class VerifyReport:
    """What a verification found; ``ok`` when nothing.

    ``bad_files`` names every file whose bytes are wrong or missing, or whose row is
    damaged, each once, with the reason in ``reasons``; ``index_problems`` are lines about
    the index itself. ``files_unchecked`` of the ``files_checked`` have no CRC32C: their
    bytes were found where the index says, but nothing can tell whether they are right.
    """

    files_checked: int = 0
    bytes_checked: int = 0
    files_unchecked: int = 0
    index_problems: list[str] = field(default_factory=list)
    bad_files: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.index_problems and not self.bad_files

    def flag(self, path: str, reason: str) -> None:
        if path not in self.reasons:
            self.reasons[path] = reason
            self.bad_files.append(path)


def verify_archive(
    index: ReadOnlyIndex,
    sharder: ShardReader,
    quick: bool = False,
    on_file: OnFile | None = None,
    workers: int = 1,
) -> VerifyReport:
    """Everything that can be checked (``quick``: all but the bytes of files before the
    last one). ``workers`` > 1 checksums address-ordered runs of files in parallel."""
    report = VerifyReport(index_problems=index.lookups.find_inconsistencies())
    for earlier, path in index.lookups.find_overlaps():
        report.index_problems.append(f"bytes of {path!r} overlap those of {earlier!r}")
    if quick:
        try:
            files = [index.lookups.get_last_file()]
        except FileNotFoundBarecatError:
            files = []
    else:
        files = list(index.listing.files(Order.ADDRESS))
    damaged = set()
    for f in files:  # first: a damaged row's reason is the damage, not where it points
        damage = row_problem(f)
        if damage is not None:
            report.flag(f.path, f"damaged index entry: {damage}")
            damaged.add(f.path)
    _check_shard_ends(index, sharder, report)
    _check_bytes(sharder, files, report, on_file, workers, damaged)
    return report


def _check_shard_ends(index: ReadOnlyIndex, sharder: ShardReader, report: VerifyReport) -> None:
    """Name the files of missing shards, and those reaching past a shard's end."""
    for shard in index.lookups.used_shards():
        if sharder.shard_exists(shard):
            end, reason = sharder.physical_shard_end(shard), "its shard file is cut short"
        else:
            end, reason = 0, "its shard file is missing"
        for path in index.lookups.files_ending_beyond(shard, end):
            report.flag(path, reason)


def _check_bytes(
    sharder: ShardReader,
    files: Sequence[BarecatFileInfo],
    report: VerifyReport,
    on_file: OnFile | None,
    workers: int,
    damaged: set[str],
) -> None:
    """CRC32C of every file not already flagged; ``damaged`` rows' numbers are not used."""
    lock = threading.Lock()

    def check(run: Sequence[BarecatFileInfo]) -> None:
        for f in run:
            good = f.path in report.reasons or _bytes_match(sharder, f)
            with lock:
                if not good:
                    report.flag(f.path, "CRC32C mismatch")
                report.files_checked += 1
                if f.path not in damaged:
                    report.bytes_checked += f.stored_size
                    report.files_unchecked += f.crc32c is None and f.path not in report.reasons
                if on_file is not None:
                    on_file(f)

    if workers <= 1 or len(files) < 2:
        check(files)
        return
    step = -(-len(files) // workers)
    with ThreadPoolExecutor(workers) as pool:
        for done in [pool.submit(check, files[i : i + step]) for i in range(0, len(files), step)]:
            done.result()


def _bytes_match(sharder: ShardReader, f: BarecatFileInfo) -> bool:
    shard, offset, size, crc = f.address
    if crc is None:
        return True
    try:
        return sharder.crc_of_range(shard, offset, size) == crc
    except (OSError, BarecatError):  # missing shard, truncated bytes
        return False
