"""Queries over every row of the index: whole-archive totals and the storage layout.

`IndexAggregates`, the base of the lookups part (:class:`~barecat.index.reading.IndexLookups`),
answers what counts and scans instead of looking one entry up: the numbers of files and directories
and the total size (from the root's statistics, recounted when they are off), which
shards are used and where each one's bytes end, the files a shortened shard cuts, byte
ranges that overlap, and the file stored last. Imports ``entries``, ``exceptions`` and
``barecat.index``'s own modules.
"""

from __future__ import annotations

from barecat.entries import BarecatFileInfo
from barecat.exceptions import FileNotFoundBarecatError
from barecat.index import query, treestats
from barecat.index.connection import select
from barecat.index.errors import guard_public_methods
from barecat.index.transactions import IndexConnection

_ADDRESSED = "typeof(offset) = 'integer' AND typeof(size) = 'integer'"
"""Rows whose bytes have a place: damaged ones (``query.address_problem``) end nowhere, and
``verify`` names them, so they neither move the write position nor overlap anything."""


ROOT_TOTAL_SQL = {
    column: f"SELECT {column} FROM dirs WHERE path = '' AND NOT EXISTS "
    "(SELECT 1 FROM config WHERE key = 'use_triggers' AND value_int IS NOT 1) LIMIT 1"
    for column in ("num_files_tree", "size_tree")
}
"""A total from the root's statistics, unless ``use_triggers`` is set to anything but 1
(as before: a missing row is taken as 1): one statement, all a ``len(bc)`` costs."""


class IndexAggregates:
    """Totals and storage-layout queries over all rows, on an index's ``connection``."""

    def __init__(self, connection: IndexConnection) -> None:
        self.connection = connection
        self.path = connection.path
        self._pool = connection.pool
        self.settled_conn = connection.settled_conn
        """The connection's :meth:`~IndexConnection.settled_conn` (bound once: a hot path)."""

    def _root_total(self, column: str, recount_sql: str) -> int:
        """A whole-archive total from the root's statistics (``column`` of
        :data:`ROOT_TOTAL_SQL`), recounted if they are off (the triggers that keep them
        are switched off: no row) or damaged (not an integer, or negative)."""
        conn = self.settled_conn()
        row = self._pool.one_row(conn, ROOT_TOTAL_SQL[column])
        if row is not None and type(value := row[0]) is int and value >= 0:
            return value
        return int(select(conn, recount_sql).fetchone()[0])

    @property
    def num_files(self) -> int:
        """The number of files in the index."""
        return self._root_total("num_files_tree", "SELECT count(*) FROM files")

    @property
    def num_dirs(self) -> int:
        """The number of directories in the index, the root included."""
        return int(select(self.settled_conn(), "SELECT count(*) FROM dirs").fetchone()[0])

    @property
    def total_size(self) -> int:
        """The total length in bytes of all files (their contents, unsealed)."""
        return self._root_total("size_tree", f"SELECT {query.SIZE_TOTAL} FROM files")

    @property
    def num_used_shards(self) -> int:
        """One past the highest shard number a file points into (0 when there are none)."""
        (top,) = select(self.settled_conn(), "SELECT max(shard) FROM files").fetchone()
        if top is not None and type(top) is not int:  # a damaged row (text sorts last)
            sql = "SELECT max(shard) FROM files WHERE typeof(shard) = 'integer'"
            (top,) = select(self.settled_conn(), sql).fetchone()
        return 0 if top is None else max(top + 1, 0)

    def logical_shard_end(self, shard: int) -> int:
        """One past the last byte any file uses in ``shard``, and at least the highest
        offset any (empty) file points at; 0 for an unused shard.

        An empty file may point anywhere, even inside another file's bytes (defrag parks
        them in holes), so the file at the highest offset need not end last. Non-empty
        files never overlap (or share the same bytes exactly), so the last of them by
        offset does: one descending index walk that stops at the first non-empty row,
        plus one max() seek.

        Args:
            shard: the shard number.

        Returns:
            The end offset (0 for an unused shard).
        """
        data_end = select(
            self.settled_conn(),
            f"SELECT offset + size FROM files WHERE shard = ? AND size > 0 AND {_ADDRESSED} "
            "ORDER BY offset DESC LIMIT 1",
            (shard,),
        ).fetchone()
        top = select(
            self.settled_conn(),
            f"SELECT offset FROM files WHERE shard = ? AND {_ADDRESSED} "
            "ORDER BY offset DESC LIMIT 1",
            (shard,),
        ).fetchone()
        return max(
            0 if data_end is None else int(data_end[0]),
            0 if top is None or top[0] is None else int(top[0]),
        )

    def used_shards(self) -> list[int]:
        """Shard numbers that at least one file points into, ascending (damaged rows, whose
        shard is not a non-negative integer, point into none).

        Returns:
            The shard numbers.
        """
        sql = (
            "SELECT DISTINCT shard FROM files WHERE typeof(shard) = 'integer' AND shard >= 0 "
            "ORDER BY shard"
        )
        return [r[0] for r in select(self.settled_conn(), sql)]

    def files_ending_beyond(self, shard: int, end: int) -> list[str]:
        """Paths in ``shard`` whose bytes reach past ``end`` (a shard cut short), by offset.

        Args:
            shard: the shard number.
            end: the shard's actual size.

        Returns:
            The paths of the files cut short, by offset.
        """
        rows = select(
            self.settled_conn(),
            f"SELECT path FROM files WHERE shard = ? AND offset + size > ? AND {_ADDRESSED} "
            "ORDER BY offset",
            (shard, end),
        )
        return [r[0] for r in rows]

    def find_overlaps(self) -> list[tuple[str, str]]:
        """(earlier file, file) pairs whose byte ranges overlap: each file that starts before
        some earlier file in its shard has ended, with its address-order predecessor.

        Files that share the same bytes exactly (one shard, offset and size: a hard link
        stored once) are one range here; a range that shares only part of another's
        bytes overlaps it.

        Returns:
            The overlapping pairs' paths (the first path of a shared range); empty when no
            bytes overlap.
        """
        sql = (
            "SELECT prev_path, path FROM (SELECT path, offset, "
            "lag(path) OVER w AS prev_path, "
            "max(offset + size) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) "
            "AS prev_end FROM (SELECT min(path) AS path, shard, offset, size FROM files "
            f"WHERE size > 0 AND {_ADDRESSED} GROUP BY shard, offset, size) "
            "WINDOW w AS (PARTITION BY shard ORDER BY offset, size)) WHERE offset < prev_end"
        )
        return [(r[0], r[1]) for r in select(self.settled_conn(), sql)]

    def has_shared_ranges(self) -> bool:
        """Whether two files share the same bytes (one shard, offset and size: a hard link
        stored once). One pass over every row.

        Returns:
            True if at least one range is shared.
        """
        sql = (
            f"SELECT 1 FROM files WHERE size > 0 AND {_ADDRESSED} "
            "GROUP BY shard, offset, size HAVING count(*) > 1 LIMIT 1"
        )
        return select(self.settled_conn(), sql).fetchone() is not None

    def find_inconsistencies(self) -> list[str]:
        """Every way the index disagrees with itself, as human-readable lines.

        Returns:
            The problems found; empty for a consistent index.
        """
        return treestats.find_inconsistencies(self.settled_conn())

    def get_last_file(self) -> BarecatFileInfo:
        """The file stored last (highest shard, then offset).

        Returns:
            Its record.

        Raises:
            FileNotFoundBarecatError: the index holds no file.
        """
        row = select(
            self.settled_conn(),
            f"SELECT {self.connection.file_columns} FROM files "
            "ORDER BY shard DESC, offset DESC, size DESC LIMIT 1",
        ).fetchone()
        if row is None:
            raise FileNotFoundBarecatError("(archive is empty)", "Last file")
        return query.file_from_row(row)


guard_public_methods(IndexAggregates, lambda part: part.path)
