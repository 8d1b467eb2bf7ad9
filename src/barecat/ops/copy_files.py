"""Copying chosen files of one archive into another: bytes in runs, rows in one statement.

The core that merge and subset share. The source index is attached to the target's (see
``Index.merge_source``), so choosing rows and inserting them are set operations. Bytes
move in *runs*: neighbouring chosen files of a source shard are copied with one kernel
call (``WriteSession.copy_from``), holes and left-out files are squeezed out, and a run
never straddles a target shard boundary. Each run becomes one :class:`Relocation`, a
shift that the index applies to every file in it. In link mode nothing is copied: the
target gets symlinks to the source's shards under new numbers and the rows keep their
offsets.

Crash ordering (per source, all or nothing): conflicts are checked before anything is
written; bytes go past the target's logical end, never over a committed file; the new
shards are fsynced (link mode: the directory holding the new links); only then does one
index transaction insert the rows and commit. A kill before that commit leaves bytes or
links no row points at, which the next writer overwrites or ignores; a kill after it
leaves every row pointing at durable bytes. An error rolls the index back and cuts the
bytes (or removes the links) again, so the target is as it was before this source.
Its bytes and rows go through the archive's write session (``writing.py``). Imports
``index``, ``shards``, ``ops.writing`` and ``exceptions``; no SQL, no file I/O of its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from barecat.exceptions import BarecatError, BarecatIntegrityError, FileTooLargeBarecatError
from barecat.index import Index, ReadOnlyIndex
from barecat.index.merging import FAR, MergeSource, Relocation, SourceTotals
from barecat.ops.writing import WriteSession
from barecat.sealing.settings import SealingSettings
from barecat.shards import Sharder
from barecat.shards.reading import ShardReader

ProgressCallback = Callable[[int, int], None]
"""Called with (files, bytes) done since the last call."""
SealLike = Callable[[SealingSettings], None]
"""Makes the empty plain target sealed like the source (the archive's ``seal_like``):
for an encrypted source, with the passphrase the target's index digest needs."""
CheckSource = Callable[[ReadOnlyIndex, SealingSettings], None]
"""Raises unless an encrypted source's file rows match its own index digest, when the
key is at hand (the archive's ``check_source_rows``): the rows are copied as they are,
and the target's digest then follows them, so a row put back in the source must be
refused before it is copied."""

MAX_RUN = 64 << 20
"""Largest run copied in one go: bounds the time between progress reports."""


@dataclass(slots=True)
class CopyStats:
    """What one copy (or several, added up) did."""

    files: int = 0
    bytes: int = 0
    skipped: int = 0
    shards_linked: int = 0

    def add(self, other: CopyStats) -> None:
        self.files += other.files
        self.bytes += other.bytes
        self.skipped += other.skipped
        self.shards_linked += other.shards_linked


def copy_files_from(
    index: Index,
    sharder: Sharder,
    src_index: ReadOnlyIndex,
    src_sharder: ShardReader,
    *,
    files: Iterable[str] | None = None,
    dirs: Iterable[str] | None = None,
    skip_existing: bool = False,
    prefix: str = "",
    link: bool = False,
    move: bool = False,
    on_progress: ProgressCallback | None = None,
    seal_like: SealLike | None = None,
    check_source: CheckSource | None = None,
) -> CopyStats:
    """Add the source's files (``files``: only these paths) and directories (``dirs``:
    only these, plus every parent the files need) to the target, under ``prefix``.

    A path the target already has raises ``FileExistsBarecatError`` naming it, unless
    ``skip_existing`` (then the target's entry is kept and counted as skipped). ``link``
    makes the target's new shards symlinks to the source's instead of copies; ``move``
    renames the source's shards into the target (the source is consumed: for temporary
    part-archives, which are discarded whatever happens). A sealed source's bytes need a
    target sealed alike: an empty plain one becomes so (``seal_like``, or for a source that
    is not encrypted, its config rows copied); an encrypted target that keeps an index
    digest must have the key at hand (``Index.keep_file_digest``), since its digest
    follows every file it takes. ``check_source`` checks an encrypted source's rows
    against its own digest first (nothing is changed if it raises).
    """
    _refuse_same_archive(index, src_index)
    _match_sealing(index, src_index, prefix, seal_like, check_source)
    writes = WriteSession(index, sharder)
    sharder.sync()  # merge_source commits what the caller wrote: its bytes go first
    start = writes.mark()
    first_new_shard = sharder.num_shards
    with index.connection.merge_source(src_index.connection.file, prefix) as source:
        source.select(files, dirs, skip_existing)
        source.check_conflicts()
        totals = source.totals()
        stats = CopyStats(totals.files, totals.size, totals.skipped)
        try:
            if link or move:
                relocations = _link_shards(src_index, src_sharder, sharder, move)
                writes.skip_shards_from(first_new_shard)
                stats.shards_linked = len(relocations)
                if on_progress is not None:
                    on_progress(totals.files, totals.size)
            else:
                _check_fits(source, totals, sharder.shard_size_limit)
                relocations = _copy_runs(source, writes, src_sharder, on_progress)
            source.insert(relocations, totals.files)
            writes.checkpoint(new_shards=link or move)
            if on_progress is not None and totals.skipped:
                on_progress(totals.skipped, 0)
        except BaseException:
            index.connection.rollback()
            if link or move:
                sharder.remove_shards_from(first_new_shard)
            writes.roll_back(start)
            raise
    return stats


def _match_sealing(
    index: Index,
    src_index: ReadOnlyIndex,
    prefix: str,
    seal_like: SealLike | None,
    check_source: CheckSource | None,
) -> None:
    """Sealed bytes are copied as they are, so both archives must read them alike: an
    empty plain target becomes sealed like its source; otherwise the sealing must agree
    (``SealingSettings.can_take_bytes_from``). An encrypted source's rows are checked
    (``check_source``) before the target changes at all."""
    source = sealing_settings(src_index)
    target = sealing_settings(index)
    taken = source if target is None else None  # the sealing an empty plain target takes
    if taken is not None and index.lookups.num_files:
        kind = "encrypted" if taken.encrypted else "compressed"
        raise BarecatError(
            f"{src_index.connection.path}: its files are {kind}, and "
            f"{index.connection.path} is a plain archive with files; copy them into a sealed "
            "archive or a new one"
        )
    if taken is not None and taken.encrypted and seal_like is None:
        raise BarecatError(_NEEDS_KEY.format(index.connection.path))
    like = target or taken
    why = None if like is None else like.can_take_bytes_from(source, prefix)
    if why is not None:
        raise BarecatError(
            f"Cannot copy {src_index.connection.path} into {index.connection.path}: {why}"
        )
    if (
        taken is None
        and index.connection.stored_file_digest() is not None
        and not index.edits.file_digest_kept
    ):
        raise BarecatError(_NEEDS_KEY.format(index.connection.path))
    if check_source is not None and source is not None and source.encrypted:
        check_source(src_index, source)
    if taken is not None and seal_like is not None:
        seal_like(taken)
    elif taken is not None:
        index.edits.enable_sealing(taken.to_config())


_NEEDS_KEY = (
    "{}: taking encrypted files needs the passphrase, since an encrypted archive "
    "authenticates its list of files (open the target with its passphrase)"
)


def sealing_settings(index: ReadOnlyIndex) -> SealingSettings | None:
    """The archive's sealing, or None for a plain archive."""
    return (
        SealingSettings.from_config(index.connection.sealing_config())
        if index.connection.sealed
        else None
    )


def _refuse_same_archive(index: Index, src_index: ReadOnlyIndex) -> None:
    with contextlib.suppress(OSError):
        if os.path.samefile(index.connection.path, src_index.connection.path):
            raise BarecatError(f"Cannot merge archive {index.connection.path} into itself")


def _check_fits(source: MergeSource, totals: SourceTotals, limit: int) -> None:
    if totals.largest > limit:
        raise FileTooLargeBarecatError(
            f"{source.largest_file()}: {totals.largest} bytes exceed the target's shard size limit "
            f"of {limit} bytes"
        )


@dataclass(slots=True)
class _Run:
    """Neighbouring source files copied together, and where in the target they will land."""

    shard: int
    start: int
    end: int
    land: int
    files: int = 1
    shared: bool = False
    """Files in it share bytes (or overlap)."""

    def extend(self, shard: int, offset: int, size: int, limit: int) -> bool:
        """Take the next file (by address) into this run if it may; False: start a new one."""
        if shard != self.shard or offset > self.end:
            return False  # another shard, or a hole (or left-out files) to squeeze out
        end = max(self.end, offset + size)
        span = end - self.start
        if offset < self.end:  # overlapping files must stay together
            self.shared = True
            if self.land + span > limit:
                if span > limit:
                    raise FileTooLargeBarecatError(
                        f"Files overlapping at shard {shard} offset {offset} span {span} "
                        f"bytes, more than the shard size limit of {limit}"
                    )
                self.land = 0  # the whole run moves to a fresh shard
        elif end > self.end and (self.land + span > limit or span > MAX_RUN):
            return False  # contiguous, but full: split here
        self.end = end
        self.files += 1
        return True


def _copy_runs(
    source: MergeSource,
    writes: WriteSession,
    src_sharder: ShardReader,
    on_progress: ProgressCallback | None,
) -> list[Relocation]:
    """Copy the chosen files' bytes run by run; returns the relocations, by source address.
    Where files share bytes (a hard link stored once), so will their copies: the target
    is guarded for that first (``WriteSession.guard_shared_bytes``)."""
    limit = writes.sharder.shard_size_limit
    relocations: list[Relocation] = []
    run: _Run | None = None

    def flush(run: _Run) -> None:
        if run.shared:
            writes.guard_shared_bytes()
        size = run.end - run.start
        dst_shard, dst_start = writes.copy_from(src_sharder, (run.shard, run.start, size))
        if dst_start != run.land:
            raise BarecatIntegrityError("Run landed at an unplanned offset")  # a bug, not data
        relocations.append(Relocation(run.shard, run.start, run.end, FAR, dst_shard, dst_start))
        if on_progress is not None:
            on_progress(run.files, size)

    with contextlib.closing(source.spans()) as spans:
        for shard, offset, size in spans:
            if run is not None and run.extend(shard, offset, size, limit):
                continue
            if run is not None:
                flush(run)
            here = writes.position[1]
            run = _Run(shard, offset, offset + size, here if here + size <= limit else 0)
    if run is not None:
        flush(run)
    return _bounded(relocations)


def _bounded(relocations: list[Relocation]) -> list[Relocation]:
    """Each relocation covers source offsets up to the next one's start in its shard."""
    out = []
    for i, r in enumerate(relocations):
        after = relocations[i + 1] if i + 1 < len(relocations) else None
        bound = after.src_start if after is not None and after.src_shard == r.src_shard else FAR
        out.append(Relocation(r.src_shard, r.src_start, r.src_end, bound, r.dst_shard, r.dst_start))
    return out


def _link_shards(
    src_index: ReadOnlyIndex, src_sharder: ShardReader, sharder: Sharder, move: bool = False
) -> list[Relocation]:
    """Give each source shard a new number in the target as a symlink to it, or (``move``)
    the shard itself, renamed (an empty file of the target's own where the source has a
    gap in its numbering)."""
    used = set(src_index.lookups.used_shards())
    count = max(src_sharder.num_shards, max(used, default=-1) + 1)
    missing = [i for i in used if not src_sharder.shard_exists(i)]
    if missing:
        raise BarecatIntegrityError(
            f"Shard {src_sharder.get_shard_path(missing[0])} is missing but files point into it"
        )
    relocations = []
    for i in range(count):
        if src_sharder.shard_exists(i) and move:
            number = sharder.adopt_shard(src_sharder.shard_file(i))
        elif src_sharder.shard_exists(i):
            number = sharder.link_shard(src_sharder.shard_file(i))
        else:
            number = sharder.add_empty_shard()
        relocations.append(Relocation(i, 0, FAR, FAR, number, 0))
    return relocations
