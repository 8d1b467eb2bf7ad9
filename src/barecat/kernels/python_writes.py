"""The extraction's per-file loop in pure Python: the reference ``_compiled.c``'s
``write_files`` implements again.

``write_files`` writes plain files of a plain archive, given their index rows in storage
order, below a directory: each file's bytes read (runs of neighbours in one read), checked
against their CRC32C, then the file created (never replacing anything), written (its zero
blocks left as holes, by :mod:`barecat.kernels.sparse`'s rule), given its owner,
permission bits and mtime, and closed; the other names of a file stored once (rows at its
place that agree on its metadata) are made hard links of it. It decides nothing: every
row that is not the plain case, and every row whose reading or writing fails at any step
(for a file stored once, every row at its place), is handed back untouched (what this
loop created for it is removed again), for the caller's careful path, which owns every
rule of extraction (``barecat/transfer/extraction.py``) and names what failed. Both twins
answer the same for every input (the fuzz tests compare them) and raise only for
arguments of the wrong type. Imports nothing of barecat but its siblings.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from typing import Any, cast

from barecat.kernels.python import canonical, crc32c
from barecat.kernels.sparse import write_all

ROW_COLUMNS = 9
"""A row is ``(path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns)``, the index's
file columns in their order (``barecat/index/query.py``'s ``FILE_COLUMNS``)."""
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_U32 = (1 << 32) - 1
_MAX_ID = _MAX_U32 - 1  # ((uid_t)-1 means "leave it": not an owner)
_MAX_I64 = (1 << 63) - 1
_MAX_FD = (1 << 31) - 1
_MIN_I64 = -(1 << 63)
_NOWHERE = object()


def _exact(value: Any, low: int, high: int) -> bool:
    """Whether ``value`` is an int (not a bool, not a subclass) in ``low..high``."""
    return type(value) is int and low <= value <= high


def _plain(row: tuple[Any, ...], limit: int) -> bool:
    """Whether a row is the plain case this loop writes: a path surely in normal form, a
    place and a size below ``limit``, a CRC32C, and metadata in the ranges the system
    calls take (no symbolic link: the caller makes those)."""
    path, shard, offset, size, crc, mode, uid, gid, mtime_ns = row
    return (
        canonical(path)
        and _exact(shard, 0, _MAX_I64)
        and _exact(offset, 0, _MAX_I64)
        and _exact(size, 0, limit - 1)
        and _exact(crc, 0, _MAX_U32)
        and (mode is None or (_exact(mode, 0, _MAX_U32) and not stat.S_ISLNK(mode)))
        and (uid is None or _exact(uid, 0, _MAX_ID))
        and (gid is None or _exact(gid, 0, _MAX_ID))
        and (mtime_ns is None or _exact(mtime_ns, _MIN_I64, _MAX_I64))
    )


def _parent(path: str) -> str:
    """The archive path of the directory of ``path`` (a path in normal form)."""
    return path[: path.rfind("/")] if "/" in path else ""


def place(row: tuple[Any, ...]) -> tuple[int, int] | None:
    """Where a row's file lies, ``(shard, offset)``, where both are ints; else None (rows
    share a place only where it is ints: the names of a file stored once)."""
    shard, offset = row[1], row[2]
    return (shard, offset) if type(shard) is int and type(offset) is int else None


def _check_arguments(
    root: Any, fds: Any, rows: Any, buffer: Any, limit: Any, umask: Any, dirs: Any, euid: Any
) -> memoryview:
    """The arguments' types and ranges (TypeError, ValueError), every row's shape
    included, before anything is written; the buffer's view."""
    if not isinstance(fds, dict) or not isinstance(rows, list):
        raise TypeError(
            "write_files(root, fds: dict, rows: list, buffer, limit, umask, dirs, euid)"
        )
    if not isinstance(buffer, bytearray):
        raise TypeError("buffer: a bytearray")
    if not isinstance(dirs, dict):
        raise TypeError("dirs: a dict")
    for value, most in ((root, _MAX_FD), (limit, _MAX_I64), (umask, 0o7777)):
        if type(value) is not int:
            raise TypeError("root, limit and umask are ints")
        if not 0 <= value <= most:
            raise ValueError("root, limit or umask out of range")
    if euid is not None and not _exact(euid, 0, _MAX_U32):
        raise ValueError("euid: None or an int in 0..2**32-1")
    for row in rows:
        if not isinstance(row, tuple) or len(row) != ROW_COLUMNS:
            raise TypeError(
                "a row is (path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns)"
            )
    return memoryview(buffer)


def write_files(
    root: int,
    fds: dict[int, int],
    rows: list[tuple[Any, ...]],
    buffer: bytearray,
    limit: int,
    umask: int,
    dirs: dict[str, int],
    euid: int | None,
) -> tuple[list[int], int, int]:
    """Write the plain files among ``rows`` below the directory ``root``.

    Args:
        root: a descriptor of the target directory; paths are opened relative to it.
        fds: per shard number, a descriptor to read it (a shard not in it: its rows are
            handed back).
        rows: index rows (:data:`ROW_COLUMNS`), in storage order (the names of a file
            stored once side by side, as storage order has them).
        buffer: where runs of neighbouring files are read, one read a run.
        limit: files of this size or more are handed back (the caller streams them, in
            bounded memory); so are those that do not fit ``buffer``. A file of
            :data:`~barecat.kernels.sparse.SPARSE_MIN` or more is written with its zero
            blocks left as holes (:func:`~barecat.kernels.sparse.write_all`).
        umask: the process's umask (what ``open`` takes from the bits asked for).
        dirs: the directories made safe to write in (archive paths, ``''`` for the
            root), each giving the group a file created there gets; a file whose
            directory is not among them is handed back.
        euid: None to leave owners as created; else the effective uid: a file is given
            its row's owner where that differs from the one it got.

    Returns:
        ``(left, files, written)``: the indices of the rows not written, in order (each
        left as it was: nothing created for it), and the count and bytes of those written.

    Raises:
        TypeError: an argument of the wrong type, or a row that is no 9-tuple.
        ValueError: ``root``, ``limit``, ``umask`` or ``euid`` out of range.
        Both before anything is written.
    """
    view = _check_arguments(root, fds, rows, buffer, limit, umask, dirs, euid)
    limit = min(limit, len(view) + 1)
    left: list[int] = []
    files = written = 0
    run = (-1, 0, 0)  # shard, start, end of what the buffer holds
    k = 0
    while k < len(rows):
        end = _group_end(rows, k)
        if end == k + 1:  # (a row alone at its place, the usual case: no lists made)
            row = rows[k]
            gid = dirs.get(_parent(row[0]), _NOWHERE) if _plain(row, limit) else _NOWHERE
            data = None
            if gid is not _NOWHERE:
                data, run = _data(fds, row, view, run, rows, end)
            if data is None or not _write(root, row, data, umask, gid, euid):
                left.append(k)
            else:
                files += 1
                written += len(data)
            k = end
            continue
        group = rows[k:end]
        gids = [
            dirs.get(_parent(row[0]), _NOWHERE) if _plain(row, limit) else _NOWHERE for row in group
        ]
        data = None
        if _NOWHERE not in gids and _one_file(group):
            stored = next((row for row in group if row[3]), group[0])
            data, run = _data(fds, stored, view, run, rows, end)
        if data is None or not _write_names(root, group, data, umask, gids, euid):
            left.extend(range(k, end))
        else:
            files += len(group)
            written += len(data)
        k = end
    return left, files, written


def _group_end(rows: list[tuple[Any, ...]], k: int) -> int:
    """Past the rows from ``k`` at the place of row ``k`` (the names of a file stored once
    lie in neighbouring rows, and so may empty files, which take no room); ``k + 1`` for
    a row alone at its place."""
    here, end = place(rows[k]), k + 1
    while here is not None and end < len(rows) and place(rows[end]) == here:
        end += 1
    return end


def _one_file(group: list[tuple[Any, ...]]) -> bool:
    """Whether the rows at one place are the kernel's: their files with bytes all names of
    one file (the same size, CRC32C, mode, owner and mtime: ``hard_link_key``, which one
    inode cannot hold two of), their empty ones with the empty CRC32C. Other groups are
    the caller's."""
    stored = [row for row in group if row[3]]
    empty_ok = all(row[4] == 0 for row in group if not row[3])
    return empty_ok and all(row[3:] == stored[0][3:] for row in stored)


def _write_names(
    root: int,
    group: list[tuple[Any, ...]],
    data: memoryview,
    umask: int,
    gids: list[Any],
    euid: int | None,
) -> bool:
    """Write the rows at one place, in order: each empty file, the first file with bytes,
    and each later name of it as a hard link of that one; if any of that fails, remove
    every name made and say False."""
    made: list[bytes] = []
    first = None
    for row, gid in zip(group, gids, strict=True):
        name = row[0].encode()
        if first is None or not row[3]:
            done = _write(root, row, data if row[3] else data[:0], umask, gid, euid)
            first = name if done and row[3] else first
        else:
            try:
                os.link(first, name, src_dir_fd=root, dst_dir_fd=root, follow_symlinks=False)
                done = True
            except OSError:
                done = False
        if not done:
            for undone in made:
                _remove(root, undone, None)
            return False
        made.append(name)
    return True


def _data(
    fds: dict[int, int],
    row: tuple[Any, ...],
    view: memoryview,
    run: tuple[int, int, int],
    rows: list[tuple[Any, ...]],
    after: int,
) -> tuple[memoryview | None, tuple[int, int, int]]:
    """A plain row's bytes, checked (None: hand it back), and what the buffer holds now
    (a run read anew where needed: :func:`_run_length`, ``rows[after:]`` following)."""
    _, shard, offset, size, crc = row[:5]
    fd = fds.get(shard)
    if not _exact(fd, 0, _MAX_FD):
        return None, run
    if size == 0:
        return (view[:0] if crc == 0 else None), run
    held, start, end = run
    if held != shard or not start <= offset <= end - size:
        if offset > _MAX_I64 - len(view):
            return None, run
        try:
            got = os.preadv(
                cast(int, fd), [view[: _run_length(row, rows, after, len(view))]], offset
            )
        except OSError:
            return None, (-1, 0, 0)
        held, start, end = run = (shard, offset, offset + got)
        if end - size < offset:
            return None, run
    data = view[offset - start : offset - start + size]
    return (data if crc32c(data) == crc else None), run


def _run_length(row: tuple[Any, ...], rows: list[tuple[Any, ...]], after: int, room: int) -> int:
    """How many bytes to read from ``row``'s place: up to the end of the last of the rows
    from ``after`` on with bytes that lie in its shard, at or past it, within ``room`` of
    it, so that one read brings a run of neighbours and nothing past them (what is read
    changes no answer: a row not in the run is read on its own)."""
    shard, start, size = row[1:4]
    first: int = start  # (a plain row's: ints)
    end: int = start + size
    for other in itertools.islice(rows, after, None):
        at, length = other[2], other[3]
        if type(at) is not int or type(length) is not int or length <= 0:
            continue
        if other[1] != shard or not first <= at <= first + room - length:
            break
        end = max(end, at + length)
    return end - first


def _write(
    root: int, row: tuple[Any, ...], data: memoryview, umask: int, group: Any, euid: int | None
) -> bool:
    """Create, write, own, chmod, touch and close one file (``group``: the one it gets
    where it is created); on any failure remove what was created and say False."""
    path, _, _, _, _, mode, uid, gid, mtime_ns = row
    name = path.encode()
    bits = 0o666 if mode is None else mode & 0o777
    try:
        fd = os.open(name, _NEW, bits, dir_fd=root)
    except OSError:
        return False
    try:
        write_all(fd, data)  # (zero blocks of a file from SPARSE_MIN left as holes)
        owned = euid is not None and uid is not None and gid is not None
        if owned and (uid != euid or not _exact(group, 0, _MAX_U32) or gid != group):
            os.fchown(fd, uid, gid)
        wanted = 0o666 & ~umask if mode is None else mode & 0o7777
        if wanted != bits & ~umask:
            os.fchmod(fd, wanted)
        if mtime_ns is not None:
            os.utime(fd, ns=(mtime_ns, mtime_ns))
    except OSError:
        _remove(root, name, fd)
        return False
    try:
        os.close(fd)
    except OSError:
        _remove(root, name, None)
        return False
    return True


def _remove(root: int, name: bytes, fd: int | None) -> None:
    """Remove a file this loop created and failed to finish (and close it)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=root)


def read_rows(index: str, sql: str) -> None:
    """Every row ``sql`` gives on the index file ``index``, read by SQLite inside the
    compiled core, with no Python object made per row: the core's ``IndexRows``, or None
    where they cannot be read so. This twin has no SQLite but Python's ``sqlite3``, whose
    rows are what the core spares, so it always answers None, as the core does where it
    cannot reach the SQLite library ``sqlite3`` runs, or cannot open the index read-only
    or prepare ``sql`` (nine columns: :data:`ROW_COLUMNS`). Given None, the caller reads
    the rows through ``sqlite3`` (meeting any error there) and writes them with
    :func:`write_files`, which is the reference of what ``IndexRows`` do:

    - ``len(rows)``: how many rows there are;
    - ``rows.odd()``: the rows whose path is not surely in normal form (as ``sqlite3``
      gives rows: tuples of int, float, str, bytes or None), in order;
    - ``rows.write(root, fds, buffer, limit, umask, dirs, euid, on_files, batch)``:
      :func:`write_files` over every row, ``batch`` rows at a time (moved on past the
      rows at the last one's place: a file's names go in one batch), ``on_files(files,
      bytes)`` told after each batch that wrote any, and an interrupt taken between;
      ``(left, files, written)``, ``left`` the rows not written, as tuples, in order.

    The core reads every row before answering (a damaged index raises the error
    ``sqlite3`` would: its ``DatabaseError`` or ``OperationalError``, or ``MemoryError``),
    holding them in memory of its own: about 100 bytes and the path's a row (120 bytes
    for a path of 17, where ``sqlite3``'s tuples of the same rows take 250).

    Raises:
        TypeError: ``index`` or ``sql`` is not a str.
    """
    if not isinstance(index, str) or not isinstance(sql, str):
        raise TypeError("read_rows(index: str, sql: str)")
    return None
