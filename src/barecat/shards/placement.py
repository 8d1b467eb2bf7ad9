"""Where new bytes go in an archive's shards: the one placement rule, which the write
session (``barecat.ops.writing``, the owner of the write rule and of the write position)
and ``Sharder.add`` (barecat 0.3.1's append, for callers that keep their own index)
both ask, so the two can never place a file differently.

- Bytes go at the write position, unless they would pass the shard size limit: then at
  the start of a fresh shard, the next number past the position's shard and past every
  shard on disk.
- A file larger than the limit fits nowhere: it is refused before a byte is written.
- Writing never goes on in a shard the archive must not write (one linked from another
  archive, the guard): it goes on at the start of a fresh shard.

Pure: it decides and writes nothing (the callers move the position and write). Imports
``exceptions`` only.
"""

from __future__ import annotations

from barecat.exceptions import FileTooLargeBarecatError

Position = tuple[int, int]
"""(shard, offset): a place in an archive's shards."""


def fresh_shard(shard: int, num_shards: int) -> int:
    """The shard that writing rolls over to from ``shard``, with ``num_shards`` shards on
    disk: the first number past both (no file may be there yet)."""
    return max(num_shards, shard + 1)


def room(position: Position, size: int, limit: int, num_shards: int) -> Position:
    """Where ``size`` bytes go when the write position is ``position``.

    Args:
        position: the write position (shard, offset).
        size: the bytes to place.
        limit: the shard size limit.
        num_shards: one past the highest shard number on disk.

    Returns:
        ``position`` if the bytes end at or before ``limit`` there, else the start of
        :func:`fresh_shard`.

    Raises:
        FileTooLargeBarecatError: ``size`` is over ``limit`` (it fits in no shard).
    """
    if size > limit:
        raise FileTooLargeBarecatError(
            f"File of {size} bytes exceeds the shard size limit of {limit} bytes"
        )
    shard, offset = position
    if offset + size > limit:
        return fresh_shard(shard, num_shards), 0
    return position


def going_on(end: Position, writable: bool, num_shards: int) -> Position:
    """Where writing goes on after ``end``, the end of the last bytes written (the last
    file the index knows, or a shard's physical end): there if that shard is
    ``writable`` by this archive, else at the start of :func:`fresh_shard`."""
    return end if writable else (fresh_shard(end[0], num_shards), 0)


__all__ = ["Position", "fresh_shard", "going_on", "room"]
