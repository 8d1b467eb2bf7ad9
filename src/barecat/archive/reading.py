"""Reading file contents out of a :class:`~barecat.archive.Barecat`: verified, and in a
sealed archive unsealed (authenticated, decompressed), whole, in batches, by range or as
streams.

:class:`ArchiveReading` is the facade's part that reads (``bc.read``, ``bc.get_many``,
...); the functions below it, over the :class:`~barecat.archive.state.OpenArchive`, are
the steps the other parts share (the facade's ``bc[path]`` and file objects, renames of
sealed files). It writes nothing. Every read first checks that the file's row can
address bytes (``index.query.checked_file``: a damaged row raises
``DamagedEntryBarecatError`` naming the path), and damage the shards report (which know
addresses, not paths) is raised again here naming the file it hit.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from barecat.archive.state import ArchivePart, OpenArchive, reading
from barecat.entries import Address, BarecatFileInfo, Order
from barecat.exceptions import (
    BarecatIntegrityError,
    DamagedEntryBarecatError,
    FileTooLargeBarecatError,
)
from barecat.index.query import checked_file
from barecat.paths import normalize, normalize_many
from barecat.shards import BarecatReadOnlyFileObject

if TYPE_CHECKING:  # a plain archive loads no sealing code
    from typing_extensions import Buffer

    from barecat.archive.planned_reads import PlannedReader
    from barecat.sealing import SealedFileReader


class ArchiveReading(ArchivePart):
    """The read side of a :class:`~barecat.archive.Barecat` (see the module doc)."""

    @reading
    def unlock(self) -> None:
        """Get an encrypted archive's key now (asking a passphrase source if that is what
        was given); does nothing for other archives.

        Raises:
            WrongPassphraseBarecatError: the passphrase is wrong.
            BarecatError: no passphrase was given.
        """
        if self.archive.sealing is not None:
            self.archive.sealing.data_key()

    @reading
    def planned_reader(self) -> PlannedReader:
        """A reader of this archive's files for other processes that read planned
        addresses from the shards alone, never the index (``archive/planned_reads.py``;
        the addresses from :meth:`~barecat.archive.Barecat.plan_files`).

        Returns:
            The reader (picklable; it holds an encrypted archive's data key: keep its
            pickles in memory).

        Raises:
            BarecatError: an encrypted archive opened without its passphrase.
            WrongPassphraseBarecatError: a wrong passphrase.
            BarecatIntegrityError: an encrypted archive whose index failed its digest
                check.
        """
        from barecat.archive.planned_reads import planned_reader

        return planned_reader(self.archive)

    @reading
    def verify_seals(
        self, on_file: Callable[[BarecatFileInfo], None] | None = None
    ) -> list[tuple[str, str]]:
        """Open every sealed file: authenticate each block (encrypted archives; needs the
        passphrase) and decompress it. The CRC32C check of ``verify_integrity`` needs no
        key; this one sees what the CRC cannot: bytes sealed for another path, or forged
        together with their checksum.

        Args:
            on_file: called with each file's record once it is checked.

        Returns:
            (path, reason) for each file that fails; empty for a plain archive.

        Raises:
            WrongPassphraseBarecatError: the passphrase is wrong.
            BarecatError: an encrypted archive and no passphrase.
        """
        if self.archive.sealing is None:
            return []
        sealer = self.archive.sealing.sealer()
        bad = []
        for f in self.archive.index.listing.files(Order.ADDRESS):
            try:
                _as_indexed(f, sealer.unseal(f.path, stored_bytes(self.archive, f)))
            except BarecatIntegrityError as e:
                bad.append((f.path, str(e)))
            if on_file is not None:
                on_file(f)
        return bad

    @reading
    def verify_index_digest(self) -> tuple[str | None, str | None]:
        """Check an encrypted archive's file rows against its index digest (every row is
        read; the key is needed).

        Returns:
            (why the rows fail, or None; the digest of the rows as they are, to write
            down and compare later). (None, None) for an archive that keeps no digest:
            plain, compressed only, or encrypted before digests existed.

        Raises:
            BarecatError: no passphrase; ``WrongPassphraseBarecatError``: a wrong one.
        """
        if self.archive.sealing is None or self.archive.sealing.digest is None:
            return None, None
        self.archive.sealing.data_key()
        return self.archive.sealing.digest.verify()

    def check_index_digest(self) -> None:
        """Raise unless an encrypted archive's file rows match its index digest (every
        row is read; the key is needed): for copies that read every file anyway
        (convert, rsync), before they write anything, so a row put back from an older
        index is refused rather than copied into an output whose own digest would then
        vouch for it. Does nothing for an archive that keeps no digest.

        Raises:
            BarecatIntegrityError: the rows fail the digest (naming the archive).
            BarecatError: no passphrase; ``WrongPassphraseBarecatError``: a wrong one.
        """
        problem, _ = self.verify_index_digest()
        if problem is not None:
            from barecat.archive.index_digest import source_refused

            raise source_refused(self.archive.path, problem)

    def get_many(self, paths: Iterable[str], max_gap: int = 4096) -> list[bytes]:
        """Contents of many files, CRC-verified, in request order.

        One index query for the whole batch, then one read a file in request order;
        files at most ``max_gap`` bytes apart in storage are fetched with a single read.
        A damaged file raised is the first requested, as a loop of ``bc[path]`` finds
        it. ``read_many`` is the same method.

        Args:
            paths: the files' paths.
            max_gap: the largest gap between two files still read in one go.

        Returns:
            Each file's bytes, in the order of ``paths``.

        Raises:
            KeyError: a path is not a file.
            BarecatIntegrityError: bytes do not match their CRC32C, or are missing.
        """
        archive = self.archive
        reads = archive.reads  # a read in progress, which close waits for (state.reading)
        reads.append(None)
        try:
            asked = list(paths)
            if (table := archive.index.lookups.table) is None or archive.sealing is not None:
                return self._get_many_carefully(asked, max_gap)
            got = table.get_many(asked, archive.sharder.open_descriptors)  # (one kernel call
            if None in got:  # for a warm batch; what it did not answer, the careful path)
                missing = [k for k, data in enumerate(got) if data is None]
                rest = self._get_many_carefully([asked[k] for k in missing], max_gap)
                for k, data in zip(missing, rest, strict=True):
                    got[k] = data
            return got  # type: ignore[return-value]  # (no None left)
        finally:
            del reads[-1]

    def _get_many_carefully(self, paths: list[str], max_gap: int) -> list[bytes]:
        """:meth:`get_many` through the index's lookups and the shards' batch reads
        (coalesced, on the read pool's threads when they wait), raising what fails."""
        archive = self.archive
        wanted = normalize_many(paths)
        try:
            return self._read_located(wanted, archive.index.lookups.locate_many(wanted), max_gap)
        except BarecatIntegrityError:  # the lookup table may be what is damaged: ask SQLite
            located = archive.index.lookups.locate_many_in_sqlite(wanted)
            try:
                return self._read_located(wanted, located, max_gap)
            except BarecatIntegrityError:
                for pos, address in sorted(located):  # which file is damaged, the first
                    _read_checked(archive, wanted[pos], address)
                raise

    def _read_located(
        self, wanted: list[str], located: list[tuple[int, Address]], max_gap: int
    ) -> list[bytes]:
        if len(located) < len(wanted):
            hit = {pos for pos, *_ in located}
            raise KeyError(next(p for i, p in enumerate(wanted) if i not in hit))
        stored = self.archive.sharder.read_many(located, max_gap)
        if self.archive.sealing is None:
            return stored
        unseal = self.archive.sealing.unseal
        return [unseal(p, data) for p, data in zip(wanted, stored, strict=True)]

    def read(self, item: BarecatFileInfo | str, offset: int = 0, size: int = -1) -> bytes:
        """A file's bytes; CRC32C-verified when the whole file is read (in a sealed
        archive, every block read is authenticated or decompressed instead).

        Args:
            item: the file's path or record.
            offset: where to start reading in the file.
            size: how many bytes to read (-1: to the end); fewer past the end.

        Returns:
            The bytes read.

        Raises:
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
            DamagedEntryBarecatError: the file's index row cannot address bytes.
            BarecatIntegrityError: the bytes do not match their CRC32C, or are missing.
        """
        archive = self.archive
        reads = archive.reads  # a read in progress, which close waits for (state.reading)
        reads.append(None)
        try:
            if isinstance(item, str) and (archive.sealing is None or (offset == 0 and size < 0)):
                # the address as bc[path] takes it (the lookup table): no record is made
                normalized = normalize(item)
                addr = archive.index.lookups.lookup_address(normalized)
                if addr is not None:
                    shard, start, total, crc = addr
                    try:
                        if offset == 0 and (size < 0 or size >= total):
                            data = archive.sharder.read_from_address(shard, start, total, crc)
                            if archive.sealing is None:
                                return data
                            return archive.sealing.unseal(normalized, data)
                        offset = min(max(offset, 0), total)
                        n = total - offset if size < 0 else min(size, total - offset)
                        return archive.sharder.read_from_address(shard, start + offset, n)
                    except BarecatIntegrityError:
                        pass  # the table may be what is damaged: the record from SQLite decides
            return read_file(archive, file_record(archive, item), offset, size)
        finally:
            del reads[-1]

    def readinto(self, item: BarecatFileInfo | str, buffer: Buffer, offset: int = 0) -> int:
        """Read a file's bytes into ``buffer`` (as much as fits), without allocating;
        CRC32C-verified when the whole file is read (in a sealed archive the file is
        unsealed, authenticated, then copied in).

        Args:
            item: the file's path or record.
            buffer: a writable, C-contiguous buffer to fill from its start (a
                ``bytearray``, a ``memoryview``, a NumPy array, a tensor's ``.numpy()``).
            offset: where to start reading in the file.

        Returns:
            The number of bytes read (0 past the end of the file).

        Raises:
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
            DamagedEntryBarecatError: the file's index row cannot address bytes.
            BarecatIntegrityError: the bytes do not match their CRC32C, or are missing.
            TypeError: ``buffer`` is read-only.
        """
        archive = self.archive
        reads = archive.reads  # a read in progress, which close waits for (state.reading)
        reads.append(None)
        try:
            view = _writable(buffer)
            offset = max(offset, 0)
            if isinstance(item, str) and archive.sealing is None:
                # the address as bc[path] takes it (the lookup table): no record is made
                addr = archive.index.lookups.lookup_address(normalize(item))
                if addr is not None:
                    shard, start, total, crc = addr
                    n = max(0, min(len(view), total - offset))
                    try:
                        return archive.sharder.readinto_from_address(
                            shard,
                            start + offset,
                            view[:n],
                            crc if offset == 0 and n == total else None,
                        )
                    except BarecatIntegrityError:
                        pass  # the table may be what is damaged: the record from SQLite decides
            f = checked_file(file_record(archive, item))
            stored = f.address
            total = f.size or 0
            n = max(0, min(len(view), total - offset))
            if archive.sealing is not None:
                view[:n] = read_file(archive, f, offset, n)
                return n
            crc = stored.crc32c if offset == 0 and n == total else None
            try:
                return archive.sharder.readinto_from_address(
                    stored.shard, stored.offset + offset, view[:n], crc
                )
            except BarecatIntegrityError as e:
                raise _naming(f.path, e) from e
        finally:
            del reads[-1]

    @reading
    def readinto_many(self, paths: Iterable[str], buffer: Buffer) -> list[tuple[int, int]]:
        """Whole files read into one caller-owned buffer, back to back in request order,
        each verified (CRC32C; in a sealed archive, unsealed and authenticated, then
        copied in) before this returns: no allocation per file in a plain archive.

        One index lookup for the batch, reads in request order (a damaged file raised is
        the first requested). On an error the buffer may hold some of the files.

        Args:
            paths: the files' paths.
            buffer: a writable, C-contiguous buffer (a ``bytearray``, a ``memoryview``,
                a NumPy array, a pinned tensor's ``.numpy()``) with room for all of them.

        Returns:
            (offset in ``buffer``, size) of each file, in the order of ``paths``.

        Raises:
            KeyError: a path is not a file.
            FileTooLargeBarecatError: the files do not all fit (naming the first that
                does not); nothing is read then.
            BarecatIntegrityError: bytes do not match their CRC32C, or are missing
                (naming the file).
            TypeError: ``buffer`` is read-only.
        """
        archive = self.archive
        view = _writable(buffer)
        wanted = normalize_many(list(paths))
        if archive.sealing is not None:
            return _place(wanted, self.get_many(wanted), view)
        located = archive.index.lookups.locate_many(wanted)
        try:
            return self._readinto_located(wanted, located, view)
        except BarecatIntegrityError:  # the lookup table may be what is damaged: ask SQLite
            return self._readinto_located(
                wanted, archive.index.lookups.locate_many_in_sqlite(wanted), view, naming=True
            )

    def _readinto_located(
        self,
        wanted: list[str],
        located: list[tuple[int, Address]],
        view: memoryview,
        naming: bool = False,
    ) -> list[tuple[int, int]]:
        places = _places(wanted, located, view)
        readinto = self.archive.sharder.readinto_from_address
        in_request_order = sorted(located)  # (the first failure raised is a loop's first)

        def read_one(k: int) -> None:  # (on the read pool's threads: see run_reads)
            pos, (shard, offset, size, crc) = in_request_order[k]
            at = places[pos][0]
            try:
                readinto(shard, offset, view[at : at + size], crc)
            except BarecatIntegrityError as e:
                if naming:
                    raise _naming(wanted[pos], e) from e
                raise

        first = in_request_order[0][1] if located else None
        self.archive.sharder.run_reads(len(located), read_one, first)
        return places

    @reading
    def check_crc32c(self, item: BarecatFileInfo | str) -> bool:
        """Whether a file's stored bytes match the CRC32C in its index row.

        Args:
            item: the file's path or record.

        Returns:
            True if they match or the row stores no checksum.

        Raises:
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
            DamagedEntryBarecatError: the file's index row cannot address bytes.
            BarecatIntegrityError: the bytes are missing (a short or missing shard).
        """
        f = checked_file(file_record(self.archive, item))
        stored = f.address
        if stored.crc32c is None:
            return True
        try:
            crc = self.archive.sharder.crc_of_range(stored.shard, stored.offset, stored.size)
        except BarecatIntegrityError as e:
            raise _naming(f.path, e) from e
        return crc == stored.crc32c

    read_many = get_many


def _writable(buffer: Buffer) -> memoryview:
    """``buffer`` as a writable byte view (``TypeError`` for a read-only one)."""
    view = memoryview(buffer)
    if view.readonly or not view.c_contiguous:
        raise TypeError("readinto needs a writable, C-contiguous buffer; this one is not")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _places(
    wanted: list[str], located: list[tuple[int, Address]], view: memoryview
) -> list[tuple[int, int]]:
    """(offset, size) of each file back to back in request order, checked to fit."""
    if len(located) < len(wanted):
        hit = {pos for pos, _ in located}
        raise KeyError(next(p for i, p in enumerate(wanted) if i not in hit))
    sizes = [0] * len(wanted)
    for pos, address in located:
        sizes[pos] = address.size
    return _fitted(wanted, sizes, len(view))


def _fitted(wanted: list[str], sizes: list[int], room: int) -> list[tuple[int, int]]:
    places, at = [], 0
    for path, size in zip(wanted, sizes, strict=True):
        if at + size > room:
            raise FileTooLargeBarecatError(
                f"{path}: {size} bytes do not fit in the buffer ({room} bytes, "
                f"{at} taken by the files before it)"
            )
        places.append((at, size))
        at += size
    return places


def _place(wanted: list[str], datas: list[bytes], view: memoryview) -> list[tuple[int, int]]:
    """Copy ``datas`` into ``view`` back to back, checked to fit first."""
    places = _fitted(wanted, [len(d) for d in datas], len(view))
    for (at, size), data in zip(places, datas, strict=True):
        view[at : at + size] = data
    return places


def read_item(archive: OpenArchive, path: str) -> bytes:
    """``bc[path]``: a file's bytes, by the address the lookup table (or SQLite) gives,
    checked and unsealed; one call deep below the facade's dict API.

    Raises:
        KeyError: no file is at ``path``.
        BarecatIntegrityError: the bytes do not match their CRC32C, or are missing.
    """
    reads = archive.reads  # a read in progress, which close waits for (state.reading)
    reads.append(None)
    try:
        lookups = archive.index.lookups
        if (table := lookups.table) is not None and archive.sealing is None:
            data = table.get(path, archive.sharder.open_descriptors)  # (one kernel call:
            if data is not None:  # probe, read, CRC; else the careful path below)
                return data
        normalized = normalize(path)
        addr = lookups.lookup_address(normalized)
        if addr is None:
            raise KeyError(path)
        try:
            data = archive.sharder.read_from_address(addr[0], addr[1], addr[2], addr[3])
        except BarecatIntegrityError as e:  # the lookup table may be what is damaged
            data = read_again(archive, path, normalized, addr, e)
        return data if archive.sealing is None else archive.sealing.unseal(normalized, data)
    finally:
        del reads[-1]


def read_again(
    archive: OpenArchive,
    path: str,
    normalized: str,
    addr: Address,
    error: BarecatIntegrityError,
) -> bytes:
    """After a failed read at ``addr`` (from the lookup table): the file read where
    SQLite says it is, if that differs; else the damage, naming the file."""
    checked = archive.index.lookups.lookup_address_in_sqlite(normalized)
    if checked is None:
        raise KeyError(path) from None
    if checked == addr:
        raise _naming(normalized, error) from error
    return _read_checked(archive, normalized, checked)


def _read_checked(archive: OpenArchive, path: str, address: Address) -> bytes:
    """Bytes of the file ``path`` from the shards (checked when the address has a
    CRC32C); damage raised naming the file (the shards know addresses, not paths)."""
    try:
        return archive.sharder.read_from_address(*address)
    except BarecatIntegrityError as e:
        raise _naming(path, e) from e


def file_record(archive: OpenArchive, item: BarecatFileInfo | str) -> BarecatFileInfo:
    """The record of the file ``item`` names: ``item`` itself when it is a record with an
    address, else the index's (which raises for a missing file or a directory)."""
    if isinstance(item, BarecatFileInfo) and item.shard is not None:
        return item
    return archive.index.lookups.lookup_file(
        item.path if isinstance(item, BarecatFileInfo) else item
    )


def read_file(archive: OpenArchive, f: BarecatFileInfo, offset: int, size: int) -> bytes:
    """``read`` of a file record, its row checked first."""
    stored = checked_file(f).address
    total = f.size or 0
    if archive.sealing is not None:
        if offset == 0 and (size < 0 or size >= total):
            return _as_indexed(f, archive.sealing.unseal(f.path, stored_bytes(archive, f)))
        with _open_sealed(archive, f) as reader:
            reader.seek(max(offset, 0))
            return reader.read(total if size < 0 else size) or b""
    if offset == 0 and (size < 0 or size >= total):
        return _read_checked(archive, f.path, stored)
    offset = min(max(offset, 0), total)
    n = total - offset if size < 0 else min(size, total - offset)
    return _read_checked(archive, f.path, Address(stored.shard, stored.offset + offset, n, None))


def stored_bytes(archive: OpenArchive, f: BarecatFileInfo) -> bytes:
    """A file's bytes as the shard holds them (sealed, in a sealed archive), CRC-checked."""
    return _read_checked(archive, f.path, checked_file(f).address)


def _open_sealed(archive: OpenArchive, f: BarecatFileInfo) -> SealedFileReader:
    """A stream over a sealed file that decodes only the blocks it reads."""
    from barecat.sealing import SealedFileReader

    assert archive.sealing is not None
    sealer = archive.sealing.sealer()
    if archive.sealing.digest is not None:
        archive.sealing.digest.require_trusted(f.path)
    shard, base, stored, _ = f.address

    def fetch(offset: int, size: int) -> bytes:
        size = max(0, min(size, stored - offset))
        return archive.read_now(
            lambda: archive.sharder.read_from_address(shard, base + offset, size)
        )

    reader = SealedFileReader(sealer, f.path, fetch, stored)
    if reader.size != f.size:
        reader.close()
        raise _length_mismatch(f, reader.size)
    return reader


def _as_indexed(f: BarecatFileInfo, data: bytes) -> bytes:
    """``data``, a sealed file's bytes as unsealed (authenticated, in an encrypted
    archive), if their length is the one the index gives ``f``: sizes a front end
    reports before reading (stat, ``Content-Length``) come from the index, so a length
    that differs is an error, never a file cut short or padded.

    Raises:
        BarecatIntegrityError: naming the path and both lengths.
    """
    if len(data) != f.size:
        raise _length_mismatch(f, len(data))
    return data


def _length_mismatch(f: BarecatFileInfo, sealed: int) -> BarecatIntegrityError:
    return BarecatIntegrityError(
        f"{f.path}: the index gives its length as {f.size} bytes, its sealed bytes hold "
        f"{sealed} (the index was changed or damaged)"
    )


def open_reader(archive: OpenArchive, f: BarecatFileInfo) -> io.RawIOBase:
    """A seekable binary stream over a file (block by block when sealed), whose bytes
    are known to be there: a missing or short shard raises now, naming the path."""
    shard, offset, size, _ = checked_file(f).address
    try:
        archive.sharder.require_range(shard, offset, size)
    except BarecatIntegrityError as e:
        raise _naming(f.path, e) from e
    if archive.sealing is not None:
        return _open_sealed(archive, f)
    return BarecatReadOnlyFileObject(_OpenShards(archive), shard, offset, size)


class _OpenShards:
    """The shard reads of an archive's streams (``ShardRanges``), each a read in progress
    that its close waits for; after the close they raise ``ArchiveClosedBarecatError``."""

    __slots__ = ("_archive",)

    def __init__(self, archive: OpenArchive) -> None:
        self._archive = archive

    def pread(self, shard: int, offset: int, size: int) -> bytes:
        archive = self._archive
        return archive.read_now(lambda: archive.sharder.pread(shard, offset, size))

    def preadinto(self, shard: int, offset: int, view: memoryview) -> int:
        archive = self._archive
        return archive.read_now(lambda: archive.sharder.preadinto(shard, offset, view))

    def truncated_error(
        self, shard: int, offset: int, size: int, got: int
    ) -> BarecatIntegrityError:
        return self._archive.sharder.truncated_error(shard, offset, size, got)


def _naming(path: str, error: BarecatIntegrityError) -> BarecatIntegrityError:
    """Damage found in the shards (their words: which shard, which offset), told with the
    path of the file it hit first."""
    if isinstance(error, DamagedEntryBarecatError) or str(error).startswith(f"{path}: "):
        return error  # names it already
    return BarecatIntegrityError(f"{path}: {error}")


__all__ = [
    "ArchiveReading",
    "file_record",
    "open_reader",
    "read_again",
    "read_file",
    "read_item",
    "stored_bytes",
]
