"""Files read where a plan made from the index says they are, without the index.

For engines whose driver plans once and whose workers only read (Ray Data, Dask, Hugging
Face): the driver lists the chosen files with ``Barecat.plan_files`` (the index's plan,
``IndexListing.planned``: typed rows in storage order, chosen by SQLite), and hands each
worker a :class:`PlannedReader` (``Barecat.planned_reader``, made by
:func:`planned_reader` from the open archive's state) with the addresses of its files. A
worker opens the shards only (local files, or ranged requests to object storage with no
local cache), checks every file's CRC32C and, in a sealed archive, authenticates and
decompresses it bound to its path: it never opens or downloads the index. An encrypted
archive's data key travels inside the reader (pickled with it, never shown by ``repr``);
the driver checked the index digest when it unlocked the archive, so the rows it planned
from are the trusted ones. Imports ``index.listing`` (the rows' type), ``shards``,
``objectstore``, ``sealing`` and ``checksum``; no SQL (the plan is the index's).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import BarecatIntegrityError
from barecat.index.listing import PlannedRow

if TYPE_CHECKING:
    from barecat.archive.state import OpenArchive
    from barecat.sealing import Sealer
    from barecat.shards.reading import ShardReader


PlannedFile = tuple[str, int, int, int, int | None]
"""(path, shard, offset, stored size, crc32c): one file's bytes as the shards hold them
(the first five fields of a plan's ``PlannedRow``)."""


class PlannedReader:
    """Reads planned files of one archive from its shards alone (see the module doc).

    Pickles as the archive's location, its storage options and, when sealed, its sealing
    settings and data key; each process opens the shards on first use.
    """

    def __init__(
        self,
        location: str,
        remote: bool,
        num_shards: int,
        storage_options: dict[str, Any] | None,
        sealing: tuple[str, int, int, bytes | None, bytes | None] | None,
    ) -> None:
        self.location = location
        self.remote = remote
        self.num_shards = num_shards
        self.storage_options = storage_options
        self._sealing = sealing  # (codec, level, block size, data key, dictionary)
        self._sharder: ShardReader | None = None
        self._sealer: Sealer | None = None
        self._pid = -1

    def __repr__(self) -> str:  # never the key
        sealed = "" if self._sealing is None else ", sealed"
        return f"PlannedReader({self.location!r}{sealed})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_sharder"], state["_sealer"], state["_pid"] = None, None, -1
        return state

    def _shards(self) -> ShardReader:
        if self._sharder is None or self._pid != os.getpid():
            if self.remote:
                from barecat.objectstore import ObjectStore, url_protocol
                from barecat.shards.objectstore import ObjectStoreSharder

                protocol = url_protocol(self.location)
                assert protocol is not None
                store = ObjectStore(protocol, self.storage_options)
                self._sharder = ObjectStoreSharder(self.location, store, self.num_shards, None)
            else:
                from barecat.shards import Sharder

                self._sharder = Sharder(self.location, readonly=True)
            self._pid = os.getpid()
        return self._sharder

    def read(self, files: Sequence[PlannedFile], max_gap: int = 4096) -> list[bytes]:
        """The files' contents, CRC32C-checked (and in a sealed archive authenticated and
        decompressed, bound to each path), in the order given.

        Neighbours at most ``max_gap`` apart are read with one ``pread`` (up to 16 MiB),
        or on object storage fetched by one ranged request per run.

        Args:
            files: (path, shard, offset, stored size, crc32c) of each file, as
                :func:`plan_files` gave them.
            max_gap: the largest gap between two files still read in one go.

        Returns:
            One ``bytes`` per file.

        Raises:
            BarecatIntegrityError: bytes do not match their CRC32C or their seal, or are
                missing; the message names the file.
        """
        addresses = [Address(shard, offset, size, crc) for _, shard, offset, size, crc in files]
        order = sorted(range(len(files)), key=lambda i: (addresses[i].shard, addresses[i].offset))
        located = [(pos, addresses[i]) for pos, i in enumerate(order)]
        try:
            stored = self._shards().read_many(located, max_gap)
        except BarecatIntegrityError as e:
            self._raise_naming_the_file(files, e)
        out: list[bytes] = [b""] * len(files)
        for pos, i in enumerate(order):
            out[i] = stored[pos]
        if self._sealing is not None:
            sealer = self._unsealer()
            paths = [path for path, *_ in files]
            out = [sealer.unseal(path, data) for path, data in zip(paths, out, strict=True)]
        return out

    @property
    def sealed(self) -> bool:
        """Whether files are stored sealed (then only :meth:`read` reads them)."""
        return self._sealing is not None

    def read_packed(
        self,
        files: Sequence[PlannedFile],
        allocate: Callable[[int], memoryview],
        max_gap: int = 4096,
    ) -> memoryview:
        """The stored bytes of a plain archive's files back to back, in the order given,
        each CRC32C-checked where it lies: no object per file, no copy but the read's.

        Neighbours in one shard at most ``max_gap`` apart are read into the buffer with
        one read (up to 16 MiB, their gaps 1 MiB at most), then moved down over the gaps,
        so each file's bytes start where those of the file before it end: the sizes give
        the offsets. On object storage the ranges are fetched as :meth:`read` fetches
        them (each shard's coalesced, requested together), then copied in.

        Args:
            files: (path, shard, offset, stored size, crc32c) of each file.
            allocate: a writable buffer of at least the given number of bytes (a view
                of one of Arrow's, say); called once.
            max_gap: the largest gap between two files still read in one go.

        Returns:
            The first ``sum(sizes)`` bytes of the buffer, as unsigned bytes.

        Raises:
            BarecatIntegrityError: bytes do not match their CRC32C or are missing; the
                message names the file.
            ValueError: the archive is sealed (:meth:`read` unseals its files).
        """
        if self._sealing is not None:
            raise ValueError("a sealed archive's files are read one by one, by read()")
        if self.remote:  # each shard's ranges fetched together, as read() does, copied in
            contents = self.read(files, max_gap)
            view = memoryview(allocate(sum(len(data) for data in contents))).cast("B")
            at = 0
            for data in contents:
                view[at : at + len(data)] = data
                at += len(data)
            return view[:at]
        shards = self._shards()
        runs = _runs(files, max_gap)
        try:  # a shard too short is told before any buffer is made
            for _, _, shard, start, end in runs:
                if end > start:
                    shards.require_range(shard, start, end - start)
        except BarecatIntegrityError as e:
            self._raise_naming_the_file(files, e)
        need = packed = 0
        for i, j, _, start, end in runs:
            need = max(need, packed + end - start)
            packed += sum(size for _, _, _, size, _ in files[i:j])
        view = memoryview(allocate(max(need, packed))).cast("B")
        packed = 0
        for i, j, shard, start, end in runs:
            base = packed
            if end > start:
                try:
                    shards.readinto_from_address(shard, start, view[base : base + end - start])
                except BarecatIntegrityError as e:
                    self._raise_naming_the_file(files[i:j], e)
            for path, _, offset, size, crc in files[i:j]:
                if size:
                    at = base + offset - start
                    if at != packed:  # after a gap: moved down over it
                        view[packed : packed + size] = view[at : at + size]
                if crc is not None and crc32c(view[packed : packed + size]) != crc:
                    error = shards.crc_mismatch_error(shard, offset, size)
                    raise BarecatIntegrityError(f"{path}: {error}")
                packed += size
        return view[:packed]

    def _raise_naming_the_file(
        self, files: Sequence[PlannedFile], error: BarecatIntegrityError
    ) -> NoReturn:
        """Raise ``error`` again, as the error of the first of ``files`` that fails alone
        (its message then names the file)."""
        for path, shard, offset, size, crc in files:
            try:
                self._shards().read_from_address(shard, offset, size, crc)
            except BarecatIntegrityError as e:
                raise BarecatIntegrityError(f"{path}: {e}") from e
        raise error

    def _unsealer(self) -> Sealer:
        if self._sealer is None:
            from barecat.sealing import Sealer

            assert self._sealing is not None
            codec, level, block_size, key, dictionary = self._sealing
            self._sealer = Sealer(codec, level, block_size, key, dictionary)
        return self._sealer


def planned_reader(archive: OpenArchive) -> PlannedReader:
    """A reader of an open archive's planned files for other processes (see the module
    doc; ``Barecat.planned_reader`` is this, on the reading part).

    Args:
        archive: the archive's state, open for reading; an encrypted one with its
            passphrase.

    Returns:
        The reader; it holds an encrypted archive's data key (keep its pickles in
        memory).

    Raises:
        BarecatError: an encrypted archive opened without its passphrase.
        WrongPassphraseBarecatError: a wrong passphrase.
        BarecatIntegrityError: an encrypted archive whose index failed its digest check.
    """
    sealing = None
    state = archive.sealing
    if state is not None:
        key = state.data_key()
        if state.digest is not None:
            state.digest.require_trusted(archive.path)
        s = state.settings
        sealing = (s.codec, s.level, s.block_size, key, s.dictionary or None)
    storage_options = archive.remote_options["storage_options"] if archive.remote else None
    location = archive.path if archive.remote else os.path.abspath(archive.path)
    num_shards = archive.index.lookups.num_used_shards
    return PlannedReader(location, archive.remote, num_shards, storage_options, sealing)


_RUN_SPAN = 16 << 20
"""Most bytes of one read of :meth:`PlannedReader.read_packed` (one file may be more)."""
_RUN_GAPS = 1 << 20
"""Most bytes of gaps one read of :meth:`PlannedReader.read_packed` reads."""


def _runs(files: Sequence[PlannedFile], max_gap: int) -> list[tuple[int, int, int, int, int]]:
    """``files`` cut into runs read in one go: (first, past the last, shard, start, end);
    a run's files are in address order, in one shard, at most ``max_gap`` apart (empty
    files, which need no bytes, join any run; a run of them only reads nothing)."""
    runs: list[tuple[int, int, int, int, int]] = []
    first, shard, start, end, gaps = 0, -1, 0, 0, 0
    for i, (_, s, offset, size, _) in enumerate(files):
        if not size:
            continue
        if shard >= 0 and (
            s != shard
            or offset < end
            or offset - end > max_gap
            or offset + size - start > _RUN_SPAN
            or gaps + offset - end > _RUN_GAPS
        ):
            runs.append((first, i, shard, start, end))
            first, shard = i, -1
        if shard < 0:
            shard, start, end, gaps = s, offset, offset + size, 0
        else:
            gaps += offset - end
            end = offset + size
    if first < len(files) or not runs:
        runs.append((first, len(files), max(shard, 0), start, end))
    return runs


__all__ = ["PlannedFile", "PlannedReader", "PlannedRow", "planned_reader"]
