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
by the next write of the same output on that machine. With ``passphrase`` the output is
encrypted: its sealing (data key, settings) is made once on the driver and every part is
sealed with it, so the join re-encrypts nothing. An output on object storage (a URL)
needs no shared filesystem, one machine or many: each task uploads its part from a
temporary folder of its own under a hidden staging prefix beside the output, and the
driver joins the parts' indices, has their shards copied into place on the store's side
and uploads the index last. The parts and their join are ``parts.py``'s, shared with the
Dask writer; this module is what Ray asks of a sink. Imports ray and pyarrow (the
``ray`` extra) and ``parts``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing("barecat.integrations.ray needs Ray Data", "ray"):
    import pyarrow as pa
    import ray.data
    from ray.data.block import Block, BlockAccessor
    from ray.data.datasource import Datasink, WriteResult

from barecat.integrations.keywords import WriterKeywords, shows_keywords, writer_values
from barecat.integrations.parts import OutputSettings, PartArchives, WrittenPart
from barecat.integrations.selection import ArchiveLocation

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_PART_BYTES = 64 << 20
"""Rows Ray gathers for one write task (one part-archive), in bytes: fewer, bigger parts
(each is an archive made, synced and joined)."""


class BarecatDatasink(Datasink[WrittenPart | None]):
    """Writes a dataset's rows as the files of one new archive (see the module doc).

    Args:
        path: the archive to create: a local path that every write task can reach, or a
            URL of object storage (``s3://...``), which needs no shared filesystem.
        staging_dir: deprecated and unused (parts no longer pass through a folder of the
            driver; each task uploads its own); giving one warns.
        part_bytes: about how many bytes of rows each write task (each part) takes (0:
            as the blocks come, which lets Ray fuse the write with the step before it).
        **keywords: how the output is made, and its key and options (``overwrite``,
            ``shard_size_limit``, ``compression``, ``compression_level``,
            ``passphrase``, ``storage_options``: see
            :class:`~barecat.integrations.keywords.WriterKeywords`).

    Raises:
        FileExistsBarecatError: an archive exists at ``path`` (without ``overwrite``).
    """

    @shows_keywords(WriterKeywords)
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        staging_dir: str | os.PathLike[str] | None = None,
        part_bytes: int = DEFAULT_PART_BYTES,
        **keywords: Unpack[WriterKeywords],
    ) -> None:
        _warn_staging(staging_dir)
        location, settings = writer_values(path, keywords, "BarecatDatasink")
        self._made(PartArchives(location, "ray", settings), part_bytes)

    @classmethod
    def of(
        cls,
        location: ArchiveLocation,
        settings: OutputSettings | None = None,
        *,
        part_bytes: int = DEFAULT_PART_BYTES,
    ) -> BarecatDatasink:
        """The sink writing the archive at ``location`` made with ``settings`` (the
        arguments otherwise as the constructor's).

        Raises:
            FileExistsBarecatError: an archive exists there (without ``overwrite``).
        """
        sink = cls.__new__(cls)
        sink._made(PartArchives(location, "ray", settings), part_bytes)
        return sink

    def _made(self, parts: PartArchives, part_bytes: int) -> None:
        self.parts = parts
        self.path = parts.path
        self.part_bytes = part_bytes

    def __repr__(self) -> str:  # never the passphrase
        return f"BarecatDatasink({self.parts!r})"

    def get_name(self) -> str:
        return "Barecat"

    @property
    def min_bytes_per_write(self) -> int | None:
        return self.part_bytes or None

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Check the rows' columns and make the parts' folder (on the driver), removing
        those of earlier writes of the same output whose driver died."""
        self.parts.start(None if schema is None else schema.names)

    def write(self, blocks: Iterable[Block], ctx: Any) -> WrittenPart | None:
        """One task's rows into a part-archive of its own (on object storage: uploaded
        from a temporary folder of the task's own).

        Returns:
            The part's place and shard sizes; None when the task had no rows.

        Raises:
            FileExistsBarecatError: a path twice in this task's rows.
        """
        tables = (BlockAccessor.for_block(block).to_arrow() for block in blocks)
        return self.parts.write_part(tables, getattr(ctx, "task_idx", 0))

    def on_write_complete(self, write_result: WriteResult[WrittenPart | None]) -> None:
        """Join the parts into the output (on the driver), then remove their folder.

        Raises:
            FileExistsBarecatError: a path in two parts' rows, named.
        """
        self.parts.join(write_result.write_returns)

    def on_write_failed(self, error: Exception) -> None:
        """Remove the parts (whole or half-written): no output appears."""
        self.parts.discard()


def _warn_staging(staging_dir: str | os.PathLike[str] | None) -> None:
    """Warn that ``staging_dir`` is given: it is no longer used."""
    if staging_dir is not None:
        warnings.warn(
            "write_barecat's staging_dir is no longer used: each write task uploads its "
            "own part, and the driver joins them on the store",
            DeprecationWarning,
            stacklevel=3,
        )


@shows_keywords(WriterKeywords)
def write_barecat(
    ds: ray.data.Dataset,
    path: str | os.PathLike[str],
    *,
    staging_dir: str | os.PathLike[str] | None = None,
    part_bytes: int = DEFAULT_PART_BYTES,
    concurrency: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    **keywords: Unpack[WriterKeywords],
) -> None:
    """Write a dataset's rows (``path``, ``bytes``; optionally ``mtime_ns``, ``mode``)
    as the files of a new archive at ``path`` (see :class:`BarecatDatasink`).

    Args:
        ds: the dataset.
        path: the archive to create: on a filesystem every write task reaches, or a URL
            of object storage (``s3://...``; no shared filesystem needed).
        staging_dir: deprecated and unused (see :class:`BarecatDatasink`).
        part_bytes: about how many bytes of rows each write task (each part) takes (0:
            as the blocks come).
        concurrency: the most write tasks running at once.
        ray_remote_args: more options of the write tasks.
        **keywords: how the output is made, and its key and options (as for
            :class:`BarecatDatasink`).

    Raises:
        FileExistsBarecatError: an archive exists at ``path`` (without ``overwrite``),
            or a path is in the rows twice (named); then no archive appears.
        BarecatError: rows without ``path`` or ``bytes``; see :class:`BarecatDatasink`.
        RemoteStorageBarecatError: the store failed (a URL output; then no archive is
            there).
    """
    _warn_staging(staging_dir)
    location, settings = writer_values(path, keywords, "write_barecat")
    sink = BarecatDatasink.of(location, settings, part_bytes=part_bytes)
    ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args or {})


__all__ = ["BarecatDatasink", "write_barecat"]
