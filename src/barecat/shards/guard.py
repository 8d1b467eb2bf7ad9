"""The guard: a shard that is a symbolic link to the null device, kept by an archive whose
files share bytes.

Rows may share bytes (a hard link stored once: its names point at the same shard, offset
and size). barecat 0.3.1's writers take each byte range for one file's own: its defrag
copies a shared range once per row, the second copy landing on the next file's bytes
before they moved, and its ``remove`` cuts a shard at a removed file that ends it, though
another name still uses those bytes. But 0.3.1 opens no shard for writing while any shard
is a symbolic link (``allow_writing_symlinked_shard``, a ``ValueError`` before a byte or
a row changes) and reads such a shard like any other. So an archive with shared bytes
keeps one shard linked to ``/dev/null``: to 0.3.1 an empty shard that nothing points
into, which keeps its defrag, remove and appends away; its reads, verify and merges (as
the source) work. barecat itself never writes through the guard: a write into its number
turns it into a shard of the archive's own, after making a new guard past the last shard.

File-level steps on paths; each replacement is one ``rename``, so a guard is there at
every moment. Imports only the standard library; knows nothing of archives.
"""

from __future__ import annotations

import contextlib
import os

GUARD_TARGET = os.devnull
"""Where a guard points."""


def is_guard(path: str) -> bool:
    """Whether the shard file ``path`` is a guard (a symbolic link to the null device)."""
    try:
        return os.readlink(path) == GUARD_TARGET
    except OSError:  # not a link, or not there
        return False


def make_guard(path: str) -> None:
    """Create a guard at ``path`` (nothing may be there)."""
    os.symlink(GUARD_TARGET, path)


def replace_with_guard(path: str) -> None:
    """Put a guard at ``path`` in one step, in the place of what is there, if anything."""
    temporary = f"{path}.guard-{os.getpid()}"
    _remove_if_there(temporary)
    os.symlink(GUARD_TARGET, temporary)
    os.replace(temporary, path)


def replace_guard_with_file(path: str) -> None:
    """Put an empty file of the archive's own at ``path``, a guard, in one step."""
    temporary = f"{path}.shard-{os.getpid()}"
    _remove_if_there(temporary)
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
    os.replace(temporary, path)


def _remove_if_there(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


__all__ = [
    "GUARD_TARGET",
    "is_guard",
    "make_guard",
    "replace_guard_with_file",
    "replace_with_guard",
]
