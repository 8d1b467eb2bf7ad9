"""Rounds of file moves inside one archive, in the order that survives any crash.

A maintenance operation that moves stored files (defrag, reshard) plans moves into space
that no committed index row references, then makes them in one *round*:

1. copy the bytes to their new places (checking each file's CRC32C on the way);
2. ``fsync`` the shards written to (and their directory when a shard was created);
3. point the rows at the copies and commit the index.

Only after step 3 is the old space free for a later round or a truncation. A kill before
step 3 leaves the old rows pointing at untouched old bytes (the copies are garbage past
or between files); a kill after it leaves the new rows pointing at durable copies. Also
here: the end of an operation (cut shards after their last file, delete unused ones),
the way back after an error, and the checks before starting. Works on (Index, Sharder),
its checkpoints and write position through the write session (``writing.py``); no SQL
and no file I/O of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from barecat.exceptions import BarecatError, ReadOnlyBarecatError
from barecat.index import Index
from barecat.index.placement import (
    Placement,
    count_empty_files,
    park_empty_files,
    set_addresses,
    shard_ends,
)
from barecat.ops.writing import WriteSession
from barecat.shards import Sharder
from barecat.shards.moving import copy_files

OnProgress = Callable[[int, int], None]
"""Told ``(files, nbytes)`` since the last call: files settled and bytes copied."""

ROUND_BYTES = 256 << 20  # bytes copied per round (one fsync and one commit each)
ROUND_FILES = 50_000
ROUND_SECONDS = 2.0  # also commit this often, so progress survives a crash


@dataclass(slots=True)
class Tally:
    """What the rounds of one operation added up to."""

    files_moved: int = 0
    bytes_moved: int = 0
    rounds: int = 0  # index commits, each after an fsync of the copies
    corrupt_files: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Move:
    file: Placement
    shard: int
    offset: int


class Round:
    """The moves planned since the last commit.

    While a move is planned, its source is still what the committed row points at, so
    it must not be written over: ``first_source`` tells, per shard, where the lowest
    planned source starts (sources are planned in ascending order, or from the end
    backwards by a caller that never targets them).
    """

    def __init__(self) -> None:
        self.moves: list[Move] = []
        self.nbytes = 0
        self.first_source: dict[int, int] = {}
        self.started = time.monotonic()

    def __bool__(self) -> bool:
        return bool(self.moves)

    def add(self, f: Placement, shard: int, offset: int) -> None:
        self.moves.append(Move(f, shard, offset))
        self.nbytes += f.size
        known = self.first_source.get(f.shard)
        if known is None or f.offset < known:
            self.first_source[f.shard] = f.offset

    def is_full(self) -> bool:
        return (
            self.nbytes >= ROUND_BYTES
            or len(self.moves) >= ROUND_FILES
            or time.monotonic() - self.started >= ROUND_SECONDS
        )

    def commit(self, index: Index, sharder: Sharder, buffer: bytearray, tally: Tally) -> int:
        """Copy, fsync, commit (in that order); returns the bytes copied."""
        if not self.moves:
            return 0
        shards_before = sharder.num_shards
        copied = 0
        for run in _destination_runs(self.moves):
            sources = [(m.file.shard, m.file.offset, m.file.size) for m in run]
            crcs = copy_files(sharder, sources, run[0].shard, run[0].offset, buffer)
            for m, crc in zip(run, crcs, strict=True):
                copied += m.file.size
                if m.file.crc32c is not None and crc != m.file.crc32c:
                    tally.corrupt_files.append(m.file.path)
        set_addresses(
            index, [(rowid, m.shard, m.offset) for m in self.moves for rowid in m.file.rowids]
        )
        WriteSession(index, sharder).checkpoint(
            {m.shard for m in self.moves}, new_shards=sharder.num_shards != shards_before
        )
        tally.rounds += 1
        tally.files_moved += sum(1 + len(m.file.sharers) for m in self.moves)
        tally.bytes_moved += copied
        return copied


def _destination_runs(moves: list[Move]) -> list[list[Move]]:
    """Moves grouped into back-to-back destination runs, each copied as one."""
    runs: list[list[Move]] = []
    for m in moves:
        last = runs[-1][-1] if runs else None
        if last is not None and last.shard == m.shard and last.offset + last.file.size == m.offset:
            runs[-1].append(m)
        else:
            runs.append([m])
    return runs


def cut_shard(index: Index, sharder: Sharder, shard: int, end: int) -> None:
    """Truncate ``shard`` at ``end``, past which no committed non-empty file lies; empty
    files there are parked first, so every row stays within its shard's bytes."""
    if park_empty_files(index, shard, end):
        index.connection.commit()
    if sharder.physical_shard_end(shard) > end:
        sharder.truncate_shard(shard, end)


def finish(index: Index, sharder: Sharder, on_progress: OnProgress | None) -> None:
    """Park stray empty files, cut every shard after its last file and delete the shards
    past the last used one.

    Runs after the final commit, so only bytes no committed row references go. Leaves
    the write position at the end of the last file, where the archive appends next.
    """
    guarded = sharder.guarded
    if park_empty_files(index):
        index.connection.commit()
    if on_progress is not None and (empties := count_empty_files(index)):
        on_progress(empties, 0)
    ends = shard_ends(index)
    last = max(ends, default=0)
    for shard in range(min(sharder.num_shards, last + 1)):
        end = ends.get(shard, 0)
        if sharder.physical_shard_end(shard) > end:
            sharder.truncate_shard(shard, end)
    if guarded and not any(sharder.is_guard(s) for s in range(last + 1)):
        sharder.place_guard(last + 1)  # (files share bytes: the guard stays, see shards.guard)
        sharder.remove_shards_from(last + 2)
    else:
        sharder.remove_shards_from(last + 1)
    WriteSession(index, sharder).resync(ends)


def resync_after_failure(index: Index, sharder: Sharder) -> None:
    """Drop an unfinished round's index changes; append after the last committed file."""
    index.connection.rollback()
    WriteSession(index, sharder).resync(shard_ends(index))


def require_movable(index: Index, sharder: Sharder, what: str) -> None:
    """Moving files needs an index and shards open for writing, not append-only, and no
    shard linked to a file the archive does not own (``merge --symlink``, ``convert
    --wrap``): packing would write into it."""
    if index.connection.readonly or sharder.readonly:
        raise ReadOnlyBarecatError(f"Cannot {what}: the archive is open read-only")
    if sharder.append_only:
        raise BarecatError(f"Cannot {what}: the archive is open append-only")
    linked = [
        s for s in range(sharder.num_shards) if sharder.is_foreign(s) and not sharder.is_guard(s)
    ]
    if linked:
        raise BarecatError(
            f"Cannot {what} {sharder.path}: shard {linked[0]} is a link to a file this archive "
            "does not own (another archive's shard from 'merge --symlink', or a tar/zip from "
            "'convert --wrap'), which must not be written; make a copy with 'barecat merge' "
            "without --symlink first"
        )
