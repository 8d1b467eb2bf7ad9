"""The write rule (``barecat.ops.writing``'s ``WriteSession``) over a real index and real
shard files: bytes first, row second, write position last. A refused row leaves no bytes;
the position rolls to a new shard at the size limit; a new session places it after the
last file the index holds, so what an uncommitted write left is overwritten; linked
shards are skipped and a guard is not appended to; batches are all or nothing;
a checkpoint commits rows only with their bytes.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from barecat.checksum import crc32c
from barecat.entries import Address, BarecatFileInfo
from barecat.exceptions import FileExistsBarecatError, FileTooLargeBarecatError
from barecat.index import Index
from barecat.ops.writing import WriteSession
from barecat.shards import Sharder

LIMIT = 16


class Halves:
    """An archive's two halves at ``base``, opened for writing, and its write session."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.index = Index(base, shard_size_limit=LIMIT, readonly=False)
        self.sharder = Sharder(base, shard_size_limit=LIMIT, readonly=False)
        self.session = WriteSession(self.index, self.sharder)

    def row(self, path: str) -> Callable[[Address], None]:
        """A ``record`` that inserts ``path``'s row at the address it is given."""

        def record(address: Address) -> None:
            shard, offset, size, crc = address
            self.index.add_file(BarecatFileInfo(path, shard=shard, offset=offset, size=size,
                                                crc32c=crc))  # fmt: skip

        return record

    def ends(self) -> list[int]:
        """Each shard's size on disk."""
        return [self.sharder.physical_shard_end(i) for i in range(self.sharder.num_shards)]

    def close(self) -> None:
        self.sharder.close()
        self.index.close()


@pytest.fixture
def halves(tmp_path: Path) -> Iterator[Halves]:
    opened = Halves(str(tmp_path / "a.barecat"))
    try:
        yield opened
    finally:
        opened.close()


def test_a_file_is_its_bytes_then_its_row_then_the_position(halves: Halves) -> None:
    seen: list[tuple[Address, tuple[int, int], bytes]] = []

    def record(address: Address) -> None:  # what holds when the row is recorded
        data = halves.sharder.read_from_address(*address)
        seen.append((address, halves.session.position, data))
        halves.row("a")(address)

    address = halves.session.store(record, b"hello")
    assert address == Address(0, 0, 5, crc32c(b"hello"))
    assert seen == [(address, (0, 0), b"hello")]  # the bytes were there, the position not moved
    assert halves.session.position == (0, 5)
    assert halves.index.lookup_address("a") == address


def test_a_refused_row_leaves_no_bytes_behind(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"first")
    with pytest.raises(FileExistsBarecatError):
        halves.session.store(halves.row("a"), b"refused")
    assert halves.ends() == [5] and halves.session.position == (0, 5)
    assert halves.session.store(halves.row("b"), b"next")[:3] == (0, 5, 4)


def test_a_refused_row_that_rolled_to_a_new_shard_leaves_it_empty(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"first")
    with pytest.raises(FileExistsBarecatError):
        halves.session.store(halves.row("a"), b"x" * 12)  # 5 + 12 > 16: in shard 1
    assert halves.ends() == [5, 0]  # its bytes cut, the shard it opened left empty
    # placed from the index again: at the end of the last shard on disk
    assert halves.session.position == (1, 0)
    assert halves.session.store(halves.row("b"), b"next")[:3] == (1, 0, 4)


def test_a_stream_refused_leaves_no_bytes_behind(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"first")
    with pytest.raises(FileExistsBarecatError):
        halves.session.store(halves.row("a"), fileobj=io.BytesIO(b"streamed"), bufsize=4)
    assert halves.ends() == [5]


def test_the_position_rolls_to_a_new_shard_at_the_limit(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"x" * 10)
    assert halves.session.store(halves.row("b"), b"y" * 6)[:3] == (0, 10, 6)  # exactly full
    assert halves.session.store(halves.row("c"), b"z")[:3] == (1, 0, 1)
    assert halves.session.position == (1, 1)
    assert halves.ends() == [16, 1]


def test_a_file_over_the_limit_is_refused_before_a_byte(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abc")
    with pytest.raises(FileTooLargeBarecatError, match="17 bytes exceeds"):
        halves.session.store(halves.row("big"), b"x" * 17)
    assert halves.ends() == [3] and halves.session.position == (0, 3)
    assert halves.index.lookup_address("big") is None


def test_a_new_session_overwrites_what_an_uncommitted_write_left(halves: Halves) -> None:
    halves.session.store(halves.row("kept"), b"kept")
    halves.session.checkpoint()
    halves.session.store(halves.row("lost"), b"uncommitted")
    halves.index.rollback()  # (as a crash before the commit: the row is gone, the bytes not)
    assert halves.ends() == [15]
    halves.sharder.close()
    halves.sharder = Sharder(halves.base, shard_size_limit=LIMIT, readonly=False)
    session = WriteSession(halves.index, halves.sharder)  # placed from the index
    assert session.position == (0, 4)
    address = session.store(halves.row("new"), b"new")
    assert address[:3] == (0, 4, 3)
    assert halves.sharder.read_from_address(*address) == b"new"
    session.trim_tail()  # the rest of the lost bytes
    assert halves.ends() == [7]


def test_sessions_over_one_sharder_share_the_position(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abc")
    other = WriteSession(halves.index, halves.sharder)
    assert other.position == (0, 3)
    other.store(halves.row("b"), b"de")
    assert halves.session.position == (0, 5)


def test_a_linked_shard_is_skipped(halves: Halves, tmp_path: Path) -> None:
    target = tmp_path / "theirs"
    target.write_bytes(b"their bytes")
    halves.session.store(halves.row("a"), b"abc")
    number = halves.session.link_shard(str(target))
    assert number == 1 and halves.session.position == (0, 3)  # (shard 0 is our own)
    assert halves.session.store(halves.row("b"), b"ours")[:3] == (0, 3, 4)
    # the next shard after 0 is the one past the link
    assert halves.session.store(halves.row("c"), b"z" * 10)[:3] == (2, 0, 10)
    halves.session.resync()
    assert halves.session.position == (2, 10)
    assert target.read_bytes() == b"their bytes"


def test_a_linked_last_shard_is_never_appended_to_after_reopening(
    halves: Halves, tmp_path: Path
) -> None:
    target = tmp_path / "theirs"
    target.write_bytes(b"their bytes")
    halves.session.store(halves.row("a"), b"abc")
    halves.session.link_shard(str(target))
    halves.session.resync()  # the index uses shard 0 only; shard 1 is a link
    assert halves.session.position == (2, 0)


def test_a_guard_is_not_appended_to(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abc")
    halves.session.guard_shared_bytes()
    assert halves.sharder.is_guard(1)
    halves.session.resync()
    assert halves.session.position == (0, 3)  # after the last used shard, not the guard
    halves.session.store(halves.row("b"), b"x" * 13)  # (0, 3): fills shard 0
    assert halves.session.store(halves.row("c"), b"next")[:3] == (2, 0, 4)  # past it
    assert halves.sharder.is_guard(1)


def test_a_batch_is_all_or_nothing(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abc")
    with pytest.raises(RuntimeError), halves.session.all_or_nothing() as mark:
        assert mark == (0, 3)
        halves.session.append(b"x" * 10)
        halves.session.append(b"y" * 10)  # (rolls into shard 1)
        raise RuntimeError("the batch failed")
    assert halves.session.position == (0, 3)
    assert halves.ends() == [3, 0]


def test_store_batch_records_every_row_or_cuts_every_byte(halves: Halves) -> None:
    def rows(addresses: list[Address]) -> None:
        halves.index.add_files_bulk(
            [BarecatFileInfo(f"f{i}", shard=a.shard, offset=a.offset, size=a.size,
                             crc32c=a.crc32c) for i, a in enumerate(addresses)]
        )  # fmt: skip

    assert halves.session.store_batch([b"one", b"two", b"three"], rows) == 3
    assert [halves.index.lookup_address(f"f{i}")[:3] for i in range(3)] == [  # type: ignore[index]
        (0, 0, 3), (0, 3, 3), (0, 6, 5),
    ]  # fmt: skip
    with pytest.raises(FileExistsBarecatError):
        halves.session.store_batch([b"ag", b"in"], rows)  # f0 exists: all refused
    assert halves.ends() == [11] and halves.session.position == (0, 11)
    with pytest.raises(FileExistsBarecatError):  # across shards: 11 + 4 + 5 > 16
        halves.session.store_batch([b"more", b"again"], rows)
    assert halves.ends() == [11, 0] and halves.session.position == (0, 11)


def test_reserve_claims_room_back_to_back_without_writing(halves: Halves) -> None:
    places = halves.session.reserve([6, 6, 6])
    assert places == [(0, 0), (0, 6), (1, 0)]
    assert halves.session.position == (1, 6)
    assert halves.ends() == [0, 0]  # nothing written yet
    halves.session.write_reserved(places, [b"a" * 6, b"b" * 6, b"c" * 6])
    assert halves.sharder.read_from_address(0, 6, 6) == b"b" * 6
    assert halves.session.claim(10) == (1, 6)


def test_a_checkpoint_commits_the_rows(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abc")
    with Index(halves.base) as reader:
        assert reader.lookup_address("a") is None  # not committed yet
    halves.session.checkpoint()
    with Index(halves.base) as reader:
        assert reader.lookup_address("a") == Address(0, 0, 3, crc32c(b"abc"))


def test_a_stream_that_outgrows_its_shard_moves_whole(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abcdef")
    data = b"0123456789"  # no size known: it starts at (0, 6) and 6 + 10 > 16 - 1
    address = halves.session.store(halves.row("s"), fileobj=io.BytesIO(data + b"!"), bufsize=4)
    assert address[:3] == (1, 0, 11)
    assert halves.sharder.read_from_address(*address) == data + b"!"
    assert halves.ends() == [6, 11] and halves.session.position == (1, 11)


def test_a_file_written_in_place_moves_the_position_only_when_closed(halves: Halves) -> None:
    halves.session.store(halves.row("a"), b"abc")
    shard, offset = halves.session.open_region()
    assert (shard, offset) == (0, 3)
    halves.sharder.write_at(shard, offset, b"grown")
    assert halves.session.position == (0, 3)
    halves.session.close_region((shard, offset, 5), halves.row("w"))
    assert halves.session.position == (0, 8)
    assert halves.index.lookup_address("w") == Address(0, 3, 5, crc32c(b"grown"))


def test_bytes_copied_from_another_archive_land_at_the_position(
    halves: Halves, tmp_path: Path
) -> None:
    with Sharder(str(tmp_path / "source"), readonly=False) as source:
        stored = source.add(data=b"0123456789")
        halves.session.store(halves.row("a"), b"abcdefgh")
        assert halves.session.copy_from(source, (0, 2, 6)) == (0, 8)
        assert halves.session.copy_from(source, stored[:3]) == (1, 0)  # 8 + 6 + 10 > 16
    assert halves.sharder.read_from_address(0, 8, 6) == b"234567"
    assert halves.sharder.read_from_address(1, 0, 10) == b"0123456789"
    assert halves.session.position == (1, 10)
