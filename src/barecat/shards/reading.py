"""Reading an archive's shards, whatever holds them.

:class:`ShardReader` is what the read paths above need of an archive's shards (verified
reads, batches, ranges, streams, checksums, sizes), and the one base that the local
:class:`~barecat.shards.Sharder` and the object-storage reader (``shards/objectstore.py``)
both extend: each supplies the reads themselves (positional reads, batches, sizes), and
everything computed from them (the shard files' names, the errors that name them,
handles made once per shard whatever the threads, reads into a caller's buffer,
checksums of ranges, file objects) is written once here. Readers are typed against it,
so nothing above tells the two apart. Imports ``entries``, ``exceptions``, ``layout``
and the file objects.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import BinaryIO, TypeVar, cast

from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import BarecatIntegrityError
from barecat.layout import shard_path
from barecat.shards.fileobj import BarecatReadOnlyFileObject

_T = TypeVar("_T")

COPY_CHUNK = 1 << 20
"""Bytes a buffered copy or a checksum of a range reads at a time."""


class ShardReader(abc.ABC):
    """The read side of an archive's shards (see the module doc). Reads are positional
    and safe on any thread; addresses are ``(shard, offset, size)`` in the shards. An
    implementation supplies the abstract reads; the rest is computed from them here."""

    readonly: bool

    def __init__(self, path: str) -> None:
        self.path = path
        """The archive's base name (a path, or the URL of an archive on object storage)."""
        self._lock = threading.Lock()
        self.open_descriptors: dict[int, int] = {}
        """The open descriptor of each local shard read so far (none on object storage):
        for the kernels that read a file in one call (``barecat.kernels``)."""

    def get_shard_path(self, i_shard: int) -> str:
        """The name of shard ``i_shard`` (``PATH-shard-NNNNN``), as messages give it."""
        return shard_path(self.path, i_shard)

    def shard_file(self, i_shard: int) -> str:
        """Where shard ``i_shard`` is opened: its name (a local sharder's is absolute)."""
        return self.get_shard_path(i_shard)

    def _per_shard(self, table: dict[int, _T], shard: int, make: Callable[[int], _T]) -> _T:
        """``table[shard]``, made by ``make`` the first time (once, whatever the threads)."""
        value = table.get(shard)
        if value is None:
            with self._lock:
                value = table.get(shard)
                if value is None:
                    value = table[shard] = make(shard)
        return value

    # -- the errors, naming the shard ------------------------------------------------------

    def missing_shard_error(self, shard: int) -> BarecatIntegrityError:
        """The error for a shard file that is not there."""
        return BarecatIntegrityError(f"Shard file {self.get_shard_path(shard)} is missing")

    def crc_mismatch_error(self, shard: int, offset: int, size: int) -> BarecatIntegrityError:
        """The error for ``size`` bytes at ``offset`` that do not match their CRC32C."""
        return BarecatIntegrityError(
            f"CRC32C mismatch in shard {self.get_shard_path(shard)} at offset {offset} "
            f"({size} bytes): the stored bytes are corrupt"
        )

    def truncated_error(
        self, shard: int, offset: int, size: int, got: int
    ) -> BarecatIntegrityError:
        """The error for a shard that ends ``got`` bytes into ``size`` at ``offset``."""
        return BarecatIntegrityError(
            f"Shard {self.get_shard_path(shard)} is truncated: needed {size} bytes at offset "
            f"{offset}, only {got} exist"
        )

    # -- what an implementation supplies ---------------------------------------------------

    @property
    @abc.abstractmethod
    def num_shards(self) -> int:
        """One past the highest shard number."""

    @abc.abstractmethod
    def shard_exists(self, shard_number: int) -> bool:
        """Whether shard ``shard_number`` exists."""

    @abc.abstractmethod
    def physical_shard_end(self, shard_number: int) -> int:
        """The stored size of a shard (0 for a missing one)."""

    @abc.abstractmethod
    def read_from_address(
        self, shard: int, offset: int, size: int, expected_crc32c: int | None = None
    ) -> bytes:
        """Bytes of one stored file; checked against ``expected_crc32c`` when given.

        Raises:
            BarecatIntegrityError: the shard is missing or ends before ``offset + size``,
                or the bytes do not match ``expected_crc32c``.
        """

    @abc.abstractmethod
    def read_many(self, located: list[tuple[int, Address]], max_gap: int = 0) -> list[bytes]:
        """Bytes for ``(position, address)`` entries sorted by address, returned by
        position; neighbours at most ``max_gap`` apart are read together. Each file
        with a CRC32C is verified.

        Raises:
            BarecatIntegrityError: as :meth:`read_from_address`.
        """

    @abc.abstractmethod
    def require_range(self, shard: int, offset: int, size: int) -> None:
        """Check that ``shard`` holds ``size`` bytes at ``offset`` (before streaming them).

        Raises:
            BarecatIntegrityError: the shard is missing or ends before ``offset + size``.
        """

    @abc.abstractmethod
    def pread(self, shard: int, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes (fewer at the shard's end), no checking."""

    @abc.abstractmethod
    def preadinto(self, shard: int, offset: int, view: memoryview) -> int:
        """Up to ``len(view)`` bytes into ``view`` (fewer at the shard's end)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of every open shard."""

    # -- computed from reads ---------------------------------------------------------------

    def readinto_from_address(
        self,
        shard: int,
        offset: int,
        buffer: bytearray | memoryview,
        expected_crc32c: int | None = None,
    ) -> int:
        """Fill ``buffer`` with the bytes at ``(shard, offset)`` (through :meth:`preadinto`;
        an empty buffer needs no shard); returns their number.

        Raises:
            BarecatIntegrityError: as :meth:`read_from_address`.
        """
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        size = len(view)
        got = self.preadinto(shard, offset, view) if size else 0
        while got < size:
            n = self.preadinto(shard, offset + got, view[got:])
            if n == 0:
                raise self.truncated_error(shard, offset, size, got)
            got += n
        if expected_crc32c is not None and crc32c(view) != expected_crc32c:
            raise self.crc_mismatch_error(shard, offset, got)
        return got

    def run_reads(
        self, count: int, task: Callable[[int], None], first: Address | None = None
    ) -> None:
        """Call ``task(k)`` for each ``k`` in ``range(count)``: a batch's reads, on the
        read pool's threads where the shards have one and the reads wait (``first``:
        the address task 0 reads, asked whether it would wait); here one after another.

        Raises:
            Exception: what the lowest-numbered failing task raised.
        """
        for k in range(count):
            task(k)

    @property
    def total_physical_size_stat(self) -> int:
        """Bytes of all shards together, as stored."""
        return sum(self.physical_shard_end(i) for i in range(self.num_shards))

    @property
    def total_physical_size_seek(self) -> int:
        """The same (the reference's second name for it)."""
        return self.total_physical_size_stat

    def crc_of_range(self, shard: int, offset: int, size: int) -> int:
        """The CRC32C of ``size`` stored bytes at ``(shard, offset)``, read in chunks.

        Raises:
            BarecatIntegrityError: the bytes are not all there.
        """
        value, done = 0, 0
        while done < size:
            chunk = self.read_from_address(shard, offset + done, min(COPY_CHUNK, size - done))
            value = crc32c(chunk, value)
            done += len(chunk)
        return value

    def open_from_address(self, shard: int, offset: int, size: int, mode: str = "rb") -> BinaryIO:
        """A seekable read-only file object over one stored byte range."""
        if mode != "rb":
            raise ValueError("Only 'rb' is supported for raw shard ranges")
        return cast(BinaryIO, BarecatReadOnlyFileObject(self, shard, offset, size))

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["COPY_CHUNK", "ShardReader", "crc32c"]
