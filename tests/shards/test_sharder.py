"""The shards layer on its own (``barecat.shards.sharder``): real shard files in a
temporary directory, no index. Placement by ``Sharder.add`` (the reference's convenience:
after the last shard's physical end, a new shard at the size limit), streams that roll to
a new shard when theirs fills up and cut what they wrote when they fail, ``truncate_after``
(the session's way back), linked shards never written, and reads that check what they
return.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pytest
from tests.helpers.disks import small_tmpfs

import barecat
from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    FileTooLargeBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.shards import Sharder


class FailingStream(io.RawIOBase):
    """Gives ``good`` bytes, then raises (a source that breaks mid-copy)."""

    def __init__(self, good: bytes) -> None:
        self.left = good

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self.left:
            raise OSError("the source broke")
        n = min(len(buffer), len(self.left), 3)
        buffer[:n] = self.left[:n]
        self.left = self.left[n:]
        return n


def sizes(base: str) -> list[int]:
    """Each shard file's size on disk, in order."""
    with Sharder(base) as sh:
        return [os.path.getsize(sh.get_shard_path(i)) for i in range(sh.num_shards)]


def test_sharder_on_its_own(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with barecat.Sharder(base, shard_size_limit=10, readonly=False) as sh:
        a = sh.add(data=b"hello")
        b = sh.add(fileobj=io.BytesIO(b"worlds!"), size=7)
        assert a[:3] == (0, 0, 5) and b[:3] == (1, 0, 7)  # rotated: 5 + 7 > 10
        with pytest.raises(barecat.BarecatError):
            sh.add(shard=0, offset=0, data=b"overwrite")
        assert sh.read_from_address(*b) == b"worlds!"
        with sh.open_from_address(1, 2, 3) as f:
            assert f.read() == b"rld"
    with barecat.Sharder(base) as sh:
        assert sh.num_shards == 2 and sh.total_physical_size_stat == 12
        with pytest.raises(barecat.BarecatIntegrityError):
            sh.read_from_address(0, 0, 5, expected_crc32c=a[3] ^ 1)
        with pytest.raises(PermissionError):
            sh.add(data=b"x")


def test_standalone_sharder_appends_after_existing_bytes(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with barecat.Sharder(base, readonly=False) as sh:
        first = sh.add(data=b"first")
    with barecat.Sharder(base, readonly=False) as sh:
        second = sh.add(data=b"second")
        assert second[:3] == (0, 5, 6)
        assert sh.read_from_address(*first) == b"first"


# -- placement at the size limit -----------------------------------------------------------


def test_add_fills_a_shard_exactly_to_its_limit_then_rolls(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, shard_size_limit=10, readonly=False) as sh:
        assert sh.add(data=b"123456") == Address(0, 0, 6, crc32c(b"123456"))
        assert sh.add(data=b"7890")[:3] == (0, 6, 4)  # 6 + 4 == 10: still fits
        assert sh.add(data=b"x")[:3] == (1, 0, 1)  # one byte more: the next shard
        assert sh.add(data=b"")[:3] == (1, 1, 0)
    assert sizes(base) == [10, 1]


def test_add_refuses_a_file_over_the_limit_and_writes_nothing(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, shard_size_limit=10, readonly=False) as sh:
        sh.add(data=b"abc")
        with pytest.raises(FileTooLargeBarecatError, match="11 bytes exceeds"):
            sh.add(data=b"x" * 11)
        with pytest.raises(FileTooLargeBarecatError, match="do not fit"):
            sh.add(data=b"x" * 8, size=8, raise_if_cannot_fit=True)
    assert sizes(base) == [3]


def test_a_stream_that_fills_its_shard_moves_to_the_next_one(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    data = b"0123456789abc"
    with Sharder(base, shard_size_limit=16, readonly=False) as sh:
        sh.add(data=b"head")
        # no size given: the stream starts at offset 4 and outgrows shard 0 (4 + 13 > 16)
        address = sh.write_stream(io.BytesIO(data), 0, 4, lambda: 1, bufsize=5)
        assert address == Address(1, 0, len(data), crc32c(data))
        assert sh.read_from_address(*address) == data
        assert sh.read_from_address(0, 0, 4) == b"head"
    assert sizes(base) == [4, 13]  # what it wrote in shard 0 was cut again


def test_a_stream_over_the_limit_raises_and_leaves_nothing(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, shard_size_limit=8, readonly=False) as sh:
        sh.add(data=b"ab")
        with pytest.raises(FileTooLargeBarecatError, match="grew past"):
            sh.write_stream(io.BytesIO(b"x" * 9), 0, 2, lambda: 1, bufsize=4)
    assert sizes(base)[0] == 2


def test_a_failing_stream_cuts_what_it_wrote(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, readonly=False) as sh:
        sh.add(data=b"kept")
        stream = io.BufferedReader(FailingStream(b"half a file"))
        with pytest.raises(OSError, match="the source broke"):
            sh.write_stream(stream, 0, 4, lambda: 1, bufsize=4)  # type: ignore[arg-type]
        assert sh.physical_shard_end(0) == 4
        assert sh.read_from_address(0, 0, 4) == b"kept"


# -- the way back ---------------------------------------------------------------------------


def test_truncate_after_cuts_that_shard_and_later_own_shards(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    other = str(tmp_path / "other")
    with Sharder(other, readonly=False) as sh:
        sh.add(data=b"belongs to another archive")
    with Sharder(base, readonly=False) as sh:
        sh.write_at(0, 0, b"committed|uncommitted")
        sh.write_at(1, 0, b"more")
        linked = sh.link_shard(sh_path := Sharder(other).get_shard_path(0))
        sh.write_at(3, 0, b"after the link")
        assert sh.read_from_address(linked, 0, 7) == b"belongs"  # (its descriptor open)
        sh.truncate_after(0, len(b"committed"))
        assert sh.pread(0, 0, 100) == b"committed"
        assert sh.physical_shard_end(1) == 0 and sh.physical_shard_end(3) == 0
        assert os.path.islink(sh.get_shard_path(linked))
    assert Path(sh_path).read_bytes() == b"belongs to another archive"  # never cut


# -- linked shards ----------------------------------------------------------------------------


def test_a_linked_shard_is_never_written_through(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"theirs")
    with Sharder(base, readonly=False) as sh:
        number = sh.link_shard(str(target))
        assert sh.is_foreign(number) and not sh.is_guard(number)
        assert sh.read_from_address(number, 0, 6) == b"theirs"
        with pytest.raises(BarecatError, match="Refusing to write into symlinked shard"):
            sh.write_at(number, 6, b"ours")
        assert sh.add(data=b"ours")[:3] == (number + 1, 0, 4)  # placed past the link
    assert target.read_bytes() == b"theirs"
    with Sharder(base, readonly=False, allow_writing_symlinked_shard=True) as sh:
        assert not sh.is_foreign(0)
        sh.write_at(0, 6, b"!")  # (asked for: the reference's override)
    assert target.read_bytes() == b"theirs!"


def test_remove_shards_from_removes_links_not_their_targets(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"theirs")
    with Sharder(base, readonly=False) as sh:
        sh.add(data=b"own")
        first = sh.link_shard(str(target))
        sh.add_empty_shard()
        assert sh.num_shards == 3
        sh.remove_shards_from(first)
        assert sh.num_shards == 1
        assert not os.path.lexists(sh.get_shard_path(1))
        assert not os.path.lexists(sh.get_shard_path(2))
    assert target.read_bytes() == b"theirs"


# -- reads -------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_gap", [0, 8, 4096])
def test_a_batch_reads_what_a_loop_reads_in_request_order(tmp_path: Path, max_gap: int) -> None:
    """Batches of lone files and of runs of neighbours (and empty files) mixed, in every
    order: each file's bytes at its position, as a loop of single reads has them, and
    a damaged file raised (the archive's ``get_many`` finds the first requested)."""
    rng = random.Random(7)
    with Sharder(str(tmp_path / "raw"), readonly=False) as sh:
        stored = []
        for i in range(60):
            data = rng.randbytes(rng.choice([0, 3, 40, 900]))
            stored.append((sh.add(data=data), data))
            if i % 7 == 0:
                sh.add(data=bytes(rng.choice([4, 20, 5000])))  # a gap no file owns
        for _ in range(40):
            picked = rng.sample(stored, rng.randint(2, 30))
            located = sorted(enumerate(a for a, _ in picked), key=lambda pa: pa[1][:2])
            assert sh.read_many(located, max_gap) == [data for _, data in picked]
            damaged = sorted(rng.sample(range(len(picked)), 2))
            bad = [(pos, Address(*a[:3], a.crc32c ^ 1) if pos in damaged and a.size else a)
                   for pos, a in located]  # fmt: skip
            named = {f"at offset {picked[p][0].offset} " for p in damaged if picked[p][0].size}
            if not named:
                continue
            with pytest.raises(BarecatIntegrityError) as raised:
                sh.read_many(bad, max_gap)
            assert any(n in str(raised.value) for n in named)


def test_reads_check_their_bytes(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, readonly=False) as sh:
        a = sh.add(data=b"alpha")
        b = sh.add(data=b"beta")
        c = sh.add(data=b"gamma")
        # request order is kept, neighbours are read together
        located = [(2, a), (0, b), (1, c)]
        assert sh.read_many(located, max_gap=0) == [b"beta", b"gamma", b"alpha"]
        bad = [(1, a), (0, Address(*c[:3], c.crc32c ^ 1))]
        with pytest.raises(BarecatIntegrityError, match="CRC32C mismatch"):
            sh.read_many(bad)
        with pytest.raises(BarecatIntegrityError):
            sh.read_from_address(0, c.offset, 100)  # past the shard's end
        buffer = bytearray(4)
        assert sh.readinto_from_address(0, b.offset, buffer, b.crc32c) == 4
        assert buffer == b"beta"


def test_an_empty_file_needs_no_shard_file(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base) as sh:
        assert sh.num_shards == 0
        assert sh.read_from_address(0, 0, 0, expected_crc32c=0) == b""
        with pytest.raises(BarecatIntegrityError):
            sh.read_from_address(0, 0, 0, expected_crc32c=1)
        with pytest.raises(BarecatIntegrityError):
            sh.read_from_address(0, 0, 1)  # a byte needs the shard
    assert not os.path.lexists(f"{base}-shard-00000")


def test_a_read_only_sharder_writes_nothing(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, readonly=False) as sh:
        sh.add(data=b"x")
    with Sharder(base) as sh:
        for write in (
            lambda: sh.write_at(0, 1, b"y"),
            lambda: sh.open_for_writing(1),
            sh.add_empty_shard,
            sh.add_guard,
        ):
            with pytest.raises(ReadOnlyBarecatError):
                write()
    assert sizes(base) == [1]


def test_a_batch_bigger_than_the_free_space_names_the_full_disk(tmp_path: Path) -> None:
    """``write_many``'s one ``pwritev`` comes back short on a real full tmpfs; the rest
    is tried where it stopped, and the full disk is raised naming the archive."""
    with small_tmpfs(tmp_path, "1m") as disk:
        base = str(disk / "a.barecat")
        with Sharder(base, readonly=False) as sh:
            sh.open_for_writing(0)
            datas = [bytes([i]) * (256 << 10) for i in range(8)]  # 2 MiB back to back
            places = [(0, k * (256 << 10)) for k in range(8)]
            with pytest.raises(
                NotEnoughSpaceBarecatError, match=r"Disk full while writing .*a\.barecat"
            ):
                sh.write_many(places, datas)
            written = sh.physical_shard_end(0)
            assert 0 < written < 2 << 20  # the short write's bytes are there, in order
            assert sh.pread(0, 0, written) == b"".join(datas)[:written]
