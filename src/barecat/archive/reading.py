"""Reading file contents out of a :class:`~barecat.archive.Barecat`: verified, and in a
sealed archive unsealed (authenticated, decompressed), whole, in batches, by range or as
streams.

A mixin over what the facade holds (``index``, ``sharder`` and the archive's sealing, None
for a plain archive); it owns no state and writes nothing, so the facade module keeps
what couples writing to the halves. Every read first checks that the file's row can
address bytes (``index.query.checked_file``: a damaged row raises
``DamagedEntryBarecatError`` naming the path), and damage the shards report (which know
addresses, not paths) is raised again here naming the file it hit.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from barecat.entries import Address, BarecatFileInfo, Order
from barecat.exceptions import BarecatIntegrityError, DamagedEntryBarecatError
from barecat.index import Index
from barecat.index.query import checked_file
from barecat.paths import normalize, normalize_many
from barecat.shards import BarecatReadOnlyFileObject
from barecat.shards.reading import ShardReader

if TYPE_CHECKING:  # a plain archive loads no sealing code
    from barecat.archive.sealed import ArchiveSealing
    from barecat.sealing import SealedFileReader


class ArchiveReading:
    """The read side of a :class:`~barecat.archive.Barecat` (see the module doc)."""

    index: Index
    sharder: ShardReader
    _sealing: ArchiveSealing | None

    @property
    def sealed(self) -> bool:
        """True if files are stored compressed and/or encrypted (see ``barecat.sealing``)."""
        return self._sealing is not None

    @property
    def encrypted(self) -> bool:
        """True if files are stored encrypted (reading them needs the passphrase)."""
        return self._sealing is not None and self._sealing.encrypted

    @property
    def unlocked(self) -> bool:
        """True if file contents can be read without asking for a passphrase."""
        return self._sealing is None or self._sealing.data_key_known

    def unlock(self) -> None:
        """Get an encrypted archive's key now (asking a passphrase source if that is what
        was given); does nothing for other archives.

        Raises:
            WrongPassphraseBarecatError: the passphrase is wrong.
            BarecatError: no passphrase was given.
        """
        if self._sealing is not None:
            self._sealing.data_key()

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
        if self._sealing is None:
            return []
        sealer = self._sealing.sealer()
        bad = []
        for f in self.index.listing.files(Order.ADDRESS):
            try:
                sealer.unseal(f.path, self._stored_bytes(f))
            except BarecatIntegrityError as e:
                bad.append((f.path, str(e)))
            if on_file is not None:
                on_file(f)
        return bad

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
        if self._sealing is None or self._sealing.digest is None:
            return None, None
        self._sealing.data_key()
        return self._sealing.digest.verify()

    def __getitem__(self, path: str) -> bytes:
        normalized = normalize(path)
        addr = self.index.lookup_address(normalized)
        if addr is None:
            raise KeyError(path)
        try:
            data = self.sharder.read_from_address(addr[0], addr[1], addr[2], addr[3])
        except BarecatIntegrityError as e:  # the lookup table may be what is damaged
            data = self._read_again(path, normalized, addr, e)
        return data if self._sealing is None else self._sealing.unseal(normalized, data)

    def _read_again(
        self,
        path: str,
        normalized: str,
        addr: Address,
        error: BarecatIntegrityError,
    ) -> bytes:
        """After a failed read at ``addr`` (from the lookup table): the file read where
        SQLite says it is, if that differs; else the damage, naming the file."""
        checked = self.index.lookup_address_in_sqlite(normalized)
        if checked is None:
            raise KeyError(path) from None
        if checked == addr:
            raise _naming(normalized, error) from error
        return self._read_checked(normalized, checked)

    def _read_checked(self, path: str, address: Address) -> bytes:
        """Bytes of the file ``path`` from the shards (checked when the address has a
        CRC32C); damage raised naming the file (the shards know addresses, not paths)."""
        try:
            return self.sharder.read_from_address(*address)
        except BarecatIntegrityError as e:
            raise _naming(path, e) from e

    def get(self, path: str, default: Any = None) -> Any:
        """A file's contents, or ``default`` if no file is there (as ``dict.get``).

        Args:
            path: the file's path.
            default: what to return for a missing file.

        Returns:
            The file's bytes (CRC32C-verified, unsealed), or ``default``.

        Raises:
            BarecatIntegrityError: the bytes do not match their CRC32C, or are missing.
        """
        try:
            return self[path]
        except KeyError:
            return default

    def get_many(self, paths: Iterable[str], max_gap: int = 4096) -> list[bytes]:
        """Contents of many files, CRC-verified, in request order.

        One index query for the whole batch, then reads in storage order; files at most
        ``max_gap`` bytes apart are fetched with a single read. ``read_many`` is the
        same method.

        Args:
            paths: the files' paths.
            max_gap: the largest gap between two files still read in one go.

        Returns:
            Each file's bytes, in the order of ``paths``.

        Raises:
            KeyError: a path is not a file.
            BarecatIntegrityError: bytes do not match their CRC32C, or are missing.
        """
        wanted = normalize_many(list(paths))
        try:
            return self._read_located(wanted, self.index.locate_many(wanted), max_gap)
        except BarecatIntegrityError:  # the lookup table may be what is damaged: ask SQLite
            located = self.index.locate_many_in_sqlite(wanted)
            try:
                return self._read_located(wanted, located, max_gap)
            except BarecatIntegrityError:
                for pos, address in located:  # which file is damaged
                    self._read_checked(wanted[pos], address)
                raise

    def _read_located(
        self, wanted: list[str], located: list[tuple[int, Address]], max_gap: int
    ) -> list[bytes]:
        if len(located) < len(wanted):
            hit = {pos for pos, *_ in located}
            raise KeyError(next(p for i, p in enumerate(wanted) if i not in hit))
        stored = self.sharder.read_many(located, max_gap)
        if self._sealing is None:
            return stored
        unseal = self._sealing.unseal
        return [unseal(p, data) for p, data in zip(wanted, stored, strict=True)]

    def _fileinfo(self, item: BarecatFileInfo | str) -> BarecatFileInfo:
        if isinstance(item, BarecatFileInfo) and item.shard is not None:
            return item
        return self.index.lookup_file(item.path if isinstance(item, BarecatFileInfo) else item)

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
        return self._read_file(self._fileinfo(item), offset, size)

    def _read_file(self, f: BarecatFileInfo, offset: int, size: int) -> bytes:
        """``read`` of a file record, its row checked first."""
        stored = checked_file(f).address
        total = f.size or 0
        if self._sealing is not None:
            if offset == 0 and (size < 0 or size >= total):
                return self._sealing.unseal(f.path, self._stored_bytes(f))
            with self._open_sealed(f) as reader:
                reader.seek(max(offset, 0))
                return reader.read(total if size < 0 else size) or b""
        if offset == 0 and (size < 0 or size >= total):
            return self._read_checked(f.path, stored)
        offset = min(max(offset, 0), total)
        n = total - offset if size < 0 else min(size, total - offset)
        return self._read_checked(f.path, Address(stored.shard, stored.offset + offset, n, None))

    def readinto(
        self, item: BarecatFileInfo | str, buffer: bytearray | memoryview, offset: int = 0
    ) -> int:
        """Read a file's bytes into ``buffer`` (as much as fits), without allocating;
        CRC32C-verified when the whole file is read.

        Args:
            item: the file's path or record.
            buffer: a writable buffer to fill from its start.
            offset: where to start reading in the file.

        Returns:
            The number of bytes read (0 past the end of the file).

        Raises:
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
            DamagedEntryBarecatError: the file's index row cannot address bytes.
            BarecatIntegrityError: the bytes do not match their CRC32C, or are missing.
        """
        f = checked_file(self._fileinfo(item))
        stored = f.address
        total = f.size or 0
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), total - offset))
        if self._sealing is not None:
            view[:n] = self._read_file(f, offset, n)
            return n
        crc = stored.crc32c if offset == 0 and n == total else None
        try:
            return self.sharder.readinto_from_address(
                stored.shard, stored.offset + offset, view[:n], crc
            )
        except BarecatIntegrityError as e:
            raise _naming(f.path, e) from e

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
        f = checked_file(self._fileinfo(item))
        stored = f.address
        if stored.crc32c is None:
            return True
        try:
            crc = self.sharder.crc_of_range(stored.shard, stored.offset, stored.size)
        except BarecatIntegrityError as e:
            raise _naming(f.path, e) from e
        return crc == stored.crc32c

    def _stored_bytes(self, f: BarecatFileInfo) -> bytes:
        """A file's bytes as the shard holds them (sealed, in a sealed archive), CRC-checked."""
        return self._read_checked(f.path, checked_file(f).address)

    def _open_sealed(self, f: BarecatFileInfo) -> SealedFileReader:
        """A stream over a sealed file that decodes only the blocks it reads."""
        from barecat.sealing import SealedFileReader

        assert self._sealing is not None
        sealer = self._sealing.sealer()
        if self._sealing.digest is not None:
            self._sealing.digest.require_trusted(f.path)
        shard, base, stored, _ = f.address

        def fetch(offset: int, size: int) -> bytes:
            size = max(0, min(size, stored - offset))
            return self.sharder.read_from_address(shard, base + offset, size)

        return SealedFileReader(sealer, f.path, fetch, stored)

    read_many = get_many

    def _open_reader(self, f: BarecatFileInfo) -> io.RawIOBase:
        """A seekable binary stream over a file (block by block when sealed), whose bytes
        are known to be there: a missing or short shard raises now, naming the path."""
        shard, offset, size, _ = checked_file(f).address
        try:
            self.sharder.require_range(shard, offset, size)
        except BarecatIntegrityError as e:
            raise _naming(f.path, e) from e
        if self._sealing is not None:
            return self._open_sealed(f)
        return BarecatReadOnlyFileObject(self.sharder, shard, offset, size)


def _naming(path: str, error: BarecatIntegrityError) -> BarecatIntegrityError:
    """Damage found in the shards (their words: which shard, which offset), told with the
    path of the file it hit first."""
    if isinstance(error, DamagedEntryBarecatError) or str(error).startswith(f"{path}: "):
        return error  # names it already
    return BarecatIntegrityError(f"{path}: {error}")


__all__ = ["ArchiveReading"]
