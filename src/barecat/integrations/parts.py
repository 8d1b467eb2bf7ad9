"""One new archive written by many tasks of an engine: a part-archive per task, joined
once, without copying, when all are done (the engine-independent part of the Ray and
Dask writers).

:class:`PartArchives` is made on the driver and travels to the tasks.
:meth:`~PartArchives.start` makes the parts' place, removing those of earlier writes of
the same output whose driver died (the name holds the driver's process id); each task
writes its rows with :meth:`~PartArchives.write_part` (rows as Arrow tables: ``path`` and
``bytes``, optionally ``mtime_ns`` and ``mode``; see :func:`files_of`) and hands back a
small :class:`WrittenPart`; :meth:`~PartArchives.join` then, on the driver, makes the
output of the parts, whole or not at all; :meth:`~PartArchives.discard` removes every
part, whole or half-written, when the write fails.

A local output has its parts in a hidden folder beside it (``.NAME.ENGINE-PID-ID/``, so
on the same filesystem; workers on other machines need that filesystem shared). The join
makes a new archive in that folder that takes each part's shards by link
(``Barecat.merge(..., symlink=True)``, which also refuses a path two parts share, naming
it), replaces each link by the shard it points to (a rename), and renames the joined
archive to the output, shards first and index last.

An output on object storage (a URL) shares no filesystem with the tasks: each task writes
its part in a temporary folder of its own machine and uploads it under a hidden staging
prefix beside the output (``.NAME.ENGINE-HOST-PID-ID/``); the driver fetches the parts'
indices (never a shard), joins them by the same merge over stand-in shards, then has each
part's shard copied into place on the store's side and uploads the joined index last
(``remote_parts.py``, ``archive.objectstore.publish_archive``).

An encrypted output (``passphrase``) has its sealing made once, on the driver (settings,
dictionary and a new data key, wrapped by the passphrase): each part, and the joined
archive, is created sealed with those same records (``Barecat.seal_with_records``, as
the parallel ingest's parts are), so the parts' sealed bytes are the output's as they
are and the join re-encrypts nothing. The passphrase travels to the tasks inside this
object, never shown by ``repr``. Imports pyarrow, the archive layer, ``layout``,
``objectstore`` and ``remote_parts``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from barecat.archive import Barecat
from barecat.archive.objectstore import publish_archive
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError, FileExistsBarecatError, RemoteStorageBarecatError
from barecat.index.schema import ConfigValue
from barecat.integrations.remote_parts import (
    WrittenPart,
    abandoned_prefixes,
    part_sizes,
    shard_sources,
    staging_prefix,
    stand_ins,
    upload_part,
)
from barecat.integrations.selection import ArchiveLocation
from barecat.layout import (
    OLD_INDEX_SUFFIX,
    abandoned_entries,
    archive_exists,
    finish_replace,
    index_path,
    remove_archive,
    replace_archive,
    shard_files,
)
from barecat.objectstore import ObjectStore, is_remote_url, url_protocol

REQUIRED_COLUMNS = ("path", "bytes")
"""The columns every row needs."""
OPTIONAL_COLUMNS = ("mtime_ns", "mode")
"""The columns a row may have besides."""
_TASK_FOLDER = "barecat-part-"
"""How a task's temporary folder begins (its process id follows) when the output is on
object storage."""


@dataclass(frozen=True)
class OutputSettings:
    """How the output archive is made (the writers' arguments besides its location).

    Attributes:
        overwrite: replace an existing archive there (once the new one is whole).
        shard_size_limit: the output's (and each part's) shard size limit (bytes, '1G').
        compression: store files compressed (``'zstd'``, ``'lz4'``): a sealed archive.
        compression_level: the codec's level.
    """

    overwrite: bool = False
    shard_size_limit: int | str | None = None
    compression: str | None = None
    compression_level: int | None = None


class PartArchives:
    """The parts of one write of a new archive at ``location`` (see the module doc);
    pickles as its settings, for the tasks.

    Args:
        location: the archive to create: a local path that every task can reach, or a
            URL of object storage (``s3://...``), which the tasks and the driver reach
            with its ``storage_options`` and need share no filesystem; its
            ``passphrase`` encrypts the output (a function giving one is asked once,
            here).
        engine: names the parts' place (``.NAME.ENGINE-...``): ``'ray'``, ``'dask'``.
        settings: how the output is made (overwrite, shard size limit, compression).

    Raises:
        FileExistsBarecatError: an archive exists at ``location`` (without
            ``overwrite``).
    """

    def __init__(
        self, location: ArchiveLocation, engine: str, settings: OutputSettings | None = None
    ) -> None:
        self.remote = is_remote_url(location.path)
        """Whether the output is on object storage (the parts go there too)."""
        self.path = location.path if self.remote else os.path.abspath(location.path)
        self.storage_options = location.storage_options if self.remote else None
        self.settings = settings or OutputSettings()
        if self.remote:
            self._prefix = staging_prefix(self.path, engine)
        else:
            folder, name = os.path.split(self.path)
            self._prefix = os.path.join(folder, f".{name}.{engine}-")
        self.staging = f"{self._prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        """The hidden place of the parts, named after the driver: a folder beside a local
        output, a prefix beside one on object storage."""
        self._objectstore: ObjectStore | None = None
        self.refuse_existing()
        self._passphrase: _Secret | None = None
        self._sealing: dict[str, ConfigValue] | None = None
        if location.passphrase is not None:
            passphrase = location.passphrase
            secret = passphrase() if callable(passphrase) else passphrase
            self._passphrase = _Secret(secret)
            self._sealing = self._new_sealing(secret)

    def __repr__(self) -> str:  # never the passphrase
        encrypted = ", encrypted" if self._passphrase is not None else ""
        return f"PartArchives({self.path!r}{encrypted})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_objectstore"] = None  # (each process talks to the store its own way)
        return state

    @property
    def store(self) -> ObjectStore:
        """This process's access to the output's store (a URL output), counting what it
        costs in ``store.stats``."""
        if self._objectstore is None:
            protocol = url_protocol(self.path)
            assert protocol is not None, self.path
            self._objectstore = ObjectStore(protocol, self.storage_options)
        return self._objectstore

    def _new_sealing(self, passphrase: str | bytes) -> dict[str, ConfigValue]:
        """The records of the output's sealing, made once (by an empty archive made and
        removed in a temporary folder: the data key is new, the passphrase wraps it)."""
        with tempfile.TemporaryDirectory(prefix="barecat-sealing-") as folder:
            template = Barecat(
                os.path.join(folder, "sealing"),
                readonly=False,
                compression=self.settings.compression,
                compression_level=self.settings.compression_level,
                passphrase=passphrase,
            )
            with template:
                records = template.sealing_records()
        assert records is not None  # (a passphrase makes a sealed archive)
        return records

    def _new_archive(self, path: str) -> Barecat:
        """A new archive at ``path`` for this write's files, open for writing: sealed
        with the output's records when it is encrypted (see the module doc).

        Raises:
            FileExistsBarecatError: something is at ``path``.
        """
        if self._sealing is not None:
            with Barecat(path, readonly=False, exist_ok=False) as empty:
                empty.seal_with_records(self._sealing)
        return Barecat(
            path,
            readonly=False,
            exist_ok=self._sealing is not None,
            shard_size_limit=self.settings.shard_size_limit,
            compression=self.settings.compression,
            compression_level=self.settings.compression_level,
            passphrase=self._passphrase,
        )

    def refuse_existing(self) -> None:
        """Raise unless the output may be written.

        Raises:
            FileExistsBarecatError: an archive (or anything) is at ``path``, without
                ``overwrite``.
        """
        if self.settings.overwrite:
            return
        if self.remote:
            exists = any(self.store.exists(u) for u in (self.path, self.path + OLD_INDEX_SUFFIX))
        else:
            exists = archive_exists(self.path) or os.path.lexists(self.path)
        if exists:
            raise FileExistsBarecatError(self.path, "Output")

    def start(self, columns: Sequence[str] | None = None) -> None:
        """Check the rows' columns and make the parts' place (on the driver), removing
        those of earlier writes of the same output whose driver (a process of this
        machine) died.

        Args:
            columns: the rows' column names, when known before any task runs.

        Raises:
            BarecatError: ``path`` or ``bytes`` is not among ``columns``.
            FileExistsBarecatError: see :meth:`refuse_existing`.
            RemoteStorageBarecatError: the store failed (a URL output).
        """
        if columns is not None:
            check_columns(columns)
        self.refuse_existing()
        if self.remote:
            for prefix in abandoned_prefixes(self.store, self._prefix):
                self.store.remove_tree(prefix)
            return  # (a prefix needs no making)
        finish_replace(self.path)  # a join killed while it put its archive in place
        folder, start = os.path.split(self._prefix)
        for entries in abandoned_entries(folder, start).values():
            for entry in entries:  # the parts of a write whose driver died
                shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
        os.makedirs(self.staging, exist_ok=True)

    def write_part(self, tables: Iterable[pa.Table], number: int = 0) -> WrittenPart | None:
        """One task's rows into a part-archive of its own (in a task): beside a local
        output; for one on object storage, written in a temporary folder of this machine,
        uploaded under the staging prefix and removed here.

        Args:
            tables: the rows (see :func:`files_of`).
            number: the task's number; parts are joined in the order of their numbers.

        Returns:
            The part; None when the task had no rows.

        Raises:
            FileExistsBarecatError: a path twice in this task's rows.
            BarecatError: rows without ``path`` or ``bytes``.
            OSError: the parts' folder is gone (the write was discarded meanwhile).
            RemoteStorageBarecatError: the upload failed.
        """
        name = f"part-{number:05d}-{uuid.uuid4().hex[:8]}"
        if not self.remote:
            part = os.path.join(self.staging, name)
            return WrittenPart(part, part_sizes(part)) if self._write(part, tables) else None
        temporary = tempfile.gettempdir()
        for entries in abandoned_entries(temporary, _TASK_FOLDER).values():
            for entry in entries:  # what a task killed on this machine left
                shutil.rmtree(os.path.join(temporary, entry), ignore_errors=True)
        folder = tempfile.mkdtemp(prefix=f"{_TASK_FOLDER}{os.getpid()}-")
        try:
            part = os.path.join(folder, "part")
            if not self._write(part, tables):
                return None
            return upload_part(self.store, part, f"{self.staging}/{name}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _write(self, part: str, tables: Iterable[pa.Table]) -> bool:
        """The rows into a new part-archive at ``part``; False (and no part) if none."""
        with self._new_archive(part) as bc:
            count = 0
            for table in tables:
                count += bc.add_many(files_of(table))
            if count == 0:
                bc.abandon()  # a part made holding nothing is removed
                return False
        return True

    def join(self, parts: Iterable[WrittenPart | None]) -> None:
        """Join the parts into the output (on the driver), then remove their place.

        Args:
            parts: what the tasks' :meth:`write_part` returned.

        Raises:
            FileExistsBarecatError: a path in two parts, named; the output, when it
                appeared meanwhile (without ``overwrite``).
            RemoteStorageBarecatError: the store failed (a URL output; then no archive
                is there).
        """
        chosen = sorted((p for p in parts if p), key=lambda p: p.location)
        if self.remote:
            with tempfile.TemporaryDirectory(prefix="barecat-join-") as folder:
                local_parts, origins = stand_ins(self.store, chosen, folder)
                joined = os.path.join(folder, "joined")
                self._merge(joined, local_parts)
                self.refuse_existing()
                sources = shard_sources(joined, origins)
                publish_archive(self.store, self.path, index_path(joined), sources)
        else:
            joined = os.path.join(self.staging, "joined")
            self._merge(joined, [p.location for p in chosen])
            for shard in shard_files(joined):  # adopt each part's shard: the link becomes it
                if os.path.islink(shard):
                    os.replace(os.path.realpath(shard), shard)
            self.refuse_existing()
            replace_archive(joined, self.path)  # (overwrite: the old one goes as it comes)
        self.discard()

    def _merge(self, joined: str, parts: list[str]) -> None:
        """A new archive at ``joined`` linking the shards of the local ``parts``, in order.

        Raises:
            FileExistsBarecatError: a path in two parts, named.
        """
        remove_archive(joined)
        if self._sealing is None:  # (plain when made: the merge seals it like its parts)
            out = Barecat(joined, readonly=False, shard_size_limit=self.settings.shard_size_limit)
        else:
            out = self._new_archive(joined)
        with out:
            out.merge(parts, symlink=True)

    def discard(self) -> None:
        """Remove the parts' place and every part in it, whole or half-written (on a
        store that fails, what stays goes at the next write of the output from this
        machine, once this process has ended)."""
        if self.remote:
            with contextlib.suppress(RemoteStorageBarecatError):
                self.store.remove_tree(self.staging)
        else:
            shutil.rmtree(self.staging, ignore_errors=True)


class _Secret:
    """A passphrase that travels (pickled) but never shows: a function giving it, as
    ``Barecat(passphrase=...)`` takes one, whose ``repr`` hides it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | bytes) -> None:
        self._value = value

    def __call__(self) -> str | bytes:
        return self._value

    def __repr__(self) -> str:
        return "<passphrase>"


def check_columns(columns: Sequence[str]) -> None:
    """Raise unless rows with ``columns`` can be written.

    Raises:
        BarecatError: ``path`` or ``bytes`` is missing, named.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise BarecatError(
            f"write_barecat needs the columns path and bytes; {missing[0]!r} is missing "
            f"(the rows have: {', '.join(columns)})"
        )


def files_of(table: pa.Table) -> Iterable[tuple[BarecatFileInfo, bytes]]:
    """The files that rows make: ``path`` and ``bytes``, and ``mtime_ns`` and ``mode``
    where a row has them (other columns are ignored).

    Args:
        table: the rows.

    Returns:
        Each row's file record and contents, in order.

    Raises:
        BarecatError: a table without ``path`` or ``bytes``; a row where either is null,
            or whose ``bytes`` are not bytes (a string column), named.
    """
    names = table.column_names
    check_columns(names)
    paths = table.column("path").to_pylist()
    datas = table.column("bytes").to_pylist()
    mtimes = table.column("mtime_ns").to_pylist() if "mtime_ns" in names else None
    modes = table.column("mode").to_pylist() if "mode" in names else None
    for i, (path, data) in enumerate(zip(paths, datas, strict=True)):
        if path is None or data is None:
            raise BarecatError(f"Row {i} of a block has no path or no bytes")
        if not isinstance(data, bytes):
            raise BarecatError(
                f"{path}: its bytes are a {type(data).__name__}, not bytes (a binary column; "
                "Dask turns object columns into strings unless they are binary[pyarrow])"
            )
        info = BarecatFileInfo(path)
        if mtimes is not None and mtimes[i] is not None:
            info.mtime_ns = int(mtimes[i])
        if modes is not None and modes[i] is not None:
            info.mode = int(modes[i])
        yield info, data


__all__ = [
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "PartArchives",
    "WrittenPart",
    "check_columns",
    "files_of",
]
