"""Where an archive's parts live on disk: the index file and the numbered shard files.

An archive named ``ARCHIVE`` has its SQLite index at ``ARCHIVE`` (current naming) or at
``ARCHIVE-sqlite-index`` (the reference's older naming, kept when found), and its data in
``ARCHIVE-shard-00000``, ``ARCHIVE-shard-00001``, ...; readers may keep a lookup table
(a cache) at ``INDEX-lookup``. This module owns those names, and tells which of the files
a process names after its id while building something (``.out.partial-1234``,
``.out.partial-1234.part0-shard-00000``, ``index.part-1234``) were abandoned because that
process is gone (killed mid-way), so the next builder may delete them. It imports no
other barecat module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

OLD_INDEX_SUFFIX = "-sqlite-index"
LOOKUP_TABLE_SUFFIX = "-lookup"
SHARD_INFIX = "-shard-"
SHARD_DIGITS = 5


def base_path(path: str | os.PathLike[str]) -> str:
    """The archive's base name, given either the base or an existing old-style index path."""
    text = os.fspath(path)
    if text.endswith(OLD_INDEX_SUFFIX) and os.path.isfile(text):
        return text[: -len(OLD_INDEX_SUFFIX)]
    return text


def index_path(base: str) -> str:
    """The index file of the archive at ``base``: the old name if that one exists."""
    old = base + OLD_INDEX_SUFFIX
    if not os.path.exists(base) and os.path.exists(old):
        return old
    return base


def lookup_table_path(index: str) -> str:
    """Where readers keep the lookup table of the index file ``index`` (a cache that only
    speeds up reads; see ``index/lookup_table.py``)."""
    return index + LOOKUP_TABLE_SUFFIX


def shard_path(base: str, number: int) -> str:
    """Path of shard ``number`` (zero-padded to five digits, as the reference does)."""
    return f"{base}{SHARD_INFIX}{number:0{SHARD_DIGITS}d}"


def existing_shard_numbers(base: str) -> list[int]:
    """Shard numbers present on disk for ``base``, sorted."""
    directory = os.path.dirname(base) or "."
    prefix = os.path.basename(base) + SHARD_INFIX
    pattern = re.compile(re.escape(prefix) + rf"(\d{{{SHARD_DIGITS},}})$")
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := pattern.match(n)))


def shard_files(base: str) -> list[str]:
    """The shard files of the archive at ``base`` that exist on disk, in shard order."""
    return [shard_path(base, n) for n in existing_shard_numbers(base)]


def shards_with_bytes(base: str) -> list[str]:
    """The shard files of the archive at ``base`` that hold bytes (a link counts: it
    holds another archive's), in shard order."""
    return [p for p in shard_files(base) if os.path.islink(p) or os.path.getsize(p) > 0]


def archive_exists(path: str | os.PathLike[str]) -> bool:
    """True if an archive index exists at ``path`` under either naming."""
    base = base_path(path)
    return os.path.isfile(base) or os.path.isfile(base + OLD_INDEX_SUFFIX)


SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a readable file that starts with SQLite's header: tells an
    archive's index from a tar, a zip or any other file of the same name."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def archive_files(path: str | os.PathLike[str]) -> list[str]:
    """Every on-disk file that belongs to the archive (index, its journals and lookup
    table, shards)."""
    base = base_path(path)
    idx = index_path(base)
    files = [idx] + [idx + s for s in ("-journal", "-wal", "-shm", LOOKUP_TABLE_SUFFIX)]
    files += shard_files(base)
    return [f for f in files if os.path.lexists(f)]


def remove_archive(path: str | os.PathLike[str]) -> None:
    """Delete the archive's index and shard files (missing parts are not an error)."""
    for f in archive_files(path):
        os.remove(f)


def move_archive(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename the archive at ``src`` to ``dst`` (same filesystem; ``dst`` free).

    Shards and the lookup table go first and the index last, so that ``dst`` only turns
    into an archive, to anyone looking, once it is whole.
    """
    src_base, dst_base = base_path(src), os.fspath(dst)
    src_index = index_path(src_base)
    for n in existing_shard_numbers(src_base):
        os.replace(shard_path(src_base, n), shard_path(dst_base, n))
    if os.path.lexists(src_index + LOOKUP_TABLE_SUFFIX):
        os.replace(src_index + LOOKUP_TABLE_SUFFIX, dst_base + LOOKUP_TABLE_SUFFIX)
    os.replace(src_index, dst_base)


# -- what a dead process left ------------------------------------------------------------

_PID = re.compile(r"(\d+)(?:\D|$)")


def abandoned_entries(folder: str, prefix: str) -> dict[int, list[str]]:
    """Names in ``folder`` of the form ``PREFIX<pid>`` (possibly followed by more, after
    a non-digit) left by processes that ended, by process id; this process and live ones,
    anyone's, are left out."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return {}
    return abandoned_names(names, prefix)


def abandoned_names(names: Iterable[str], prefix: str) -> dict[int, list[str]]:
    """Those of ``names`` of the form ``PREFIX<pid>`` (possibly followed by more, after a
    non-digit) whose process, on this machine, ended (as :func:`abandoned_entries`, for
    names listed elsewhere: objects on a store)."""
    found: dict[int, list[str]] = {}
    for name in names:
        if name.startswith(prefix) and (m := _PID.match(name, len(prefix))):
            found.setdefault(int(m.group(1)), []).append(name)
    found.pop(os.getpid(), None)
    return {pid: sorted(entries) for pid, entries in found.items() if not _alive(pid)}


def abandoned_pids(folder: str, prefix: str) -> set[int]:
    """Ids of the ended processes that left entries named ``PREFIX<pid>...`` in
    ``folder`` (this process and live ones, anyone's, excluded)."""
    return set(abandoned_entries(folder, prefix))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True
