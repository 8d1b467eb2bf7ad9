"""The :class:`Sharder`: the local shard files of one archive, opened, read from,
written at given places and added to.

Reads are positional (``os.pread``/``os.preadv``) on lazily opened descriptors, so any
number of threads and forked processes can read through one ``Sharder`` with no locks
and no shared file position; which reads of a batch go together is ``coalescing``'s.
Writes are positional too (the loops that finish them: ``positional``): where new bytes
go (the write position, kept here) is decided by ``placement`` and moved only by the
write session above (``barecat.ops.writing``), which also computes CRC32C on the way and
cuts what a failed write left, so a half-written file never becomes visible. Knows
nothing of paths or SQL; imports ``entries``, ``layout`` and ``exceptions``. What it
shares with the object-storage reader (errors naming shards, checksums of ranges,
reads into a caller's buffer) is in ``reading``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO

from barecat.checksum import crc32c
from barecat.entries import SHARD_SIZE_UNLIMITED, Address
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    FileTooLargeBarecatError,
    ReadOnlyBarecatError,
)
from barecat.kernels import read_checked, read_each
from barecat.layout import existing_shard_numbers, shard_path
from barecat.shards.coalescing import SPAN, by_position, in_request_order, runs_of
from barecat.shards.concurrent import DEFAULT_READ_CONCURRENCY, ReadPool, read_would_wait
from barecat.shards.copy import copy_range
from barecat.shards.guard import is_guard, make_guard, replace_guard_with_file, replace_with_guard
from barecat.shards.placement import fresh_shard, going_on, room
from barecat.shards.positional import back_to_back, pwritev_all
from barecat.shards.reading import COPY_CHUNK, ShardReader
from barecat.shards.writeback import EarlyWriteback


class Sharder(ShardReader):
    """The shard files of one archive on this machine (``path`` is the archive's base
    name): a :class:`~barecat.shards.reading.ShardReader`, and the writing primitives."""

    def __init__(
        self,
        path: str,
        shard_size_limit: int | None = None,
        readonly: bool = True,
        append_only: bool = False,
        threadsafe: bool = False,
        allow_writing_symlinked_shard: bool = False,
        read_concurrency: int = DEFAULT_READ_CONCURRENCY,
    ) -> None:
        super().__init__(path)
        self._at = os.path.abspath(path)
        """``path`` made absolute at open: the shard files are opened, made and removed by
        it (a change of the working directory since changes nothing), and named in
        messages by ``path`` as given."""
        self.read_pool = ReadPool(read_concurrency)
        """The threads a batch's reads run on (``read_concurrency`` of them, 1: none)."""
        self.shard_size_limit = (
            SHARD_SIZE_UNLIMITED if shard_size_limit is None else shard_size_limit
        )
        self.readonly = readonly
        self.append_only = append_only
        self.allow_writing_symlinked_shard = allow_writing_symlinked_shard
        self._fds: dict[int, int] = self.open_descriptors  # (one dict, never replaced)
        self._cannot_tell: set[int] = set()  # shards whose filesystem has no RWF_NOWAIT
        self._checked_writable: set[int] = set()
        self._copy_buffer = bytearray()
        self._writeback = EarlyWriteback()
        self._num_shards = self._count_shards()
        self._guard_seen = False  # a guard was found or made (cleared when shards go)
        self._write_position: tuple[int, int] | None = None
        """Where the next file's bytes go: moved only by ``barecat.ops.writing``'s
        ``WriteSession`` (None until a session places it; see ``write_position``)."""

    def shard_file(self, i_shard: int) -> str:
        """The file of shard ``i_shard``, by its absolute name (see ``_at``)."""
        return shard_path(self._at, i_shard)

    def _count_shards(self) -> int:
        """One past the highest shard number on disk (gaps are reported by verify)."""
        numbers = existing_shard_numbers(self._at)
        return numbers[-1] + 1 if numbers else 0

    # -- descriptors -------------------------------------------------------------------

    @property
    def num_shards(self) -> int:
        return self._num_shards

    def _open_shard(self, shard: int) -> int:
        writable = not self.readonly and not self.is_foreign(shard)
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        try:
            return os.open(self.shard_file(shard), flags | os.O_CLOEXEC, 0o666)
        except FileNotFoundError:
            raise self.missing_shard_error(shard) from None

    def _fd(self, shard: int) -> int:
        fd = self._fds.get(shard)  # (every positional read comes here)
        return fd if fd is not None else self._per_shard(self._fds, shard, self._open_shard)

    def close(self) -> None:
        self.read_pool.close()
        with self._lock:
            fds = dict(self._fds)
            self._fds.clear()
            self._checked_writable.clear()
        for fd in fds.values():
            os.close(fd)

    def shard_exists(self, shard_number: int) -> bool:
        return os.path.exists(self.shard_file(shard_number))

    def physical_shard_end(self, shard_number: int) -> int:
        try:
            return os.path.getsize(self.shard_file(shard_number))
        except FileNotFoundError:
            return 0

    # -- reading -----------------------------------------------------------------------

    def read_from_address(
        self, shard: int, offset: int, size: int, expected_crc32c: int | None = None
    ) -> bytes:
        """Bytes of one stored file; checked against ``expected_crc32c`` when given.

        An empty file needs no bytes, so no shard either: its read never opens one (an
        archive without bytes may have no shard file, as before this version made the
        first one when creating an archive).

        Raises:
            BarecatIntegrityError: the shard is missing or ends before ``offset + size``
                (told before a buffer of ``size`` is allocated when it is a big one),
                or the bytes do not match ``expected_crc32c``.
        """
        if size == 0:
            if expected_crc32c is not None and expected_crc32c != 0:
                raise self.crc_mismatch_error(shard, offset, size)
            return b""
        fd = self._fds.get(shard)
        if fd is None:
            fd = self._fd(shard)
        data = read_checked(fd, offset, size, expected_crc32c)  # (the kernel: None
        if data is not None:  # unless all came and matched; then the careful path below)
            return data
        if size > SPAN:  # a damaged row's size must not allocate a huge buffer first
            there = os.fstat(fd).st_size - offset
            if there < size:
                raise self.truncated_error(shard, offset, size, max(0, there))
        data = os.pread(fd, size, offset)
        if len(data) != size:
            data = self._read_fully(shard, offset, size, data)
        if expected_crc32c is not None and crc32c(data) != expected_crc32c:
            raise self.crc_mismatch_error(shard, offset, size)
        return data

    def read_many(self, located: list[tuple[int, Address]], max_gap: int = 0) -> list[bytes]:
        """Bytes for ``(position, address)`` entries sorted by address, returned by
        position; neighbours at most ``max_gap`` apart share one ``pread`` (spans up to
        16 MiB), and the reads run on the read pool's threads (``read_concurrency``).
        Each file with a CRC is verified; a failure raised is the first in request
        order, as a loop of the same reads would raise it.

        The reads are made in request order (a run of neighbours at its first requested
        file's turn): a caller drops the results in that order, and memory handed out
        in the order it is given back stays with the process, where results made in
        storage order and dropped in request order make glibc return the freed heap to
        the kernel, so the next batch page-faults every page in again (2x the time a
        file, see docs/benchmarks.md). Reads that wait are as quick in either order:
        they run on the threads together, and the kernel orders what they queue."""
        if len(located) == 1:  # (a batch of one: a read of one)
            shard, offset, size, crc = located[0][1]
            return [self.read_from_address(shard, offset, size, crc)]
        runs = runs_of(located, max_gap)
        if len(runs) == len(located):  # no neighbours (files picked at random): a read each
            return self._read_each(by_position(located))
        out: list[bytes] = [b""] * len(located)
        runs = in_request_order(runs, located)

        def read_run(k: int) -> None:
            i, j, end = runs[k]
            pos, (shard, start, size, crc) = located[i]
            if j == i + 1:  # the common case: a lone file
                out[pos] = self.read_from_address(shard, start, size, crc)
                return
            view = memoryview(self.read_from_address(shard, start, end - start))
            for pos, (_, off, n, crc) in located[i:j]:
                data = bytes(view[off - start : off - start + n])
                if crc is not None and crc32c(data) != crc:
                    raise self.crc_mismatch_error(shard, off, n)
                out[pos] = data

        first = located[runs[0][0]][1] if runs else None
        self.read_pool.run(len(runs), read_run, self._would_wait(first))
        return out

    def _read_each(self, addresses: list[Address]) -> list[bytes]:
        """Each address read and checked on its own, in the order given; in plain loops
        while the read pool keeps the batch on the calling thread (as it does when the
        page cache answers: no task per read), else on the pool's threads."""
        read, count = self.read_from_address, len(addresses)
        first = addresses[0] if addresses else None
        fans_out = self.read_pool.fans_out(count, self._would_wait(first))
        if fans_out is False:
            return self._read_span(addresses)
        out: list[bytes] = [b""] * count

        def read_one(k: int) -> None:
            out[k] = read(*addresses[k])

        def read_span(a: int, b: int) -> None:
            out[a:b] = self._read_span(addresses[a:b])

        self.read_pool.run_as(fans_out, count, read_one, read_span)
        return out

    def _read_span(self, addresses: list[Address]) -> list[bytes]:
        """Each address read and checked, in order, on this thread: one kernel call for
        all of them, then the careful path for any it did not answer (a shard not open
        yet, a short read, a mismatch: raised as a loop of reads would raise it)."""
        got = read_each(self._fds, addresses)
        if None in got:
            read = self.read_from_address
            return [read(*a) if d is None else d for d, a in zip(got, addresses, strict=True)]
        return got  # type: ignore[return-value]  # (no None in it)

    def run_reads(
        self, count: int, task: Callable[[int], None], first: Address | None = None
    ) -> None:
        self.read_pool.run(count, task, self._would_wait(first))

    def _would_wait(self, first: Address | None) -> Callable[[], bool | None] | None:
        """Asks whether the read of ``first`` would wait for its storage (see
        ``shards/concurrent.py``), or None when no one can tell."""
        if first is None or first[0] in self._cannot_tell:
            return None
        shard, offset = first[0], first[1]

        def ask() -> bool | None:
            try:
                fd = self._fd(shard)
            except (BarecatIntegrityError, OSError):  # (the read itself will say so)
                return None
            waits = read_would_wait(fd, offset)
            if waits is None:
                self._cannot_tell.add(shard)
            return waits

        return ask

    def _read_fully(self, shard: int, offset: int, size: int, head: bytes) -> bytes:
        parts = [head]
        got = len(head)
        while got < size:
            chunk = os.pread(self._fd(shard), size - got, offset + got)
            if not chunk:
                raise self.truncated_error(shard, offset, size, got)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def require_range(self, shard: int, offset: int, size: int) -> None:
        """Check that ``shard`` holds ``size`` bytes at ``offset`` (before streaming them).

        Raises:
            BarecatIntegrityError: the shard is missing or ends before ``offset + size``
                (nothing is needed of a shard for zero bytes).
        """
        if size == 0:
            return
        end = os.fstat(self._fd(shard)).st_size
        if offset + size > end:
            raise self.truncated_error(shard, offset, size, max(0, end - offset))

    def pread(self, shard: int, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes (fewer at the shard's physical end), no checking."""
        fd = self._fd(shard)
        if size > SPAN:  # no buffer bigger than what is there (a damaged row's size)
            size = max(0, min(size, os.fstat(fd).st_size - offset))
        return os.pread(fd, size, offset)

    def preadinto(self, shard: int, offset: int, view: memoryview) -> int:
        fd = self._fds.get(shard)  # (every read into a caller's buffer comes here)
        return os.preadv(self._fd(shard) if fd is None else fd, (view,), offset)

    # -- writing -----------------------------------------------------------------------

    def raise_if_readonly(self, message: str) -> None:
        if self.readonly:
            raise ReadOnlyBarecatError(message)

    def _writable_fd(self, shard: int) -> int:
        if shard in self._checked_writable:
            return self._fds[shard]
        self.raise_if_readonly("Cannot write: the archive is open read-only")
        target = self.shard_file(shard)
        if os.path.islink(target) and is_guard(target):
            self._promote_guard(shard)
        elif os.path.islink(target) and not self.allow_writing_symlinked_shard:
            raise BarecatError(
                f"Refusing to write into symlinked shard {target} (it belongs to another archive); "
                "pass allow_writing_symlinked_shard=True to override"
            )
        fd = self._fd(shard)
        self._num_shards = max(self._num_shards, shard + 1)
        self._checked_writable.add(shard)
        return fd

    @property
    def write_position(self) -> tuple[int, int] | None:
        """(shard, offset) where the archive's next bytes go, read-only: the write session
        (``barecat.ops.writing``) alone moves it. None before a session placed it."""
        return self._write_position

    def is_foreign(self, shard: int) -> bool:
        """True if ``shard`` is a symlink this sharder must not write through (a guard,
        always: see :mod:`barecat.shards.guard`)."""
        path = self.shard_file(shard)
        return os.path.islink(path) and (not self.allow_writing_symlinked_shard or is_guard(path))

    def is_guard(self, shard: int) -> bool:
        """True if ``shard`` is the guard an archive whose files share bytes keeps."""
        return is_guard(self.shard_file(shard))

    @property
    def guarded(self) -> bool:
        """Whether a shard is a guard (:mod:`barecat.shards.guard`)."""
        return any(self.is_guard(shard) for shard in range(self._num_shards))

    def add_guard(self) -> None:
        """Keep a guard (the next shard) unless one is there: files are about to share
        bytes, which barecat 0.3.1 must then not write (:mod:`barecat.shards.guard`)."""
        if self._guard_seen:
            return
        if not self.guarded:
            self._add_shard(make_guard)
            self.sync_directory()  # (before any row that shares bytes is committed)
        self._guard_seen = True

    def place_guard(self, shard: int) -> None:
        """Make ``shard`` (unused, or past the last shard) the guard, in one step."""
        self.raise_if_readonly("Cannot add shards: the archive is open read-only")
        self._forget(shard)
        replace_with_guard(self.shard_file(shard))
        self._num_shards = max(self._num_shards, shard + 1)
        self.sync_directory()

    def _promote_guard(self, shard: int) -> None:
        """Bytes go into the guard's number: a new guard past the last shard first, then
        the guard becomes an empty shard of this archive's own."""
        with self._lock:
            path = self.shard_file(shard)
            if not is_guard(path):
                return  # (another thread did it)
            make_guard(self.shard_file(self._num_shards))
            self._num_shards += 1
            fd = self._fds.pop(shard, None)
            if fd is not None:
                os.close(fd)
            replace_guard_with_file(path)
            self.sync_directory()

    def _forget(self, shard: int) -> None:
        fd = self._fds.pop(shard, None)
        if fd is not None:
            os.close(fd)
        self._checked_writable.discard(shard)

    def open_for_writing(self, shard: int) -> None:
        """Open (creating it if needed) ``shard`` for writing, so that later writes there
        only look its descriptor up (``write_many`` on any thread).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the shard is a link to another archive's file.
        """
        self._writable_fd(shard)

    def _pwrite_all(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
        self._writeback.wrote(fd, offset, len(data))
        pwritev_all(fd, (data,), offset, self.path)

    def write_many(
        self,
        places: Sequence[tuple[int, int]],
        datas: Sequence[bytes | bytearray | memoryview],
    ) -> None:
        """Write each of ``datas`` at its ``(shard, offset)``; back-to-back neighbours share
        one ``pwritev``. The shards must be open for writing (``open_for_writing``).

        Safe on any thread for disjoint places: it only reads the descriptor table.
        """
        for shard, start, end, i, j in back_to_back(places, datas):
            fd = self._fds[shard]
            self._writeback.wrote(fd, start, end - start)
            pwritev_all(fd, datas[i:j], start, self.path)

    def truncate_after(self, shard: int, offset: int) -> None:
        """Cut everything written after ``(shard, offset)``: that shard there, and every
        later shard of this archive's own that was written to, to nothing."""
        for later in range(shard + 1, self._num_shards):
            if later in self._fds and not self.is_foreign(later):
                os.ftruncate(self._fds[later], 0)
        if shard in self._fds or self.shard_exists(shard):  # (none made just to be cut)
            os.ftruncate(self._writable_fd(shard), offset)

    def write_stream(
        self,
        fileobj: BinaryIO,
        shard: int,
        offset: int,
        next_shard: Callable[[], int],
        bufsize: int = COPY_CHUNK,
    ) -> Address:
        """Copy a stream to ``(shard, offset)`` through a buffer reused across calls, with
        its CRC32C; returns its address. If the shard fills up mid-stream, what was
        written moves to the start of ``next_shard()`` (a fresh shard the caller chose)
        and the copy goes on there. On failure the bytes written are cut again.

        Raises:
            FileTooLargeBarecatError: the stream grew past the shard size limit.
        """
        fd = self._writable_fd(shard)
        size, value = 0, 0
        if len(self._copy_buffer) != bufsize:
            self._copy_buffer = bytearray(bufsize)
        view = memoryview(self._copy_buffer)
        try:
            while True:
                n = fileobj.readinto(view)  # type: ignore[attr-defined]
                if not n:
                    break
                if offset + size + n > self.shard_size_limit:
                    if size + n > self.shard_size_limit:
                        limit = self.shard_size_limit
                        raise FileTooLargeBarecatError(
                            f"File grew past the shard size limit of {limit} bytes"
                        )
                    moved = next_shard()
                    self.copy_within((shard, offset, size), moved, 0)
                    os.ftruncate(fd, offset)
                    shard, offset = moved, 0
                    fd = self._writable_fd(shard)
                self._pwrite_all(fd, view[:n], offset + size)
                value = crc32c(view[:n], value)
                size += n
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, offset)
            raise
        return Address(shard, offset, size, value)

    def copy_within(self, src: tuple[int, int, int], dst_shard: int, dst_offset: int) -> None:
        """Copy stored bytes to another place in this archive, inside the kernel where
        possible. The ranges must not overlap; nothing is synced."""
        self.copy_from(self, src, dst_shard, dst_offset)

    def descriptor(self, shard: int) -> int:
        """The open descriptor of a shard, for this package's bulk routines (``moving``)."""
        return self._fd(shard)

    def write_at(self, shard: int, offset: int, data: bytes | bytearray | memoryview) -> None:
        self._pwrite_all(self._writable_fd(shard), data, offset)

    def truncate_shard(self, shard: int, size: int) -> None:
        os.ftruncate(self._writable_fd(shard), size)

    def truncate_all_to_logical_size(self, logical_shard_ends: list[int]) -> None:
        for shard, end in enumerate(logical_shard_ends):
            if self.physical_shard_end(shard) > end:
                self.truncate_shard(shard, end)

    def sync(self, shards: Iterable[int] | None = None) -> None:
        """Make written bytes durable before an index commit refers to them.

        ``shards`` limits the fsyncs to the shards a caller knows it wrote (defrag
        writes into one or two of possibly thousands of open shards per round).
        """
        if self.readonly:
            return
        fds = self._fds if shards is None else {s: self._fds[s] for s in shards if s in self._fds}
        for fd in list(fds.values()):
            os.fsync(fd)
        if shards is None:
            self._writeback.forget()

    # -- combining archives ------------------------------------------------------------

    def copy_from(
        self, source: ShardReader, src: tuple[int, int, int], dst_shard: int, dst_offset: int
    ) -> None:
        """Copy ``src`` (shard, offset, size) of ``source``'s shards to ``(dst_shard,
        dst_offset)`` here, inside the kernel where possible; nothing is synced.

        For runs of many stored files moved unchanged (merge, subset): their CRCs travel
        with their rows, so nothing is recomputed.

        Raises:
            ReadOnlyBarecatError: ``source`` has no local shard files (an archive on
                object storage).
        """
        if not isinstance(source, Sharder):
            raise ReadOnlyBarecatError(
                f"{source.path} is on remote storage: its shards have no local file to copy "
                "from (extract or convert its files instead)"
            )
        shard, offset, size = src
        fd = self._writable_fd(dst_shard)
        copy_range(
            source._fd(shard), offset, fd, dst_offset, size,
            lambda at, n: self._writeback.wrote(fd, at, n),
        )  # fmt: skip

    def link_shard(self, target: str) -> int:
        """Add the next shard as a symbolic link to ``target`` (a zero-copy merge); returns
        its number. Relative when possible, so a tree holding both archives can move as a
        whole; appends never go into it (the write session moves past it)."""

        def make_link(link: str) -> None:
            here = os.path.dirname(os.path.abspath(link))
            os.symlink(os.path.relpath(os.path.abspath(target), here), link)

        return self._add_shard(make_link)

    def adopt_shard(self, source: str) -> int:
        """Add the next shard by renaming the file ``source`` (a shard of a temporary
        part-archive on the same filesystem) into place; returns its number."""
        return self._add_shard(lambda path: os.rename(source, path))

    def create_first_shard(self) -> None:
        """Create shard 0, empty, if no shard file exists yet (barecat 0.3.1 cannot open
        an archive without one).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
        """
        if self._num_shards == 0:
            self._writable_fd(0)

    def add_empty_shard(self) -> int:
        """Add the next shard as an empty file of this archive's own (keeps numbering
        contiguous where a linked archive has a gap); returns its number."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        return self._add_shard(lambda path: os.close(os.open(path, flags, 0o666)))

    def _add_shard(self, create: Callable[[str], None]) -> int:
        self.raise_if_readonly("Cannot add shards: the archive is open read-only")
        number = self._num_shards
        create(self.shard_file(number))
        self._num_shards = number + 1
        return number

    def remove_shards_from(self, number: int) -> None:
        """Undo :meth:`link_shard`/:meth:`add_empty_shard`: delete shard files from
        ``number`` on (a link is removed, never its target). The caller restores the
        write position it had before adding them."""
        self._guard_seen = False
        for shard in range(number, self._num_shards):
            self._forget(shard)
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.shard_file(shard))
        self._num_shards = min(self._num_shards, number)

    def sync_directory(self) -> None:
        """Make new directory entries (linked or created shards) durable."""
        directory = os.path.dirname(self._at)
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- the reference's Sharder conveniences ------------------------------------------

    def add(
        self,
        shard: int | None = None,
        offset: int | None = None,
        size: int | None = None,
        data: bytes | bytearray | memoryview | None = None,
        fileobj: BinaryIO | None = None,
        bufsize: int = COPY_CHUNK,
        raise_if_cannot_fit: bool = False,
    ) -> Address:
        """Append ``data`` or ``fileobj`` and keep it; returns (shard, offset, size, crc32c).

        For callers that keep their own index (an archive's writers go through its write
        session instead): bytes go after the physical end of the last shard, a new shard
        when they would not fit, placed by the write session's rule
        (:mod:`barecat.shards.placement`). A given ``shard``/``offset`` must be that place: bytes
        are only ever appended.
        """
        last = max(self._num_shards - 1, 0)
        end = (last, self.physical_shard_end(last))
        here = going_on(end, not self.is_foreign(last), self._num_shards)
        if (shard, offset) != (None, None) and (shard, offset) != here:
            raise BarecatError(f"Can only append at shard {here[0]} offset {here[1]}")
        if raise_if_cannot_fit and size is not None and here[1] + size > self.shard_size_limit:
            raise FileTooLargeBarecatError(f"{size} bytes do not fit in the current shard")
        known = size if fileobj is not None else len(b"" if data is None else data)
        if known is not None:
            here = room(here, known, self.shard_size_limit, self._num_shards)
        if fileobj is not None:

            def rolled() -> int:
                return fresh_shard(here[0], self._num_shards)

            return self.write_stream(fileobj, *here, rolled, bufsize)
        data = b"" if data is None else data
        fd = self._writable_fd(here[0])
        try:
            self._pwrite_all(fd, data, here[1])
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, here[1])
            raise
        return Address(*here, len(data), crc32c(data))
