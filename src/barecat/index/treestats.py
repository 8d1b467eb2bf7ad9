"""Directory statistics recomputed from scratch, for bulk loads and consistency checks.

One grouped scan of ``files`` plus one of ``dirs``; the per-directory numbers are then
pushed up the tree in Python (cost: directories x depth), far cheaper than a correlated
subquery per directory. Imports only ``paths``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from barecat.paths import ancestors, parent


@dataclass(slots=True)
class TreeStats:
    num_subdirs: int = 0
    num_files: int = 0
    num_files_tree: int = 0
    size_tree: int = 0


def compute_treestats(conn: sqlite3.Connection) -> dict[str, TreeStats]:
    """Correct statistics for every directory the files and dirs imply (root included)."""
    stats: dict[str, TreeStats] = {"": TreeStats()}

    def ensure(path: str) -> TreeStats:
        s = stats.get(path)
        if s is None:
            s = stats[path] = TreeStats()
            if path:
                ensure(parent(path)).num_subdirs += 1
        return s

    for (path,) in conn.execute("SELECT path FROM dirs"):
        ensure(path)
    for par, count, size in conn.execute(
        "SELECT parent, count(*), ifnull(sum(size), 0) FROM files GROUP BY parent"
    ):
        s = ensure(par)
        s.num_files += count
        for d in (par, *ancestors(par)) if par else ("",):
            t = stats[d]
            t.num_files_tree += count
            t.size_tree += size
    return stats
