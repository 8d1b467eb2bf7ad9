"""Bringing an archive made by an older barecat up to schema 0.3, in place and atomically.

Why a new file rather than ALTER TABLE: the 0.2 tables differ in their definitions (path
as PRIMARY KEY, no separate unique index) and the unversioned layout in nearly
everything, and rebuilding lets the old index stay untouched until the last moment. The
steps: lock out writers, build a schema-0.3 index beside the old one
(``INDEX.upgrading``, see ``barecat.index.migrate``), fill in CRC32C from the shards when
the old layout had none (``workers`` threads; the unversioned layout's zlib CRC-32, where
present, is checked on the way), recompute directory statistics, open the result with
the normal reader and check it, then hard-link the old index to ``INDEX.old`` and
``os.replace`` the new one over ``INDEX``. A kill at any moment leaves ``INDEX`` either
the old file or the complete new one; leftovers (``.upgrading``) are deleted by the next
run. The index keeps its name (``ARCHIVE`` or the older ``ARCHIVE-sqlite-index``), as the
reference's upgrade does; shard files are only read.

Library code: progress through callbacks, the outcome as an :class:`UpgradeResult`.
No SQL of its own; shard bytes are read through a :class:`Sharder`.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice

from barecat.checksum import crc32c
from barecat.exceptions import (
    BarecatError,
    CorruptIndexBarecatError,
    SchemaVersionBarecatError,
)
from barecat.index import Index
from barecat.index.migrate import (
    CURRENT_VERSION,
    SEALED_VERSION,
    TEMP_SUFFIX,
    BuildReport,
    FileToChecksum,
    UpgradeBuild,
    format_version,
    held_for_upgrade,
    install_index,
)
from barecat.layout import archive_not_found, base_path, index_path
from barecat.shards import Sharder

OnBegin = Callable[[tuple[int, int], int], None]
"""Called once the old version is known: (old version, number of files whose bytes will
be read to compute checksums; 0 when only the index is rewritten)."""
OnFile = Callable[[int], None]
"""Called with a file's size after its checksum was computed."""


BACKUP_SUFFIX = ".old"
_BATCH = 4096  # files per round of parallel checksumming
_READ_CHUNK = 1 << 20


@dataclass(slots=True)
class UpgradeResult:
    """What an upgrade did. ``upgraded`` is False when the index was already current.

    ``bad_files`` (with ``reasons``) lists files whose bytes could not be read or did not
    match the old index's CRC-32 while checksums were computed; the upgrade still
    completes (their CRC32C is that of the bytes found, or empty if unreadable), and the
    backup is then kept whatever ``preserve_backup`` said, since it holds the old CRCs.
    """

    index_path: str
    from_version: tuple[int, int]
    to_version: tuple[int, int] = CURRENT_VERSION
    upgraded: bool = False
    backup_path: str | None = None
    num_files: int = 0
    num_dirs: int = 0
    checksums_computed: int = 0
    dirs_fixed: int = 0
    bad_files: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def upgrade(
    archive: str | os.PathLike[str],
    *,
    workers: int = 1,
    preserve_backup: bool = True,
    on_begin: OnBegin | None = None,
    on_file: OnFile | None = None,
) -> UpgradeResult:
    """Upgrade the archive's index to schema 0.3 in place; a no-op when it already is.

    Raises ``SchemaVersionBarecatError`` for an index newer than 0.3 and
    ``ArchiveLockedBarecatError`` when another writer has the archive open.
    """
    base = base_path(archive)
    idx = _existing_index(archive)
    real = os.path.realpath(idx)
    with held_for_upgrade(real) as version:
        result = UpgradeResult(index_path=idx, from_version=version)
        if version in (CURRENT_VERSION, SEALED_VERSION):
            return result
        if version > CURRENT_VERSION:
            raise SchemaVersionBarecatError(
                f"{idx} uses barecat index {format_version(version)}, newer than "
                f"{format_version(CURRENT_VERSION)}: nothing to upgrade; use a newer barecat"
            )
        build = UpgradeBuild.start(real, real + TEMP_SUFFIX, version)
        try:
            if on_begin is not None:
                on_begin(version, build.count_old_files() if build.needs_checksums else 0)
            build.copy_rows()
            if build.needs_checksums:
                with Sharder(base, readonly=True) as sharder:
                    _fill_checksums(build, sharder, max(1, workers), on_file, result)
            report = build.finish()
            _check_new_index(build.new_path, report, build.version)
            backup = real + BACKUP_SUFFIX
            install_index(real, build.new_path, backup)
        except BaseException:
            build.discard()
            raise
        result.num_files, result.num_dirs = report.num_files, report.num_dirs
        result.dirs_fixed = report.dirs_fixed
        result.upgraded = True
    if preserve_backup or result.bad_files:
        result.backup_path = backup if os.path.islink(idx) else idx + BACKUP_SUFFIX
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(backup)
    return result


def _existing_index(archive: str | os.PathLike[str]) -> str:
    idx = index_path(base_path(archive))
    if not os.path.isfile(idx):
        raise archive_not_found(idx, "Archive index")
    return idx


def _fill_checksums(
    build: UpgradeBuild,
    sharder: Sharder,
    workers: int,
    on_file: OnFile | None,
    result: UpgradeResult,
) -> None:
    """CRC32C of every file's bytes, in storage order, ``workers`` runs at a time."""
    rows = build.files_to_checksum()
    with ThreadPoolExecutor(workers) as pool:
        while batch := list(islice(rows, _BATCH)):
            step = -(-len(batch) // workers)
            runs = [batch[i : i + step] for i in range(0, len(batch), step)]
            for outcome in pool.map(lambda run: _checksum_run(sharder, run), runs):
                good = [(crc, path) for path, crc, _ in outcome if crc is not None]
                build.set_checksums(good)
                result.checksums_computed += len(good)
                for path, _, reason in outcome:
                    if reason is not None:
                        result.bad_files.append(path)
                        result.reasons[path] = reason
            if on_file is not None:
                for _, _, _, size, _ in batch:
                    on_file(size)


def _checksum_run(
    sharder: Sharder, run: Sequence[FileToChecksum]
) -> list[tuple[str, int | None, str | None]]:
    """(path, CRC32C or None if unreadable, problem or None) for each file of ``run``."""
    out: list[tuple[str, int | None, str | None]] = []
    for path, shard, offset, size, old_crc in run:
        try:
            new, old = _checksums(sharder, shard, offset, size)
        except (OSError, BarecatError) as e:
            out.append((path, None, f"bytes unreadable: {e}"))
            continue
        problem = None
        if old_crc is not None and old != old_crc & 0xFFFFFFFF:
            problem = "bytes differ from the CRC-32 the old index recorded"
        out.append((path, new, problem))
    return out


def _checksums(sharder: Sharder, shard: int, offset: int, size: int) -> tuple[int, int]:
    """(CRC32C, zlib CRC-32) of a byte range, read in bounded chunks."""
    new = old = done = 0
    while done < size:
        chunk = sharder.read_from_address(shard, offset + done, min(_READ_CHUNK, size - done))
        new = crc32c(chunk, new)
        old = zlib.crc32(chunk, old)
        done += len(chunk)
    return new, old


def _check_new_index(path: str, report: BuildReport, version: tuple[int, int]) -> None:
    """Open the new index as any reader would and insist it is consistent and holds
    every file of the old one."""
    with Index(path, readonly=True, lookup_table=False) as index:
        problems = index.lookups.find_inconsistencies()
        if index.connection.schema_version != CURRENT_VERSION:
            problems.append(f"the result has {format_version(index.connection.schema_version)}")
        got = (index.lookups.num_files, index.lookups.total_size)
        want = (report.old_num_files, report.old_total_size)
        if got != want:
            problems.append(f"(files, bytes) = {got} where the old index has {want}")
    if problems:
        raise CorruptIndexBarecatError(
            f"Upgrading from {format_version(version)} produced an inconsistent index "
            f"({'; '.join(problems[:5])}); the old index is left unchanged"
        )


__all__ = [
    "BACKUP_SUFFIX",
    "OnBegin",
    "OnFile",
    "TEMP_SUFFIX",
    "UpgradeResult",
    "format_version",
    "upgrade",
]
