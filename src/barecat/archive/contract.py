"""What the parts of the :class:`~barecat.archive.Barecat` facade that change an archive
rely on the facade for: its two halves and its sealing, the checks that a write is
allowed, and the pacing of commits. The facade owns these (they couple the halves and
the writer lock); the mixins that edit and maintain an archive declare them once, here,
so that each stays a plain class over the same names.
"""

from __future__ import annotations

from barecat.archive.sealed import ArchiveSealing
from barecat.index import Index
from barecat.sealing import SealingSettings
from barecat.shards import Sharder


class ArchiveContract:
    """The facade's state and hooks, as the editing and maintenance mixins see them."""

    path: str
    index: Index
    sharder: Sharder
    _sealing: ArchiveSealing | None

    def _require_writable(self) -> None:
        """Raise unless the archive is open for writing, in this process."""
        raise NotImplementedError

    def _require_changeable(self) -> None:
        """Raise unless writable and not append-only."""
        raise NotImplementedError

    def _require_no_open_writer(self) -> None:
        """Raise while a file opened for writing is still open."""
        raise NotImplementedError

    def _maybe_commit(self, changes: int = 1) -> None:
        """Count changes; commit when enough have come or enough time has passed."""
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def seal_like(self, settings: SealingSettings) -> None:
        """Make the empty plain archive sealed like one whose files it takes as they are."""
        raise NotImplementedError

    def prepare_file_list_edit(self) -> None:
        """Get the key of an encrypted archive before an edit of its file list."""
        raise NotImplementedError

    def _resync_write_position(self) -> None:
        """Put the write position after the last file the index knows."""
        raise NotImplementedError


__all__ = ["ArchiveContract"]
