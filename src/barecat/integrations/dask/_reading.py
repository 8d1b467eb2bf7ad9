"""Reading an archive into a Dask DataFrame: :func:`read_barecat`.

The client plans once, from the index alone (``read_plans.py``, as the Ray reader does):
the chosen files (a glob ``pattern`` and an SQL ``where`` on the index's columns, both
run by SQLite) in storage order (shard, offset), cut into chunks of at most
``chunk_bytes`` and the chunks into partitions of contiguous runs of at most
``partition_bytes`` (``dd.from_map`` over those index ranges), the first of at most 4 MiB
and each next one twice the one before, so that the first rows come soon. Each
partition's task carries the addresses of its files (path, shard, offset, size, CRC32C)
as Arrow arrays and reads them from the shards alone, one sequential read per chunk on a
local disk, one coalesced ranged request per chunk on object storage: no worker opens or
downloads the index. In a plain archive the ``bytes`` column is made over the read itself (one Arrow
buffer per chunk, each file's CRC32C checked where it lies: ``read_plans.binary_column``);
in a sealed archive each file is authenticated and decompressed bound to its path (the
data key travels inside the task graph, never the passphrase).

Columns are ``path`` (``string[pyarrow]``), ``bytes`` (``binary[pyarrow]``), ``size``,
``mtime_ns``, ``crc32c`` (``int64[pyarrow]``; the CRC32C is the index's, of the stored
bytes); ``columns=``, or any column selection Dask's optimizer pushes into the read
(``df[["path", "size"]]``), keeps some, and without ``bytes`` no shard is read.
``group_by_stem=True`` makes one row per sample: ``__key__`` and one ``binary[pyarrow]``
column per extension. The index is a row number in reading order, and the divisions are
known from the plan. Imports dask.dataframe, pandas and
pyarrow (the ``dask`` extra) and ``read_plans``.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing(
    "barecat.integrations.dask needs Dask DataFrame", "dask"
):
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa

from barecat.archive.planned_reads import PlannedReader
from barecat.integrations.keywords import ReaderKeywords, reader_values, shows_keywords
from barecat.integrations.read_plans import (
    DEFAULT_CHUNK_BYTES,
    MAX_CHUNK_FILES,
    ArchivePlan,
    Chunk,
    plan_archive,
    read_chunk,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_PARTITION_BYTES = 64 << 20
"""Largest run of stored bytes one partition reads (Dask's own readers aim at about
100 MB in memory; smaller runs spread a small archive over more workers, at a cost of
more tasks)."""
FIRST_PARTITION_BYTES = 4 << 20
"""The first partition's most stored bytes (each next one's twice the one before, up to
``partition_bytes``): the first rows come out after a small read."""


@dataclass(frozen=True)
class _Partition:
    """One partition's share of the plan: a contiguous run of chunks, their plans as one
    table of one piece per column (a table pickles as its pieces: a few objects, not a
    few per chunk) cut at ``bounds`` (chunk ``i`` is rows ``bounds[i]:bounds[i + 1]``),
    and the row number of its first row."""

    plan: pa.Table | None
    bounds: tuple[int, ...]
    start: int
    rows: int
    token: str

    @classmethod
    def of(cls, run: list[Chunk], start: int, token: str, chunk_bytes: int) -> _Partition:
        """The partition reading ``run`` (planned in small chunks, so that the first
        partition can be small), its first row numbered ``start``, its neighbouring
        chunks read together up to ``chunk_bytes`` (and ``MAX_CHUNK_FILES`` files)."""
        plan = pa.concat_tables([c.plan for c in run]).combine_chunks() if run else None
        bounds = [0]
        held = files = 0
        for chunk in run:
            if files and (
                held + chunk.stored_bytes > chunk_bytes
                or files + chunk.plan.num_rows > MAX_CHUNK_FILES
            ):
                bounds.append(bounds[-1] + files)
                held = files = 0
            held += chunk.stored_bytes
            files += chunk.plan.num_rows
        if files:
            bounds.append(bounds[-1] + files)
        return cls(plan, tuple(bounds), start, sum(c.rows for c in run), token)

    @property
    def plans(self) -> list[pa.Table]:
        """Each chunk's plan, in order."""
        if self.plan is None:
            return []
        return [self.plan.slice(a, b - a) for a, b in itertools.pairwise(self.bounds)]

    def __dask_tokenize__(self) -> tuple[str, int]:
        return self.token, self.start


class _PartitionReader:
    """Makes a partition's DataFrame (a task's work); its ``columns`` keyword is what
    lets Dask push a column selection into the read."""

    def __init__(self, plan: ArchivePlan) -> None:
        self.reader: PlannedReader = plan.reader
        self.group_by_stem = plan.group_by_stem
        self.extensions = plan.extensions
        self.all_columns = plan.all_columns
        self.schema = plan.schema(plan.all_columns)

    def __call__(self, part: _Partition, columns: Sequence[str] | None = None) -> pd.DataFrame:
        chosen = self.all_columns if columns is None else list(columns)
        index = pd.RangeIndex(part.start, part.start + part.rows)
        if not chosen:
            return pd.DataFrame(index=index)
        tables = [
            read_chunk(self.reader, plan, chosen, self.group_by_stem, self.extensions)
            for plan in part.plans
        ]
        schema = pa.schema([self.schema.field(c) for c in chosen])
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        frame = _to_pandas(table)
        frame.index = index
        return frame

    def __dask_tokenize__(self) -> tuple[str, ...]:
        return (type(self).__name__, self.reader.location, *self.all_columns)


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """Binary and integer columns Arrow-backed (binary would be object, which Dask takes
    for strings); strings as pandas makes them."""
    types = {
        pa.binary(): pd.ArrowDtype(pa.binary()),
        pa.int64(): pd.ArrowDtype(pa.int64()),
        pa.string(): pd.StringDtype("pyarrow"),
    }
    frame: pd.DataFrame = table.to_pandas(types_mapper=types.get)
    return frame


@shows_keywords(ReaderKeywords)
def read_barecat(
    path_or_url: str | os.PathLike[str],
    *,
    partition_bytes: int = DEFAULT_PARTITION_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    **keywords: Unpack[ReaderKeywords],
) -> dd.DataFrame:
    """An archive's files as a Dask DataFrame, a partition per contiguous run of them in
    storage order (see the module doc).

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        partition_bytes: the most stored bytes one partition reads (the first
            partitions read less: 4 MiB, then twice as much each).
        chunk_bytes: the most bytes read in one go (one Arrow buffer).
        **keywords: which files and the archive's key and options, used here on the
            client (``pattern``, ``where``, ``params``, ``columns``,
            ``group_by_stem``, ``passphrase``, ``storage_options``, ``cache_dir``: see
            :class:`~barecat.integrations.keywords.ReaderKeywords`).

    Returns:
        The DataFrame (lazy: the plan is made now, the bytes read when it is computed).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: an encrypted archive without its passphrase; an unknown column; a
            file without an extension with ``group_by_stem``.
        WrongPassphraseBarecatError: a wrong passphrase.
        sqlite3.Error: ``where`` is not a valid condition.
        ValueError: ``partition_bytes`` or ``chunk_bytes`` below 1.
    """
    if partition_bytes < 1 or chunk_bytes < 1:
        raise ValueError("partition_bytes and chunk_bytes are numbers of bytes, at least 1")
    location, selection = reader_values(path_or_url, keywords, "read_barecat")
    plan = plan_archive(
        location,
        selection,
        chunk_bytes=min(chunk_bytes, partition_bytes, FIRST_PARTITION_BYTES),
    )
    plan.checked_columns(selection.columns)
    token = uuid.uuid4().hex
    parts: list[_Partition] = []
    start = 0
    for run in plan.runs(partition_bytes, first_bytes=FIRST_PARTITION_BYTES):
        parts.append(_Partition.of(run, start, token, chunk_bytes))
        start += parts[-1].rows
    divisions: tuple[int, ...] | None = (*(p.start for p in parts), start - 1)
    if not parts:  # nothing chosen: one empty partition
        parts, divisions = [_Partition.of([], 0, token, chunk_bytes)], None
    read = _PartitionReader(plan)
    meta = _to_pandas(read.schema.empty_table())
    meta.index = pd.RangeIndex(0, 0)
    frame: dd.DataFrame = dd.from_map(
        read,
        parts,
        meta=meta,
        divisions=divisions,
        label="read-barecat",
        enforce_metadata=False,
        columns=None if selection.columns is None else list(selection.columns),
    )
    return frame


__all__ = [
    "DEFAULT_PARTITION_BYTES",
    "FIRST_PARTITION_BYTES",
    "read_barecat",
]
