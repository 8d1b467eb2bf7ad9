"""Adding to a :class:`~barecat.archive.Barecat`: files (one at a time, in fast batches,
from disk, or placed by a parallel ingest's own threads), replaced contents, and
directories.

The facade's part over its :class:`~barecat.archive.state.OpenArchive`, whose write
session (``ops/writing.py``) owns the rule the halves cannot keep alone: a file's bytes
are written to the shard first, its index row second, and the write position moves only
when the row is accepted, so no row ever points at bytes that were not written and a
refused or failed write leaves nothing behind. In a sealed archive the bytes are sealed
for their path first (``sealed.py``).
"""

from __future__ import annotations

import io
import os
import stat
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, BinaryIO

from barecat.archive.reading import file_record
from barecat.archive.state import ArchivePart, serialized
from barecat.entries import Address, BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import (
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
)
from barecat.paths import normalize, normalize_many, parent

if TYPE_CHECKING:  # sealing and write code are imported when used, not before
    from barecat.ops.writing import WriteSession
    from barecat.sealing import Sealer


class ArchiveWriting(ArchivePart):
    """New files and directories of a :class:`~barecat.archive.Barecat` (see the module
    doc)."""

    @serialized
    def mkdir(self, path: str, mode: int = 0o755, exist_ok: bool = False) -> None:
        """Create one directory; its parent must exist (as ``os.mkdir``).

        Args:
            path: the directory's path in the archive.
            mode: its permission bits.
            exist_ok: update the mode and time of an existing directory instead of raising.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileNotFoundBarecatError: the parent directory does not exist.
            NotADirectoryBarecatError: the parent, or one of its ancestors, is a file.
            FileExistsBarecatError: the directory exists and ``exist_ok`` is False, or
                a file is at ``path``.
        """
        path = normalize(path)
        if path and not self.archive.index.lookups.isdir(parent(path)):
            error = self.archive.index.lookups.not_found_error(path)
            if not isinstance(error, NotADirectoryBarecatError):
                error = FileNotFoundBarecatError(parent(path), "Parent directory")
            raise error
        self._add_dir(BarecatDirInfo(path, mode, mtime_ns=time.time_ns()), exist_ok)

    @serialized
    def makedirs(self, path: str, mode: int = 0o755, exist_ok: bool = False) -> None:
        """Create a directory and any missing ancestors (as ``os.makedirs``).

        Args:
            path: the directory's path in the archive.
            mode: its permission bits (the ancestors made get the default).
            exist_ok: update the mode and time of an existing directory instead of raising.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: the directory exists and ``exist_ok`` is False, or
                a file is at ``path``.
            NotADirectoryBarecatError: an ancestor is a file.
        """
        self._add_dir(BarecatDirInfo(normalize(path), mode, mtime_ns=time.time_ns()), exist_ok)

    def _add_dir(self, info: BarecatDirInfo, exist_ok: bool) -> None:
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        self.archive.edits.add_dir(info, exist_ok=exist_ok)
        self.archive.maybe_commit()

    @serialized
    def add_dirs(self, infos: Iterable[BarecatDirInfo]) -> None:
        """Create many directories, or update the metadata of existing ones, at once.

        Missing ancestors are created too; all or nothing.

        Args:
            infos: the directories' records; None fields of an existing directory keep
                their stored values.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: a file is at one of the paths.
            NotADirectoryBarecatError: an ancestor of one of the paths is a file.
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        dirs = list(infos)
        self.archive.edits.upsert_dirs_bulk(dirs)
        self.archive.maybe_commit(len(dirs))

    @serialized
    def add(
        self,
        item: BarecatEntryInfo | str,
        *,
        data: bytes | bytearray | memoryview | None = None,
        fileobj: BinaryIO | None = None,
        bufsize: int = 1 << 20,
        dir_exist_ok: bool = False,
        file_exist_ok: bool = False,
        mode: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        mtime_ns: int | None = None,
        dir: bool = False,
        compress: bool = True,
    ) -> None:
        """Add a file from ``data`` or ``fileobj``; a dir info or ``dir=True`` adds a directory.

        In a sealed archive ``compress=False`` stores this file's blocks uncompressed
        (still encrypted if the archive is); blocks that do not shrink are stored raw anyway.

        Args:
            item: the path, or a record whose path and metadata are used.
            data: the file's contents (None and no ``fileobj``: empty).
            fileobj: a binary stream to read the contents from instead.
            bufsize: bytes copied from ``fileobj`` at a time.
            dir_exist_ok: adding an existing directory updates its metadata instead of
                raising.
            file_exist_ok: adding an existing file does nothing instead of raising.
            mode: the permission bits (for a path ``item``).
            uid: the owner's user id (for a path ``item``).
            gid: the group id (for a path ``item``).
            mtime_ns: the modification time in nanoseconds (for a path ``item``).
            dir: add a directory at the path ``item``.
            compress: in a sealed archive, compress this file's blocks.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: the path is taken (see ``file_exist_ok``,
                ``dir_exist_ok``).
            IsADirectoryBarecatError: a file at a directory's path (the root included).
            NotADirectoryBarecatError: an ancestor of the path is a file.
            FileTooLargeBarecatError: the file is larger than the shard size limit.
            NotEnoughSpaceBarecatError: the disk is full.
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        if isinstance(item, BarecatDirInfo) or (dir and isinstance(item, str)):
            info = (
                item
                if isinstance(item, BarecatDirInfo)
                else BarecatDirInfo(item, mode, uid, gid, mtime_ns)
            )
            self._add_dir(info, dir_exist_ok)
            return
        if isinstance(item, BarecatEntryInfo):
            finfo = BarecatFileInfo(item.path, item.mode, item.uid, item.gid, item.mtime_ns)
        else:
            finfo = BarecatFileInfo(item, mode, uid, gid, mtime_ns)
        if not finfo.path:
            raise IsADirectoryBarecatError("")
        if file_exist_ok and self.archive.index.lookups.lookup_address(finfo.path) is not None:
            return

        def record(address: Address, logical_size: int | None) -> None:
            finfo.shard, finfo.offset, finfo.size, finfo.crc32c = address
            if logical_size is not None:
                finfo.sealed_size, finfo.size = finfo.size, logical_size
            self.archive.edits.add_file(finfo)

        self._append_then_record(
            finfo.path, data, fileobj, _size_hint(fileobj), bufsize, record, compress
        )

    def _append_then_record(
        self,
        path: str,
        data: bytes | bytearray | memoryview | None,
        fileobj: BinaryIO | None,
        size_hint: int | None,
        bufsize: int,
        record: Callable[[Address, int | None], None],
        compress: bool = True,
    ) -> None:
        """Write the bytes (sealed for ``path`` in a sealed archive), then let ``record``
        store the row that points at them; it gets their address and, when sealed, the
        file's own length.

        If recording fails the bytes are dropped again, so no row ever points at bytes
        that were not written and no refused file leaves bytes behind. A sealed file from
        a stream of known size (a regular file) is sealed block by block; from other
        streams, whole in memory (its block table comes before its blocks).
        """
        if self.archive.sealing is None:
            self.archive.writes.store(
                lambda address: record(address, None), data,
                fileobj=fileobj, size_hint=size_hint, bufsize=bufsize,
            )  # fmt: skip
        elif fileobj is not None and size_hint is not None:
            sealer = self.archive.sealing.sealer(compress)
            self.archive.writes.store(
                lambda address: record(address, size_hint), fileobj=fileobj,
                size_hint=size_hint, sealer=sealer, path=path,
            )  # fmt: skip
        else:
            plain = fileobj.read() if fileobj is not None else (b"" if data is None else data)
            sealed = self.archive.sealing.seal(path, plain, compress)
            self.archive.writes.store(lambda address: record(address, len(plain)), sealed)
        self.archive.maybe_commit()

    @serialized
    def update_file(
        self,
        old_item: BarecatFileInfo | str,
        new_item: BarecatFileInfo | str | None = None,
        *,
        data: bytes | bytearray | memoryview | None = None,
        fileobj: BinaryIO | None = None,
        size: int | None = None,
        bufsize: int = 1 << 20,
    ) -> None:
        """Replace a file's contents (the old bytes become a hole until defrag).

        ``new_item`` may rename the file and carry new metadata at the same time.

        Args:
            old_item: the file's path or record.
            new_item: a new path, or a record with a new path and metadata (None
                fields kept); None: keep both.
            data: the new contents (None and no ``fileobj``: empty).
            fileobj: a binary stream to read the new contents from instead.
            size: the stream's length, if known (else found from the stream if it can be).
            bufsize: bytes copied from ``fileobj`` at a time.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only or append-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileNotFoundBarecatError: no file is at ``old_item``.
            IsADirectoryBarecatError: a directory is at ``old_item``, or at the new path.
            FileExistsBarecatError: the new path is taken by another file.
            NotADirectoryBarecatError: an ancestor of the new path is a file.
            FileTooLargeBarecatError: the contents are larger than the shard size limit.
        """
        self.archive.require_changeable()
        self.archive.require_no_open_writer()
        old = file_record(self.archive, old_item)
        new = new_item if isinstance(new_item, BarecatFileInfo) else None
        target = _path_str(new_item) if new_item is not None else old.path

        def record(address: Address, logical_size: int | None) -> None:
            if target != old.path:
                self.archive.edits.rename_file(old.path, target)
            self.archive.edits.update_file(
                target,
                *address,
                new_mtime_ns=new.mtime_ns if new else None,
                new_mode=new.mode if new else None,
                new_uid=new.uid if new else None,
                new_gid=new.gid if new else None,
                new_logical_size=logical_size,
            )

        size_hint = size if size is not None else _size_hint(fileobj)
        self._append_then_record(target, data, fileobj, size_hint, bufsize, record)

    @serialized
    def add_many(
        self,
        items: Iterable[tuple[BarecatFileInfo | str, bytes | bytearray | memoryview]],
        batch_size: int = 2048,
    ) -> int:
        """Add many files fast: bytes written with few system calls, index rows inserted and
        directory statistics updated once per batch.

        Each batch is atomic: on a conflict (an existing path, a file where a directory is
        needed) nothing of that batch remains, and the error names the path; earlier
        batches stay. ``BarecatFileInfo`` items are stored as given and receive their
        address (shard, offset, size, crc32c).

        Args:
            items: (path or record, contents) pairs.
            batch_size: files per batch.

        Returns:
            The number of files added.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: a path is taken.
            IsADirectoryBarecatError: a file at a directory's path.
            NotADirectoryBarecatError: an ancestor of a path is a file.
            FileTooLargeBarecatError: a file is larger than the shard size limit.
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        count = 0
        batch: list[tuple[BarecatFileInfo | str, bytes | bytearray | memoryview]] = []
        for item in items:
            batch.append(item)
            if len(batch) >= batch_size:
                count += self._add_batch(batch)
                batch = []
        if batch:
            count += self._add_batch(batch)
        return count

    def _add_batch(
        self, batch: list[tuple[BarecatFileInfo | str, bytes | bytearray | memoryview]]
    ) -> int:
        # A BarecatFileInfo is used as given and receives its address (as ``add`` does in
        # the reference); other items become new infos.
        infos = [
            i
            if i.__class__ is BarecatFileInfo
            else BarecatFileInfo(i.path, i.mode, i.uid, i.gid, i.mtime_ns)
            if isinstance(i, BarecatEntryInfo)
            else BarecatFileInfo(i)
            for i, _ in batch
        ]
        _normalize_paths(infos)
        datas = [data for _, data in batch]
        if self.archive.sealing is not None:
            for f, data in zip(infos, datas, strict=True):
                f.size = len(data)
            datas = [
                self.archive.sealing.seal(f.path, d) for f, d in zip(infos, datas, strict=True)
            ]

        def record(addresses: list[Address]) -> None:
            for f, (shard, offset, size, crc) in zip(infos, addresses, strict=True):
                f.shard, f.offset, f.crc32c = shard, offset, crc
                if self.archive.sealing is None:
                    f.size = size
                else:
                    f.sealed_size = size
            self.archive.edits.add_files_bulk(infos)

        self.archive.writes.store_batch(datas, record)
        self.archive.maybe_commit(len(infos))
        return len(infos)

    def sealing_for_writers(self) -> Sealer | None:
        """For writers that place bytes themselves (``add_placed``): the sealer that turns
        a file's bytes into what a sealed archive stores for its (normalized) path
        (``seal``, or the batch writer's ``stream`` for big files). Safe to use from
        several threads.

        Returns:
            The sealer; None for a plain archive.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) no passphrase.
            WrongPassphraseBarecatError: the passphrase is wrong.
        """
        self.archive.require_writable()
        if self.archive.sealing is None:
            return None
        self.archive.sealing.data_key()  # ask for the passphrase now, not in a worker thread
        return self.archive.sealing.sealer()

    def batch_writer(self) -> WriteSession:
        """The archive's write session, for a writer that places bytes itself from several
        threads (a parallel ingest): it claims room with ``reserve`` in one order, writes
        the claims with ``write_reserved`` on any thread, streams big files with
        ``stream`` (sealed with ``sealing_for_writers``), indexes them with
        :meth:`add_placed`, and after a failure ``roll_back``s to a mark. Hold
        :meth:`exclusive` meanwhile.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: closed, or a file opened for writing is still open.
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        return self.archive.writes

    @serialized
    def guard_shared_bytes(self) -> None:
        """Files are about to share bytes (rows pointing at the same place: a hard link
        stored once, through :meth:`add_placed`): keep barecat 0.3.1's writers, which take
        each byte range for one file's own and would overwrite or cut the bytes another
        name still uses, from writing this archive. A shard that is a symbolic link to
        ``/dev/null`` does (0.3.1 writes no archive with a linked shard; it reads it as an
        empty shard); nothing if it is there already.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
        """
        self.archive.require_writable()
        self.archive.writes.guard_shared_bytes()

    @serialized
    def add_placed(self, infos: list[BarecatFileInfo]) -> None:
        """Index files whose bytes are already in the shards, at places claimed and
        written through :meth:`batch_writer`.

        This is how a parallel ingest adds files: its reader threads write while this
        thread indexes. The batch is atomic, like ``add_many``'s; if it raises, nothing of
        it is indexed and the caller rolls the writer back to before its reservations.

        Args:
            infos: the files' records, each with its path, metadata and address.

        Raises:
            BarecatError: what :meth:`add_many` raises for a batch (each its own class:
                a read-only or closed archive, a file open for writing, a path taken, a
                file at a directory's path or under a file), but a file's size, checked
                when its room was claimed.
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        _normalize_paths(infos)
        self.archive.edits.add_files_bulk(infos)
        self.archive.maybe_commit(len(infos))

    def add_by_path(
        self, filesys_path: str, store_path: str | None = None, dir_exist_ok: bool = False
    ) -> None:
        """Add one file (with its contents) or one directory (without its contents) from
        disk, with its metadata (mode, owner, times).

        Args:
            filesys_path: the file or directory on disk.
            store_path: its path in the archive (default: ``filesys_path``).
            dir_exist_ok: an existing directory has its metadata updated instead of
                raising.

        Raises:
            OSError: ``filesys_path`` cannot be read.
            BarecatError: what :meth:`add` raises for the entry (such as
                ``FileExistsBarecatError``).
        """
        st = os.stat(filesys_path)
        target = filesys_path if store_path is None else store_path
        if stat.S_ISDIR(st.st_mode):
            info = BarecatDirInfo(target)
            info.fill_from_statresult(st)
            self.add(info, dir_exist_ok=dir_exist_ok)
            return
        finfo = BarecatFileInfo(target)
        finfo.fill_from_statresult(st)
        with open(filesys_path, "rb") as f:
            self.add(finfo, fileobj=f)


def _path_str(item: BarecatEntryInfo | str) -> str:
    return item.path if isinstance(item, BarecatEntryInfo) else normalize(item)


def _size_hint(fileobj: BinaryIO | None) -> int | None:
    """The size of a regular file behind ``fileobj``, when there is one."""
    if fileobj is None:
        return None
    try:
        st = os.fstat(fileobj.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _normalize_paths(infos: list[BarecatFileInfo]) -> None:
    """Renormalize infos whose path was changed after creation; refuse the root."""
    paths = [f.path for f in infos]
    if normalize_many(paths) is not paths:
        for f in infos:
            f.path = normalize(f.path)
    if any(not f.path for f in infos):
        raise IsADirectoryBarecatError("")


__all__ = ["ArchiveWriting"]
