"""Another archive's rows taken into this index, its shards already placed beside ours.

The zero-copy merge done by hand, as barecat 0.3.1's merge how-to does it: the caller
puts each shard of the source after this archive's shards (``ARCHIVE-shard-NNNNN``, a
symlink or a copy), then :meth:`Index.merge_from_other_barecat` adds the source's rows,
their shard numbers shifted by where the source's shard 0 now is. That place is the
source's shard count before the end of this archive's shard files; it is checked before
any row is written: it must lie past every shard this archive's own files use, and each
placed shard must be the source's (the same file, or a copy of the same size), so rows
never point at the wrong bytes. Sealed archives are refused (their rows need the
passphrase's checks that only ``Barecat.merge_from_other_barecat`` makes). Imports
``reading``, ``merging``, ``layout``, ``paths`` and ``exceptions``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from barecat.exceptions import BarecatError
from barecat.index.aggregates import IndexAggregates
from barecat.index.merging import FAR, Relocation
from barecat.index.transactions import IndexConnection
from barecat.layout import base_path, existing_shard_numbers, index_path, shard_path
from barecat.paths import normalize

if TYPE_CHECKING:
    from barecat.index.reading import IndexLookups


def merge_placed(
    db: IndexConnection,
    lookups: IndexLookups,
    source_path: str,
    prefix: str,
    ignore_duplicates: bool,
) -> None:
    """Add the rows of the archive at ``source_path`` (its base path or index file) to
    the index of ``db`` (its connection part) and ``lookups`` under ``prefix``; see the
    module's docstring. All or nothing.

    Raises:
        BarecatError: a sealed archive, or the source's shards are not in place.
        FileExistsBarecatError, MergeConflictBarecatError: as ``MergeSource.check_conflicts``.
    """
    src_base = base_path(source_path)
    src_index = index_path(src_base)
    src = IndexConnection(src_index, readonly=True)
    try:
        sealed, used = src.sealed, IndexAggregates(src).used_shards()
    finally:
        src.close()
    if sealed or db.sealed:
        raise BarecatError(
            f"Cannot merge the rows of {source_path} by hand: sealed (compressed or "
            "encrypted) archives are merged with Barecat.merge_from_other_barecat or "
            "barecat merge --symlink"
        )
    numbers = existing_shard_numbers(src_base)
    count = max([*numbers, *used], default=-1) + 1
    offset = _placed_offset(db.path, lookups, src_base, count, set(numbers), set(used))
    with db.merge_source(src_index, normalize(prefix)) as source:
        source.select(skip_existing=ignore_duplicates)
        source.check_conflicts()
        moves = [Relocation(i, 0, FAR, FAR, offset + i, 0) for i in range(count)]
        source.insert(moves, source.totals().files)
        db.commit()


def _placed_offset(
    path: str, lookups: IndexLookups, src_base: str, count: int, present: set[int], used: set[int]
) -> int:
    """Where the source's shard 0 was placed: ``count`` shards before this archive's last
    shard file. Raises unless every source shard is there and past our own files."""
    base = base_path(path)
    ours = existing_shard_numbers(base)
    own_end = max(lookups.used_shards(), default=-1) + 1
    offset = max(ours, default=-1) + 1 - count
    hint = (
        f"place the {count} shards of {src_base} after this archive's, as "
        f"{shard_path(base, own_end)} onwards (symlinks or copies), before merging its rows"
    )
    if offset < own_end:
        raise BarecatError(f"The shards of {src_base} are not in place: {hint}")
    for i in range(count):
        placed, original = shard_path(base, offset + i), shard_path(src_base, i)
        if i not in present:
            if i in used:
                raise BarecatError(f"{original} is missing, but files of {src_base} use it")
        elif not _same_bytes(placed, original):
            raise BarecatError(f"{placed} is not {original}: {hint}")
    return offset


def _same_bytes(placed: str, original: str) -> bool:
    """The placed shard is the original (a link to it, or a copy of its size)."""
    try:
        return os.path.samefile(placed, original) or (
            os.path.getsize(placed) == os.path.getsize(original)
        )
    except OSError:
        return False
