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
block never splits a sample. Imports ray and pyarrow (the ``ray`` extra) and the archive
layer.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import pyarrow as pa
    import ray.data
    from ray.data.block import Block, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        f"barecat.integrations.ray needs Ray Data ({e}): pip install 'barecat[ray]'"
    ) from e

from barecat.archive import Barecat, Passphrase
from barecat.archive.planned_reads import PlannedFile, PlannedReader, plan_files, planned_reader
from barecat.entries import BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.samples import group_by_stem, sample_key, sample_part

ROW_COLUMNS = ("path", "bytes", "size", "mtime_ns", "crc32c")
"""The columns of a row per file, in order."""
KEY_COLUMN = "__key__"
"""The sample key's column with ``group_by_stem`` (WebDataset's name)."""
DEFAULT_TARGET_BYTES = 128 << 20
"""Largest run of bytes one read task reads."""
DEFAULT_CHUNK_BYTES = 16 << 20
"""Largest run of bytes read in one go and returned as one block."""
_MIN_TASK_BYTES = 4 << 20
"""Smallest run a task is given, however many tasks Ray asks for (a task costs ~ms)."""
_CHUNK_FILES = 8192
"""Most files in one block."""

_PLAN_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("shard", pa.int64()),
        ("offset", pa.int64()),
        ("stored", pa.int64()),
        ("crc32c", pa.int64()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
    ]
)


@dataclass(frozen=True)
class _Chunk:
    """One block's worth of planned files, as Arrow columns (compact to pickle)."""

    plan: pa.Table
    stored_bytes: int
    logical_bytes: int


class _Planner:
    """Collects planned files into chunks of at most ``chunk_bytes`` (a sample's files
    never split, with grouping)."""

    def __init__(self, chunk_bytes: int, group_by_stem: bool) -> None:
        self.chunk_bytes = chunk_bytes
        self.group_by_stem = group_by_stem
        self.chunks: list[_Chunk] = []
        self.extensions: set[str] = set()
        self._rows: list[list[Any]] = [[] for _ in _PLAN_SCHEMA]
        self._stored = 0
        self._logical = 0
        self._last_key: str | None = None

    def add(self, f: BarecatFileInfo) -> None:
        stored = f.stored_size
        if self.group_by_stem:
            key, ext = sample_part(f.path)
            self.extensions.add(ext)
            boundary = key != self._last_key
            self._last_key = key
        else:
            boundary = True
        full = self._stored + stored > self.chunk_bytes or len(self._rows[0]) >= _CHUNK_FILES
        if boundary and self._rows[0] and full:
            self.flush()
        for column, value in zip(
            self._rows,
            (f.path, f.shard, f.offset, stored, f.crc32c, f.size, f.mtime_ns),
            strict=True,
        ):
            column.append(value)
        self._stored += stored
        self._logical += f.size or 0

    def flush(self) -> None:
        if not self._rows[0]:
            return
        arrays = [pa.array(c, type=t.type) for c, t in zip(self._rows, _PLAN_SCHEMA, strict=True)]
        table = pa.Table.from_arrays(arrays, schema=_PLAN_SCHEMA)
        self.chunks.append(_Chunk(table, self._stored, self._logical))
        self._rows = [[] for _ in _PLAN_SCHEMA]
        self._stored = 0
        self._logical = 0


class BarecatDatasource(Datasource):
    """An archive's files as a Ray Data source (see the module doc).

    The plan is made here, once, on the driver: the archive is opened (on object storage
    its index copied once into ``cache_dir``), the chosen files listed in storage order,
    and the archive closed again. Read tasks carry their files' addresses and a reader of
    the shards.

    Args:
        path_or_url: the archive (a local path, or ``s3://...`` and other fsspec URLs).
        pattern: a glob over paths (``**`` recursive, hidden names included); None: all.
        where: an SQL condition on the index's ``files`` columns (``size``, ``mtime_ns``,
            ``mode``, ``path``, ...; in a sealed archive ``size`` is the sealed length and
            ``logical_size`` the file's own), ``?`` placeholders filled from ``params``.
        params: values for ``where``'s placeholders.
        columns: the columns to produce (default: all).
        group_by_stem: one row per sample (``__key__`` and a column per extension).
        passphrase: an encrypted archive's passphrase.
        storage_options: fsspec options for a URL (credentials, endpoint).
        cache_dir: where the driver keeps a remote archive's index copy.
        target_bytes: the most bytes one read task reads.
        chunk_bytes: the most bytes one block holds (and one read fetches).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: an encrypted archive without its passphrase; a file without an
            extension with ``group_by_stem``; an unknown column.
        WrongPassphraseBarecatError: a wrong passphrase.
        sqlite3.Error: ``where`` is not a valid condition.
    """

    def __init__(
        self,
        path_or_url: str | os.PathLike[str],
        *,
        pattern: str | None = None,
        where: str | None = None,
        params: Sequence[object] = (),
        columns: Sequence[str] | None = None,
        group_by_stem: bool = False,
        passphrase: Passphrase | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        target_bytes: int = DEFAULT_TARGET_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if target_bytes < 1 or chunk_bytes < 1:
            raise ValueError("target_bytes and chunk_bytes are numbers of bytes, at least 1")
        self.location = os.fspath(path_or_url)
        self.group_by_stem = group_by_stem
        self.target_bytes = target_bytes
        planner = _Planner(min(chunk_bytes, target_bytes), group_by_stem)
        with Barecat(
            self.location,
            passphrase=passphrase,
            storage_options=storage_options,
            cache_dir=cache_dir,
            lookup_table=False,
        ) as bc:
            self._reader = planned_reader(bc)
            for f in plan_files(bc, pattern, where, params, by_path=group_by_stem):
                planner.add(f)
        planner.flush()
        self._chunks = planner.chunks
        self._extensions = sorted(planner.extensions)
        self._all_columns = [KEY_COLUMN, *self._extensions] if group_by_stem else list(ROW_COLUMNS)
        self._projection_map: dict[str, str] | None = None
        if columns is not None:
            unknown = [c for c in columns if c not in self._all_columns]
            if unknown:
                known = ", ".join(self._all_columns)
                raise BarecatError(f"Unknown column {unknown[0]!r}; this source has: {known}")
            self._projection_map = {c: c for c in columns}

    # -- what Ray asks before reading ---------------------------------------------------

    def get_name(self) -> str:
        return "Barecat"

    def supports_projection_pushdown(self) -> bool:
        return True

    def selected_columns(self) -> list[str]:
        """The columns rows will have, in order (after ``columns`` and any projection)."""
        chosen = self._get_data_columns()
        if chosen is None:
            return list(self._all_columns)
        return [c for c in self._all_columns if c in chosen]

    @property
    def num_files(self) -> int:
        """How many files the plan reads."""
        return sum(c.plan.num_rows for c in self._chunks)

    def schema(self) -> pa.Schema:
        """The Arrow schema of the blocks (after projection)."""
        types = {"path": pa.string(), "bytes": pa.binary(), KEY_COLUMN: pa.string()}
        return pa.schema(
            [(c, types.get(c, pa.binary() if self.group_by_stem else pa.int64()))
             for c in self.selected_columns()]
        )  # fmt: skip

    def _chunk_size(self, chunk: _Chunk, columns: list[str]) -> int:
        """Bytes a chunk takes in memory: contents if read, paths, 8 per number."""
        contents = chunk.logical_bytes if _reads_bytes(columns, self.group_by_stem) else 0
        numbers: int = 8 * chunk.plan.num_rows * len(columns)
        return contents + int(chunk.plan.column("path").nbytes) + numbers

    def estimate_inmemory_data_size(self) -> int:
        """The planned rows' size in memory, from the index (contents and paths)."""
        columns = self.selected_columns()
        return sum(self._chunk_size(c, columns) for c in self._chunks)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any = None,
    ) -> list[ReadTask]:
        """Read tasks of contiguous runs of chunks: up to ``target_bytes`` each, and about
        ``parallelism`` of them when the archive is small (not below 4 MiB each)."""
        columns = self.selected_columns()
        schema = self.schema()
        total = sum(c.stored_bytes for c in self._chunks)
        per_task = -(-total // max(1, parallelism))
        run_bytes = max(min(per_task, self.target_bytes), min(_MIN_TASK_BYTES, self.target_bytes))
        tasks = []
        run: list[_Chunk] = []
        run_stored = 0
        for chunk in self._chunks:
            if run and run_stored + chunk.stored_bytes > run_bytes:
                tasks.append(self._task(run, columns, schema, per_task_row_limit))
                run, run_stored = [], 0
            run.append(chunk)
            run_stored += chunk.stored_bytes
        if run:
            tasks.append(self._task(run, columns, schema, per_task_row_limit))
        return tasks

    def _task(
        self,
        run: list[_Chunk],
        columns: list[str],
        schema: pa.Schema,
        per_task_row_limit: int | None,
    ) -> ReadTask:
        if self.group_by_stem:
            rows = sum(len(group_by_stem(c.plan.column("path").to_pylist())) for c in run)
        else:
            rows = sum(c.plan.num_rows for c in run)
        metadata = BlockMetadata(
            num_rows=rows,
            size_bytes=int(sum(self._chunk_size(c, columns) for c in run)),
            input_files=None,
            exec_stats=None,
        )
        plans = [c.plan for c in run]  # not self: a task pickles its own run, no more
        read = functools.partial(
            _read_chunks, self._reader, plans, columns, self.group_by_stem, self._extensions
        )
        return ReadTask(read, metadata, schema=schema, per_task_row_limit=per_task_row_limit)


def _reads_bytes(columns: list[str], group_by_stem: bool) -> bool:
    if group_by_stem:
        return any(c != KEY_COLUMN for c in columns)
    return "bytes" in columns


def _read_chunks(
    reader: PlannedReader,
    plans: list[pa.Table],
    columns: list[str],
    group_by_stem: bool,
    extensions: list[str],
) -> Iterator[Block]:
    """A read task's work: one block per chunk."""
    for plan in plans:
        if group_by_stem:
            yield _samples(reader, plan, columns, extensions)
        else:
            yield _rows(reader, plan, columns)


def _planned(plan: pa.Table, keep: Sequence[bool] | None = None) -> list[PlannedFile]:
    cols = [plan.column(n).to_pylist() for n in ("path", "shard", "offset", "stored", "crc32c")]
    files = list(zip(*cols, strict=True))
    if keep is None:
        return files
    return [f for f, k in zip(files, keep, strict=True) if k]


def _rows(reader: PlannedReader, plan: pa.Table, columns: list[str]) -> pa.Table:
    arrays: list[pa.Array] = []
    for name in columns:
        if name == "bytes":
            arrays.append(pa.array(reader.read(_planned(plan)), type=pa.binary()))
        else:
            arrays.append(plan.column(name).combine_chunks())
    return pa.Table.from_arrays(arrays, names=columns)


def _samples(
    reader: PlannedReader, plan: pa.Table, columns: list[str], extensions: list[str]
) -> pa.Table:
    """One row per sample key of the chunk, in the order keys first appear."""
    paths = plan.column("path").to_pylist()
    samples = group_by_stem(paths)
    wanted = {c for c in columns if c != KEY_COLUMN}
    keep = [sample_key(p)[1] in wanted for p in paths]
    contents: list[bytes | None] = [None] * len(paths)
    if any(keep):
        read = iter(reader.read(_planned(plan, keep)))
        contents = [next(read) if k else None for k in keep]
    arrays: list[pa.Array] = []
    for name in columns:
        if name == KEY_COLUMN:
            arrays.append(pa.array(list(samples), type=pa.string()))
        else:
            cells = [contents[files[name]] if name in files else None for files in samples.values()]
            arrays.append(pa.array(cells, type=pa.binary()))
    return pa.Table.from_arrays(arrays, names=columns)


def read_barecat(
    path_or_url: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    where: str | None = None,
    params: Sequence[object] = (),
    columns: Sequence[str] | None = None,
    group_by_stem: bool = False,
    passphrase: Passphrase | None = None,
    storage_options: dict[str, Any] | None = None,
    cache_dir: str | None = None,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    override_num_blocks: int | None = None,
    concurrency: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
) -> ray.data.Dataset:
    """An archive's files as a Ray ``Dataset`` (see :class:`BarecatDatasource`).

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        pattern: a glob over paths (``**`` recursive, hidden names included).
        where: an SQL condition on the index's columns, with ``?`` placeholders.
        params: values for ``where``'s placeholders.
        columns: the columns to produce (default: all).
        group_by_stem: one row per sample: ``__key__`` and a column per extension.
        passphrase: an encrypted archive's passphrase.
        storage_options: fsspec options for a URL.
        cache_dir: where the driver keeps a remote archive's index copy.
        target_bytes: the most bytes one read task reads.
        chunk_bytes: the most bytes one block holds.
        override_num_blocks: as for ``ray.data.read_datasource`` (the number of tasks
            asked for; runs are still cut at ``target_bytes``).
        concurrency: the most read tasks running at once.
        ray_remote_args: more options of the read tasks (``num_cpus``, ...).

    Returns:
        The dataset (lazy: the plan is made now, the bytes read when it runs).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: see :class:`BarecatDatasource`.
    """
    source = BarecatDatasource(
        path_or_url,
        pattern=pattern,
        where=where,
        params=params,
        columns=columns,
        group_by_stem=group_by_stem,
        passphrase=passphrase,
        storage_options=storage_options,
        cache_dir=cache_dir,
        target_bytes=target_bytes,
        chunk_bytes=chunk_bytes,
    )
    dataset: ray.data.Dataset = ray.data.read_datasource(
        source,
        override_num_blocks=override_num_blocks,
        concurrency=concurrency,
        ray_remote_args=ray_remote_args,
    )
    return dataset


__all__ = ["BarecatDatasource", "read_barecat", "sample_key"]
