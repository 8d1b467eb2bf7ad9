"""The :class:`Barecat` facade: a dict and a small filesystem over (Index, Sharder).

``Barecat`` is composed, not inherited: it owns one
:class:`~barecat.archive.state.OpenArchive` (the two halves, the sealing, a writer's
session, lock and checks, the commit pacing) and one object per group of methods over
it, each in its module: ``reading.py`` (contents), ``inspecting.py`` (queries, listings,
integrity), ``writing.py`` (adding files and directories), ``editing.py`` (removals,
renames, metadata), ``maintenance.py`` (whole-archive operations), ``opening.py``
(file objects). The class body offers their methods as its own (``parts.py``: on an
archive, the part's bound method; on the class, the part's function, with its signature
and docstring). What stays here: the constructor, the dict API (``bc[path]`` and
``path in bc`` read the halves directly, one call deep), the archive's attributes and
totals, pickling, and the deprecated codecs.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from barecat.archive.editing import ArchiveEditing
from barecat.archive.inspecting import ArchiveInspection
from barecat.archive.maintenance import ArchiveMaintenance
from barecat.archive.opening import ArchiveOpening
from barecat.archive.parts import Parts
from barecat.archive.reading import ArchiveReading, read_item
from barecat.archive.sealed import Passphrase, not_encrypted
from barecat.archive.state import COMMIT_EVERY_FILES, OpenArchive
from barecat.archive.writing import ArchiveWriting
from barecat.exceptions import (
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
)
from barecat.paths import normalize
from barecat.shards.concurrent import DEFAULT_READ_CONCURRENCY

if TYPE_CHECKING:
    from barecat.codecs import DecodedView
    from barecat.index import ReadOnlyIndex
    from barecat.shards.reading import ShardReader

_open_archive = Parts("_archive")
_reading = Parts("_reading")
_inspecting = Parts("_inspecting")
_writing = Parts("_writing")
_editing = Parts("_editing")
_maintenance = Parts("_maintenance")
_opening = Parts("_opening")


class Barecat(MutableMapping[str, bytes]):
    """An archive of files addressed by path.

    Opens read-only by default. ``readonly=False`` creates the archive if missing (unless
    ``exist_ok=False`` and it exists); ``overwrite=True`` makes a new, empty one that
    replaces an existing one at close (built beside it meanwhile, so that readers, and a
    kill at any moment, find the old archive or the new one whole; see docs/safety.md).
    A created archive that a failed open or a ``with`` block left by an exception leaves
    holding nothing is removed again (:meth:`abandon`); no index is made beside shards
    that hold data (``CorruptIndexBarecatError``).
    Read-only archives answer lookups from the lookup table saved beside the index once
    it is checked (a few lookups in: its contents hashed, and vouched for by the index or,
    encrypted, by the key), else build one once enough random reads happen
    (``lookup_table=True``: at open); writers that create most of an archive, or opened
    with ``lookup_table=True``, save it at close. ``lookup_table=False`` neither uses nor
    writes one.

    ``path`` may be an fsspec URL (``s3://bucket/ds.barecat``, ``https://host/ds.barecat``;
    ``storage_options`` as for fsspec): such an archive opens read-only, its files read by
    ranged requests through a block cache in ``cache_dir`` (default ``~/.cache/barecat``,
    or ``$BARECAT_CACHE_DIR``; ``block_cache=False``: no shard bytes kept on disk). How
    its index is read is ``remote_mode`` (else ``$BARECAT_REMOTE_MODE``, else ``"auto"``):
    ``"download"`` copies it once into ``cache_dir`` (refreshed when the store's version
    changes); ``"lazy"`` reads only the pages it needs, by ranged requests, keeping at most
    ``page_cache`` bytes of them in memory (default 64 MiB, or ``$BARECAT_PAGE_CACHE``);
    ``"hydrate"`` reads lazily while downloading the index in the background, then
    locally; ``"auto"`` is lazy for an archive made ready by ``barecat publish`` and
    download otherwise (see docs/object-storage-and-serving.md).

    ``auto_codec=True`` (deprecated, as in 0.3.x; so is :meth:`register_codec`): the dict
    API (``bc[path]``, ``get``, ``items``, ...) encodes and decodes values by extension
    and passes names without a codec through as bytes (see ``auto_codec.py``); new code
    wraps the archive in ``DecodedView`` instead.

    ``passphrase`` (text, or a function asked when the key is first needed) opens an
    encrypted archive, or makes the archive this call creates encrypted; an existing
    archive that is not encrypted refuses it at open (``BarecatError``), so a key given
    never reads files it did not seal. ``IfEncrypted(function)`` claims nothing: it is
    asked only if the archive is encrypted, or, empty, takes an encrypted archive's
    files (merge, subset).

    ``threadsafe=True``: a reader gives each thread its own SQLite connection; a writer
    may be used from several threads, its changes run one at a time, and what any thread
    added is in the archive once ``add`` returned, committed by the next commit or
    ``close`` (see ``exclusive`` for several steps in a row).

    ``read_concurrency``: how many threads a batch (``get_many``, ``read_many``,
    ``readinto_many``) of a local archive reads on at once (default 16; 1: one read at a
    time on the calling thread). Results, checks and errors are the same either way; it
    pays where each read waits (a network filesystem, a cold disk), so a batch fans out
    to the threads only when its reads wait (the kernel says its first read would, or,
    where the filesystem cannot tell, a read took over 100 µs), and stays on the calling
    thread while the page cache answers. The threads are made at the first batch that
    fans out and stopped by ``close``.
    """

    __slots__ = ("__dict__", "__weakref__", "_archive", "_editing", "_inspecting",
                 "_maintenance", "_opening", "_reading", "_writing", "codec_view")  # fmt: skip
    # (slots: ``bc[path]`` finds its halves as fast however many part methods the
    # archive's ``__dict__`` keeps; see parts.py)

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
        *,
        commit_interval: float = 1.0,
        lookup_table: bool | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        passphrase: Passphrase | None = None,
        compression_dictionary: bytes | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        block_cache: bool = True,
        read_concurrency: int = DEFAULT_READ_CONCURRENCY,
        remote_mode: str | None = None,
        page_cache: int | str | None = None,
    ) -> None:
        self._archive = archive = OpenArchive(
            path,
            shard_size_limit,
            readonly=readonly,
            overwrite=overwrite,
            exist_ok=exist_ok,
            append_only=append_only,
            threadsafe=threadsafe,
            allow_writing_symlinked_shard=allow_writing_symlinked_shard,
            wal=wal,
            readonly_is_immutable=readonly_is_immutable,
            commit_interval=commit_interval,
            lookup_table=lookup_table,
            compression=compression,
            compression_level=compression_level,
            passphrase=passphrase,
            compression_dictionary=compression_dictionary,
            storage_options=storage_options,
            cache_dir=cache_dir,
            block_cache=block_cache,
            read_concurrency=read_concurrency,
            remote_mode=remote_mode,
            page_cache=page_cache,
        )
        self._reading = ArchiveReading(archive)
        self._inspecting = ArchiveInspection(archive)
        self._writing = ArchiveWriting(archive)
        self._editing = ArchiveEditing(archive)
        self._maintenance = ArchiveMaintenance(archive)
        self._opening = ArchiveOpening(archive, self._writing)
        self.codec_view: DecodedView | None = None
        """The deprecated codecs' view that the dict API goes through (``auto_codec=True``,
        :meth:`register_codec`; see ``auto_codec.py``), or None: the files' bytes."""
        if auto_codec:
            from barecat.archive import auto_codec as legacy_codecs

            warnings.warn(legacy_codecs.AUTO_CODEC_DEPRECATED, DeprecationWarning, stacklevel=2)
            legacy_codecs.decode_by_extension(self)

    # -- the archive's attributes ----------------------------------------------------

    @property
    def path(self) -> str:
        """Where the archive is: its base path (``ds.barecat``), or the URL it was opened
        from on object storage."""
        return self._archive.path

    @property
    def remote(self) -> bool:
        """True if the archive is on object storage (an fsspec URL)."""
        return self._archive.remote

    @property
    def readonly(self) -> bool:
        """True if the archive is open for reading only."""
        return self._archive.readonly

    @property
    def append_only(self) -> bool:
        """True if the archive is open for adding files only."""
        return self._archive.append_only

    @property
    def threadsafe(self) -> bool:
        """True if the archive was opened to be shared by threads."""
        return self._archive.threadsafe

    @property
    def created(self) -> bool:
        """This object made the archive (there was none, or an index without an archive in
        it and no shard with data): a failed open, or a ``with`` block that raises before
        anything is stored, leaves no archive behind (see :meth:`abandon`)."""
        return self._archive.created

    @property
    def commit_interval(self) -> float:
        """Seconds between commits during long writes (settable)."""
        return self._archive.commit_interval

    @commit_interval.setter
    def commit_interval(self, seconds: float) -> None:
        self._archive.commit_interval = seconds
        if self._archive.committer is not None:
            self._archive.committer.wake()  # (it may be waiting out the old interval)

    @property
    def transaction(self) -> int:
        """The number of the index transaction holding the changes not yet committed:
        each commit, and each failure that rolls the transaction back, starts the next.
        Read it inside :meth:`exclusive`, right after a change, to name the transaction
        that holds the change, for :meth:`commit_transaction` (which tells whether it
        was committed, lost, or is still to commit)."""
        return self._archive.open_transaction()

    @property
    def on_commit(self) -> Callable[[], None] | None:
        """Called after each commit: what was written before it is now durable
        (settable)."""
        return self._archive.on_commit

    @on_commit.setter
    def on_commit(self, callback: Callable[[], None] | None) -> None:
        self._archive.on_commit = callback

    @property
    def index(self) -> ReadOnlyIndex:
        """The archive's index (SQLite): a reader's a :class:`~barecat.index.ReadOnlyIndex`,
        a writer's an :class:`~barecat.index.Index` (with its ``edits``); None once the
        archive is closed."""
        archive = self._archive
        return None if archive.closed else archive.index  # type: ignore[return-value]

    @property
    def sharder(self) -> ShardReader:
        """The archive's shards, as every archive reads them (on object storage too);
        once the archive is closed, any use raises ``ArchiveClosedBarecatError``."""
        return self._archive.sharder

    @property
    def sealed(self) -> bool:
        """True if files are stored compressed and/or encrypted (see ``barecat.sealing``)."""
        return self._archive.sealing is not None

    @property
    def encrypted(self) -> bool:
        """True if files are stored encrypted (reading them needs the passphrase)."""
        sealing = self._archive.sealing
        return sealing is not None and sealing.encrypted

    @property
    def unlocked(self) -> bool:
        """True if file contents can be read without asking for a passphrase."""
        sealing = self._archive.sealing
        return sealing is None or sealing.data_key_known

    @property
    def shard_size_limit(self) -> int:
        """The largest size in bytes a shard may grow to (settable, as bytes or a size such
        as ``'1G'``, on a writable archive; existing shards are not reorganized: see
        :meth:`reshard`)."""
        return self._archive.index.connection.shard_size_limit

    @shard_size_limit.setter
    def shard_size_limit(self, value: int | str) -> None:
        self._maintenance.set_shard_size_limit(value)

    @property
    def num_files(self) -> int:
        """The number of files in the archive."""
        archive = self._archive
        return archive.read_now(lambda: archive.index.lookups.num_files)

    @property
    def num_dirs(self) -> int:
        """The number of directories in the archive, the root included."""
        archive = self._archive
        return archive.read_now(lambda: archive.index.lookups.num_dirs)

    @property
    def total_size(self) -> int:
        """The total size in bytes of all files (their contents, as read)."""
        archive = self._archive
        return archive.read_now(lambda: archive.index.lookups.total_size)

    @property
    def total_logical_size(self) -> int:
        """Bytes of all files by the index (as 0.3.1: the same as :attr:`total_size`);
        below :attr:`total_physical_size_seek` while deleted files leave gaps."""
        return self.total_size

    @property
    def total_physical_size_stat(self) -> int:
        """Bytes of all shard files on disk, by ``stat``."""
        return self._archive.sharder.total_physical_size_stat

    @property
    def total_physical_size_seek(self) -> int:
        """Bytes of all shard files on disk (0.3.1's name; the same as
        :attr:`total_physical_size_stat` here, as writes reach the file at once)."""
        return self._archive.sharder.total_physical_size_seek

    # -- what the parts do, offered as the archive's own methods (see parts.py) --------

    commit = _open_archive(OpenArchive.commit)
    commit_transaction = _open_archive(OpenArchive.commit_transaction)
    exclusive = _open_archive(OpenArchive.exclusive)
    close = _open_archive(OpenArchive.close)
    abandon = _open_archive(OpenArchive.abandon)
    seal_like = _open_archive(OpenArchive.seal_like)
    prepare_file_list_edit = _open_archive(OpenArchive.prepare_file_list_edit)
    raise_if_append_only = _open_archive(OpenArchive.raise_if_append_only)
    raise_if_readonly = _open_archive(OpenArchive.raise_if_readonly)

    unlock = _reading(ArchiveReading.unlock)
    planned_reader = _reading(ArchiveReading.planned_reader)
    verify_seals = _reading(ArchiveReading.verify_seals)
    verify_index_digest = _reading(ArchiveReading.verify_index_digest)
    check_index_digest = _reading(ArchiveReading.check_index_digest)
    get_many = _reading(ArchiveReading.get_many)
    read_many = _reading(ArchiveReading.read_many)
    read = _reading(ArchiveReading.read)
    readinto = _reading(ArchiveReading.readinto)
    readinto_many = _reading(ArchiveReading.readinto_many)
    check_crc32c = _reading(ArchiveReading.check_crc32c)

    exists = _inspecting(ArchiveInspection.exists)
    isfile = _inspecting(ArchiveInspection.isfile)
    isdir = _inspecting(ArchiveInspection.isdir)
    stat = _inspecting(ArchiveInspection.stat)
    lookup = _inspecting(ArchiveInspection.lookup)
    lookup_file = _inspecting(ArchiveInspection.lookup_file)
    lookup_dir = _inspecting(ArchiveInspection.lookup_dir)
    listdir_infos = _inspecting(ArchiveInspection.listdir_infos)
    subdirs_of = _inspecting(ArchiveInspection.subdirs_of)
    files_in = _inspecting(ArchiveInspection.files_in)
    files_page = _inspecting(ArchiveInspection.files_page)
    files_after = _inspecting(ArchiveInspection.files_after)
    iter_fileinfos = _inspecting(ArchiveInspection.iter_fileinfos)
    iter_dirinfos = _inspecting(ArchiveInspection.iter_dirinfos)
    files = _inspecting(ArchiveInspection.files)
    dirs = _inspecting(ArchiveInspection.dirs)
    listdir = _inspecting(ArchiveInspection.listdir)
    listdir_types = _inspecting(ArchiveInspection.listdir_types)
    scandir = _inspecting(ArchiveInspection.scandir)
    walk = _inspecting(ArchiveInspection.walk)
    walk_infos = _inspecting(ArchiveInspection.walk_infos)
    glob = _inspecting(ArchiveInspection.glob)
    iglob = _inspecting(ArchiveInspection.iglob)
    globfiles = _inspecting(ArchiveInspection.globfiles)
    iglobfiles = _inspecting(ArchiveInspection.iglobfiles)
    glob_entries = _inspecting(ArchiveInspection.glob_entries)
    select_entries = _inspecting(ArchiveInspection.select_entries)
    plan_files = _inspecting(ArchiveInspection.plan_files)
    logical_shard_end = _inspecting(ArchiveInspection.logical_shard_end)
    physical_shard_end = _inspecting(ArchiveInspection.physical_shard_end)
    fragmentation = _inspecting(ArchiveInspection.fragmentation)
    verify = _inspecting(ArchiveInspection.verify)
    verify_integrity = _inspecting(ArchiveInspection.verify_integrity)
    file_positions = _inspecting(ArchiveInspection.file_positions)
    sealing_records = _inspecting(ArchiveInspection.sealing_records)

    mkdir = _writing(ArchiveWriting.mkdir)
    makedirs = _writing(ArchiveWriting.makedirs)
    add_dirs = _writing(ArchiveWriting.add_dirs)
    add = _writing(ArchiveWriting.add)
    update_file = _writing(ArchiveWriting.update_file)
    add_many = _writing(ArchiveWriting.add_many)
    sealing_for_writers = _writing(ArchiveWriting.sealing_for_writers)
    batch_writer = _writing(ArchiveWriting.batch_writer)
    add_placed = _writing(ArchiveWriting.add_placed)
    guard_shared_bytes = _writing(ArchiveWriting.guard_shared_bytes)
    add_by_path = _writing(ArchiveWriting.add_by_path)

    remove = _editing(ArchiveEditing.remove)
    rmdir = _editing(ArchiveEditing.rmdir)
    rmtree = _editing(ArchiveEditing.rmtree)
    rename = _editing(ArchiveEditing.rename)
    move = _editing(ArchiveEditing.move)
    chmod = _editing(ArchiveEditing.chmod)
    chown = _editing(ArchiveEditing.chown)
    utime = _editing(ArchiveEditing.utime)

    truncate_all_to_logical_size = _maintenance(ArchiveMaintenance.truncate_all_to_logical_size)
    defragment = _maintenance(ArchiveMaintenance.defragment)
    defrag = _maintenance(ArchiveMaintenance.defrag)
    reshard = _maintenance(ArchiveMaintenance.reshard)
    repair = _maintenance(ArchiveMaintenance.repair)
    merge = _maintenance(ArchiveMaintenance.merge)
    take_subset = _maintenance(ArchiveMaintenance.take_subset)
    merge_from_other_barecat = _maintenance(ArchiveMaintenance.merge_from_other_barecat)
    rekey = _maintenance(ArchiveMaintenance.rekey)
    reset_index_digest = _maintenance(ArchiveMaintenance.reset_index_digest)
    seal_with_records = _maintenance(ArchiveMaintenance.seal_with_records)
    take_all_from = _maintenance(ArchiveMaintenance.take_all_from)

    open = _opening(ArchiveOpening.open)

    # -- dict API --------------------------------------------------------------------

    def __getitem__(self, path: str) -> bytes:
        data = read_item(self._archive, path)
        codecs = self.codec_view  # (deprecated codecs: decoded by extension)
        return data if codecs is None else codecs.decode(path, data)

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

    def __setitem__(self, path: str, content: bytes) -> None:
        codecs = self.codec_view
        self.add(path, data=content if codecs is None else codecs.encode(path, content))

    def _read_raw(self, path: str) -> bytes:
        """``bc[path]`` below the codecs: the file's bytes."""
        return read_item(self._archive, path)

    def _write_raw(self, path: str, data: bytes) -> None:
        """``bc[path] = data`` below the codecs: the bytes stored as they are."""
        self.add(path, data=data)

    def __delitem__(self, path: str) -> None:
        try:
            self.remove(path)
        except (FileNotFoundBarecatError, IsADirectoryBarecatError, NotADirectoryBarecatError):
            raise KeyError(path) from None

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        archive = self._archive
        reads = archive.reads  # (as in __getitem__)
        reads.append(None)
        try:
            return archive.index.lookups.lookup_address(normalize(path)) is not None
        finally:
            del reads[-1]

    def __len__(self) -> int:
        return self.num_files

    def __iter__(self) -> Iterator[str]:
        archive = self._archive
        return archive.steps_of(archive.read_now(lambda: archive.index.listing.file_paths()))

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

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> Barecat:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.abandon()

    def __getstate__(self) -> dict[str, Any]:
        """A read-only archive travels to worker processes as its path (and, if encrypted
        and already unlocked, its data key: keep such pickles in memory), with its
        deprecated codecs if it has them (they pickle if their functions do)."""
        if not self._archive.readonly:
            raise TypeError("A writable Barecat cannot be pickled: only one writer may exist")
        codecs = self.codec_view
        return {
            **({} if codecs is None else {"codecs": (codecs.codecs, codecs.allow_pickle)}),
            "path": self._archive.path,
            "threadsafe": self._archive.threadsafe,
            "readonly_is_immutable": self._archive.readonly_is_immutable,
            "read_concurrency": self._archive.read_concurrency,
            "data_key": None
            if self._archive.sealing is None
            else self._archive.sealing.unlocked_key,
            "keeps_digest": self._archive.sealing is not None
            and self._archive.sealing.keeps_digest,
            **self._remote_state(),
        }

    def _remote_state(self) -> dict[str, Any]:
        if not self._archive.remote:
            return {}
        return dict(self._archive.remote_options)

    def __setstate__(self, state: dict[str, Any]) -> None:
        data_key = state.pop("data_key", None)
        keeps_digest = state.pop("keeps_digest", False)
        codecs = state.pop("codecs", None)
        self.__init__(readonly=True, **state)  # type: ignore[misc]
        if codecs is not None:
            from barecat.archive import auto_codec as legacy_codecs

            legacy_codecs.decode_by_extension(self, codecs[0]).allow_pickle = codecs[1]
        if data_key is not None:
            sealing = self._archive.sealing
            if sealing is None or not sealing.encrypted:  # no longer: it was changed
                self.close()
                raise not_encrypted(self._archive.path)
            sealing.use_key(data_key, keeps_digest)

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
        archive = self._archive
        state = "closed" if archive.closed else ("read-only" if archive.readonly else "writable")
        return f"Barecat({archive.path!r}, {state})"


__all__ = ["COMMIT_EVERY_FILES", "Barecat"]
