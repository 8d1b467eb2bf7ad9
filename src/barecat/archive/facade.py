"""The :class:`Barecat` facade: a dict and a small filesystem over (Index, Sharder).

Its writes go through its write session (``ops/writing.py``), the one owner of the
rule the halves cannot keep alone: a file's bytes are written to the shard first, its
index row second, and the write position moves only when the row is accepted — so no
row ever points at bytes that were not written, and a refused or failed write leaves
nothing behind. Commits are batched (every ``commit_interval`` seconds or
``COMMIT_EVERY_FILES`` files, whichever comes first, and on close) with the shards
fsynced first, so a killed writer loses at most about a second of work. A writer holds
an advisory lock on the index file, so a second writer fails at open instead of
interleaving bytes. A writer opened with ``threadsafe=True`` may be shared by threads:
its changes run one at a time (``serialized``), in its one SQLite transaction.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import IO, TYPE_CHECKING, Any, BinaryIO, cast

from barecat.archive.contract import serialized
from barecat.archive.editing import ArchiveEditing
from barecat.archive.inspecting import ArchiveInspection
from barecat.archive.maintenance import ArchiveMaintenance
from barecat.archive.reading import ArchiveReading
from barecat.archive.sealed import Passphrase, SealedFileWriter, open_sealing, take_sealing
from barecat.archive.writer_lock import WriterLock
from barecat.entries import Address, BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, parse_size
from barecat.exceptions import (
    BarecatError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    ReadOnlyBarecatError,
)
from barecat.index import Index
from barecat.layout import archive_exists, base_path, index_path, remove_archive
from barecat.objectstore import is_remote_url, local_path_of
from barecat.paths import normalize, normalize_many
from barecat.shards import BarecatReadWriteFileObject, Sharder

if TYPE_CHECKING:  # sealing code is imported when an archive is sealed, not before
    from barecat.index.schema import ConfigValue
    from barecat.ops.copy_files import CopyStats
    from barecat.ops.writing import Position, WriteSession
    from barecat.sealing import Sealer, SealingSettings

COMMIT_EVERY_FILES = 4096
"""Commit at least this often during long writes (besides every ``commit_interval``)."""


def _valid_mode(mode: str) -> bool:
    """Whether ``builtins.open`` would accept ``mode``: one of r/w/a/x, each letter at most
    once, optionally ``+``, and ``b`` or ``t`` (not both)."""
    letters = set(mode)
    return (
        len(letters) == len(mode)
        and letters <= set("rwax+bt")
        and len(letters & set("rwax")) == 1
        and not {"b", "t"} <= letters
    )


class Barecat(
    ArchiveReading,
    ArchiveInspection,
    ArchiveEditing,
    ArchiveMaintenance,
    MutableMapping[str, bytes],
):
    """An archive of files addressed by path.

    Opens read-only by default. ``readonly=False`` creates the archive if missing (unless
    ``exist_ok=False`` and it exists); ``overwrite=True`` deletes an existing one first.
    A created archive that a failed open or a ``with`` block left by an exception leaves
    holding nothing is removed again (:meth:`abandon`); no index is made beside shards
    that hold data (``CorruptIndexBarecatError``).
    Read-only archives answer lookups from the lookup table saved beside the index when it
    matches, else build one once enough random reads happen (``lookup_table=True``: at
    open); writers that create most of an archive save it at close. ``lookup_table=False``
    neither uses nor writes one.

    ``path`` may be an fsspec URL (``s3://bucket/ds.barecat``; ``storage_options`` as for
    fsspec): such an archive opens read-only, its index copied once into ``cache_dir``
    (default ``~/.cache/barecat``, or ``$BARECAT_CACHE_DIR``) and refreshed when the
    store's version of it changes, its files read by ranged requests through a block
    cache there (``block_cache=False``: no shard bytes kept on disk).

    ``auto_codec=True`` (deprecated, as in 0.3.x; so is :meth:`register_codec`): the dict
    API (``bc[path]``, ``get``, ``items``, ...) encodes and decodes values by extension
    and passes names without a codec through as bytes (see ``auto_codec.py``); new code
    wraps the archive in ``DecodedView`` instead.

    ``threadsafe=True``: a reader gives each thread its own SQLite connection; a writer
    may be used from several threads, its changes run one at a time, and what any thread
    added is in the archive once ``add`` returned, committed by the next commit or
    ``close`` (see ``exclusive`` for several steps in a row).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shard_size_limit: int | str | None = None,
        readonly: bool = True,
        overwrite: bool = False,
        auto_codec: bool = False,
        exist_ok: bool = True,
        append_only: bool = False,
        threadsafe: bool = False,
        allow_writing_symlinked_shard: bool = False,
        wal: bool = False,
        readonly_is_immutable: bool = False,
        commit_interval: float = 1.0,
        lookup_table: bool | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        passphrase: Passphrase | None = None,
        compression_dictionary: bytes | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        block_cache: bool = True,
    ) -> None:
        self.remote = is_remote_url(path)
        self.path = os.fspath(path) if self.remote else base_path(local_path_of(path))
        self._remote_options = (storage_options, cache_dir, block_cache)
        self.readonly = readonly
        self.threadsafe = threadsafe
        self._write_lock = threading.RLock() if threadsafe and not readonly else None
        self.append_only = append_only
        self.commit_interval = commit_interval
        self._readonly_is_immutable = readonly_is_immutable
        self._lock: WriterLock | None = None
        self.created = False
        """This object made the archive (there was none, or an index without an archive in
        it and no shard with data): a failed open, or a ``with`` block that raises before
        anything is stored, leaves no archive behind (see :meth:`abandon`)."""
        self._writer: BarecatReadWriteFileObject | SealedFileWriter | None = None
        self._owner_pid = os.getpid()
        self.on_commit: Callable[[], None] | None = None
        """Called after each commit: what was written before it is now durable."""
        limit = None if shard_size_limit is None else parse_size(shard_size_limit)
        if self.remote:
            if not readonly:
                raise ReadOnlyBarecatError(
                    f"{self.path} is on remote storage, which barecat reads but does not "
                    "write: build the archive locally and upload its files"
                )
            from barecat.archive.objectstore import open_objectstore_halves

            self.index, self.sharder = open_objectstore_halves(
                self.path, storage_options, cache_dir, block_cache, threadsafe, lookup_table
            )
        else:
            self._open_local(limit, overwrite, exist_ok, wal, lookup_table,
                             allow_writing_symlinked_shard)  # fmt: skip
        self._passphrase = passphrase
        try:
            self._sealing = open_sealing(
                self.index,
                self.path,
                compression,
                compression_level,
                passphrase,
                compression_dictionary,
            )
        except BaseException:
            self.abandon()
            raise
        self._last_commit = time.monotonic()
        self._uncommitted = 0
        if auto_codec:  # (a plain archive pays nothing for this: see auto_codec.py)
            from barecat.archive import auto_codec as legacy_codecs

            warnings.warn(legacy_codecs.AUTO_CODEC_DEPRECATED, DeprecationWarning, stacklevel=2)
            legacy_codecs.decode_by_extension(self)

    def _open_local(
        self,
        limit: int | None,
        overwrite: bool,
        exist_ok: bool,
        wal: bool,
        lookup_table: bool | None,
        allow_writing_symlinked_shard: bool,
    ) -> None:
        """Open (or create) the index and shards on this machine; a writer locks first."""
        if self.readonly:
            if overwrite:
                raise BarecatError("overwrite=True needs readonly=False")
            if not archive_exists(self.path):
                raise FileNotFoundBarecatError(self.path, "Archive")
        else:
            if overwrite:
                remove_archive(self.path)
            elif archive_exists(self.path) and not exist_ok:
                raise FileExistsBarecatError(self.path, "Archive")
            self._lock = WriterLock(self.path)
        try:
            self.index = Index(
                index_path(self.path),
                shard_size_limit=limit,
                readonly=self.readonly,
                wal=wal,
                readonly_is_immutable=self._readonly_is_immutable,
                threadsafe=self.threadsafe,
                lookup_table=lookup_table,
            )
            self.sharder = Sharder(
                self.path,
                shard_size_limit=self.index.shard_size_limit,
                readonly=self.readonly,
                append_only=self.append_only,
                threadsafe=self.threadsafe,
                allow_writing_symlinked_shard=allow_writing_symlinked_shard,
            )
            self.created = self.index.created
            if not self.readonly:  # (readers load no write code)
                from barecat.ops.writing import WriteSession

                self._writes = WriteSession(self.index, self.sharder)  # places the position
        except BaseException:
            index: Index | None = getattr(self, "index", None)
            if index is not None:
                index.close()
            if self._lock is not None:
                self._lock.undo_creation(made_schema=index is not None and index.created)
            self._release_writer_lock()
            raise

    # -- lifecycle -------------------------------------------------------------------

    def _release_writer_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @serialized
    def commit(self) -> None:
        """Make everything written so far durable: shard bytes first, then the index.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
        """
        self._require_writable()
        self._writes.checkpoint()
        self._last_commit = time.monotonic()
        self._uncommitted = 0
        if self.on_commit is not None:
            self.on_commit()

    def exclusive(self) -> contextlib.AbstractContextManager[object]:
        """Hold a writer shared by threads for several steps in a row: other threads'
        changes wait until the block ends (a no-op for other archives).

        Returns:
            A context manager.
        """
        return contextlib.nullcontext() if self._write_lock is None else self._write_lock

    def _maybe_commit(self, changes: int = 1) -> None:
        self._uncommitted += changes
        if (
            self._uncommitted >= COMMIT_EVERY_FILES
            or time.monotonic() - self._last_commit >= self.commit_interval
        ):
            self.commit()

    @serialized
    def close(self) -> None:
        """Finish and release the archive: a writer closes a file still open for writing,
        commits, trims unused shard space after the last file and gives up the writer
        lock. Closing a closed archive does nothing.

        Raises:
            NotEnoughSpaceBarecatError: the last commit found the disk full.
        """
        try:
            self._close_halves()
        finally:
            self._release_writer_lock()

    def abandon(self) -> None:
        """Close after a failed create: an archive this object created (``created``) that
        still holds nothing (no file, no directory but the root) is removed, so that the
        same create, corrected, succeeds; any other archive is closed as :meth:`close`
        does. A ``with`` block left by an exception calls this instead of ``close``.

        Raises:
            NotEnoughSpaceBarecatError: the last commit found the disk full.
        """
        lock, discard = self._lock, self._made_and_holds_nothing()
        try:
            self._close_halves()
            if discard and lock is not None:
                lock.undo_creation(made_schema=True)
        finally:
            self._release_writer_lock()

    def _made_and_holds_nothing(self) -> bool:
        """This writer made the archive and it holds no file and no directory but the root
        (False when the index cannot tell, after a failure of its own: the archive stays)."""
        if self._lock is None or not self.created or os.getpid() != self._owner_pid:
            return False
        try:
            return self.index.num_files == 0 and self.index.num_dirs <= 1
        except Exception:  # the index failed (the error being handled): keep the archive
            return False

    def _close_halves(self) -> None:
        if getattr(self, "index", None) is None:
            return
        in_owner = os.getpid() == self._owner_pid
        try:
            if not self.readonly and in_owner:
                if self._writer is not None:
                    self._writer.close()
                self.commit()
                self._writes.trim_tail()
                if self.sharder.num_shards == 0 and self.index.total_size == 0:
                    # An archive without bytes still gets its (empty) first shard, which
                    # barecat 0.3.1 needs to open it. Made at close, as shards linked
                    # or adopted into a new archive (merge, wrap) must start at 0.
                    self._writes.sharder.create_first_shard()
                self.index.close()
            elif in_owner:
                self.index.close()
            self.sharder.close()
        finally:
            self.index = None  # type: ignore[assignment]

    def __enter__(self) -> Barecat:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.abandon()

    def __getstate__(self) -> dict[str, Any]:
        """A read-only archive travels to worker processes as its path (and, if encrypted
        and already unlocked, its data key: keep such pickles in memory)."""
        if not self.readonly:
            raise TypeError("A writable Barecat cannot be pickled: only one writer may exist")
        return {
            "path": self.path,
            "threadsafe": self.threadsafe,
            "readonly_is_immutable": self._readonly_is_immutable,
            "data_key": None if self._sealing is None else self._sealing.unlocked_key,
            "keeps_digest": self._sealing is not None and self._sealing.keeps_digest,
            **self._remote_state(),
        }

    def _remote_state(self) -> dict[str, Any]:
        if not self.remote:
            return {}
        storage_options, cache_dir, block_cache = self._remote_options
        return {"storage_options": storage_options, "cache_dir": cache_dir,
                "block_cache": block_cache}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        data_key = state.pop("data_key", None)
        keeps_digest = state.pop("keeps_digest", False)
        self.__init__(readonly=True, **state)  # type: ignore[misc]
        if self._sealing is not None and data_key is not None:
            self._sealing.use_key(data_key, keeps_digest)

    def _require_writable(self) -> None:
        if getattr(self, "index", None) is None:
            raise BarecatError(f"Archive {self.path} is closed")
        if self.readonly:
            raise ReadOnlyBarecatError(f"Archive {self.path} is open read-only")
        if os.getpid() != self._owner_pid:
            raise BarecatError(
                f"Archive {self.path} was opened for writing in process {self._owner_pid}; "
                "open it again in this process"
            )

    def _require_changeable(self) -> None:
        """Writable, and not ``append_only`` (which permits adding but nothing else)."""
        self._require_writable()
        self.raise_if_append_only(f"Archive {self.path} is append-only: files cannot be changed")

    @serialized
    def seal_like(self, settings: SealingSettings) -> None:
        """Make this empty plain archive sealed like one whose sealed bytes it is about to
        take as they are (merge, subset); an encrypted one needs the passphrase this
        archive was opened with (the other's, whose key it takes).

        Args:
            settings: the other archive's sealing (compression, encryption, key).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, not empty and plain, or
                no passphrase for an encrypted source.
        """
        self._require_writable()
        if self._sealing is not None or self.index.num_files:
            raise BarecatError(f"{self.path}: only an empty plain archive takes a sealing")
        self._sealing = take_sealing(self.index, self.path, settings, self._passphrase)

    def prepare_file_list_edit(self) -> None:
        """Get the key of an encrypted archive now (asking its passphrase source), before
        an edit that adds, removes or renames files (remove, rename, merge, subset, repair
        ``--drop-bad``): its index digest follows them, and refuses them without the key.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) no passphrase.
            WrongPassphraseBarecatError: the passphrase is wrong.
            BarecatIntegrityError: the index digest failed its check (edits would hide
                that; ``barecat digest --reset`` trusts the rows again).
        """
        self._require_writable()
        if self._sealing is not None:
            self._sealing.before_file_list_edit()

    def raise_if_append_only(self, message: str) -> None:
        """Refuse an operation an append-only archive does not allow (barecat 0.3.1's
        method).

        Args:
            message: the error's message.

        Raises:
            ReadOnlyBarecatError: the archive was opened ``append_only``.
        """
        if self.append_only:
            raise ReadOnlyBarecatError(message)

    def raise_if_readonly(self, message: str) -> None:
        """Refuse an operation a read-only archive does not allow (barecat 0.3.1's
        method).

        Args:
            message: the error's message.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
        """
        if self.readonly:
            raise ReadOnlyBarecatError(message)

    def _require_no_open_writer(self) -> None:
        if self._writer is not None:
            raise BarecatError(
                f"{self._writer_path!r} is still open for writing; close it before other writes"
            )

    # -- dict API --------------------------------------------------------------------

    def __setitem__(self, path: str, content: bytes) -> None:
        self.add(path, data=content)

    def __delitem__(self, path: str) -> None:
        try:
            self.remove(path)
        except (FileNotFoundBarecatError, IsADirectoryBarecatError, NotADirectoryBarecatError):
            raise KeyError(path) from None

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.index.lookup_address(normalize(path)) is not None

    def __len__(self) -> int:
        return self.index.num_files

    def __iter__(self) -> Iterator[str]:
        return self.index.listing.file_paths()

    def files(self) -> Iterator[str]:
        """Every file's path, in the order they were added.

        Returns:
            An iterator of paths.
        """
        return self.index.listing.file_paths()

    def dirs(self) -> Iterator[str]:
        """Every directory's path (the root as ``""``), in the order they were added.

        Returns:
            An iterator of paths.
        """
        return self.index.listing.dir_paths()

    def clear(self) -> None:
        """Remove every file and directory (as ``dict.clear``; the root stays).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only or append-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) the passphrase is missing.
            BarecatIntegrityError: the index digest of an encrypted archive failed its
                check.
        """
        self.rmtree("")

    # -- reading ---------------------------------------------------------------------

    def open(
        self,
        item: BarecatFileInfo | str,
        mode: str = "r",
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
    ) -> IO[Any]:
        """Open a stored file like ``builtins.open``: r, rb, r+b, w(b), a(b), x(b).

        Reading streams the file (block by block when sealed); writing needs a writable
        archive and allows one open writer at a time, whose file is indexed when it is
        closed (the old bytes of a rewritten file become a hole until defrag).

        Args:
            item: the file's path or record.
            mode: as ``builtins.open``; without ``b``, text.
            encoding: the text encoding (default UTF-8); text modes only.
            errors: how text decoding errors are handled; text modes only.
            newline: newline translation; text modes only.

        Returns:
            A binary file object, or a text one (``io.TextIOWrapper``).

        Raises:
            ValueError: a mode ``builtins.open`` would refuse.
            FileNotFoundBarecatError: reading (``r``, ``r+``) and no file is there.
            IsADirectoryBarecatError: a directory is there.
            FileExistsBarecatError: ``x`` mode and the file exists.
            DamagedEntryBarecatError: reading, and the file's index row cannot address
                bytes.
            BarecatIntegrityError: reading, and the file's bytes are missing.
            ReadOnlyBarecatError: writing to an archive open read-only.
            BarecatError: writing while another file is open for writing, or to a
                closed archive.
        """
        if not _valid_mode(mode):
            raise ValueError(f"Invalid mode: {mode!r}")
        text = "b" not in mode
        raw: io.RawIOBase
        if mode.replace("b", "").replace("t", "") == "r":
            raw = self._open_reader(self._fileinfo(item))
            if not text:
                return raw  # type: ignore[return-value]
            return io.TextIOWrapper(
                io.BufferedReader(raw), encoding=encoding or "utf-8", errors=errors, newline=newline
            )
        writer = self._open_for_writing(
            item.path if isinstance(item, BarecatEntryInfo) else item, mode
        )
        if not text:
            return writer  # type: ignore[return-value]
        buffered: io.BufferedIOBase
        if isinstance(writer, SealedFileWriter):
            buffered = writer
        else:
            stream = cast(Any, writer)
            buffered = io.BufferedRandom(stream) if writer.readable() else io.BufferedWriter(stream)
        return io.TextIOWrapper(
            buffered, encoding=encoding or "utf-8", errors=errors, newline=newline
        )

    @serialized
    def _open_for_writing(
        self, path: str, mode: str
    ) -> BarecatReadWriteFileObject | SealedFileWriter:
        self._require_writable()
        self._require_no_open_writer()
        path = normalize(path)
        kind = mode.replace("b", "").replace("t", "").replace("+", "")
        try:
            existing: BarecatFileInfo | None = self.index.lookup_file(path, normalized=True)
        except FileNotFoundBarecatError:
            existing = None
        if kind == "r" and existing is None:
            raise self.index.not_found_error(path)
        if kind == "x" and existing is not None:
            raise FileExistsBarecatError(path)
        keep = existing is not None and kind in ("r", "a")
        if self._sealing is not None:
            return self._open_sealed_for_writing(path, existing, keep, kind == "a")
        relocate: Callable[[], tuple[int, int]] | None = None
        if keep and existing is not None:
            # Read in place until the first change copies the bytes to the write end
            # (committed bytes are never changed in place).
            shard, offset, size, _ = existing.address  # (a plain archive: size is stored)
            stored = (shard, offset, size)
            self.sharder.require_range(*stored)
            relocate = functools.partial(self._copy_to_write_end, stored)
        else:
            size = 0
            shard, offset = self._writes.open_region()
        self._writer_path = path
        self._writer = BarecatReadWriteFileObject(
            self._writes.sharder, shard, offset, size, self._finish_writer, mode, relocate,
            move_to_new_shard=self._move_writer,
        )  # fmt: skip
        return self._writer

    @serialized
    def _copy_to_write_end(self, stored: tuple[int, int, int]) -> Position:
        """Copy a stored file's bytes to the write end, for a writer's first change."""
        return self._writes.copy_to_region(stored)

    @serialized
    def _move_writer(self, region: tuple[int, int, int]) -> Position:
        """An open writer outgrew its shard: its bytes go on at a new shard's start."""
        return self._writes.move_region(region)

    def _open_sealed_for_writing(
        self, path: str, existing: BarecatFileInfo | None, keep: bool, append: bool
    ) -> SealedFileWriter:
        def store(data: bytes | None) -> None:
            self._writer = None
            if data is None:  # opened with its content, closed unchanged
                return
            stamp = BarecatFileInfo(path, mtime_ns=time.time_ns())
            if existing is not None:
                self.update_file(existing, stamp, data=data)
            else:
                stamp.mode = 0o100644
                self.add(stamp, data=data)

        initial = self.read(existing) if keep and existing else b""
        writer = SealedFileWriter(initial, store, store_unchanged=not keep)
        if append:
            writer.seek(0, io.SEEK_END)
        self._writer_path = path
        self._writer = writer
        return writer

    @serialized
    def _finish_writer(self, w: BarecatReadWriteFileObject) -> None:
        self._writer = None
        if w.in_place:  # opened on a stored file and never changed: nothing to record
            return
        path = self._writer_path

        def record(address: Address) -> None:
            now = time.time_ns()
            if self.index.isfile(path):
                self.index.update_file(path, *address, now)
            else:
                self.index.add_file(BarecatFileInfo(path, 0o100644, None, None, now, *address))

        self._writes.close_region((w.shard, w.offset, w.size), record)
        self._maybe_commit()

    # -- adding ----------------------------------------------------------------------

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
        self._require_writable()
        self._require_no_open_writer()
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
        if file_exist_ok and self.index.lookup_address(finfo.path) is not None:
            return

        def record(address: Address, logical_size: int | None) -> None:
            finfo.shard, finfo.offset, finfo.size, finfo.crc32c = address
            if logical_size is not None:
                finfo.sealed_size, finfo.size = finfo.size, logical_size
            self.index.add_file(finfo)

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
        if self._sealing is None:
            self._writes.store(
                lambda address: record(address, None), data,
                fileobj=fileobj, size_hint=size_hint, bufsize=bufsize,
            )  # fmt: skip
        elif fileobj is not None and size_hint is not None:
            sealer = self._sealing.sealer(compress)
            self._writes.store(
                lambda address: record(address, size_hint), fileobj=fileobj,
                size_hint=size_hint, sealer=sealer, path=path,
            )  # fmt: skip
        else:
            plain = fileobj.read() if fileobj is not None else (b"" if data is None else data)
            sealed = self._sealing.seal(path, plain, compress)
            self._writes.store(lambda address: record(address, len(plain)), sealed)
        self._maybe_commit()

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
        self._require_changeable()
        self._require_no_open_writer()
        old = self._fileinfo(old_item)
        new = new_item if isinstance(new_item, BarecatFileInfo) else None
        target = _path_str(new_item) if new_item is not None else old.path

        def record(address: Address, logical_size: int | None) -> None:
            if target != old.path:
                self.index.rename_file(old.path, target)
            self.index.update_file(
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
        self._require_writable()
        self._require_no_open_writer()
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
        if self._sealing is not None:
            for f, data in zip(infos, datas, strict=True):
                f.size = len(data)
            datas = [self._sealing.seal(f.path, d) for f, d in zip(infos, datas, strict=True)]

        def record(addresses: list[Address]) -> None:
            for f, (shard, offset, size, crc) in zip(infos, addresses, strict=True):
                f.shard, f.offset, f.crc32c = shard, offset, crc
                if self._sealing is None:
                    f.size = size
                else:
                    f.sealed_size = size
            self.index.add_files_bulk(infos)

        self._writes.store_batch(datas, record)
        self._maybe_commit(len(infos))
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
        self._require_writable()
        if self._sealing is None:
            return None
        self.unlock()  # ask for the passphrase now, not in a worker thread
        return self._sealing.sealer()

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
        self._require_writable()
        self._require_no_open_writer()
        return self._writes

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
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: a path is taken.
            IsADirectoryBarecatError: a file at a directory's path.
            NotADirectoryBarecatError: an ancestor of a path is a file.
        """
        self._require_writable()
        self._require_no_open_writer()
        _normalize_paths(infos)
        self.index.add_files_bulk(infos)
        self._maybe_commit(len(infos))

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

    def register_codec(
        self,
        exts: list[str],
        encoder: Callable[[Any], bytes],
        decoder: Callable[[bytes], Any],
        nonfinal: bool = False,
    ) -> None:
        """Deprecated (as in barecat 0.3.x): encode and decode files named ``*.ext`` in
        the dict API (``bc[path]``, ``get``, ``items``, ...). Other names stay raw bytes
        (unless ``auto_codec=True`` gave the built-in codecs). Use ``DecodedView`` instead.

        Args:
            exts: extensions (``'.txt'`` or ``'txt'``), matched in any case.
            encoder: a value to bytes.
            decoder: bytes to a value.
            nonfinal: a layer (compression) over whatever the rest of the name says.
        """
        from barecat.archive import auto_codec as legacy_codecs
        from barecat.codecs.registry import CodecRegistry

        warnings.warn(legacy_codecs.REGISTER_CODEC_DEPRECATED, DeprecationWarning, stacklevel=2)
        view = legacy_codecs.decode_by_extension(self, CodecRegistry())
        view.register_codec(exts, encoder, decoder, nonfinal)

    def __repr__(self) -> str:
        state = (
            "closed"
            if getattr(self, "index", None) is None
            else ("read-only" if self.readonly else "writable")
        )
        return f"Barecat({self.path!r}, {state})"

    # -- for transfer/ and legacy_api (so they need not reach into the index) -----------

    def file_positions(self, paths: list[str]) -> list[int]:
        """Which of ``paths`` (normalized) are files here: their positions in ``paths``,
        found with one query.

        Args:
            paths: normalized paths.

        Returns:
            The positions of those that are files, in storage order.
        """
        return [row[0] for row in self.index.locate_many(paths)]

    def sealing_records(self) -> dict[str, ConfigValue] | None:
        """This archive's sealing as the config rows that make another, empty archive
        sealed the same way, its wrapped data key included (see
        :meth:`seal_with_records`); None for a plain archive."""
        return self.index.sealing_config() if self.sealed else None

    @serialized
    def seal_with_records(self, records: dict[str, ConfigValue]) -> None:
        """Make this empty plain archive sealed with another's :meth:`sealing_records` as
        they are (the parts of a parallel ingest, whose bytes then move into that one
        unchanged); committed at once, in effect when the archive is next opened.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            SchemaVersionBarecatError: the archive has files.
        """
        self._require_writable()
        self.index.enable_sealing(records)

    @serialized
    def take_all_from(self, src: Barecat) -> CopyStats:
        """Move every file and directory of ``src`` into this archive: ``src``'s shards'
        bytes are moved (not copied) behind ours and its rows inserted in one statement;
        ``src`` is consumed. For archives written to become part of this one (sealed
        alike, see :meth:`seal_with_records`).

        Returns:
            What was taken.

        Raises:
            ReadOnlyBarecatError: this archive is open read-only.
            BarecatError: the two archives' sealings differ, or a path conflicts.
        """
        from barecat.ops.copy_files import copy_files_from

        self._require_writable()
        return copy_files_from(self.index, self._writes.sharder, src.index, src.sharder, move=True)


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
