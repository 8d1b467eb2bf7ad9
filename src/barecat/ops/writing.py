"""The write rule, in one place: bytes first, row second, write position last.

A :class:`WriteSession` over an archive's (Index, Sharder) is the only code that claims
room for new bytes, writes them (one file, a batch with ``pwritev``, a stream, a copy
from another archive), records the rows that point at them, checkpoints and rolls back;
and the only code that moves the Sharder's write position, which is private to it
(``Sharder.write_position`` is read-only; sessions over one Sharder share it).

The rule, and what it guarantees:

1. New bytes go at or past the write position, into space no row points at, and are
   written in full before anything refers to them.
2. Their rows are recorded only then; a failure before or while recording rolls back to
   the *mark* taken before the writing (the bytes are cut, the position goes back), so a
   refused or failed write leaves nothing behind. A single file moves the position past
   its bytes only once its row is in; a batch moves it as it claims room (so that
   reader threads can write their claims at once), its mark being the way back.
3. A checkpoint makes the bytes durable (fsync) before the index commits the rows.
4. The durable truth is the index: a writer places the position after the last file the
   index knows (``resync``), so whatever a crash (kill -9) left past it is overwritten
   or cut, and every committed row points at intact bytes, whenever the crash came.
5. A shard linked from another archive (``merge --symlink``, ``convert --wrap``) is never
   written: the position moves past it to a shard of the archive's own.

Defrag and reshard move files into holes in rounds (``rounds.py``): their copies land
in planned free space rather than at the position, so only their relocations past the
end (``claim``), their checkpoints and their way back go through here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import BinaryIO

from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import BarecatError
from barecat.index import Index
from barecat.sealing import Sealer
from barecat.shards import Sharder
from barecat.shards.placement import Position, fresh_shard, going_on, room
from barecat.shards.reading import COPY_CHUNK, ShardReader

Data = bytes | bytearray | memoryview


class WriteSession:
    """Writes new bytes into ``sharder`` and records their rows in ``index`` by the rule
    above. Cheap to make: the position lives in the Sharder, so every session over it
    (the archive's own, an operation's) sees the same one; the first places it."""

    def __init__(self, index: Index, sharder: Sharder) -> None:
        self.index = index
        self.sharder = sharder
        if sharder.write_position is None:
            self.resync()

    # -- the position --------------------------------------------------------------------

    @property
    def position(self) -> Position:
        """Where the next bytes go."""
        return self.sharder._write_position or (0, 0)

    def _move(self, shard: int, offset: int) -> None:
        self.sharder._write_position = (shard, offset)

    def resync(self, ends: Mapping[int, int] | None = None) -> None:
        """Place the position after the last file the index holds (its uncommitted rows
        may have been rolled back): at the end of the last shard on disk or in use.
        ``ends`` (each used shard's end, as a maintenance operation computed them): after
        the last used shard instead, whatever shards follow it."""
        if ends is not None:
            last = max(ends, default=0)
            end = ends.get(last, 0)
        else:
            last = max(self.sharder.num_shards - 1, self.index.lookups.num_used_shards - 1, 0)
            if self.sharder.is_guard(last):  # (nothing in it: append after the last used)
                last = max(self.index.lookups.num_used_shards - 1, 0)
            end = self.index.lookups.logical_shard_end(last)
        writable = not self.sharder.is_foreign(last)
        self._move(*going_on((last, end), writable, self.sharder.num_shards))

    def indexed_end(self) -> Position:
        """Where the files the index holds end (the end of the last shard it uses)."""
        used = self.index.lookups.num_used_shards
        return (used - 1, self.index.lookups.logical_shard_end(used - 1)) if used else (0, 0)

    def skip_shards_from(self, first: int) -> None:
        """Shards from ``first`` on were just linked or adopted whole: never append into
        them, go on in a new shard after them."""
        if self.position[0] >= first:
            self._move(self.sharder.num_shards, 0)

    def guard_shared_bytes(self) -> None:
        """Files are about to share bytes: keep barecat 0.3.1's writers, which take each
        byte range for one file's own, from writing this archive (a guard shard, see
        ``barecat.shards.guard``, durable before this returns); nothing if there is one."""
        self.sharder.add_guard()

    def link_shard(self, target: str) -> int:
        """Add the next shard as a link to ``target`` (another archive's shard, a tar or
        zip file: never written) and go on after it; returns its number."""
        number = self.sharder.link_shard(target)
        self.skip_shards_from(number)
        return number

    def mark(self) -> Position:
        """A place to roll back to (the position now)."""
        return self.position

    def roll_back(self, mark: Position) -> None:
        """Cut every byte written after ``mark`` and put the position back there."""
        self.sharder.truncate_after(*mark)
        self._move(*mark)

    @contextlib.contextmanager
    def all_or_nothing(self) -> Iterator[Position]:
        """A batch: if the block raises, everything written in it is cut again (its rows
        are the caller's to undo, unless one atomic index call recorded them); yields
        the mark."""
        mark = self.position
        try:
            yield mark
        except BaseException:
            self.roll_back(mark)
            raise

    def trim_tail(self) -> None:
        """Cut bytes past the position in its shard (left by failed writes)."""
        shard, offset = self.position
        if self.sharder.physical_shard_end(shard) > offset:
            self.sharder.truncate_shard(shard, offset)

    def checkpoint(self, shards: Iterable[int] | None = None, new_shards: bool = False) -> None:
        """Make the written bytes durable (``shards``: only those were written; with
        ``new_shards``, also the directory entries of shards made), then commit the
        index: rows never outlive their bytes in a crash."""
        self.sharder.sync(shards)
        if new_shards:
            self.sharder.sync_directory()
        self.index.connection.commit()

    # -- room ----------------------------------------------------------------------------

    def _room(self, size: int) -> Position:
        """Where ``size`` bytes go, as ``shards.placement`` decides: the position, or a
        new shard (the position moved to its start) if they do not fit."""
        sharder = self.sharder
        position = sharder._write_position or (0, 0)
        place = room(position, size, sharder.shard_size_limit, sharder.num_shards)
        if place[0] != position[0]:
            self._start_shard(place[0])
        return place

    def _new_shard(self) -> int:
        """Roll over to a fresh shard (a stream or a file written in place outgrew one)."""
        return self._start_shard(fresh_shard(self.position[0], self.sharder.num_shards))

    def _start_shard(self, shard: int) -> int:
        self._move(shard, 0)
        self.sharder.open_for_writing(shard)
        return shard

    def reserve(self, sizes: Iterable[int]) -> list[Position]:
        """Claim room for files of these sizes back to back, rotating shards as needed,
        without writing; the position moves past them at once (a batch: roll back to a
        mark if their rows are not recorded). Returns where each one goes."""
        places: list[Position] = []
        opened = -1
        for size in sizes:
            shard, offset = self._room(size)
            if shard != opened:  # opened here, so writers only look descriptors up
                opened = shard
                self.sharder.open_for_writing(shard)
            places.append((shard, offset))
            self._move(shard, offset + size)
        return places

    def claim(self, size: int) -> Position:
        """Claim room for ``size`` bytes that a later step writes (a defrag round's copy
        past the end); the position moves past it."""
        return self.reserve((size,))[0]

    # -- writing -------------------------------------------------------------------------

    def write_reserved(self, places: Sequence[Position], datas: Sequence[Data]) -> None:
        """Write ``datas`` at places from :meth:`reserve`, neighbours with one ``pwritev``.
        Safe on any thread for disjoint reservations."""
        self.sharder.write_many(places, datas)

    def append(self, data: Data) -> Address:
        """Write one file at the position and move past it at once (inside a batch)."""
        address = self._write(data)
        self._move(address.shard, address.offset + address.size)
        return address

    def append_many(self, datas: Sequence[Data]) -> list[Address]:
        """Write files back to back with few ``pwritev`` calls, moving past them at once
        (inside a batch); returns their addresses."""
        places = self.reserve(len(d) for d in datas)
        self.sharder.write_many(places, datas)
        return [
            Address(shard, offset, len(data), crc32c(data))
            for (shard, offset), data in zip(places, datas, strict=True)
        ]

    def stream(
        self,
        fileobj: BinaryIO,
        size_hint: int | None = None,
        *,
        bufsize: int = COPY_CHUNK,
        sealer: Sealer | None = None,
        path: str = "",
    ) -> Address:
        """Copy a stream at the position (sealed for ``path`` block by block when a
        ``sealer`` is given; then ``size_hint`` must be its size) and move past it at
        once (inside a batch); returns its address."""
        address = self._write_stream(fileobj, size_hint, bufsize, sealer, path)
        self._move(address.shard, address.offset + address.size)
        return address

    def copy_from(self, source: ShardReader, src: tuple[int, int, int]) -> Position:
        """Copy another archive's stored bytes ``src`` (shard, offset, size) to the
        position and move past them at once (inside a batch); returns where they landed."""
        shard, offset = self._room(src[2])
        self.sharder.copy_from(source, src, shard, offset)
        self._move(shard, offset + src[2])
        return shard, offset

    def store(
        self,
        record: Callable[[Address], None],
        data: Data | None = None,
        *,
        fileobj: BinaryIO | None = None,
        size_hint: int | None = None,
        bufsize: int = COPY_CHUNK,
        sealer: Sealer | None = None,
        path: str = "",
    ) -> Address:
        """One file, by the rule: its bytes (``data``, or ``fileobj`` streamed, sealed for
        ``path`` when a ``sealer`` is given), then ``record(address)`` stores its row,
        then the position moves past it. If recording fails, the bytes are cut and the
        position is placed from the index again (SQLite may have rolled back rows)."""
        if fileobj is None:
            address = self._write(b"" if data is None else data)
        else:
            address = self._write_stream(fileobj, size_hint, bufsize, sealer, path)
        try:
            record(address)
        except BaseException:
            if self.position == (address.shard, address.offset):
                with contextlib.suppress(OSError):
                    self.sharder.truncate_shard(address.shard, address.offset)
            self.resync()
            raise
        self._move(address.shard, address.offset + address.size)
        return address

    def store_batch(self, datas: Sequence[Data], record: Callable[[list[Address]], None]) -> int:
        """Files back to back (``append_many``), then ``record(addresses)`` stores their
        rows in one atomic index call; if anything fails, all their bytes are cut.
        Returns the number of files."""
        with self.all_or_nothing():
            record(self.append_many(datas))
        return len(datas)

    def _write(self, data: Data) -> Address:
        shard, offset = self._room(len(data))
        try:
            self.sharder.write_at(shard, offset, data)
        except BaseException:
            with contextlib.suppress(OSError):
                self.sharder.truncate_shard(shard, offset)
            raise
        return Address(shard, offset, len(data), crc32c(data))

    def _write_stream(
        self,
        fileobj: BinaryIO,
        size_hint: int | None,
        bufsize: int,
        sealer: Sealer | None,
        path: str,
    ) -> Address:
        """A stream known to be small (``size_hint`` below ``bufsize``) is read in one call
        and written in one ``pwrite``; larger ones go through a buffer reused across
        calls, a new shard taking what was written if the current one fills up."""
        if sealer is not None:
            if size_hint is None:
                raise ValueError("a sealed stream needs its size")
            return self._write_sealed_stream(sealer, path, fileobj, size_hint)
        if size_hint is not None and size_hint < bufsize:
            return self._write(fileobj.read())
        shard, offset = self._room(size_hint) if size_hint is not None else self.position
        return self.sharder.write_stream(fileobj, shard, offset, self._new_shard, bufsize)

    def _write_sealed_stream(
        self, sealer: Sealer, path: str, fileobj: BinaryIO, size: int
    ) -> Address:
        """Seal a stream of ``size`` bytes straight into the shards, a block at a time (so
        a file of any size takes one block of memory): room is made for the most the
        sealed file can take, the blocks are written as they are sealed, the head last,
        and the CRC32C is taken from the written bytes. A stream that is not ``size``
        bytes long raises, leaving bytes past the position only."""
        stream = sealer.start(path, size)
        shard, offset = self._room(stream.max_size)
        end = offset + stream.head_size
        left = size
        for _ in range(stream.count):
            block = _read_exactly(fileobj, min(sealer.block_size, left), path)
            left -= len(block)
            payload = stream.seal_block(block)
            self.sharder.write_at(shard, end, payload)
            end += len(payload)
        if fileobj.read(1):
            raise BarecatError(f"{path}: the source grew while it was being stored")
        self.sharder.write_at(shard, offset, stream.head())
        crc = self.sharder.crc_of_range(shard, offset, end - offset)
        return Address(shard, offset, end - offset, crc)

    # -- a file written in place (``Barecat.open`` for writing) ---------------------------

    def open_region(self) -> Position:
        """Where a file opened for writing starts growing: the position (or a fresh
        shard if the current one is full). The position moves only at :meth:`close_region`."""
        return self._room(0)

    def copy_to_region(self, stored: tuple[int, int, int]) -> Position:
        """Copy a stored file's bytes to where a file opened on it grows (its first
        change: committed bytes are never changed in place)."""
        shard, offset = self._room(stored[2])
        self.sharder.copy_within(stored, shard, offset)
        return shard, offset

    def move_region(self, region: tuple[int, int, int]) -> Position:
        """A file opened for writing outgrew its shard: copy it to a new shard's start."""
        shard = self._new_shard()
        self.sharder.copy_within(region, shard, 0)
        return shard, 0

    def close_region(self, region: tuple[int, int, int], record: Callable[[Address], None]) -> None:
        """Record the row of a file written in place, then move past its bytes."""
        shard, offset, size = region
        record(Address(shard, offset, size, self.sharder.crc_of_range(shard, offset, size)))
        self._move(shard, offset + size)


def _read_exactly(fileobj: BinaryIO, n: int, path: str) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = fileobj.read(n - got)
        if not chunk:
            raise BarecatError(f"{path}: the source shrank while it was being stored")
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


__all__ = ["Position", "WriteSession"]
