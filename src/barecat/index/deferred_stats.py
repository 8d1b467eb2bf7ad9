"""Directory statistics for files added one at a time, applied together later.

The schema's triggers keep ``dirs`` right row by row: every file insert walks up its
directory chain, half of what a loop of ``bc[path] = data`` costs. A writer that adds
files one by one instead switches the triggers off inside its open transaction, inserts
each row on its own (so a duplicate or a file over a directory still fails at once, with
the usual error), keeps the directories and per-directory totals the rows need in memory,
and applies them with the set-based updates of a bulk insert (``barecat.index.bulk``)
before the index is used for anything else: any query, any other edit, the commit. So
no committed state, and no query of this connection, ever sees the statistics behind.

Deferring starts once a few files came in a row (``ADDS_BEFORE_DEFERRING``), so a loop
that reads the tree between its adds keeps the triggers. The checks the triggers would
make are made here: a file may not take a directory's path (also one only this batch
needs), and no directory a file needs may be a file. Switched-off triggers still cost a
sub-program call per row, so once a batch is long enough to pay for it the two row
triggers of file inserts are dropped inside the transaction, as a bulk insert does, and
recreated from their stored text when the statistics are applied: no committed state
lacks them. Imports ``exceptions``, ``paths``, ``barecat.index.bulk`` and
``barecat.index.connection``.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable

from barecat.exceptions import IsADirectoryBarecatError, NotADirectoryBarecatError
from barecat.index.bulk import (
    SUSPEND_TRIGGERS_ROWS,
    apply_deltas,
    create_missing_dirs,
    drop_insert_triggers,
    first_in,
)
from barecat.index.connection import open_savepoint, select
from barecat.paths import ancestors, parent

ADDS_BEFORE_DEFERRING = 8
"""Files added in a row, with nothing else using the index in between, before their
statistics are deferred: a loop that queries the tree between adds would otherwise
switch the triggers off and on for every file, which costs twice what they do."""


_IS_DIR = "SELECT 1 FROM dirs WHERE path = ?"


class DeferredStats:
    """The statistics owed for files inserted with the triggers off, on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._dir_check = conn.cursor()
        """Kept for the one check every insert makes (a new cursor a file costs a third
        of a microsecond); inserts run one at a time, under the archive's write lock."""
        self._dir_check.row_factory = None
        self.needed_dirs: set[str] = set()
        self.per_parent: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.rows = 0
        self.dropped_triggers: list[str] = []

    @classmethod
    def begin(cls, conn: sqlite3.Connection) -> DeferredStats | None:
        """Switch the triggers off in ``conn``'s transaction; None if they are off already
        (a bulk edit that recounts at its end, or an index without the flag, where the
        triggers never fire): nothing is owed then."""
        row = select(conn, "SELECT value_int FROM config WHERE key = 'use_triggers'").fetchone()
        if row is None or row[0] != 1:
            return None
        conn.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
        return cls(conn)

    def insert(self, path: str, size: int, insert_row: Callable[[], None]) -> None:
        """Check ``path`` as the triggers would, run ``insert_row``, and note what it owes."""
        conn = self.conn
        if path in self.needed_dirs or (
            self._dir_check.execute(_IS_DIR, (path,)).fetchone() is not None
        ):
            raise IsADirectoryBarecatError(path)
        folder = parent(path)
        new_dirs: list[str] = []
        if folder and folder not in self.needed_dirs:
            new_dirs = [d for d in (folder, *ancestors(folder)) if d]
            if first_in(conn, "files", new_dirs) is not None:
                raise NotADirectoryBarecatError(f"A parent of {path!r} is a file")
        if self.rows == SUSPEND_TRIGGERS_ROWS:
            self.dropped_triggers = drop_insert_triggers(conn)
        insert_row()
        self.rows += 1
        self.needed_dirs.update(new_dirs)
        totals = self.per_parent[folder]
        totals[0] += 1
        totals[1] += size

    def apply(self) -> None:
        """Create the missing directories, add the totals and switch the triggers back on:
        all of it or, if anything fails, none of it (the caller keeps this object then)."""
        conn = self.conn
        open_savepoint(conn, "barecat_deferred_stats")
        try:
            for sql in self.dropped_triggers:
                conn.execute(sql)
            create_missing_dirs(conn, self.needed_dirs)
            apply_deltas(conn, self.per_parent)
            conn.execute("UPDATE config SET value_int = 1 WHERE key = 'use_triggers'")
        except BaseException:
            conn.execute("ROLLBACK TO barecat_deferred_stats")
            conn.execute("RELEASE barecat_deferred_stats")
            raise
        conn.execute("RELEASE barecat_deferred_stats")


__all__ = ["ADDS_BEFORE_DEFERRING", "DeferredStats"]
