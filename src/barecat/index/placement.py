"""Where files' bytes sit in the shards, for operations that move them (defrag, reshard).

Files are read by storage address in pages with keyset pagination on
``(shard, offset, rowid)``, so a caller may move rows between pages without the next
page repeating or skipping any file; holes and per-shard ends are computed in SQL; many
files' addresses are rewritten by rowid in one statement. Only ``shard`` and ``offset``
ever change here, so no statistics trigger fires and nothing is committed: the caller
commits once the moved bytes are durable. Imports ``index.index`` and ``exceptions``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from barecat.index.connection import select
from barecat.index.index import Index, ReadOnlyIndex

AddressKey = tuple[int, int, int]
"""A total order on files by storage place: (shard, offset, rowid)."""

_COLUMNS = "rowid, path, shard, offset, ifnull(size, 0), crc32c"


@dataclass(slots=True)
class Placement:
    """One file's place in the shards, with what is needed to move and check it."""

    rowid: int
    path: str
    shard: int
    offset: int
    size: int
    crc32c: int | None
    sharers: list[Placement] = field(default_factory=list)
    """Later files (by rowid) with the same bytes exactly: the same shard, offset and
    size (a hard link stored once). A move takes them along: their rows follow."""

    @property
    def rowids(self) -> list[int]:
        """This file's row and those of its sharers."""
        return [self.rowid, *(s.rowid for s in self.sharers)]

    def shares_with(self, other: Placement) -> bool:
        """Whether ``other`` holds the same bytes exactly (never for empty files)."""
        return self.size > 0 and (self.shard, self.offset, self.size) == (
            other.shard,
            other.offset,
            other.size,
        )

    @property
    def key(self) -> AddressKey:
        return (self.shard, self.offset, self.rowid)

    @property
    def end(self) -> int:
        return self.offset + self.size


def placements_after(index: ReadOnlyIndex, after: AddressKey, limit: int) -> list[Placement]:
    """Up to ``limit`` files whose key is above ``after``, in ascending storage order.

    ``(shard, offset, -1)`` as ``after`` starts at that address (rowids are positive).
    """
    return _placements(index, ">", "", after, limit)


def placements_before(index: ReadOnlyIndex, before: AddressKey, limit: int) -> list[Placement]:
    """Up to ``limit`` files whose key is below ``before``, in descending storage order."""
    return _placements(index, "<", " DESC", before, limit)


def _placements(
    index: ReadOnlyIndex, beyond: str, direction: str, key: AddressKey, limit: int
) -> list[Placement]:
    """Up to ``limit`` files whose key is ``beyond`` (``<``, ``>``) ``key``, walked in
    ``direction`` (``""``, ``" DESC"``)."""
    order = ", ".join(column + direction for column in ("shard", "offset", "rowid"))
    rows = select(
        index.connection.settled_conn(),
        f"SELECT {_COLUMNS} FROM files WHERE (shard, offset, rowid) {beyond} (?, ?, ?) "
        f"ORDER BY {order} LIMIT ?",
        (*key, limit),
    ).fetchall()
    return [Placement(*row) for row in rows]


def holes(index: ReadOnlyIndex) -> list[tuple[int, int, int]]:
    """(shard, offset, size) of every stretch no file uses, before or between files.

    Space after a shard's last file is not included (it has no upper bound here). A
    running maximum of ends, not the neighbour's end, so empty files sharing an offset
    with a neighbour never make a hole appear.
    """
    rows = select(
        index.connection.settled_conn(),
        "SELECT shard, prev_end, offset - prev_end FROM ("
        " SELECT shard, offset, ifnull(max(offset + ifnull(size, 0)) OVER ("
        "  PARTITION BY shard ORDER BY offset, rowid"
        "  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS prev_end"
        " FROM files) WHERE offset > prev_end ORDER BY shard, prev_end",
    ).fetchall()
    return [(int(s), int(o), int(n)) for s, o, n in rows]


def shard_ends(index: ReadOnlyIndex) -> dict[int, int]:
    """The logical end (one past the last used byte) of every shard that has files."""
    rows = select(
        index.connection.settled_conn(),
        "SELECT shard, max(offset + ifnull(size, 0)) FROM files GROUP BY shard",
    ).fetchall()
    return {int(shard): int(end) for shard, end in rows}


def end_before(index: ReadOnlyIndex, shard: int, offset: int) -> int:
    """One past the last byte used in ``shard`` by files starting below ``offset`` (or 0)."""
    row = select(
        index.connection.settled_conn(),
        "SELECT max(offset + ifnull(size, 0)) FROM files WHERE shard = ?1 AND offset = "
        "(SELECT max(offset) FROM files WHERE shard = ?1 AND offset < ?2)",
        (shard, offset),
    ).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def largest_file_size(index: ReadOnlyIndex) -> int:
    row = select(
        index.connection.settled_conn(), "SELECT ifnull(max(size), 0) FROM files"
    ).fetchone()
    return int(row[0])


def set_addresses(index: Index, moves: Sequence[tuple[int, int, int]]) -> None:
    """Point files at new places: ``(rowid, shard, offset)`` each; not committed.

    Sizes, paths and checksums stay, so directory statistics are untouched.
    """
    index.connection.require_writable()
    try:
        index.connection.settled_conn().executemany(
            "UPDATE files SET shard = ?2, offset = ?3 WHERE rowid = ?1", moves
        )
    except sqlite3.OperationalError as e:
        raise index.connection.edit_failed(e) from e


def park_empty_files(index: Index, shard: int | None = None, beyond: int = -1) -> int:
    """Point empty files at (0, 0) when they lie past the last byte of data in their
    shard (or in a shard without data), so they never keep a shard or its tail alive.

    With ``shard``, only the empty files of that shard past offset ``beyond`` (before
    the shard is cut there). Returns how many were parked; not committed.
    """
    index.connection.require_writable()
    if shard is not None:
        sql = (
            "UPDATE files SET shard = 0, offset = 0 WHERE ifnull(size, 0) = 0 "
            "AND shard = ? AND offset > ? AND (shard, offset) != (0, 0)"
        )
        return int(index.connection.settled_conn().execute(sql, (shard, beyond)).rowcount)
    return int(
        index.connection.settled_conn()
        .execute(
            "WITH ends AS (SELECT shard, max(offset + size) AS e FROM files WHERE size > 0 "
            "GROUP BY shard) "
            "UPDATE files SET shard = 0, offset = 0 WHERE ifnull(size, 0) = 0 "
            "AND (shard, offset) != (0, 0) AND offset > "
            "ifnull((SELECT e FROM ends WHERE ends.shard = files.shard), -1)"
        )
        .rowcount
    )


def count_empty_files(index: ReadOnlyIndex) -> int:
    sql = "SELECT count(*) FROM files WHERE ifnull(size, 0) = 0"
    return int(select(index.connection.settled_conn(), sql).fetchone()[0])
