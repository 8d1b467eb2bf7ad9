"""The kernels in pure Python: the reference that ``_compiled.c`` implements again.

Each function answers exactly what its compiled twin answers, for every input (the fuzz
tests compare them): the checked bytes, or None where the caller's careful path must
answer (a short read, a CRC mismatch, an error of the system, a size over 16 MiB, a shard
with no open descriptor, an address no table slot can hold). They decide nothing and
raise only for arguments of the wrong type. CRC32C is the ``crc32c`` package's C
function, loaded without running the package's own start-up: its ``__init__`` looks its
version up in the installed packages' metadata and imports its command line, 20-45 ms
that every fresh process checking one file would pay, where its extension loads in half
a millisecond (a later ``import crc32c`` takes it from ``sys.modules``). Imports nothing
of barecat.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import operator
import os
import resource
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

SPAN = 16 << 20
"""The largest single read: reads above it are the careful path's (it checks the shard's
size first), and ``shards/coalescing.py`` joins neighbours up to it (``_compiled.c``
holds the same number)."""
SLOT_WORDS = 4
"""u64 words a lookup-table slot: the path's xxh3 hash (0: empty), shard << 48 | offset,
path start << 24 | length, CRC << 32 | size (barecat/index/lookup_table.py says why)."""
_WORDS = SLOT_WORDS
_OFFSET_BITS = 48
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_LENGTH_BITS = 24
_LENGTH_MASK = (1 << _LENGTH_BITS) - 1
_MAX_U32 = (1 << 32) - 1
_MAX_FD = (1 << 31) - 1
_MAX_I64 = (1 << 63) - 1
_new = tuple.__new__  # an address without a NamedTuple's Python-level __new__
_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)
_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)
_NO_NOWAIT = (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)
_WAITING_READ_NS = 100_000  # (shards/concurrent.py's WAITING_READ_NS)


def _crc32c_module() -> ModuleType:
    """The module holding ``crc32c``: the package's extension alone, or the package."""
    name = "crc32c._crc32c"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    try:
        package = importlib.util.find_spec("crc32c")
        for folder in (package.submodule_search_locations or []) if package else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_crc32c" + suffix)
                if not os.path.exists(path):
                    continue
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[name] = module
                return module
    except (ImportError, OSError):
        pass
    import crc32c as whole_package

    return whole_package


crc32c: Callable[..., int] = _crc32c_module().crc32c
"""``crc32c(data, value=0)``: the CRC32C of a bytes-like ``data``, continuing from
``value``."""


def _crc_of(crc: Any) -> int:
    """The CRC to check against: -1 for none (None), -2 for what no CRC32C can be."""
    if crc is None:
        return -1
    value = operator.index(crc)
    return value if 0 <= value <= _MAX_U32 else -2


def _int_of(value: Any) -> int:
    return operator.index(value)


def _pread_checked(fd: int, offset: int, size: int, crc: int) -> bytes | None:
    parts, got = [], 0
    while got < size:
        try:
            chunk = os.pread(fd, size - got, offset + got)
        except OSError:
            return None
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    return data if crc == -1 or crc32c(data) == crc else None


def _one_read(fd: int, offset: int, size: int, crc: int) -> bytes | None:
    fd, offset, size, crc = _plan(fd, offset, size, crc)
    if fd < 0:
        return None
    return b"" if size == 0 else _pread_checked(fd, offset, size, crc)


def read_checked(fd: int, offset: int, size: int, crc: int | None) -> bytes | None:
    """The ``size`` bytes at ``offset`` of ``fd``, if all of them came and match ``crc``
    (None: not checked).

    Args:
        fd: an open descriptor.
        offset: where the bytes start.
        size: how many (over 16 MiB: the careful path's).
        crc: their CRC32C, or None.

    Returns:
        The bytes, or None for the careful path.
    """
    return _one_read(_int_of(fd), _int_of(offset), _int_of(size), _crc_of(crc))


def read_each(
    fds: dict[int, int], addresses: list[Any], stop_on_wait: bool = False
) -> list[bytes | None]:
    """:func:`read_checked` of each ``(shard, offset, size, crc32c)``, its descriptor
    ``fds[shard]`` (None where the shard has none open).

    Args:
        fds: the open descriptor of each shard.
        addresses: the addresses, in the order their bytes are wanted (the list as it
            is at the call: what reading its items runs cannot change the batch).
        stop_on_wait: stop at the first read whose storage would wait (see
            :func:`_read_planned`); it and the rest are None.

    Returns:
        Each address's bytes or None, in order.

    Raises:
        TypeError: ``fds`` is not a dict, ``addresses`` not a list, an address not a
            4-tuple.
    """
    if not isinstance(fds, dict) or not isinstance(addresses, list):
        raise TypeError("read_each(fds: dict, addresses: list, stop_on_wait=False)")
    planned = []
    for address in addresses[:]:  # (the batch as it is now: see the compiled one)
        if not isinstance(address, tuple) or len(address) != 4:
            raise TypeError("an address is a tuple (shard, offset, size, crc32c)")
        shard, offset, size, crc = address
        fd = fds.get(shard)
        planned.append(_plan(-1 if fd is None else _int_of(fd), _int_of(offset),
                             _int_of(size), _crc_of(crc)))  # fmt: skip
    return _read_planned(planned, bool(stop_on_wait))


_NOT_READ = (-1, 0, 0, -1)
"""The plan of an address not read here (None)."""


def _plan(fd: int, offset: int, size: int, crc: int) -> tuple[int, int, int, int]:
    """(fd, offset, size, crc) of a read to make, or :data:`_NOT_READ`."""
    if crc == -2 or not 0 <= fd <= _MAX_FD or not 0 <= size <= SPAN:
        return _NOT_READ
    if not 0 <= offset <= _MAX_I64 - size or (size == 0 and crc > 0):
        return _NOT_READ
    return fd, offset, size, crc


def _read_planned(
    planned: list[tuple[int, int, int, int]], stop_on_wait: bool
) -> list[bytes | None]:
    """The planned reads made in order. With ``stop_on_wait``, a read stops the batch
    (it and the rest None) where ``RWF_NOWAIT`` says it would wait for its storage;
    where the storage cannot tell, a read that took over 100 µs while the thread slept
    (or took that long where sleeps are not counted) is kept and the rest are None: the
    caller's careful path reads them on its threads (``shards/concurrent.py``)."""
    out: list[bytes | None] = []
    nowait = _RWF_NOWAIT is not None
    slept = _sleeps_so_far() if stop_on_wait else None
    for k, (fd, offset, size, crc) in enumerate(planned):
        if fd < 0 or size == 0:
            out.append(None if fd < 0 else b"")
            continue
        if not stop_on_wait:
            out.append(_pread_checked(fd, offset, size, crc))
            continue
        got = b""
        if nowait:
            buffer = bytearray(size)
            try:
                got = bytes(buffer[: os.preadv(fd, [buffer], offset, _RWF_NOWAIT)])  # type: ignore[arg-type]
            except BlockingIOError:
                return out + [None] * (len(planned) - k)
            except OSError as e:
                if e.errno not in _NO_NOWAIT:
                    out.append(None)
                    continue
                nowait = False
        started = time.perf_counter_ns()
        rest = (
            _pread_checked(fd, offset + len(got), size - len(got), -1) if len(got) < size else b""
        )
        data = None if rest is None else got + rest
        out.append(None if data is None or (crc >= 0 and crc32c(data) != crc) else data)
        waited = not nowait and time.perf_counter_ns() - started > _WAITING_READ_NS
        if waited and (slept is None or _sleeps_so_far() != slept):
            return out + [None] * (len(planned) - k - 1)
    return out


def _sleeps_so_far() -> int | None:
    """The calling thread's sleeps (voluntary context switches), None where not counted."""
    if _RUSAGE_THREAD is None:
        return None
    return resource.getrusage(_RUSAGE_THREAD).ru_nvcsw


class AddressTable:
    """The lookup table's probe over its slot words and path bytes (the layout is
    ``barecat/index/lookup_table.py``'s).

    Args:
        slots: the slots, 4 u64 words each, 8-byte aligned.
        paths: the paths' bytes.
        paths_start: where the paths start in ``paths``.
        hash: the paths' 64-bit hash (xxh3).
        address: the type of the addresses answered (a tuple subtype).
        header: the index's first bytes (28 or more), or None: then :meth:`get` answers
            only while bytes 24-27 (SQLite's change counter) are ``counter``.
        counter: the change counter the table was made for (4 bytes).

    Raises:
        ValueError: the slots or paths are out of shape, or the header too short.
        TypeError: ``address`` is not a tuple subtype, ``counter`` not 4 bytes,
            ``paths_start`` not an int, or ``slots``, ``paths`` or ``header`` not
            bytes-like.
    """

    def __init__(
        self,
        slots: Any,
        paths: Any,
        paths_start: int,
        hash: Callable[[bytes], int],
        address: type,
        header: Any = None,
        counter: bytes | None = None,
    ) -> None:
        view = memoryview(slots).cast("B")
        size = len(view)
        paths_start = operator.index(paths_start)
        with memoryview(paths):  # (bytes-like, as the compiled one reads it)
            pass
        if size < 8 * _WORDS or size % (8 * _WORDS) or not 0 <= paths_start <= len(paths):
            raise ValueError("not a lookup table: slots or paths out of shape")
        if not (isinstance(address, type) and issubclass(address, tuple)):
            raise TypeError("the address type is a tuple subtype")
        if header is not None:
            if not isinstance(counter, bytes) or len(counter) != 4:
                raise TypeError("the counter is 4 bytes")
            with memoryview(header):
                pass
            if len(header) < 28:
                raise ValueError("the index header has 28 bytes or more")
        self._header = header
        self._counter = counter
        self._slots = view.cast("Q")
        self._capacity = len(self._slots) // _WORDS
        self._paths = paths
        self._paths_start = paths_start
        self._hash = hash
        self._address = address

    def _slot(self, path: str) -> int:
        """The first word index of ``path``'s slot, or -1. A probe visits each slot at
        most once, so even a table without an empty slot ends every probe."""
        if path.__class__ is not str and not isinstance(path, str):
            raise TypeError("a path is a str")
        key = path.encode("utf-8", "surrogateescape")
        h = self._hash(key) or 1
        slots, capacity = self._slots, self._capacity
        i = ((h * capacity) >> 64) * _WORDS
        current = slots[i]
        if current == h:  # (the common case, checked before the loop's set-up)
            ref = slots[i + 2]
            start = self._paths_start + (ref >> _LENGTH_BITS)
            if self._paths[start : start + (ref & _LENGTH_MASK)] == key:
                return i
        elif current == 0:
            return -1
        paths, start0, end = self._paths, self._paths_start, capacity * _WORDS
        for _ in range(capacity - 1):
            i += _WORDS
            if i == end:
                i = 0
            current = slots[i]
            if current == 0:
                return -1
            if current == h:
                ref = slots[i + 2]
                start = start0 + (ref >> _LENGTH_BITS)
                if paths[start : start + (ref & _LENGTH_MASK)] == key:
                    return i
        return -1

    def find(self, path: str) -> Any:
        """The address of ``path``.

        Args:
            path: a normalized path.

        Returns:
            Its address, or None when the table does not hold it.

        Raises:
            TypeError: ``path`` is not a str.
        """
        i = self._slot(path)
        if i < 0:
            return None
        word, size_crc = self._slots[i + 1], self._slots[i + 3]
        return _new(self._address, (word >> _OFFSET_BITS, word & _OFFSET_MASK,
                                    size_crc & _MAX_U32, size_crc >> 32))  # fmt: skip

    def find_many(self, paths: list[str]) -> list[tuple[int, Any]] | None:
        """The address of every path, sorted by address.

        Args:
            paths: normalized paths (the list as it is at the call).

        Returns:
            (position in ``paths``, address) pairs, sorted on the slot's
            ``shard << 48 | offset`` word, ties in request order; None as soon as one
            path is not in the table.

        Raises:
            TypeError: ``paths`` is not a list, or holds what is not a str.
        """
        if not isinstance(paths, list):
            raise TypeError("find_many takes a list of paths")
        slot, slots, address = self._slot, self._slots, self._address
        words, found = [], []
        for path in paths[:]:  # (the batch as it is now: see the compiled one)
            i = slot(path)
            if i < 0:
                return None
            word, size_crc = slots[i + 1], slots[i + 3]
            words.append(word)
            found.append(_new(address, (word >> _OFFSET_BITS, word & _OFFSET_MASK,
                                        size_crc & _MAX_U32, size_crc >> 32)))  # fmt: skip
        return [(pos, found[pos]) for pos in sorted(range(len(words)), key=words.__getitem__)]

    def get(self, path: str, fds: dict[int, int]) -> bytes | None:
        """The bytes of the file at ``path``, read from ``fds[shard]`` and checked.

        Args:
            path: a path as a caller gave it.
            fds: the open descriptor of each shard.

        Returns:
            The bytes, or None for the careful path: the index changed since the table
            was made (its change counter moved), ``path`` is not surely normal
            (:func:`canonical`), the table does not hold it, no descriptor is open for its
            shard, or :func:`read_checked` does not answer.

        Raises:
            TypeError: ``fds`` is not a dict.
        """
        if not isinstance(fds, dict):
            raise TypeError("get(path, fds: dict)")
        if self._stale():
            return None
        fd, offset, size, crc = self._plan_path(path, fds)
        if fd < 0:
            return None
        return b"" if size == 0 else _pread_checked(fd, offset, size, crc)

    def get_many(self, paths: list[str], fds: dict[int, int]) -> list[bytes | None]:
        """:meth:`get` of each path, the reads made in request order and stopped where
        one would wait for its storage (see :func:`_read_planned`).

        Args:
            paths: paths as a caller gave them.
            fds: the open descriptor of each shard.

        Returns:
            Each path's bytes, or None for the careful path.

        Raises:
            TypeError: ``paths`` is not a list, or ``fds`` not a dict.
        """
        if not isinstance(paths, list) or not isinstance(fds, dict):
            raise TypeError("get_many(paths: list, fds: dict)")
        if self._stale():
            return [None] * len(paths)
        return _read_planned([self._plan_path(p, fds) for p in paths[:]], True)

    def _stale(self) -> bool:
        """Whether a commit moved the index's change counter since the table was made."""
        return self._header is not None and self._header[24:28] != self._counter

    def _plan_path(self, path: object, fds: dict[int, int]) -> tuple[int, int, int, int]:
        """The read of ``path``'s bytes, or :data:`_NOT_READ` (not surely normal, not
        held, or its shard not open)."""
        if not canonical(path):
            return _NOT_READ
        i = self._slot(path)  # type: ignore[arg-type]
        if i < 0:
            return _NOT_READ
        word, size_crc = self._slots[i + 1], self._slots[i + 3]
        fd = fds.get(word >> _OFFSET_BITS)
        if fd is None:
            return _NOT_READ
        return _plan(_int_of(fd), word & _OFFSET_MASK, size_crc & _MAX_U32, size_crc >> 32)


_MAX_SHARD = (1 << (64 - _OFFSET_BITS)) - 1
_MAX_PATH_START = (1 << (64 - _LENGTH_BITS)) - 1


def fill_table(
    slots: Any, paths: bytearray, rows: list[Any], hash: Callable[[bytes], int], stored: int
) -> int:
    """Store rows of the ``files`` table in a lookup table being built (the layout is
    ``barecat/index/lookup_table.py``'s): each row whose address a slot can hold (exact
    ints: a shard below 2**16, an offset below 2**48, a size and a CRC32C below 2**32; a
    ``str`` path of under 2**24 bytes) gets a slot, and its path's bytes go at the end of
    ``paths``. Rows that do not fit are left to SQLite.

    Args:
        slots: the slots, writable, 4 u64 words each, zeros where empty.
        paths: the paths' bytes so far.
        rows: ``(path, shard, offset, size, crc32c)`` tuples.
        hash: the paths' 64-bit hash (xxh3).
        stored: how many rows the table holds so far.

    Returns:
        How many it holds now; -1 when a row finds no empty slot (more rows than the
        table was made for: a damaged index, no table).

    Raises:
        TypeError: ``paths`` is not a bytearray, ``rows`` not a list, a row not a 5-tuple.
        ValueError: the slots are out of shape.
    """
    if not isinstance(paths, bytearray) or not isinstance(rows, list):
        raise TypeError("fill_table(slots, paths: bytearray, rows: list, hash, stored)")
    view = memoryview(slots).cast("B")
    if len(view) < 8 * _WORDS or len(view) % (8 * _WORDS):
        raise ValueError("not a lookup table: slots out of shape")
    words = view.cast("Q")
    capacity = len(words) // _WORDS
    for row in rows:
        if not isinstance(row, tuple) or len(row) != 5:
            raise TypeError("a row is (path, shard, offset, size, crc32c)")
        path, shard, offset, size, crc = row
        if path.__class__ is not str or not (
            shard.__class__ is int and 0 <= shard <= _MAX_SHARD
            and offset.__class__ is int and 0 <= offset <= _OFFSET_MASK
            and size.__class__ is int and 0 <= size <= _MAX_U32
            and crc.__class__ is int and 0 <= crc <= _MAX_U32
        ):  # fmt: skip
            continue
        try:
            key = path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # (a surrogate no byte stands for: SQLite answers)
            continue
        if len(key) > _LENGTH_MASK or len(paths) > _MAX_PATH_START:
            continue
        if stored == capacity:
            return -1
        h = hash(key) or 1  # 0 marks an empty slot
        start = len(paths)
        paths += key
        i = ((h * capacity) >> 64) * _WORDS
        for _ in range(capacity):  # equal hashes sit side by side: paths tell them apart
            if words[i] == 0:
                break
            i = i + _WORDS if i + _WORDS < capacity * _WORDS else 0
        else:
            return -1
        words[i] = h
        words[i + 1] = (shard << _OFFSET_BITS) | offset
        words[i + 2] = (start << _LENGTH_BITS) | len(key)
        words[i + 3] = (crc << 32) | size
        stored += 1
    return stored


def canonical(path: object) -> bool:
    """Whether ``path`` is surely in normal form (``barecat.paths.normalize`` gives it
    back unchanged): a ``str`` (not a subclass) that UTF-8 encodes (no lone surrogates),
    not empty, not starting with ``/`` or ``.``, not ending with ``/``, without ``//``,
    ``/.`` or NUL. Other paths may be normal too; they are the careful path's.

    Args:
        path: what a caller asked for.

    Returns:
        True if it is surely normal.
    """
    if path.__class__ is not str:
        return False
    p: str = path
    if not p or p[0] in "/." or p[-1] == "/" or "//" in p or "/." in p or "\x00" in p:
        return False
    if p.isascii():
        return True
    try:
        p.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


CRC32C_INSTRUCTIONS = "crc32c package"
"""What computes CRC32C here."""

__all__ = [
    "CRC32C_INSTRUCTIONS",
    "SLOT_WORDS",
    "SPAN",
    "AddressTable",
    "canonical",
    "crc32c",
    "fill_table",
    "read_checked",
    "read_each",
]
