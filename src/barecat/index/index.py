"""The :class:`CoreIndex`: an archive's SQLite index, with every edit it supports.

Composed in layers, each a module with one job, each class adding to the one below:
:class:`~barecat.index.reading.IndexReader` (opening, lookups, addresses; its totals in
``aggregates.py``), :class:`~barecat.index.transactions.IndexTransactions` (the
writer's connection, commit, rollback, close, blocks with triggers or foreign keys off,
attached indexes), :class:`~barecat.index.row_edits.IndexRowEdits` (single rows added,
updated, removed) and :class:`~barecat.index.tree_edits.IndexTreeEdits` (renames,
subtrees removed). This module adds what concerns the index as a whole: its sealing
settings, the digest of its file rows, and its statistics rebuilt and checked. Method
names and meanings are the reference's where it had them; its other names are in
``compat.py``.
"""

from __future__ import annotations

from barecat.exceptions import BarecatError
from barecat.index import file_digest, treestats
from barecat.index.schema import (
    SEALING_KEY,
    ConfigValue,
    check_version,
    enable_sealing,
    write_config,
)
from barecat.index.tree_edits import IndexTreeEdits


class CoreIndex(IndexTreeEdits):
    """An archive's SQLite index, readable and (unless ``readonly``) editable.

    ``barecat.Index`` (``compat.py``) is this class with barecat 0.3.1's names added.
    """

    file_digest_kept = False
    """True once edits of file rows update the stored digest (``keep_file_digest``)."""

    def enable_sealing(self, records: dict[str, ConfigValue]) -> None:
        """Make this empty archive a sealed one, described by the ``sealing*`` ``records``
        (see ``schema.enable_sealing``); committed at once.

        Args:
            records: the sealing settings, as config rows.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            SchemaVersionBarecatError: the archive already holds files.
        """
        self._require_writable()
        self.commit()
        conn = self.settled_conn()
        enable_sealing(conn, {SEALING_KEY: "1", **records})
        self.schema_version = check_version(conn, self.path)
        self._read_layout()

    def update_sealing_config(self, records: dict[str, ConfigValue]) -> None:
        """Replace ``sealing*`` config rows (a new wrapped key, say); committed at once.

        Args:
            records: the rows to write, each key starting with ``sealing``.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            BarecatError: the archive is not sealed, or a key is not a sealing one.
        """
        self._require_writable()
        if not self.sealed or any(not k.startswith(SEALING_KEY) for k in records):
            raise BarecatError("Only a sealed archive's sealing settings can be updated")
        conn = self.settled_conn()
        with conn:
            write_config(conn, records)

    def keep_file_digest(self, step: file_digest.Step | None) -> None:
        """Keep the encrypted archive's digest of its file rows (``file_digest``) with
        ``step`` on every connection of this index; None refuses the edits it covers.

        Args:
            step: the digest's step function, or None.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        self._pool.set_up_each("file_digest", lambda conn: file_digest.install(conn, step))
        self.file_digest_kept = step is not None

    def update_dirs(self) -> None:
        """Create every directory that a file or directory implies but that has no row.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        treestats.insert_missing_dirs(self.settled_conn())

    def update_treestats(self) -> None:
        """Recompute every directory's statistics from the files (after bulk loads).

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self._require_writable()
        with self.no_triggers():
            treestats.rewrite_treestats(self.settled_conn())

    def find_inconsistencies(self) -> list[str]:
        """Every way the index disagrees with itself, as human-readable lines.

        Returns:
            The problems found; empty for a consistent index.
        """
        return treestats.find_inconsistencies(self.settled_conn())

    def optimize(self) -> None:
        """Let SQLite refresh its query planner statistics (``PRAGMA optimize``)."""
        self.settled_conn().execute("PRAGMA optimize")
