"""What the parts of the :class:`~barecat.archive.Barecat` facade that change an archive
rely on the facade for: its two halves and its sealing, the checks that a write is
allowed, and the pacing of commits. The facade owns these (they couple the halves and
the writer lock); the mixins that edit and maintain an archive declare them once, here,
so that each stays a plain class over the same names. Also :func:`serialized`, which
every operation that changes an archive wears, so that a writer shared by threads
(``threadsafe=True``) runs them one at a time.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:  # a plain archive loads no sealing code
    from barecat.archive.sealed import ArchiveSealing
    from barecat.index import Index
    from barecat.ops.writing import WriteSession
    from barecat.sealing import SealingSettings
    from barecat.shards.reading import ShardReader

_P = ParamSpec("_P")
_R = TypeVar("_R")
_A = TypeVar("_A", bound="ArchiveContract")


def serialized(method: Callable[Concatenate[_A, _P], _R]) -> Callable[Concatenate[_A, _P], _R]:
    """Run ``method`` holding the archive's write lock, when it has one (a writer opened
    with ``threadsafe=True``); otherwise call it directly. The lock is re-entrant, so an
    operation may call others (``add`` commits through ``commit``)."""

    @functools.wraps(method)
    def locked(self: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        lock = self._write_lock
        if lock is None:
            return method(self, *args, **kwargs)
        with lock:
            return method(self, *args, **kwargs)

    return locked


class ArchiveContract:
    """The facade's state and hooks, as the editing and maintenance mixins see them."""

    path: str
    index: Index
    sharder: ShardReader
    """The shards as every archive reads them (on object storage too); a writer's own
    ``Sharder``, which writes, is its write session's (``_writes.sharder``)."""
    _sealing: ArchiveSealing | None
    _writes: WriteSession
    """A writer's write session: every new byte and the row after it go through it."""
    _write_lock: threading.RLock | None = None
    """Held by every change of a writer shared by threads; None otherwise."""

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


__all__ = ["ArchiveContract", "serialized"]
