"""Where an archive's parts live on disk: the index file and the numbered shard files.

An archive named ``ARCHIVE`` has its SQLite index at ``ARCHIVE`` (current naming) or at
``ARCHIVE-sqlite-index`` (the reference's older naming, kept when found), and its data in
``ARCHIVE-shard-00000``, ``ARCHIVE-shard-00001``, ...; readers may keep a lookup table
(a cache) at ``INDEX-lookup``. This module owns those names, and tells which of the files
a process names after its id while building something (``.out.partial-1234``,
``.out.partial-1234.part0-shard-00000``, ``index.part-1234``) were abandoned because that
process is gone (killed mid-way), so the next builder may delete them.

It also owns the one way an archive is put in the place of another (``-f``,
``overwrite=True``): :func:`replace_archive`, whose journal ``.ARCHIVE.replace`` lets the
next open finish a replace that a kill interrupted (:func:`finish_replace`), so that at
every moment the old archive or the new one is there, whole. And it says, for every
opener, that no archive is at a path (:func:`archive_not_found`: what stands there
instead, a directory and the archives it holds; :func:`foreign_archive`: a tar or zip
file). It imports only ``exceptions`` of barecat.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from barecat.exceptions import BarecatError, FileNotFoundBarecatError, ReadOnlyBarecatError

OLD_INDEX_SUFFIX = "-sqlite-index"
LOOKUP_TABLE_SUFFIX = "-lookup"
SIDECAR_SUFFIX = "-sidecar"
"""A published archive's sidecar (``barecat publish``, ``index/sidecar.py``)."""
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


def sidecar_path(base: str) -> str:
    """Where ``barecat publish`` puts the sidecar of the archive at ``base``: the pages
    and the lookup buckets a remote reader fetches instead of searching the index."""
    return base + SIDECAR_SUFFIX


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
    """True if an archive index exists at ``path`` under either naming, or a replace of
    it was interrupted (its journal is there: opening it finishes the replace)."""
    base = base_path(path)
    return (
        os.path.isfile(base)
        or os.path.isfile(base + OLD_INDEX_SUFFIX)
        or os.path.lexists(replace_journal_path(base))
    )


def archive_not_found(
    path: str | os.PathLike[str], what: str = "Archive"
) -> FileNotFoundBarecatError:
    """The error for "no archive at ``path``", the one way every opener says it: "Archive
    not found: PATH", or, where a directory stands, that it is one (not an archive), and
    which archives it holds if it holds some (``what`` names the thing looked for)."""
    text = os.fspath(path)
    if not os.path.isdir(text):
        return FileNotFoundBarecatError(text, what)
    instead = "a directory, not a barecat archive"
    inside = [os.path.join(text, name) for name in archives_in(text)]
    if inside:
        shown = ", ".join(inside[:3]) + (", ..." if len(inside) > 3 else "")
        instead += f"; it holds the archive{'s' if len(inside) > 1 else ''} {shown}"
    return FileNotFoundBarecatError(text, what, instead=instead)


def archives_in(folder: str) -> list[str]:
    """Names of the archives directly in ``folder`` (an index file beside its first
    shard, or an index under the older naming), sorted; none if it cannot be listed."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return []
    first_shard = SHARD_INFIX + "0" * SHARD_DIGITS
    found = {n[: -len(first_shard)] for n in names if n.endswith(first_shard)}
    found |= {n[: -len(OLD_INDEX_SUFFIX)] for n in names if n.endswith(OLD_INDEX_SUFFIX)}
    return sorted(n for n in found if n and archive_exists(os.path.join(folder, n)))


_COMPRESSED_TAR = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")
_COMPRESSION_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")


def foreign_archive(path: str | os.PathLike[str]) -> str | None:
    """What the file at ``path`` is if it is a tar or zip file, given where a barecat index
    belongs, told by its first bytes (a zip's signature, a tar header's ``ustar``, a
    compressed stream under a compressed tar's name): "a tar file, not a barecat
    archive", with how to read it where that holds for any such file (``barecat mount``
    tells an uncompressed tar by its content); None for any other file."""
    text = os.fspath(path)
    try:
        with open(text, "rb") as f:
            head = f.read(263)
    except OSError:
        return None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "a zip file, not a barecat archive"
    if head[257:262] == b"ustar":
        return "a tar file, not a barecat archive (barecat mount mounts it as it is)"
    if text.lower().endswith(_COMPRESSED_TAR) and head.startswith(_COMPRESSION_MAGIC):
        return "a compressed tar file, not a barecat archive"
    return None


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
    table, sidecar, shards)."""
    base = base_path(path)
    idx = index_path(base)
    files = [idx] + [idx + s for s in ("-journal", "-wal", "-shm", LOOKUP_TABLE_SUFFIX)]
    files += [sidecar_path(base), *shard_files(base)]
    return [f for f in files if os.path.lexists(f)]


def remove_archive(path: str | os.PathLike[str]) -> None:
    """Delete the archive's index and shard files (missing parts are not an error)."""
    for f in archive_files(path):
        os.remove(f)


def _named_files(base: str) -> list[tuple[str, str]]:
    """(path, suffix after ``base``) of every file of the archive at ``base``: shards,
    lookup table, the index's journals, the index last; the suffix says what each one is
    (an old-style index keeps its naming: ``-sqlite-index``, ``-sqlite-index-lookup``)."""
    return [(f, f[len(base) :]) for f in reversed(archive_files(base))]


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


# -- builds under a temporary name ------------------------------------------------------


def staging_path(target: str) -> str:
    """Where an output is built before it takes the place of ``target``: hidden, beside
    it (so that renames stay on one filesystem), and named after this process."""
    folder, name = os.path.split(os.path.abspath(target))
    return os.path.join(folder, f".{name}.partial-{os.getpid()}")


def remove_abandoned_builds(target: str) -> None:
    """Delete what killed builds of ``target`` left (their process is gone): a staged
    archive, its shards and journal, the part-archives of a parallel create, a replace
    journal never made durable. A replace that a kill interrupted after the new archive
    was complete is finished first (:func:`finish_replace`), so no complete build that
    is the only copy is deleted."""
    finish_replace(target)
    folder, name = os.path.split(os.path.abspath(target))
    for entries in abandoned_entries(folder, f".{name}.partial-").values():
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, entry))


# -- one archive put in the place of another ---------------------------------------------
#
# An archive is several files, so no single rename swaps one for another. The protocol:
#   1. the new archive is complete (closed: its shards fsynced, its index committed);
#   2. the journal ``.NAME.replace`` is written, fsynced and linked into place, holding an
#      exclusive flock for as long as its writer works: from here on the new archive is
#      the one that stays;
#   3. the old archive's files are renamed aside, to ``.NAME.replaced-PID...`` (index
#      first: the target stops being an archive before any of its shards goes);
#   4. the new archive's files are renamed into place (index last);
#   5. the old files are deleted, then the journal.
# A kill before 2 leaves the old archive (the new one is a dead build's leftover, removed
# by the next build); from 2 on, whoever opens the target next takes the journal's lock
# and redoes 3 to 5 where they stopped: a step of 3 is done when its destination exists,
# one of 4 when its source is gone, and 4 is over when the new index has moved.


def replace_journal_path(target: str) -> str:
    """The journal of a replace of the archive at ``target`` (see :func:`replace_archive`)."""
    folder, name = os.path.split(os.path.abspath(target))
    return os.path.join(folder, f".{name}.replace")


def replace_archive(new: str, target: str) -> None:
    """Put the complete, closed archive at ``new`` in the place of ``target`` (an archive
    under either naming, any other file, or nothing), so that a kill at any moment leaves
    the old archive or the new one there, whole: see the protocol above. ``new`` must be
    on the same filesystem (beside ``target``, or below its folder).

    Raises:
        BarecatError: ``new`` holds no archive, or ``target`` is a directory.
        ReadOnlyBarecatError: the folder cannot be written.
    """
    new_base, target = base_path(new), os.path.abspath(base_path(target))
    if not archive_exists(new_base):
        raise BarecatError(f"No archive to put in place at {new_base}")
    if os.path.isdir(target) and not os.path.islink(target):
        raise BarecatError(f"Cannot replace {target}: it is a directory")
    folder, name = os.path.split(target)
    aside = os.path.join(folder, f".{name}.replaced-{os.getpid()}")
    _sync_directory(os.path.dirname(os.path.abspath(new_base)))  # the new one's names
    with _claimed_journal(target) as fd:
        plan = {
            "pid": os.getpid(),
            "aside": [(_rel(f, folder), _rel(aside + s, folder)) for f, s in _old_files(target)],
            "into": [
                (_rel(f, folder), _rel(target + _current_naming(s), folder))
                for f, s in _named_files(new_base)
            ],
        }
        os.write(fd, json.dumps(plan).encode())
        os.fsync(fd)
        _replay(target, plan)


def finish_replace(target: str | os.PathLike[str]) -> bool:
    """Finish a replace of the archive at ``target`` that a kill interrupted (see
    :func:`replace_archive`); wait for one that a live process is making. Costs one
    failed ``open`` when there is none.

    Returns:
        True if this call finished one.

    Raises:
        ReadOnlyBarecatError: one was interrupted and the folder cannot be written.
    """
    base = os.path.abspath(base_path(target))
    journal = replace_journal_path(base)
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):  # (no such folder: no archive either)
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a live replace: wait for its end
        if os.fstat(fd).st_nlink == 0:
            return False  # finished meanwhile
        try:
            plan = json.loads(_read_all(fd))
        except ValueError:  # written up to a kill: no file was moved before it was whole
            os.remove(journal)
            return True
        _replay(base, plan)
        return True
    except PermissionError as e:
        raise ReadOnlyBarecatError(
            f"{base}: a replace of this archive was interrupted ({journal}); it is "
            f"finished by the next open with write access to its folder ({e})"
        ) from e
    finally:
        os.close(fd)


@contextlib.contextmanager
def _claimed_journal(target: str) -> Iterator[int]:
    """The journal of a replace of ``target``, made empty and locked for the block (an
    earlier replace finished or waited for first), as a descriptor to write the plan
    to; gone when the block ends (the block removes it when it completes). Until the
    plan is whole and durable no file is moved, so a journal that does not parse means
    a replace that moved nothing."""
    folder, name = os.path.split(target)
    draft = os.path.join(folder, f".{name}.partial-{os.getpid()}.replace")
    fd = os.open(draft, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        while True:
            finish_replace(target)  # an earlier one, interrupted or in progress
            try:
                os.link(draft, replace_journal_path(target))
                break
            except FileExistsError:
                continue  # another one began meanwhile: wait for it, then ours
            except OSError:  # a filesystem without hard links
                os.rename(draft, replace_journal_path(target))
                break
        with contextlib.suppress(FileNotFoundError):
            os.remove(draft)
        yield fd
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(draft)
        os.close(fd)


def _replay(target: str, plan: dict[str, Any]) -> None:
    """Steps 3 to 5 of a replace (see above), from wherever they stopped; the plan made
    durable first."""
    folder = os.path.dirname(target)
    _sync_directory(folder)
    aside = [(os.path.join(folder, a), os.path.join(folder, b)) for a, b in plan["aside"]]
    into = [(os.path.join(folder, a), os.path.join(folder, b)) for a, b in plan["into"]]
    if into and os.path.lexists(into[-1][0]):  # the new index has not moved yet
        for src, dst in aside:
            if not os.path.lexists(dst) and os.path.lexists(src):
                os.replace(src, dst)
        for src, dst in into:
            if os.path.lexists(src):
                os.replace(src, dst)
        for where in {folder, *(os.path.dirname(src) for src, _ in into)}:
            _sync_directory(where)
    for _, dst in aside:
        with contextlib.suppress(FileNotFoundError):
            os.remove(dst)
    os.remove(replace_journal_path(target))
    _sync_directory(folder)


def _old_files(target: str) -> list[tuple[str, str]]:
    """The files at ``target`` to move aside, with their suffixes, the index (or
    whatever file is there) first."""
    files = _named_files(target)
    return files[-1:] + files[:-1]


def _current_naming(suffix: str) -> str:
    """A file's suffix under the current naming (an old-style index takes the base)."""
    return suffix[len(OLD_INDEX_SUFFIX) :] if suffix.startswith(OLD_INDEX_SUFFIX) else suffix


def _rel(path: str, folder: str) -> str:
    return os.path.relpath(os.path.abspath(path), folder)


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 65536):
        parts.append(chunk)
    return b"".join(parts)


def _sync_directory(folder: str) -> None:
    """Make the names in ``folder`` durable (renames, new and removed files), where the
    filesystem allows."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
