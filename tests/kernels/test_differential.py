"""The compiled kernels answer exactly what the pure-Python reference answers, for hostile
inputs to every entry point: the same bytes, the same None, or an exception of the same
type (wrong argument types). Fuzz tests: hypothesis draws descriptors of every kind (-1,
closed, huge, a real file, a directory, a pipe), offsets, sizes and CRCs at and past every
limit, batches with what is not an address, lookup tables with random slot words, path
references past the paths' bytes, no empty slot, a header whose change counter matches or
not, and paths with surrogates, NUL, '/', '.' and non-ASCII text.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

import crc32c as crc32c_package
import pytest
import xxhash
from hypothesis import event, example, given
from hypothesis import strategies as st

from barecat.exceptions import BarecatError
from barecat.paths import normalize
from helpers.fuzzing import fuzz_settings

pytestmark = pytest.mark.fuzz

SPAN = 16 << 20
FILE_SIZE = 70_000
CONTENT = bytes((i * 7919 + (i >> 8)) & 0xFF for i in range(FILE_SIZE))


class Address(NamedTuple):
    """An address type as the index's (a tuple subtype)."""

    shard: int
    offset: int
    size: int
    crc32c: int


def outcome(kernels: Any, name: str, args: tuple[Any, ...]) -> tuple[str, Any]:
    """What a call answered: ("ok", its result) or ("raised", the exception's type)."""
    try:
        result = getattr(kernels, name)(*args)
    except Exception as e:  # (the type is what is compared)
        return ("raised", type(e))
    if type(result).__name__ == "AddressTable":
        return ("ok", "made")
    if isinstance(result, tuple):
        return ("ok", (type(result), result))
    if isinstance(result, list):
        return ("ok", [(type(x), x) for x in result])
    return ("ok", result)


def same(ours: Any, theirs: Any, name: str, *args: Any) -> tuple[str, Any]:
    """``ours.name(*args)`` and ``theirs.name(*args)`` answer the same; what they answer
    (a table made is "made": objects are not compared)."""
    want, got = outcome(ours, name, args), outcome(theirs, name, args)
    assert got == want
    return want


def test_the_build_under_test(compiled: ModuleType) -> None:
    """Under tools/asan_kernels.py, the compiled kernels tested are its build: the file
    BARECAT_KERNELS_SO names, instrumented, with the sanitizer's runtime in the process."""
    so = os.environ.get("BARECAT_KERNELS_SO")
    if not so:
        pytest.skip("BARECAT_KERNELS_SO is not set: the in-place build is under test")
    assert os.path.samefile(compiled.__file__, so)
    if os.environ.get("BARECAT_KERNELS_ASAN") == "1":
        with open(so, "rb") as f:
            assert b"__asan_report_load8" in f.read()  # (instrumented loads)
        assert hasattr(ctypes.CDLL(None), "__asan_init")  # (the runtime is loaded)


# ---------------------------------------------------------------- descriptors --------


@dataclass
class Descriptors:
    """Real descriptors of every kind, opened once for the module."""

    by_kind: dict[str, int]


@pytest.fixture(scope="module")
def descriptors() -> Iterator[Descriptors]:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "shard")
        with open(path, "wb") as f:
            f.write(CONTENT)
        opened = {
            "file": os.open(path, os.O_RDONLY),
            "write-only": os.open(path, os.O_WRONLY),
            "directory": os.open(folder, os.O_RDONLY),
        }
        read_end, write_end = os.pipe()
        opened["pipe"], opened["pipe-write"] = read_end, write_end
        closed = os.open(path, os.O_RDONLY)
        os.close(closed)  # (the lowest free number: nothing opens while the module runs)
        try:
            yield Descriptors({**opened, "closed": closed})
        finally:
            for fd in opened.values():
                os.close(fd)


FD_KINDS = ["file", "file", "file", "write-only", "directory", "pipe", "pipe-write", "closed"]
HOSTILE_FDS: list[Any] = [-1, -(2**31), 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -(2**70)]
NOT_INTS: list[Any] = [None, 1.0, "3", b"3", [3], 2.5]
fd_of = st.sampled_from(FD_KINDS * 3 + HOSTILE_FDS + NOT_INTS)


def resolve_fd(fd: Any, descriptors: Descriptors) -> Any:
    return descriptors.by_kind[fd] if isinstance(fd, str) and fd in descriptors.by_kind else fd


offsets = st.one_of(
    st.integers(0, FILE_SIZE + 10),
    st.integers(0, FILE_SIZE + 10),
    st.sampled_from([-1, -(2**63), FILE_SIZE - 1, FILE_SIZE, 2**31, 2**48 - 1, 2**63 - 1]),
    st.sampled_from([2**63, 2**64, 2**64 + 5, -(2**64)]),
)
sizes = st.one_of(
    st.integers(0, 300),
    st.integers(0, 300),
    st.integers(0, FILE_SIZE + 10),
    st.sampled_from([-1, SPAN - 1, SPAN, SPAN + 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64]),
)
crc_kinds = st.one_of(
    st.sampled_from(["right", "right", "right", "wrong", None, None]),
    st.sampled_from([-1, 0, 2**32 - 1, 2**32, 2**63, -(2**64)]),
    st.integers(0, 2**32 - 1),
)
maybe_wrong_type = st.one_of(st.nothing(), st.sampled_from(NOT_INTS))


def resolve_crc(crc: Any, offset: Any, size: Any) -> Any:
    """ "right" and "wrong": the CRC32C of the file's bytes there, and that plus one."""
    if crc not in ("right", "wrong"):
        return crc
    data = CONTENT[offset : offset + size] if isinstance(offset, int) and offset >= 0 else b""
    if isinstance(size, int) and size < 0:
        data = b""
    right = crc32c_package.crc32c(data)
    return right if crc == "right" else (right + 1) % 2**32


# ------------------------------------------------------------------ read_checked --------


@fuzz_settings(300)
@given(fd=fd_of, offset=offsets, size=sizes, crc=crc_kinds,
       twist=st.sampled_from([0] * 9 + [1, 2, 3]), wrong=st.sampled_from(NOT_INTS))  # fmt: skip
@example(fd="file", offset=0, size=FILE_SIZE, crc="right", twist=0, wrong=None)
@example(fd="file", offset=FILE_SIZE - 5, size=10, crc=None, twist=0, wrong=None)
@example(fd="file", offset=2**63 - 1, size=1, crc=None, twist=0, wrong=None)
@example(fd="file", offset=0, size=0, crc=5, twist=0, wrong=None)
def test_read_checked(
    python: ModuleType,
    compiled: ModuleType,
    descriptors: Descriptors,
    fd: Any,
    offset: Any,
    size: Any,
    crc: Any,
    twist: int,
    wrong: Any,
) -> None:
    args = [resolve_fd(fd, descriptors), offset, size, resolve_crc(crc, offset, size)]
    if twist:  # one argument of a wrong type
        args[twist] = wrong
    result = same(python, compiled, "read_checked", *args)
    event(f"read_checked: {'bytes' if isinstance(result[1], bytes) else result}")
    in_file = isinstance(offset, int) and isinstance(size, int) and offset >= 0 <= size
    if fd == "file" and crc == "right" and not twist and in_file and offset + size <= FILE_SIZE:
        assert result == ("ok", CONTENT[offset : offset + size])


def test_read_checked_argument_count(python: ModuleType, compiled: ModuleType) -> None:
    for args in [(), (1, 2, 3), (1, 2, 3, 4, 5)]:
        same(python, compiled, "read_checked", *args)


# ------------------------------------------------------------------ read_each --------

shards = st.sampled_from([0, 1, 2, 7, 2**16 - 1, 2**70, -1, True])
address_parts = st.tuples(shards, offsets, sizes, crc_kinds)


@st.composite
def an_address(draw: st.DrawFn) -> Any:
    shard, offset, size, crc = draw(address_parts)
    kind = draw(st.sampled_from(["tuple"] * 6 + ["named", "list", "short", "long", "none",
                                                 "wrong type", "unhashable shard"]))  # fmt: skip
    crc = resolve_crc(crc, offset, size)
    if kind == "named":
        return Address(shard, offset, size, crc)
    if kind == "list":
        return [shard, offset, size, crc]
    if kind == "short":
        return (shard, offset, size)
    if kind == "long":
        return (shard, offset, size, crc, 0)
    if kind == "none":
        return None
    if kind == "wrong type":
        parts = [shard, offset, size, crc]
        parts[draw(st.integers(1, 3))] = draw(st.sampled_from(NOT_INTS))
        return tuple(parts)
    if kind == "unhashable shard":
        return ([shard], offset, size, crc)
    return (shard, offset, size, crc)


fd_tables = st.dictionaries(shards, st.one_of(fd_of, st.none()), max_size=6)


@fuzz_settings(300)
@given(fds=fd_tables, addresses=st.lists(an_address(), max_size=12),
       container=st.sampled_from(["dict/list"] * 8 + ["tuple", "not dict"]))  # fmt: skip
@example(fds={0: "file"}, addresses=[(0, 0, 100, "right"), (0, 10, 100, "wrong")],
         container="dict/list")  # fmt: skip
@example(fds={0: None}, addresses=[(0, 0, 10, None)], container="dict/list")
def test_read_each(
    python: ModuleType,
    compiled: ModuleType,
    descriptors: Descriptors,
    fds: dict[Any, Any],
    addresses: list[Any],
    container: str,
) -> None:
    real = {shard: resolve_fd(fd, descriptors) for shard, fd in fds.items()}
    resolved = [
        (a[0], a[1], a[2], resolve_crc(a[3], a[1], a[2])) if type(a) is tuple and len(a) == 4 else a
        for a in addresses
    ]
    args: list[Any] = [real, resolved]
    if container == "tuple":
        args[1] = tuple(resolved)
    elif container == "not dict":
        args[0] = list(real.items())
    same(python, compiled, "read_each", *args)


class Meddler:
    """A shard, field or descriptor whose ``__hash__`` and ``__index__`` change the list
    of the call they are in, while it runs."""

    def __init__(self, value: int, victim: list[Any], action: str) -> None:
        self.value, self.victim, self.action = value, victim, action

    def meddle(self) -> None:
        if self.action == "clear":
            self.victim.clear()
        elif self.action == "append":
            self.victim.append(self.victim[0] if self.victim else None)
        elif self.action == "pop" and self.victim:
            self.victim.pop()
        elif self.action == "replace" and self.victim:
            self.victim[:] = [None] * len(self.victim)

    def __hash__(self) -> int:
        self.meddle()
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return other == self.value

    def __index__(self) -> int:
        self.meddle()
        return self.value


MEDDLING = ["clear", "append", "pop", "replace"]
PLACES = ["shard", "offset", "size", "crc", "fd"]


def meddled_batch(
    place: str, action: str, descriptors: Descriptors
) -> tuple[dict[Any, Any], list[Any]]:
    """A batch of reads with a meddler at ``place``, changing the batch's list."""
    addresses: list[Any] = []
    fds: dict[Any, Any] = {0: descriptors.by_kind["file"]}
    fields: list[Any] = [0, 10, 20, crc32c_package.crc32c(CONTENT[10:30])]
    if place == "fd":
        fds[0] = Meddler(descriptors.by_kind["file"], addresses, action)
    else:
        fields[PLACES.index(place)] = Meddler(fields[PLACES.index(place)], addresses, action)
    addresses += [(0, 0, 5, None), tuple(fields)] + [(0, k, 5, None) for k in range(6)]
    return fds, addresses


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("action", MEDDLING)
def test_read_each_batch_changed_while_read(
    python: ModuleType, compiled: ModuleType, descriptors: Descriptors, place: str, action: str
) -> None:
    """What an address's parts run cannot change the batch being read: each module
    reads the list as it was at the call (the compiled one read freed memory, or
    crashed, once)."""
    want = outcome(python, "read_each", meddled_batch(place, action, descriptors))
    got = outcome(compiled, "read_each", meddled_batch(place, action, descriptors))
    assert got == want
    assert want[0] == "ok"
    assert len(want[1]) == 8


@pytest.mark.parametrize("action", MEDDLING)
def test_find_many_list_changed_by_the_hash(
    python: ModuleType, compiled: ModuleType, action: str
) -> None:
    """A hash that changes the list of paths being found cannot change the batch either."""
    keys = [f"k{n}".encode() for n in range(6)]
    answers = []
    for kernels in (python, compiled):
        asked: list[Any] = [key.decode() for key in keys]
        meddler = Meddler(0, asked, action)

        def hash64(key: bytes, meddler: Meddler = meddler) -> int:
            meddler.meddle()
            return xxhash.xxh3_64_intdigest(key)

        table = table_of(kernels, keys, hash64)
        answers.append(outcome(table, "find_many", (asked,)))
    assert answers[0] == answers[1]
    assert answers[0][0] == "ok"


def table_of(kernels: ModuleType, keys: list[bytes], hash64: Any) -> Any:
    """A full table of ``keys``, placed by their xxh3 (each at shard 0, offset its slot,
    size 1), probed with ``hash64``."""
    capacity = len(keys)
    slots = [0] * (capacity * WORDS)
    paths = b""
    for key in keys:
        h = xxhash.xxh3_64_intdigest(key) or 1
        i = (h * capacity) >> 64
        while slots[i * WORDS]:
            i = (i + 1) % capacity
        slots[i * WORDS : i * WORDS + 4] = [h, i, len(paths) << 24 | len(key), i << 32 | 1]
        paths += key
    return kernels.AddressTable(array("Q", slots), paths, 0, hash64, Address)


# ------------------------------------------------------------------ the table --------

WORDS = 4
hostile_texts = st.one_of(
    st.text(alphabet=st.sampled_from("ab/.\x00é\udc80\ud800😀 "), max_size=8),
    st.text(st.characters(exclude_categories=()), max_size=6),  # (surrogates too)
)
names = st.lists(st.text("abé😀", min_size=1, max_size=3), min_size=1, max_size=3).map("/".join)


@dataclass
class Table:
    """The arguments of an AddressTable, and the paths it was built from."""

    args: tuple[Any, ...]
    keys: list[str]


@st.composite
def a_table(draw: st.DrawFn) -> Table:
    """A lookup table as lookup_table.py builds one (entries placed by linear probing,
    maybe none left empty), then maybe damaged: random words anywhere, path references
    past the paths' bytes."""
    capacity = draw(st.integers(1, 64))
    keys = draw(st.lists(names | names | hostile_texts, max_size=capacity, unique=True))
    raw = [k.encode("utf-8", "surrogateescape") for k in keys if _encodes(k)]
    # a hash with chosen collisions: a few values, 0 and 2**64 - 1 among them
    pool = draw(st.lists(st.sampled_from([0, 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1),
                         min_size=1, max_size=4))  # fmt: skip
    chosen = {key: draw(st.sampled_from(pool)) for key in raw if draw(st.booleans())}

    def hash64(key: bytes) -> int:
        return chosen[key] if key in chosen else xxhash.xxh3_64_intdigest(key)

    paths_start = draw(st.integers(0, 16))
    paths = bytearray(draw(st.binary(max_size=paths_start)).ljust(paths_start, b"\0"))
    words = [0] * (capacity * WORDS)
    for key in raw:
        h = hash64(key) or 1
        i = (h * capacity) >> 64
        while words[i * WORDS]:
            i = (i + 1) % capacity
        ref = (len(paths) - paths_start) << 24 | len(key)
        paths += key
        offset, size = draw(st.integers(0, FILE_SIZE + 5)), draw(st.integers(0, 200))
        crc = resolve_crc(draw(st.sampled_from(["right", "right", "wrong"])), offset, size)
        shard = draw(st.sampled_from([0, 0, 1, 2**16 - 1]))
        words[i * WORDS : i * WORDS + 4] = [h, shard << 48 | offset, ref, crc << 32 | size]
    if draw(st.integers(0, 3)) == 0:  # no slot left empty: every probe of a miss wraps
        for i in range(capacity):
            if not words[i * WORDS]:
                words[i * WORDS] = draw(st.sampled_from([1, 2**64 - 1]) | st.integers(1, 2**64 - 1))
                words[i * WORDS + 2] = draw(st.integers(0, 2**64 - 1))
    for _ in range(draw(st.integers(0, 6))):  # damage
        at = draw(st.integers(0, len(words) - 1))
        words[at] = draw(st.sampled_from([0, 1, 2**64 - 1, (2**40 - 1) << 24 | 5, 2**24 - 1])
                         | st.integers(0, 2**64 - 1))  # fmt: skip
    slots = array("Q", words)
    kind = draw(st.sampled_from(["array", "bytes", "bytearray", "mmap"]))
    slots_arg: Any = slots if kind == "array" else bytes(slots)
    if kind == "bytearray":
        slots_arg = bytearray(slots_arg)
    elif kind == "mmap":
        slots_arg = _mapped(bytes(slots))
    paths_arg: Any = draw(st.sampled_from([bytes, bytearray, _mapped]))(bytes(paths))
    counter = draw(st.binary(min_size=4, max_size=4))
    header_kind = draw(st.sampled_from(["none", "matching", "moved"]))
    header: Any = None
    if header_kind != "none":
        header = bytearray(draw(st.binary(min_size=28, max_size=40)).ljust(28, b"\1"))
        header[24:28] = counter if header_kind == "matching" else _moved(counter)
    args: tuple[Any, ...] = (slots_arg, paths_arg, paths_start, hash64, Address)
    if header is not None:
        args += (header, counter)
    return Table(args, keys)


def _moved(counter: bytes) -> bytes:
    return bytes([(counter[0] + 1) % 256]) + counter[1:]


def _mapped(data: bytes) -> Any:
    mapped = mmap.mmap(-1, max(len(data), 1))
    mapped[: len(data)] = data
    return mapped if len(data) else bytearray()


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


class StrChild(str):
    """A str subclass (not surely normal: the careful path's)."""


def queries(keys: list[str]) -> st.SearchStrategy[Any]:
    known = st.sampled_from(keys) if keys else st.nothing()
    return st.one_of(known, known, known, known.map(StrChild), hostile_texts, names,
                     st.sampled_from([None, b"a", 3, ["a"]]))  # fmt: skip


@fuzz_settings(300)
@given(data=st.data(), table=a_table())
def test_address_table(
    python: ModuleType, compiled: ModuleType, descriptors: Descriptors, data: st.DataObject,
    table: Table,
) -> None:  # fmt: skip
    made = same(python, compiled, "AddressTable", *table.args)
    assert made[0] == "ok", made
    ours, theirs = python.AddressTable(*table.args), compiled.AddressTable(*table.args)
    fds = {shard: resolve_fd(fd, descriptors) for shard, fd in data.draw(fd_tables).items()}
    fds.setdefault(0, descriptors.by_kind["file"])
    asked = data.draw(st.lists(queries(table.keys), max_size=8))
    for path in asked:
        same(ours, theirs, "find", path)
        got = same(ours, theirs, "get", path, fds)
        event(f"get: {'bytes' if isinstance(got[1], bytes) else got}")
    same(ours, theirs, "find_many", asked)
    in_table = [k for k in table.keys if _encodes(k) and ours.find(k) is not None]
    same(ours, theirs, "find_many", in_table)
    same(ours, theirs, "find_many", tuple(in_table))
    same(ours, theirs, "get", asked[0] if asked else "a", list(fds.items()))  # fmt: skip


BAD_TABLES: list[tuple[Any, ...]] = [
    (b"", b"", 0, xxhash.xxh3_64_intdigest, Address),
    (bytes(33), b"", 0, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), b"ab", 3, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), b"ab", -1, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), b"ab", 2**70, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), b"ab", 1.0, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), b"ab", "1", xxhash.xxh3_64_intdigest, Address),
    ("x" * 32, b"ab", 0, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), "ab", 0, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), None, 0, xxhash.xxh3_64_intdigest, Address),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, dict),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, (1, 2)),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, bytes(27), b"abcd"),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, bytes(28), b"abc"),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, bytes(28), "abcd"),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, bytes(28)),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, "x" * 28, b"abcd"),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, None, b"abcd"),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest, Address, None, None, None),
    (bytes(32), b"ab", 0, xxhash.xxh3_64_intdigest),
]


@pytest.mark.parametrize("args", BAD_TABLES, ids=range(len(BAD_TABLES)))
def test_address_table_out_of_shape(
    python: ModuleType, compiled: ModuleType, args: tuple[Any, ...]
) -> None:
    same(python, compiled, "AddressTable", *args)


def test_address_table_hostile_hash(python: ModuleType, compiled: ModuleType) -> None:
    """A hash that raises, or answers what is not an int, raises the same in both."""

    def raising(key: bytes) -> int:
        raise KeyError(key)

    for hash64 in (raising, lambda key: "h", lambda key: 1.5):
        args = (bytes(32), b"", 0, hash64, Address)
        ours, theirs = python.AddressTable(*args), compiled.AddressTable(*args)
        same(ours, theirs, "find", "a")
        same(ours, theirs, "get", "a", {})
        same(ours, theirs, "find_many", ["a"])


def test_shard_with_none_for_descriptor(
    python: ModuleType, compiled: ModuleType, descriptors: Descriptors
) -> None:
    """A shard whose descriptor is None has none open: the careful path's, in both (the
    compiled core once raised TypeError there)."""
    key = b"a/b"
    size_crc = crc32c_package.crc32c(CONTENT[5:8]) << 32 | 3
    slots = array("Q", [xxhash.xxh3_64_intdigest(key) or 1, 5, len(key), size_crc])
    args = (slots, key, 0, xxhash.xxh3_64_intdigest, Address)
    ours, theirs = python.AddressTable(*args), compiled.AddressTable(*args)
    file = descriptors.by_kind["file"]
    assert ours.get("a/b", {0: file}) == theirs.get("a/b", {0: file}) == CONTENT[5:8]
    assert ours.get("a/b", {0: None}) is theirs.get("a/b", {0: None}) is None
    addresses = [(0, 0, 4, None), (1, 0, 4, None)]
    want = [CONTENT[:4], None]
    assert python.read_each({0: file, 1: None}, addresses) == want
    assert compiled.read_each({0: file, 1: None}, addresses) == want


class Renamed(tuple):  # type: ignore[type-arg]
    """A tuple subtype with a ``__new__`` of its own (which the tables do not call)."""

    def __new__(cls, *fields: int) -> Renamed:
        raise AssertionError("not called: addresses are made as tuples")


@pytest.mark.parametrize(
    "address",
    [Address, tuple, Renamed, os.stat_result, time.struct_time, type(sys.version_info)],
    ids=lambda t: t.__name__,
)
def test_address_types(
    python: ModuleType, compiled: ModuleType, descriptors: Descriptors, address: type
) -> None:
    """Any tuple subtype may be the address type, and answers the same in both; one that
    tuple.__new__ refuses to make (a struct sequence, whose hidden fields a bare tuple
    lacks) raises TypeError at each address made, in both (the compiled one made such
    bare tuples, and reading their fields crashed it)."""
    key = b"a/b"
    size_crc = crc32c_package.crc32c(CONTENT[5:8]) << 32 | 3
    args = (array("Q", [xxhash.xxh3_64_intdigest(key) or 1, 5, len(key), size_crc]), key, 0,
            xxhash.xxh3_64_intdigest, address)  # fmt: skip
    ours, theirs = python.AddressTable(*args), compiled.AddressTable(*args)
    found = same(ours, theirs, "find", "a/b")
    same(ours, theirs, "find_many", ["a/b", "a/b"])
    same(ours, theirs, "find", "a/c")
    assert same(ours, theirs, "get", "a/b", {0: descriptors.by_kind["file"]}) == (
        "ok",
        CONTENT[5:8],
    )
    if found[0] == "ok":
        assert found[1] == (address, (0, 5, 3, size_crc >> 32))
        made = theirs.find("a/b")
        assert [*made] == [0, 5, 3, size_crc >> 32] and repr(made)
    else:
        assert found == ("raised", TypeError)
        assert address in (os.stat_result, time.struct_time, type(sys.version_info))


# ------------------------------------------------------------------ canonical --------


@fuzz_settings(500)
@given(path=st.one_of(hostile_texts, st.text(st.characters(exclude_categories=())),
                      st.text().map(StrChild), names,
                      st.sampled_from([None, b"a", 1, ".a", "a/.b", "a//b", "a/"])))  # fmt: skip
@example(path="\udc80")
@example(path="a\x00b")
@example(path="a/b.c/d")
def test_canonical(python: ModuleType, compiled: ModuleType, path: Any) -> None:
    """Both say the same, and what they call surely normal is: normalize gives it back."""
    said = same(python, compiled, "canonical", path)
    if said == ("ok", True):
        try:
            assert normalize(path) == path
        except BarecatError as e:
            raise AssertionError(f"canonical({path!r}) but normalize raised {e}") from e
