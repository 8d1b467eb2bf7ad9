"""Reading an archive into Ray Data: :class:`BarecatDatasource` and :func:`read_barecat`.

The driver plans once, from the index alone: the chosen files (a glob ``pattern`` and an
SQL ``where`` on the index's columns, both run by SQLite) in storage order (shard,
offset), cut into pieces of at most ``chunk_bytes`` that each become one block, and the
pieces into read tasks of contiguous runs (up to ``target_bytes``; fewer, smaller runs
when the archive is small, so that every worker gets some). Each task carries the
addresses of its files (path, shard, offset, size, CRC32C) as Arrow arrays and reads
them from the shards alone, one sequential read per piece on a local disk, one coalesced
ranged request per piece on object storage: no worker opens or downloads the index, no
file is listed or stat'ed. Every file's bytes are CRC-checked in the task, and in a sealed
archive authenticated and decompressed bound to its path (the data key travels inside
the task and is never shown by ``repr``).

Rows are ``path``, ``bytes``, ``size``, ``mtime_ns``, ``crc32c`` (the index's: of the
stored bytes); ``columns`` (or Ray's projection pushdown, ``select_columns``) keeps some,
and without ``bytes`` no shard is read at all. ``group_by_stem=True`` makes one row per
sample, as WebDataset and LitData group files: ``__key__`` (the path up to the first dot
of the file name: ``train/0001`` for ``train/0001.jpg`` and ``train/0001.json``) and one
binary column per extension (``jpg``, ``json``; null where a sample lacks one), known
from the index when planning. Samples are planned in path order, which puts a sample's
files next to each other (and, for archives made from a tree, is storage order too); a
block never splits a sample. The planning and the reading of a chunk are
``read_plans.py``'s, shared with the Dask reader; this module is what Ray asks of a
source. Imports ray and pyarrow (the ``ray`` extra) and ``read_plans``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing("barecat.integrations.ray needs Ray Data", "ray"):
    import pyarrow as pa
    import ray.data
    from ray.data.block import Block, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

from barecat.archive.planned_reads import PlannedReader
from barecat.integrations.keywords import ReaderKeywords, reader_values, shows_keywords
from barecat.integrations.read_plans import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_TARGET_BYTES,
    Chunk,
    plan_archive,
    read_chunk,
    sample_key,
)
from barecat.integrations.selection import ArchiveLocation, FileSelection

if TYPE_CHECKING:
    from typing_extensions import Unpack

_MIN_TASK_BYTES = 4 << 20
"""Smallest run a task is given, however many tasks Ray asks for (a task costs ~ms)."""
_FIRST_TASK_ROWS = 1024
"""Rows each of the first two read tasks makes (their chunks, whole; then each task twice
as long as the one before). Ray merges a task's blocks into one (up to 128 MiB), and its
batch iterator hands out a block only once it holds a batch's rows beyond it (1,024 and
more, with ``prefetch_batches=1``): the first batch comes when the first two tasks are
done, which on two CPUs run side by side, and each is noticed ~0.1 s after it ends."""
_FIRST_TASKS = 2
"""How many tasks make ``_FIRST_TASK_ROWS`` rows."""
DEFAULT_TASKS_PER_CPU = 4
"""Most read tasks per CPU of the cluster. Ray asks for at least 200 to keep blocks
small, but a task here yields one block per chunk whatever its length, and each task
costs the driver a ``ray.put`` before the first one runs (~2 ms: 0.4 s for 200)."""


class BarecatDatasource(Datasource):
    """An archive's files as a Ray Data source (see the module doc).

    The plan is made here, once, on the driver: the archive is opened (on object storage
    its index copied once into ``cache_dir``), the chosen files listed in storage order,
    and the archive closed again. Read tasks carry their files' addresses and a reader of
    the shards.

    Args:
        path_or_url: the archive (a local path, or ``s3://...`` and other fsspec URLs).
        target_bytes: the most bytes one read task reads.
        chunk_bytes: the most bytes one block holds (and one read fetches); the first
            blocks hold less (1 MiB, then twice as much each), so the first comes soon.
        tasks_per_cpu: the most read tasks per CPU of the cluster, however many Ray
            asks for (None: about as many as Ray asks for).
        **keywords: which files and the archive's key and options (``pattern``,
            ``where``, ``params``, ``columns``, ``group_by_stem``, ``passphrase``,
            ``storage_options``, ``cache_dir``: see
            :class:`~barecat.integrations.keywords.ReaderKeywords`).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: an encrypted archive without its passphrase; a file without an
            extension with ``group_by_stem``; an unknown column.
        WrongPassphraseBarecatError: a wrong passphrase.
        sqlite3.Error: ``where`` is not a valid condition.
    """

    @shows_keywords(ReaderKeywords)
    def __init__(
        self,
        path_or_url: str | os.PathLike[str],
        *,
        target_bytes: int = DEFAULT_TARGET_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        tasks_per_cpu: int | None = DEFAULT_TASKS_PER_CPU,
        **keywords: Unpack[ReaderKeywords],
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        location, selection = reader_values(path_or_url, keywords, "BarecatDatasource")
        self._planned(location, selection, target_bytes, chunk_bytes, tasks_per_cpu)

    @classmethod
    def of(
        cls,
        location: ArchiveLocation,
        selection: FileSelection,
        *,
        target_bytes: int = DEFAULT_TARGET_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        tasks_per_cpu: int | None = DEFAULT_TASKS_PER_CPU,
    ) -> BarecatDatasource:
        """The source of the files ``selection`` chooses in the archive at ``location``
        (the arguments otherwise as the constructor's).

        Raises:
            FileNotFoundBarecatError: no archive there.
            BarecatError: see the class.
        """
        source = cls.__new__(cls)
        super(BarecatDatasource, source).__init__()  # type: ignore[no-untyped-call]
        source._planned(location, selection, target_bytes, chunk_bytes, tasks_per_cpu)
        return source

    def _planned(
        self,
        location: ArchiveLocation,
        selection: FileSelection,
        target_bytes: int,
        chunk_bytes: int,
        tasks_per_cpu: int | None,
    ) -> None:
        """Plan the reading once, here (on the driver)."""
        if target_bytes < 1 or chunk_bytes < 1:
            raise ValueError("target_bytes and chunk_bytes are numbers of bytes, at least 1")
        self.location = location.path
        self.group_by_stem = selection.group_by_stem
        self.target_bytes = target_bytes
        self.tasks_per_cpu = tasks_per_cpu
        self._chunk_bytes = min(chunk_bytes, target_bytes)
        self._plan = plan_archive(location, selection, chunk_bytes=self._chunk_bytes)
        self._reader = self._plan.reader
        self._projection_map: dict[str, str] | None = None
        if selection.columns is not None:
            self._projection_map = {c: c for c in self._plan.checked_columns(selection.columns)}

    # -- what Ray asks before reading ---------------------------------------------------

    def get_name(self) -> str:
        return "Barecat"

    def supports_projection_pushdown(self) -> bool:
        return True

    def selected_columns(self) -> list[str]:
        """The columns rows will have, in order (after ``columns`` and any projection)."""
        return self._plan.checked_columns(self._get_data_columns())

    @property
    def num_files(self) -> int:
        """How many files the plan reads."""
        return self._plan.num_files

    def schema(self) -> pa.Schema:
        """The Arrow schema of the blocks (after projection)."""
        return self._plan.schema(self.selected_columns())

    def estimate_inmemory_data_size(self) -> int:
        """The planned rows' size in memory, from the index (contents and paths)."""
        columns = self.selected_columns()
        return sum(self._plan.chunk_size(c, columns) for c in self._plan.chunks)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any = None,
    ) -> list[ReadTask]:
        """Read tasks of contiguous runs of chunks: up to ``target_bytes`` each, and about
        ``parallelism`` of them (at most ``tasks_per_cpu`` per CPU of the cluster) when
        the archive is small (not below 4 MiB each)."""
        columns = self.selected_columns()
        schema = self.schema()
        total = sum(c.stored_bytes for c in self._plan.chunks)
        wanted = max(1, parallelism)
        cpus = _cluster_cpus() if self.tasks_per_cpu is not None else 0
        if cpus and self.tasks_per_cpu is not None:
            wanted = min(wanted, max(1, self.tasks_per_cpu * cpus))
        per_task = -(-total // wanted)
        run_bytes = max(min(per_task, self.target_bytes), min(_MIN_TASK_BYTES, self.target_bytes))
        return [
            self._task(run, columns, schema, per_task_row_limit)
            for run in self._plan.runs(run_bytes, self._first_task_bytes(), _FIRST_TASKS)
        ]

    def _task(
        self,
        run: list[Chunk],
        columns: list[str],
        schema: pa.Schema,
        per_task_row_limit: int | None,
    ) -> ReadTask:
        metadata = BlockMetadata(
            num_rows=sum(c.rows for c in run),
            size_bytes=int(sum(self._plan.chunk_size(c, columns) for c in run)),
            input_files=None,
            exec_stats=None,
        )
        plans = [c.plan for c in run]  # not self: a task pickles its own run, no more
        read = functools.partial(
            _read_chunks, self._reader, plans, columns, self.group_by_stem, self._plan.extensions
        )
        return ReadTask(read, metadata, schema=schema, per_task_row_limit=per_task_row_limit)

    def _first_task_bytes(self) -> int:
        """The first tasks' stored bytes: whole chunks, as few as make ``_FIRST_TASK_ROWS``
        rows (at least one chunk)."""
        rows = held = 0
        for chunk in self._plan.chunks:
            held += chunk.stored_bytes
            rows += chunk.rows
            if rows >= _FIRST_TASK_ROWS:
                break
        return max(1, held)


def _cluster_cpus() -> int:
    """The CPUs of the Ray cluster (0 when unknown)."""
    if not ray.is_initialized():
        return 0
    return int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]


def _read_chunks(
    reader: PlannedReader,
    plans: list[pa.Table],
    columns: list[str],
    group_by_stem: bool,
    extensions: list[str],
) -> Iterator[Block]:
    """A read task's work: one block per chunk."""
    for plan in plans:
        yield read_chunk(reader, plan, columns, group_by_stem, extensions)


@shows_keywords(ReaderKeywords)
def read_barecat(
    path_or_url: str | os.PathLike[str],
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    override_num_blocks: int | None = None,
    concurrency: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    **keywords: Unpack[ReaderKeywords],
) -> ray.data.Dataset:
    """An archive's files as a Ray ``Dataset`` (see :class:`BarecatDatasource`).

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        target_bytes: the most bytes one read task reads.
        chunk_bytes: the most bytes one block holds.
        override_num_blocks: as for ``ray.data.read_datasource`` (the number of tasks
            asked for; runs are still cut at ``target_bytes``). Without it, at most
            ``DEFAULT_TASKS_PER_CPU`` (4) tasks per CPU of the cluster, and Ray is told
            that number, so it leaves each task's output whole (up to its largest
            block) instead of splitting it to make up the blocks it would ask for.
        concurrency: the most read tasks running at once.
        ray_remote_args: more options of the read tasks (``num_cpus``, ...).
        **keywords: which files and the archive's key and options (as for
            :class:`BarecatDatasource`).

    Returns:
        The dataset (lazy: the plan is made now, the bytes read when it runs).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: see :class:`BarecatDatasource`.
    """
    location, selection = reader_values(path_or_url, keywords, "read_barecat")
    source = BarecatDatasource.of(
        location,
        selection,
        target_bytes=target_bytes,
        chunk_bytes=chunk_bytes,
        tasks_per_cpu=DEFAULT_TASKS_PER_CPU if override_num_blocks is None else None,
    )
    if override_num_blocks is None:
        # Ray counts each task as one block and, with fewer blocks than the 200 it wants,
        # splits every task's output into that many more pieces (SplitBlocks(8) for 26
        # tasks): a first batch of 1,024 rows then gathers ~17 blocks of 2 MiB. Asking for
        # the tasks planned here keeps each task's output whole (Ray still cuts it at
        # 128 MiB, its largest block).
        asked = ray.data.DataContext.get_current().read_op_min_num_blocks
        override_num_blocks = len(source.get_read_tasks(asked))
    dataset: ray.data.Dataset = ray.data.read_datasource(
        source,
        override_num_blocks=override_num_blocks,
        concurrency=concurrency,
        ray_remote_args=ray_remote_args,
    )
    return dataset


__all__ = ["BarecatDatasource", "read_barecat", "sample_key"]
