"""A writer's hold on a local archive: the advisory lock on its index file, and what the
open that took it created, so that a create that fails can leave nothing behind.

The lock is ``flock`` on the index file (made empty if missing), which a second writer,
in this process or another, fails to take at open instead of interleaving bytes; it
ends with the descriptor, so a killed writer never leaves it held. Imports ``layout``
and ``exceptions`` only: no SQL, no shard I/O beyond removing files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from barecat.exceptions import ArchiveLockedBarecatError
from barecat.layout import archive_files, index_path


class WriterLock:
    """The lock on the archive at ``base``, taken at construction.

    Raises:
        ArchiveLockedBarecatError: Another writer holds it.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.index = index_path(base)
        os.makedirs(os.path.dirname(os.path.abspath(self.index)), exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(self.index, flags | os.O_EXCL, 0o666)
            self.made_index_file = True
            """The index file did not exist: this open made it (empty)."""
        except FileExistsError:
            fd = os.open(self.index, flags, 0o666)
            self.made_index_file = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ArchiveLockedBarecatError(
                f"Archive {base} is already open for writing by another Barecat (process or "
                "object); close that one first"
            ) from None
        self._fd: int | None = fd

    def release(self) -> None:
        """Let the next writer in (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def undo_creation(self, made_schema: bool) -> None:
        """Leave the archive's files as they were before this open, for an open or a
        create that failed before storing anything; call before :meth:`release`, with
        the archive's halves closed.

        Args:
            made_schema: The open made the index's schema (it held no archive, and no
                shard existed, so every file of the archive now is this open's). Without
                it only an index file this open made (empty) is removed.
        """
        if made_schema:
            for path in archive_files(self.base):
                if path != self.index:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
            if not self.made_index_file:  # there before, empty or an unfinished creation
                os.truncate(self.index, 0)
        if self.made_index_file:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.index)
