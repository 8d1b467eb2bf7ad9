"""Bringing an archive back to a consistent state after a crash or a partial copy.

What repair may change, and why it is safe: bytes past the last byte any file uses in a
shard belong to no committed file (a crashed or refused write), so they are cut off;
directory rows and statistics are derived data, so they are recreated from the files.
Files whose bytes are missing or fail their CRC32C are only reported, unless asked to
drop them from the index; their bytes are left where they are. Nothing that the index
references and that verifies is ever removed. Running it twice changes nothing the second
time. An archive whose files share bytes without a guard shard (one barecat 0.3.1's own
merge made from such an archive) is given one, so 0.3.1 does not write it
(``barecat.shards.guard``). Works on (Index, Sharder); no SQL and no shard I/O of its
own. Schema objects barecat did not make keep an archive from opening at all, so
:func:`drop_foreign_schema` removes them by path, before the archive is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from barecat.index import Index, schema_check
from barecat.layout import base_path, index_path
from barecat.ops.verify import OnFile, VerifyReport, verify_archive
from barecat.shards import Sharder


@dataclass(slots=True)
class RepairResult:
    """What repair did, and what it found still wrong."""

    bytes_truncated: int = 0
    stats_fixed: list[str] = field(default_factory=list)
    bad_files: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    remaining_problems: list[str] = field(default_factory=list)
    guarded: bool = False
    """Files share bytes and a guard shard was missing: one was added."""

    @property
    def changed(self) -> bool:
        return bool(self.bytes_truncated or self.stats_fixed or self.dropped or self.guarded)


def repair(
    index: Index,
    sharder: Sharder,
    *,
    drop_bad: bool = False,
    workers: int = 1,
    on_file: OnFile | None = None,
) -> RepairResult:
    """Truncate unreferenced shard tails, rebuild directory data, find (and with
    ``drop_bad`` remove from the index) files whose bytes are missing or corrupt."""
    result = RepairResult()
    result.bytes_truncated = _cut_unreferenced_tails(index, sharder)
    if not sharder.guarded and index.lookups.has_shared_ranges():
        sharder.add_guard()
        result.guarded = True
    before = index.lookups.find_inconsistencies()
    if before:
        index.edits.update_dirs()
        index.edits.update_treestats()
        result.stats_fixed = before
    report: VerifyReport = verify_archive(index, sharder, on_file=on_file, workers=workers)
    result.bad_files, result.reasons = report.bad_files, report.reasons
    if drop_bad and report.bad_files:
        for path in report.bad_files:
            index.edits.remove_file(path)
        result.dropped = list(report.bad_files)
    sharder.sync()
    index.connection.commit()
    result.remaining_problems = index.lookups.find_inconsistencies()
    result.remaining_problems += [
        f"bytes of {b!r} overlap those of {a!r}" for a, b in index.lookups.find_overlaps()
    ]
    return result


def _cut_unreferenced_tails(index: Index, sharder: Sharder) -> int:
    cut = 0
    for shard in range(sharder.num_shards):
        if not sharder.shard_exists(shard) or sharder.is_foreign(shard):
            continue  # another archive's shard (merge --symlink) is never cut from here
        end = index.lookups.logical_shard_end(shard)
        size = sharder.physical_shard_end(shard)
        if size > end:
            sharder.truncate_shard(shard, end)
            cut += size - end
    return cut


def drop_foreign_schema(path: str) -> list[tuple[str, bool]]:
    """Remove from the index of the archive at ``path`` the triggers, views, virtual
    tables and indexes that barecat did not make and that could run inside its
    statements (``barecat.index.schema_check``): the archive refuses to open while it
    holds them. One of barecat's own triggers or indexes found with other SQL is made
    again as barecat makes it. Nothing else is changed. ``barecat repair`` does this
    first.

    Args:
        path: the archive (its base path or index file).

    Returns:
        (``trigger 'x' on files``, whether it was made again) for each object removed;
        empty if there was none.

    Raises:
        ArchiveLockedBarecatError: a writer has the archive open.
        CorruptIndexBarecatError: one of barecat's own tables is defined otherwise
            (removing it would remove the rows), or an object cannot be removed;
            nothing was changed.
    """
    index = index_path(base_path(path))
    if not os.path.isfile(index):
        return []  # (opening the archive says what is wrong)
    return schema_check.drop_foreign(index)
