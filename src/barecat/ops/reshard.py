"""Resharding: the same files in shards of a new size limit, crash-safely.

This is a full defrag (``compaction.py``, ``rounds.py``) with the new limit as the
shards' capacity: files are packed in storage order from the front, so raising the
limit pulls later shards' files into the room now free at the end of earlier ones, and
lowering it relocates whatever lies past the new limit to new shards at the end of the
archive (each relocated run keeps its order). Holes are squeezed out on the way.

The limit stored in the index changes at the moment that keeps it true for every state
a crash could leave behind: before any move when it grows (shards only ever grow up to
the new limit), after the last move when it shrinks (until then some shard may still be
longer than the new limit, never longer than the old one).

Works on (Index, Sharder): no SQL and no shard I/O of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from barecat.exceptions import FileTooLargeBarecatError
from barecat.index import Index
from barecat.index.placement import largest_file_size
from barecat.ops.compaction import Compactor
from barecat.ops.defrag import DefragResult, record_outcome
from barecat.ops.rounds import OnProgress, finish, require_movable, resync_after_failure
from barecat.shards import Sharder


@dataclass(slots=True)
class ReshardResult(DefragResult):
    """What a reshard did: a defrag's figures plus the old and new limits."""

    old_limit: int = 0
    new_limit: int = 0


def reshard(
    index: Index,
    sharder: Sharder,
    shard_size_limit: int,
    on_progress: OnProgress | None = None,
) -> ReshardResult:
    """Reorganize into shards of at most ``shard_size_limit`` bytes and store that limit.

    Refused (nothing changed) if some file is larger than the new limit.
    """
    require_movable(index, sharder, "reshard")
    if shard_size_limit <= 0:
        raise ValueError(f"Shard size limit must be positive, not {shard_size_limit}")
    largest = largest_file_size(index)
    if largest > shard_size_limit:
        raise FileTooLargeBarecatError(
            f"A file of {largest} bytes does not fit in shards of {shard_size_limit} bytes"
        )
    started = time.monotonic()
    old = index.connection.shard_size_limit
    result = ReshardResult(
        physical_size_before=sharder.total_physical_size_stat,
        shards_before=sharder.num_shards,
        old_limit=old,
        new_limit=shard_size_limit,
    )
    if shard_size_limit >= old:
        index.connection.shard_size_limit = shard_size_limit
    sharder.shard_size_limit = shard_size_limit
    try:
        compactor = Compactor(index, sharder, shard_size_limit, on_progress=on_progress)
        compactor.run()
        finish(index, sharder, on_progress)
    except BaseException:
        resync_after_failure(index, sharder)
        sharder.shard_size_limit = index.connection.shard_size_limit
        raise
    index.connection.shard_size_limit = shard_size_limit
    record_outcome(result, compactor.tally, sharder, started)
    return result
