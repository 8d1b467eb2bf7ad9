"""Writing a Ray ``Dataset`` into an archive: :class:`BarecatDatasink` and
:func:`write_barecat`.

Rows have ``path`` and ``bytes``, optionally ``mtime_ns`` and ``mode``. Each write task
writes its rows into a part-archive of its own in a hidden folder beside the output
(``.NAME.ray-PID-ID/``, so on the same filesystem; workers on other machines need that
filesystem shared) and returns the part's path. When every task is done,
``on_write_complete`` joins the parts without copying a byte: a new archive in that
folder takes each part's shards by link (``Barecat.merge(..., symlink=True)``, which
also refuses a path two parts share, naming it), each link is then replaced by the shard
it points to (a rename), and the joined archive is renamed to the output, shards first
and index last, so the output appears only when whole. The folder is removed then, and
by ``on_write_failed`` when the write fails (a retried task's half-written part goes
with it); a folder whose driver died (its name holds the driver's process id) is removed
by the next write of the same output on that machine. Imports ray and pyarrow (the
``ray`` extra), the archive layer, ``layout`` and ``leftovers``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable
from typing import Any

try:
    import pyarrow as pa
    import ray.data
    from ray.data.block import Block, BlockAccessor
    from ray.data.datasource import Datasink, WriteResult
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        f"barecat.integrations.ray needs Ray Data ({e}): pip install 'barecat[ray]'"
    ) from e

from barecat.archive import Barecat
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError, FileExistsBarecatError
from barecat.layout import (
    abandoned_entries,
    archive_exists,
    move_archive,
    remove_archive,
    shard_files,
)

DEFAULT_PART_BYTES = 64 << 20
"""Rows Ray gathers for one write task (one part-archive), in bytes: fewer, bigger parts
(each is an archive made, synced and joined)."""
REQUIRED_COLUMNS = ("path", "bytes")
OPTIONAL_COLUMNS = ("mtime_ns", "mode")


class BarecatDatasink(Datasink[str | None]):
    """Writes a dataset's rows as the files of one new archive (see the module doc).

    Args:
        path: the archive to create (a local path that every write task can reach).
        overwrite: replace an existing archive there (once the new one is whole).
        shard_size_limit: the output's (and each part's) shard size limit (bytes, '1G').
        compression: store files compressed (``'zstd'``, ``'lz4'``): a sealed archive.
        compression_level: the codec's level.
        part_bytes: about how many bytes of rows each write task (each part) takes (0:
            as the blocks come, which lets Ray fuse the write with the step before it).

    Raises:
        FileExistsBarecatError: an archive exists at ``path`` (without ``overwrite``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = False,
        shard_size_limit: int | str | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        part_bytes: int = DEFAULT_PART_BYTES,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.part_bytes = part_bytes
        self.overwrite = overwrite
        self.shard_size_limit = shard_size_limit
        self.compression = compression
        self.compression_level = compression_level
        folder, name = os.path.split(self.path)
        self._prefix = f".{name}.ray-"
        self.staging = os.path.join(folder, f"{self._prefix}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        """The hidden folder of the parts, beside the output, named after the driver."""
        self._refuse_existing()

    def _refuse_existing(self) -> None:
        if not self.overwrite and (archive_exists(self.path) or os.path.lexists(self.path)):
            raise FileExistsBarecatError(self.path, "Output")

    def get_name(self) -> str:
        return "Barecat"

    @property
    def min_bytes_per_write(self) -> int | None:
        return self.part_bytes or None

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Check the rows' columns and make the parts' folder (on the driver), removing
        those of earlier writes of the same output whose driver died."""
        if schema is not None:
            names = set(schema.names)
            missing = [c for c in REQUIRED_COLUMNS if c not in names]
            if missing:
                raise BarecatError(
                    f"write_barecat needs the columns path and bytes; {missing[0]!r} is missing "
                    f"(the rows have: {', '.join(schema.names)})"
                )
        self._refuse_existing()
        folder = os.path.dirname(self.path)
        for entries in abandoned_entries(folder, self._prefix).values():
            for entry in entries:  # the parts of a write whose driver died
                shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
        os.makedirs(self.staging, exist_ok=True)

    def write(self, blocks: Iterable[Block], ctx: Any) -> str | None:
        """One task's rows into a part-archive of its own.

        Returns:
            The part's path; None when the task had no rows.

        Raises:
            FileExistsBarecatError: a path twice in this task's rows.
        """
        os.makedirs(self.staging, exist_ok=True)
        task = getattr(ctx, "task_idx", 0)
        part = os.path.join(self.staging, f"part-{task:05d}-{uuid.uuid4().hex[:8]}")
        bc = Barecat(
            part,
            readonly=False,
            exist_ok=False,
            shard_size_limit=self.shard_size_limit,
            compression=self.compression,
            compression_level=self.compression_level,
        )
        with bc:
            count = 0
            for block in blocks:
                count += bc.add_many(_files_of(BlockAccessor.for_block(block).to_arrow()))
            if count == 0:
                bc.abandon()  # a part made holding nothing is removed
                return None
        return part

    def on_write_complete(self, write_result: WriteResult[str | None]) -> None:
        """Join the parts into the output (on the driver), then remove their folder.

        Raises:
            FileExistsBarecatError: a path in two parts' rows, named.
        """
        parts = sorted(p for p in write_result.write_returns if p)
        joined = os.path.join(self.staging, "joined")
        remove_archive(joined)
        # (plain when made: the merge makes it sealed like compressed parts)
        with Barecat(joined, readonly=False, shard_size_limit=self.shard_size_limit) as out:
            out.merge(parts, symlink=True)
        for shard in shard_files(joined):  # adopt each part's shard: the link becomes it
            if os.path.islink(shard):
                os.replace(os.path.realpath(shard), shard)
        self._refuse_existing()
        if archive_exists(self.path):  # overwrite: the old archive goes when the new is whole
            remove_archive(self.path)
        move_archive(joined, self.path)
        shutil.rmtree(self.staging, ignore_errors=True)

    def on_write_failed(self, error: Exception) -> None:
        """Remove the parts (whole or half-written): no output appears."""
        shutil.rmtree(self.staging, ignore_errors=True)


def _files_of(table: pa.Table) -> Iterable[tuple[BarecatFileInfo, bytes]]:
    names = set(table.column_names)
    paths = table.column("path").to_pylist()
    datas = table.column("bytes").to_pylist()
    mtimes = table.column("mtime_ns").to_pylist() if "mtime_ns" in names else None
    modes = table.column("mode").to_pylist() if "mode" in names else None
    for i, (path, data) in enumerate(zip(paths, datas, strict=True)):
        if path is None or data is None:
            raise BarecatError(f"Row {i} of a block has no path or no bytes")
        info = BarecatFileInfo(path)
        if mtimes is not None and mtimes[i] is not None:
            info.mtime_ns = int(mtimes[i])
        if modes is not None and modes[i] is not None:
            info.mode = int(modes[i])
        yield info, data


def write_barecat(
    ds: ray.data.Dataset,
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    shard_size_limit: int | str | None = None,
    compression: str | None = None,
    compression_level: int | None = None,
    part_bytes: int = DEFAULT_PART_BYTES,
    concurrency: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
) -> None:
    """Write a dataset's rows (``path``, ``bytes``; optionally ``mtime_ns``, ``mode``)
    as the files of a new archive at ``path`` (see :class:`BarecatDatasink`).

    Args:
        ds: the dataset.
        path: the archive to create (on a filesystem every write task reaches).
        overwrite: replace an existing archive (once the new one is whole).
        shard_size_limit: the output's shard size limit.
        compression: store files compressed (``'zstd'``, ``'lz4'``).
        compression_level: the codec's level.
        part_bytes: about how many bytes of rows each write task (each part) takes (0:
            as the blocks come).
        concurrency: the most write tasks running at once.
        ray_remote_args: more options of the write tasks.

    Raises:
        FileExistsBarecatError: an archive exists at ``path`` (without ``overwrite``),
            or a path is in the rows twice (named); then no archive appears.
        BarecatError: rows without ``path`` or ``bytes``.
    """
    sink = BarecatDatasink(
        path,
        overwrite=overwrite,
        shard_size_limit=shard_size_limit,
        compression=compression,
        compression_level=compression_level,
        part_bytes=part_bytes,
    )
    ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args or {})


__all__ = ["BarecatDatasink", "write_barecat"]
