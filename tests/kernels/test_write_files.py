"""``write_files``, extraction's per-file loop, on both kernel paths: the plain files
written with their bytes and metadata; every other row handed back with nothing made for
it (not the plain case, a CRC that does not match, something in the way, a full disk);
the zero blocks of big files left as holes, by ``kernels/sparse.py``'s rule; and the
compiled twin answering what the Python reference answers, fuzzed with hostile rows and
arguments, down to the trees they leave.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import crc32c as crc32c_package
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from barecat.kernels import python_writes
from barecat.kernels.sparse import HOLE_BLOCK, SPARSE_MIN
from barecat.transfer.kernel_extraction import ListedRows
from helpers.fuzzing import fuzz_settings

LIMIT = 256 << 10  # (above SPARSE_MIN: files with holes are the kernel's too)
MTIME = 1_700_000_000_123_456_789
BUFFER = 1 << 20


class Shard:
    """A shard file of blobs back to back, and rows pointing at them."""

    def __init__(self, folder: str, blobs: list[bytes]) -> None:
        self.path = os.path.join(folder, "shard")
        self.places: list[tuple[int, int, int]] = []  # offset, size, crc
        with open(self.path, "wb") as f:
            for blob in blobs:
                self.places.append((f.tell(), len(blob), crc32c_package.crc32c(blob)))
                f.write(blob)
        self.fd = os.open(self.path, os.O_RDONLY)

    def row(self, path: Any, k: int, mode: Any = 0o100644, **changes: Any) -> tuple[Any, ...]:
        offset, size, crc = self.places[k]
        fields = {"shard": 0, "offset": offset, "size": size, "crc": crc}
        fields.update(changes)
        uid, gid = fields.get("uid"), fields.get("gid")
        mtime = fields.get("mtime", MTIME)
        return (
            path,
            fields["shard"],
            fields["offset"],
            fields["size"],
            fields["crc"],
            mode,
            uid,
            gid,
            mtime,
        )


@pytest.fixture
def place(tmp_path: Any) -> Iterator[tuple[str, int, Shard]]:
    """A target directory (with ``d/`` and ``e/`` in it) open as a descriptor, and a shard
    of 8 blobs."""
    target = tmp_path / "out"
    (target / "d").mkdir(parents=True)
    (target / "e").mkdir()  # (there, but not among the directories made safe)
    blobs = [bytes([k]) * (100 + 37 * k) for k in range(8)]
    shard = Shard(str(tmp_path), blobs)
    root = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield str(target), root, shard
    finally:
        os.close(root)
        os.close(shard.fd)


def umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def call(writer: ModuleType, root: int, shard: Shard, rows: list[Any], **kw: Any) -> Any:
    dirs = kw.pop("dirs", {"": 0, "d": 0})
    return writer.write_files(
        root,
        kw.pop("fds", {0: shard.fd}),
        rows,
        bytearray(BUFFER),
        LIMIT,
        umask(),
        dirs,
        kw.pop("euid", None),
    )


def test_plain_files_are_written_with_their_bytes_and_metadata(
    writer: ModuleType, place: Any
) -> None:
    target, root, shard = place
    rows = [
        shard.row("a.bin", 0, mode=0o100640),
        shard.row("d/b.bin", 1, mode=None),
        shard.row("d/setuid", 2, mode=0o104755),
        shard.row("d/old", 3, mtime=-1_500_000_001),
        ("d/empty", 0, 0, 0, 0, 0o100600, None, None, None),
    ]
    left, files, written = call(writer, root, shard, rows)
    assert (left, files, written) == ([], 5, sum(shard.places[k][1] for k in range(4)))
    for k, name in enumerate(["a.bin", "d/b.bin", "d/setuid", "d/old"]):
        with open(os.path.join(target, name), "rb") as f:
            assert f.read() == bytes([k]) * (100 + 37 * k)
    st_of = {
        n: os.stat(os.path.join(target, n))
        for n in ["a.bin", "d/b.bin", "d/setuid", "d/old", "d/empty"]
    }
    assert stat.S_IMODE(st_of["a.bin"].st_mode) == 0o640
    assert stat.S_IMODE(st_of["d/b.bin"].st_mode) == 0o666 & ~umask()
    assert stat.S_IMODE(st_of["d/setuid"].st_mode) == 0o4755
    assert st_of["a.bin"].st_mtime_ns == MTIME
    assert st_of["d/old"].st_mtime_ns == -1_500_000_001  # (before 1970: seconds floored)
    assert st_of["d/empty"].st_size == 0


HANDED_BACK = {
    "a link": {"mode": 0o120777},
    "a path not surely normal": {"path": "./x"},
    "a hidden name": {"path": "d/.x"},
    "two slashes": {"path": "d//x"},
    "not a str": {"path": b"x"},
    "a directory not made safe": {"path": "e/x"},
    "size at the limit": {"size": LIMIT},
    "a CRC that does not match": {"crc": 12345},
    "no CRC": {"crc": None},
    "no open shard": {"shard": 9},
    "an mtime past 64 bits": {"mtime": 1 << 63},
    "an owner of -1": {"uid": -1, "gid": 0},
    "a bool for a size": {"size": True},
    "an offset past the shard": {"offset": 10**9},
}


@pytest.mark.parametrize("case", sorted(HANDED_BACK))
def test_rows_not_plain_are_handed_back_with_nothing_made(
    writer: ModuleType, place: Any, case: str
) -> None:
    target, root, shard = place
    changes = dict(HANDED_BACK[case])
    path = changes.pop("path", "d/x")
    mode = changes.pop("mode", 0o100644)
    rows = [shard.row("first", 0), shard.row(path, 1, mode=mode, **changes), shard.row("last", 2)]
    left, files, _ = call(writer, root, shard, rows)
    assert (left, files) == ([1], 2)
    assert sorted(os.listdir(target)) == ["d", "e", "first", "last"]
    assert os.listdir(os.path.join(target, "e")) == []
    assert os.listdir(os.path.join(target, "d")) == []


def test_names_of_one_stored_file_become_hard_links(writer: ModuleType, place: Any) -> None:
    """Rows at one place that agree on the file's metadata (a hard link stored once): the
    file is written once and its other names are links of it, in any directory."""
    target, root, shard = place
    rows = [shard.row("a", 0), shard.row("b", 1), shard.row("d/c", 1), shard.row("e2", 1)]
    rows.append(shard.row("f", 2))
    size = shard.places[1][1]
    left, files, written = call(writer, root, shard, rows, dirs={"": 0, "d": 0})
    assert (left, files) == ([], 5)
    assert written == shard.places[0][1] + size + shard.places[2][1]  # (its bytes once)
    b, c, e2 = (os.stat(os.path.join(target, n)) for n in ["b", "d/c", "e2"])
    assert b.st_ino == c.st_ino == e2.st_ino and b.st_nlink == 3 and b.st_size == size


@pytest.mark.parametrize(
    "second",
    [{"mode": 0o100600}, {"mtime": MTIME + 1}, {"uid": 5, "gid": 5}, {"path": "d/.hidden"}],
    ids=["mode", "mtime", "owner", "a name not plain"],
)
def test_names_that_differ_are_handed_back_together(
    writer: ModuleType, place: Any, second: dict[str, Any]
) -> None:
    """Rows at one place that are not all names of one file (or one not plain): every row
    at that place goes to the careful path, which decides, and nothing is made for them."""
    target, root, shard = place
    changes = dict(second)
    path, mode = changes.pop("path", "d/b2"), changes.pop("mode", 0o100644)
    rows = [shard.row("a", 0), shard.row("b", 1), shard.row(path, 1, mode=mode, **changes)]
    rows.append(shard.row("c", 2))
    assert call(writer, root, shard, rows)[:2] == ([1, 2], 2)
    assert sorted(os.listdir(target)) == ["a", "c", "d", "e"]
    assert os.listdir(os.path.join(target, "d")) == []


def test_empty_files_at_a_files_place_are_files_of_their_own(
    writer: ModuleType, place: Any
) -> None:
    """An empty file takes no room, so its row may have the place of the next file (as
    ``create`` lays them out); each is written alone, the file and its names as one."""
    target, root, shard = place
    offset = shard.places[1][0]
    empty = ("e0", 0, offset, 0, 0, 0o100600, None, None, MTIME)
    rows = [empty, shard.row("b", 1), ("d/e1", *empty[1:]), shard.row("b2", 1)]
    assert call(writer, root, shard, rows)[:3] == ([], 4, shard.places[1][1])
    e0, e1, b, b2 = (os.stat(os.path.join(target, n)) for n in ["e0", "d/e1", "b", "b2"])
    assert e0.st_size == e1.st_size == 0 and e0.st_ino != e1.st_ino
    assert b.st_ino == b2.st_ino != e0.st_ino and stat.S_IMODE(e0.st_mode) == 0o600
    damaged = ("e2", 0, offset, 0, 7, None, None, None, None)  # (no bytes, yet a CRC)
    assert call(writer, root, shard, [damaged, shard.row("c", 1)])[:2] == ([0, 1], 0)


def test_a_name_in_the_way_leaves_none_of_the_file(writer: ModuleType, place: Any) -> None:
    """A later name of a file stored once cannot be made (something is there): the file
    and the names made before it are removed again, and every row at the place goes back."""
    target, root, shard = place
    with open(os.path.join(target, "d", "c"), "wb") as f:
        f.write(b"there")
    rows = [shard.row("b", 1), shard.row("b2", 1), shard.row("d/c", 1), shard.row("d/c2", 1)]
    assert call(writer, root, shard, rows)[:2] == ([0, 1, 2, 3], 0)
    assert sorted(os.listdir(target)) == ["d", "e"]
    assert os.listdir(os.path.join(target, "d")) == ["c"]
    with open(os.path.join(target, "d", "c"), "rb") as f:
        assert f.read() == b"there"


def test_what_is_in_the_way_is_left_as_it_is(writer: ModuleType, place: Any, tmp_path: Any) -> None:
    target, root, shard = place
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    with open(os.path.join(target, "file"), "wb") as f:
        f.write(b"there")
    os.symlink(outside, os.path.join(target, "link"))
    os.mkdir(os.path.join(target, "dir"))
    rows = [shard.row(name, k) for k, name in enumerate(["file", "link", "dir", "new"])]
    assert call(writer, root, shard, rows)[:2] == ([0, 1, 2], 1)
    with open(os.path.join(target, "file"), "rb") as f:
        assert f.read() == b"there"
    assert outside.read_bytes() == b"keep"
    assert os.path.islink(os.path.join(target, "link"))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files an owner needs root")
def test_owners_are_given_where_they_differ(writer: ModuleType, place: Any) -> None:
    target, root, shard = place
    rows = [shard.row("theirs", 0, uid=1234, gid=4321), shard.row("d/mine", 1, uid=0, gid=7)]
    assert call(writer, root, shard, rows, euid=0, dirs={"": 0, "d": 7})[:2] == ([], 2)
    st_theirs, st_mine = (os.stat(os.path.join(target, n)) for n in ["theirs", "d/mine"])
    assert (st_theirs.st_uid, st_theirs.st_gid) == (1234, 4321)
    # "d" gives its files group 7 (as a setgid directory would): nothing to change
    assert (st_mine.st_uid, st_mine.st_gid) == (0, 0)


def data_extents(path: str) -> list[tuple[int, int]]:
    """Where the file at ``path`` holds data (``SEEK_DATA``/``SEEK_HOLE``): the rest are
    holes (one extent, the whole file, on a file system that makes none)."""
    extents: list[tuple[int, int]] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size, at = os.fstat(fd).st_size, 0
        while at < size:
            try:
                start = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:  # (ENXIO: only a hole is left)
                break
            at = os.lseek(fd, start, os.SEEK_HOLE)
            extents.append((start, at))
    finally:
        os.close(fd)
    return extents


def rule_extents(blob: bytes) -> list[tuple[int, int]]:
    """Where a file of ``blob`` holds data by the rule: every aligned block of zeros a
    hole, in a file of SPARSE_MIN bytes or more."""
    extents: list[tuple[int, int]] = []
    step = HOLE_BLOCK if len(blob) >= SPARSE_MIN else max(len(blob), 1)
    for at in range(0, len(blob), step):
        block = blob[at : at + step]
        if len(block) == HOLE_BLOCK and not any(block) and len(blob) >= SPARSE_MIN:
            continue
        if extents and extents[-1][1] == at:
            extents[-1] = (extents[-1][0], at + len(block))
        else:
            extents.append((at, at + len(block)))
    return extents


def holey(blocks: str) -> bytes:
    """A blob a block a letter: ``z`` a block of zeros, ``x`` one of random bytes, ``h`` a
    block of zeros but its last byte, ``t`` a last part block of 100 bytes."""
    made = {
        "z": bytes(HOLE_BLOCK),
        "x": os.urandom(HOLE_BLOCK),
        "h": bytes(HOLE_BLOCK - 1) + b"\x01",
        "t": os.urandom(100),
    }
    return b"".join(made[c] for c in blocks)


HOLEY = {
    "holes between data": "x" * 4 + "z" * 5 + "x" * 3 + "z" * 2 + "x" * 6,
    "starts and ends in holes": "zz" + "x" * 14 + "z" * 4,
    "all zeros": "z" * 16,
    "zeros not in aligned blocks": "x" + "h" * 15 + "t",
    "a part block after a hole": "x" * 15 + "z" + "t",
    "below SPARSE_MIN": "x" + "z" * 14,
}


@pytest.mark.parametrize("case", sorted(HOLEY))
def test_zero_blocks_of_big_files_are_left_as_holes(
    writer: ModuleType, tmp_path: Any, case: str
) -> None:
    """A file of SPARSE_MIN or more is written with its aligned zero blocks as holes (and
    its size set where it ends in one), its bytes exactly the stored ones."""
    blob = holey(HOLEY[case])
    shard = Shard(str(tmp_path), [os.urandom(10), blob])
    target = tmp_path / "out"
    target.mkdir()
    root = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert call(writer, root, shard, [shard.row("f", 1)])[:3] == ([], 1, len(blob))
    finally:
        os.close(root)
        os.close(shard.fd)
    assert (target / "f").read_bytes() == blob
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.truncate(SPARSE_MIN)
    if data_extents(str(probe)) == [(0, SPARSE_MIN)]:
        pytest.skip(f"the file system of {tmp_path} makes no holes (SEEK_DATA)")
    assert data_extents(str(target / "f")) == rule_extents(blob)


@contextlib.contextmanager
def small_tmpfs(size: str) -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="barecat-full-")
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", folder], capture_output=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs to fill: {done.stderr.decode().strip()}")
        try:
            yield folder
        finally:
            subprocess.run(["umount", folder], check=True)
    finally:
        os.rmdir(folder)


def test_a_full_disk_leaves_no_file_in_part(writer: ModuleType, tmp_path: Any) -> None:
    """Files that do not fit are handed back and not left behind, partly written; the
    ones written are whole."""
    blobs = [bytes([k + 1]) * 60_000 for k in range(40)]  # 2.4 MB into 1 MiB
    shard = Shard(str(tmp_path), blobs)
    with small_tmpfs("1m") as target:
        root = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        try:
            rows = [shard.row(f"f{k:02}", k) for k in range(len(blobs))]
            left, files, written = call(writer, root, shard, rows)
        finally:
            os.close(root)
            os.close(shard.fd)
        there = sorted(os.listdir(target))
        assert left and files == len(there) == len(blobs) - len(left)
        assert there == sorted(f"f{k:02}" for k in range(len(blobs)) if k not in left)
        for name in there:
            with open(os.path.join(target, name), "rb") as f:
                assert f.read() == blobs[int(name[1:])]
        assert written == 60_000 * files


WRONG_ARGUMENTS: dict[str, dict[str, Any]] = {
    "fds not a dict": {"fds": [3]},
    "rows not a list": {"rows": ()},
    "a row too short": {"rows": [("a", 0, 0, 1, 0, None, None, None)]},
    "a row not a tuple": {"rows": [["a", 0, 0, 1, 0, None, None, None, None]]},
    "buffer not a bytearray": {"buffer": b"x" * 100},
    "dirs not a dict": {"dirs": [""]},
    "root not an int": {"root": "3"},
    "root negative": {"root": -100},
    "limit a float": {"limit": 1.5},
    "umask too big": {"umask": 0o10000},
    "euid negative": {"euid": -1},
    "euid a str": {"euid": "0"},
}


@pytest.mark.parametrize("case", sorted(WRONG_ARGUMENTS))
def test_wrong_arguments_raise_alike_before_anything_is_written(
    compiled: ModuleType, place: Any, case: str
) -> None:
    target, root, shard = place
    arguments = {
        "root": root,
        "fds": {0: shard.fd},
        "rows": [shard.row("a", 0)],
        "buffer": bytearray(BUFFER),
        "limit": LIMIT,
        "umask": 0o022,
        "dirs": {"": 0},
        "euid": None,
    }
    arguments.update(WRONG_ARGUMENTS[case])
    raised = []
    for twin in (python_writes, compiled):
        with pytest.raises((TypeError, ValueError)) as info:
            twin.write_files(*arguments.values())
        raised.append(info.type)
    assert raised[0] is raised[1]
    assert sorted(os.listdir(target)) == ["d", "e"]


# ------------------------------------------------------------------- fuzzing --------

PATHS = [
    "a",
    "d/b",
    "d/c",
    "e/f",
    "./a",
    "d/.h",
    "/abs",
    "d/",
    "",
    "a\x00b",
    "ü/x",
    "d/\udcff",
    7,
    None,
]
SHARDS: list[Any] = [0, 0, 0, 1, 9, -1, True, "0", 2**64]


@st.composite
def hostile_row(draw: Any, blobs: int) -> tuple[Any, ...]:
    """A row of one of the blobs, most of it right, up to three of its fields hostile."""
    k = draw(st.integers(0, blobs - 1))
    offset, size, crc = PLACES[k]
    row: list[Any] = [
        draw(st.sampled_from(PATHS[:4])),
        0,
        offset,
        size,
        crc,
        0o100644,
        None,
        None,
        MTIME,
    ]
    hostile: list[list[Any]] = [
        PATHS,
        SHARDS,
        [offset + 1, -offset - 1, 2**63 - 1, 2**63, None],
        [0, size + 1, LIMIT - 1, LIMIT, -1, 2**40],
        [0, crc ^ 1, -1, 2**32, None],
        [None, 0o120777, 0o40755, 0o107777, -1, 2**32, 1.0],
        [0, 1234, -1, 2**32 - 1, 2**40],
        [0, 4321, -2, 2**32],
        [None, -1, 0, 2**63 - 1, -(2**63), 2**63, 1.5],
    ]
    for field in draw(st.lists(st.integers(0, len(row) - 1), max_size=3)):
        row[field] = draw(st.sampled_from(hostile[field]))
    return tuple(row)


@st.composite
def hostile_rows(draw: Any) -> list[tuple[Any, ...]]:
    """Up to 8 rows, each maybe after an empty file at its place and followed by other
    names of its file (a hard link stored once), some of them agreeing on its metadata,
    some not."""
    rows: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 8))):
        row = draw(hostile_row(len(BLOBS)))
        if draw(st.integers(0, 3)) == 0:  # (an empty file parked at the next one's place)
            name = draw(st.sampled_from(["e", "d/e", "a"]))
            rows.append(
                (name, row[1], row[2], 0, draw(st.sampled_from([0, 0, 1])), None, None, None, None)
            )
        rows.append(row)
        for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
            other = [draw(st.sampled_from([*PATHS[:4], "d/x", "y", "ü/z"])), *row[1:]]
            if draw(st.integers(0, 3)) == 0:  # (one that differs: the careful path's)
                other[5] = draw(st.sampled_from([None, 0o100600]))
            rows.append(tuple(other))
    return rows


BLOBS = [bytes([k + 1]) * (k * 300 + 5) for k in range(6)]
BLOBS.append(  # (one with holes: aligned zero blocks between, and at its end)
    b"".join(
        bytes(HOLE_BLOCK) if k % 3 == 1 or k > 14 else bytes([k + 1]) * HOLE_BLOCK
        for k in range(17)
    )
)
PLACES: list[tuple[int, int, int]] = []
for _blob in BLOBS:
    _at = sum(p[1] for p in PLACES)
    PLACES.append((_at, len(_blob), crc32c_package.crc32c(_blob)))


def tree(folder: str) -> dict[str, Any]:
    """Every name below ``folder``: its kind and mode, owner, mtime ("now" for one set
    as it was made: a directory's, a file's without one), bytes and count of names, and
    where a file holds data (its holes)."""
    found: dict[str, Any] = {}
    for at, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = os.path.join(at, name)
            st_ = os.lstat(path)
            data = None
            if stat.S_ISREG(st_.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
            found[os.path.relpath(path, folder)] = (
                st_.st_mode,
                "now" if abs(st_.st_mtime_ns - time.time_ns()) < 3600 * 10**9 else st_.st_mtime_ns,
                st_.st_uid,
                st_.st_gid,
                data,
                st_.st_nlink if data is not None else None,
                data_extents(path) if data is not None else None,
            )
    return found


def outcome(
    twin: ModuleType, folder: str, shard_fd: int, rows: list[Any], buffer: int, euid: Any
) -> Any:
    os.makedirs(os.path.join(folder, "d"))
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        got = twin.write_files(
            root,
            {0: shard_fd, 1: -5, 2**64: shard_fd},
            rows,
            bytearray(buffer),
            LIMIT,
            0o022,
            {"": 0, "d": 0, "ü": 3},
            euid,
        )
    except Exception as e:  # (the type is what is compared)
        got = type(e)
    finally:
        os.close(root)
    return got, tree(folder)


@pytest.mark.fuzz
@fuzz_settings(150)
@given(
    rows=hostile_rows(),
    buffer=st.sampled_from([BUFFER, 700, 0]),
    euid=st.sampled_from([None, None, 0, 1234]),
)
def test_the_compiled_twin_answers_and_writes_what_the_reference_does(
    compiled: ModuleType, rows: list[Any], buffer: int, euid: Any
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "shard")
        with open(path, "wb") as f:
            f.write(b"".join(BLOBS))
        fd = os.open(path, os.O_RDONLY)
        try:
            want = outcome(python_writes, os.path.join(folder, "python"), fd, rows, buffer, euid)
            got = outcome(compiled, os.path.join(folder, "compiled"), fd, rows, buffer, euid)
        finally:
            os.close(fd)
    assert got == want
    event(f"files written: {min(want[0][1], 3) if isinstance(want[0], tuple) else 'raised'}")
    event(f"hard links made: {any(v[5] and v[5] > 1 for v in want[1].values())}")


# -- read_rows: every row read by SQLite in the core ---------------------------------------

ROWS_SQL = (
    "SELECT path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns FROM t ORDER BY rowid"
)


def bindable(value: Any) -> Any:
    """What SQLite stores of a hostile value: an int past 64 bits as its text, a str
    with a lone surrogate as the bytes it stands for (a BLOB)."""
    if type(value) is int and not -(2**63) <= value < 2**63:
        return str(value)
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogateescape")
    return value


def index_file(folder: str, rows: list[tuple[Any, ...]]) -> str:
    """An SQLite file with a table ``t`` of these rows (columns without a type: each
    value keeps its own)."""
    path = os.path.join(folder, "index")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns)")
        conn.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [tuple(map(bindable, row)) for row in rows],
        )
        conn.commit()
    return path


def listed(index: str) -> ListedRows:
    """The rows as ``sqlite3`` reads them, written by ``write_files`` (the reference)."""
    with contextlib.closing(sqlite3.connect(index)) as conn:
        return ListedRows(conn.execute(ROWS_SQL).fetchall())


def rows_outcome(rows: Any, folder: str, shard_fd: int, buffer: int, euid: Any, batch: int) -> Any:
    """What reading and writing ``rows`` gives: their count, the odd ones, the result,
    what progress was told, and the tree left."""
    os.makedirs(os.path.join(folder, "d"))
    told: list[tuple[int, int]] = []
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        odd = rows.odd()
        got = rows.write(
            root,
            {0: shard_fd, 1: -5},
            bytearray(buffer),
            LIMIT,
            0o022,
            {"": 0, "d": 0, "ü": 3},
            euid,
            lambda files, nbytes: told.append((files, nbytes)),
            batch,
        )
    finally:
        os.close(root)
    return len(rows), odd, got, told, tree(folder)


@pytest.mark.fuzz
@fuzz_settings(150)
@given(
    rows=hostile_rows(),
    buffer=st.sampled_from([BUFFER, 700]),
    euid=st.sampled_from([None, None, 0, 1234]),
    batch=st.sampled_from([1, 2, 3, 8192]),
)
def test_rows_read_in_the_core_are_what_sqlite3_reads_and_are_written_alike(
    compiled: ModuleType, rows: list[Any], buffer: int, euid: Any, batch: int
) -> None:
    """The same hostile rows (every type SQLite stores: ints, text, blobs, reals, NULL)
    read by the core's SQLite and through sqlite3: the same odd rows, rows left (as
    tuples), progress and tree, in batches of every size."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "shard")
        with open(path, "wb") as f:
            f.write(b"".join(BLOBS))
        index = index_file(folder, rows)
        core = compiled.read_rows(index, ROWS_SQL)
        assert core is not None
        fd = os.open(path, os.O_RDONLY)
        try:
            by_sqlite3 = listed(index)
            want = rows_outcome(by_sqlite3, f"{folder}/sqlite3", fd, buffer, euid, batch)
            got = rows_outcome(core, f"{folder}/core", fd, buffer, euid, batch)
        finally:
            os.close(fd)
    assert got == want
    event(f"rows left: {min(len(want[2][0]), 3)}")


def test_read_rows_answers_none_where_it_cannot_read_them(
    compiled: ModuleType, tmp_path: Any
) -> None:
    """No such file, a statement SQLite refuses or that gives other than nine columns, a
    name the core cannot pass to SQLite: None (the caller reads the rows itself); the
    Python twin always answers None; both refuse what is not a str."""
    index = index_file(str(tmp_path), [("a", 0, 0, 1, 0, None, None, None, None)])
    assert compiled.read_rows(str(tmp_path / "missing"), ROWS_SQL) is None
    assert compiled.read_rows(index, "SELECT path FROM t") is None
    assert compiled.read_rows(index, "SELECT nonsense FROM t") is None
    assert compiled.read_rows(str(tmp_path / "bad\udcff"), ROWS_SQL) is None
    assert len(compiled.read_rows(index, ROWS_SQL)) == 1
    assert python_writes.read_rows(index, ROWS_SQL) is None
    for twin in (compiled, python_writes):
        with pytest.raises(TypeError):
            twin.read_rows(index.encode(), ROWS_SQL)


def test_writing_read_rows_refuses_wrong_arguments(compiled: ModuleType, place: Any) -> None:
    _, root, shard = place
    rows = compiled.read_rows(index_file(os.path.dirname(shard.path), []), ROWS_SQL)
    given = [root, {0: shard.fd}, bytearray(BUFFER), LIMIT, umask(), {"": 0}, None, None, 8]
    for at, wrong, error in [(7, 5, TypeError), (8, 0, ValueError), (1, [], TypeError)]:
        with pytest.raises(error):
            rows.write(*given[:at], wrong, *given[at + 1 :])
    assert rows.write(*given) == ([], 0, 0)


@pytest.mark.parametrize(
    "text",
    ["61ff", "64eda080", "c0af", "64f4908080", "64e282", "e0808f"],
    ids=["bad-byte", "surrogate", "overlong-slash", "past-10ffff", "cut-short", "overlong-3"],
)
def test_text_that_is_not_utf8_raises_as_sqlite3_does(
    compiled: ModuleType, tmp_path: Any, text: str
) -> None:
    """A path stored as text that is not UTF-8 as Python decodes it: sqlite3 raises, and
    so does the core, instead of naming a file with those bytes."""
    index = index_file(str(tmp_path), [])
    with contextlib.closing(sqlite3.connect(index)) as conn:
        conn.execute(
            f"INSERT INTO t VALUES (CAST(x'{text}' AS TEXT), 0, 0, 0, 0, NULL, NULL, NULL, NULL)"
        )
        conn.commit()
    with pytest.raises(sqlite3.OperationalError):
        listed(index)
    rows = compiled.read_rows(index, ROWS_SQL)
    with pytest.raises(sqlite3.OperationalError, match="UTF-8"):
        rows.odd()


def test_a_damaged_index_raises_as_sqlite3_does(compiled: ModuleType, tmp_path: Any) -> None:
    """A page of the table's rows overwritten: sqlite3 and the core's read raise the same
    error (sqlite3.DatabaseError: the file is malformed)."""
    rows = [(f"{k:05}" + "x" * 200, 0, 0, 0, 0, None, None, None, None) for k in range(2000)]
    index = index_file(str(tmp_path), rows)
    with open(index, "r+b") as f:
        f.seek(60 * 4096)
        f.write(b"\xa5" * 4096)
    with pytest.raises(sqlite3.DatabaseError) as by_sqlite3:
        listed(index)
    with pytest.raises(sqlite3.DatabaseError) as by_core:
        compiled.read_rows(index, ROWS_SQL)
    assert type(by_core.value) is type(by_sqlite3.value)
    assert str(by_core.value) == str(by_sqlite3.value)


def test_a_batch_goes_on_past_rows_at_one_place_only_where_the_place_is_ints(
    compiled: ModuleType, place: Any
) -> None:
    """Two rows whose shard is the text '0' at one offset are at no place (not names of
    one stored file): a batch ending between them ends there, for the core and for the
    rows sqlite3 reads alike (what progress is told shows where batches end)."""
    _, _, shard = place
    rows = [shard.row("a", 0), shard.row("y", 1, shard="0"), shard.row("z", 1, shard="0")]
    rows += [shard.row("d/b", 2), shard.row("d/c", 3)]
    index = index_file(os.path.dirname(shard.path), rows)
    outcomes = []
    for k, rows_read in enumerate((listed(index), compiled.read_rows(index, ROWS_SQL))):
        folder = os.path.join(os.path.dirname(shard.path), f"out{k}")
        outcomes.append(rows_outcome(rows_read, folder, shard.fd, BUFFER, None, 2))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3] == [(1, 100), (1, 174), (1, 211)]  # ([a, y], [z, d/b], [d/c])
