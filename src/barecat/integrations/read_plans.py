"""An archive's chosen files planned into Arrow chunks on a driver, and read back into
Arrow tables by workers: the engine-independent part of the Ray, Dask and Hugging Face
readers.

:func:`plan_archive` opens the archive once, lists the chosen files (a glob ``pattern``
and an SQL ``where`` on the index's columns, both run by SQLite: the index's plan,
``Barecat.plan_files``, typed rows) in storage order (shard, offset), or in path order
for samples, and cuts them into :class:`Chunk` s of at most ``chunk_bytes``
(one block or piece of a partition each, read in one go), keeping each file's address as
Arrow columns; :meth:`ArchivePlan.runs` cuts the chunks into contiguous runs (one read
task, one partition), :meth:`ArchivePlan.shares` deals them into a given number of
contiguous shares (Hugging Face's shards). :func:`read_chunk` is a worker's part: a
chunk's rows as an Arrow table, its files' bytes read from the shards alone by the plan's
:class:`~barecat.archive.planned_reads.PlannedReader` (no index opened or downloaded;
CRC32C-checked; in a sealed archive authenticated and decompressed bound to each path).
Its ``bytes`` column (:func:`binary_column`, also the source of the samples' columns) is
made over the read itself in a plain archive: one Arrow buffer per chunk, no ``bytes``
object per file.

Rows are ``path``, ``bytes``, ``size``, ``mtime_ns``, ``crc32c`` (the index's: of the
stored bytes); with ``group_by_stem`` one row per sample: ``__key__`` (the path up to
the first dot of the file name) and one binary column per extension found in the index.
A chunk never splits a sample. Imports pyarrow and the archive layer.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from barecat.archive.planned_reads import PlannedFile, PlannedReader, PlannedRow
from barecat.exceptions import BarecatError
from barecat.integrations.selection import ArchiveLocation, FileSelection
from barecat.samples import sample_key, sample_part

ROW_COLUMNS = ("path", "bytes", "size", "mtime_ns", "crc32c")
"""The columns of a row per file, in order."""
KEY_COLUMN = "__key__"
"""The sample key's column with ``group_by_stem`` (WebDataset's name)."""
DEFAULT_TARGET_BYTES = 128 << 20
"""Largest run of bytes one read task (one partition) reads."""
DEFAULT_CHUNK_BYTES = 16 << 20
"""Largest run of bytes read in one go (one chunk)."""
MAX_CHUNK_FILES = 8192
"""Most files in one chunk."""


_PLAN_TYPE = pa.struct(
    [(n, pa.string() if n == "path" else pa.int64()) for n in PlannedRow._fields]
)
"""A chunk's plan as Arrow: a column per field of the index's planned rows."""


@dataclass(frozen=True)
class Chunk:
    """Planned files read in one go, as Arrow columns (compact to pickle).

    Attributes:
        plan: path, shard, offset, stored (size), crc32c, size, mtime_ns of each file.
        stored_bytes: what the shards hold of these files.
        logical_bytes: the files' own sizes.
        rows: the rows it makes (files, or samples with ``group_by_stem``).
    """

    plan: pa.Table
    stored_bytes: int
    logical_bytes: int
    rows: int


def _cut(
    rows: list[PlannedRow], chunk_bytes: int, group_by_stem: bool
) -> tuple[list[Chunk], list[str]]:
    """Planned files cut into chunks of at most ``chunk_bytes`` stored bytes and
    ``MAX_CHUNK_FILES`` files (a sample's files never split, with grouping); and the
    extensions found, with grouping.

    One loop over the sizes; each chunk's table is made from its rows in one go.

    Raises:
        BarecatError: a file without an extension, with ``group_by_stem``.
    """
    keys: list[str] = []
    extensions: set[str] = set()
    if group_by_stem:
        for row in rows:
            key, ext = sample_part(row.path)
            keys.append(key)
            extensions.add(ext)
    bounds = [0]
    stored_bytes = []
    held = 0
    for i, row in enumerate(rows):
        stored = row.stored
        if (
            (held + stored > chunk_bytes or i - bounds[-1] >= MAX_CHUNK_FILES)
            and i > bounds[-1]
            and (not group_by_stem or keys[i] != keys[i - 1])
        ):
            bounds.append(i)
            stored_bytes.append(held)
            held = 0
        held += stored
    if rows:
        bounds.append(len(rows))
        stored_bytes.append(held)
    chunks = []
    for (start, end), stored in zip(itertools.pairwise(bounds), stored_bytes, strict=True):
        part = rows[start:end]
        table = pa.Table.from_struct_array(pa.array(part, type=_PLAN_TYPE))
        if part[0].size is None:  # a plain archive's: the size is the stored size
            table = table.set_column(5, "size", table.column("stored"))
            logical = stored
        else:
            logical = pc.sum(table.column("size")).as_py() or 0
        made = len(set(keys[start:end])) if group_by_stem else end - start
        chunks.append(Chunk(table, stored, logical, made))
    return chunks, sorted(extensions)


@dataclass(frozen=True)
class ArchivePlan:
    """What :func:`plan_archive` planned: the chunks in reading order and how to read them.

    Attributes:
        reader: reads the planned files from the shards (holds a sealed archive's key).
        chunks: the chosen files, cut into chunks, in storage order (path order for
            samples).
        group_by_stem: rows are samples.
        extensions: with ``group_by_stem``, every extension found (one column each).
    """

    reader: PlannedReader
    chunks: list[Chunk]
    group_by_stem: bool
    extensions: list[str]

    @property
    def all_columns(self) -> list[str]:
        """Every column a row can have, in order."""
        return [KEY_COLUMN, *self.extensions] if self.group_by_stem else list(ROW_COLUMNS)

    @property
    def num_files(self) -> int:
        """How many files the plan reads."""
        return sum(c.plan.num_rows for c in self.chunks)

    def checked_columns(self, columns: Sequence[str] | None) -> list[str]:
        """``columns`` in the rows' order (all of them for None).

        Raises:
            BarecatError: a column the rows do not have.
        """
        if columns is None:
            return self.all_columns
        unknown = [c for c in columns if c not in self.all_columns]
        if unknown:
            known = ", ".join(self.all_columns)
            raise BarecatError(f"Unknown column {unknown[0]!r}; this source has: {known}")
        return [c for c in self.all_columns if c in columns]

    def schema(self, columns: Sequence[str]) -> pa.Schema:
        """The Arrow schema of the tables :func:`read_chunk` makes with ``columns``."""
        types = {"path": pa.string(), "bytes": pa.binary(), KEY_COLUMN: pa.string()}
        other = pa.binary() if self.group_by_stem else pa.int64()
        return pa.schema([(c, types.get(c, other)) for c in columns])

    def reads_bytes(self, columns: Sequence[str]) -> bool:
        """Whether reading ``columns`` reads shards (not only the plan)."""
        if self.group_by_stem:
            return any(c != KEY_COLUMN for c in columns)
        return "bytes" in columns

    def chunk_size(self, chunk: Chunk, columns: Sequence[str]) -> int:
        """Bytes a chunk's table takes in memory: contents if read, paths, 8 per number."""
        contents = chunk.logical_bytes if self.reads_bytes(columns) else 0
        numbers: int = 8 * chunk.plan.num_rows * len(columns)
        return contents + int(chunk.plan.column("path").nbytes) + numbers

    def runs(
        self, run_bytes: int, first_bytes: int | None = None, first_runs: int = 1
    ) -> list[list[Chunk]]:
        """The chunks, in order, cut into contiguous runs of at most ``run_bytes`` stored
        bytes (a chunk larger than that is a run of its own).

        Args:
            run_bytes: the most stored bytes of a run.
            first_bytes: the first runs' most (each one after them twice the one before,
                up to ``run_bytes``): the first rows come out after a small read.
            first_runs: how many runs ``first_bytes`` bounds.

        Returns:
            The runs.
        """
        runs: list[list[Chunk]] = []
        run: list[Chunk] = []
        run_stored = 0
        limit = run_bytes if first_bytes is None else min(first_bytes, run_bytes)
        for chunk in self.chunks:
            if run and run_stored + chunk.stored_bytes > limit:
                runs.append(run)
                run, run_stored = [], 0
                if len(runs) >= first_runs:
                    limit = min(2 * limit, run_bytes)
            run.append(chunk)
            run_stored += chunk.stored_bytes
        if run:
            runs.append(run)
        return runs

    def shares(self, parts: int) -> list[list[Chunk]]:
        """The chunks, in order, dealt into exactly ``parts`` contiguous shares of about
        equal stored bytes (a chunk goes to the share its middle falls in; with fewer
        chunks than shares, some shares are empty).

        Raises:
            ValueError: ``parts`` is below 1.
        """
        if parts < 1:
            raise ValueError("parts is a number of shares, at least 1")
        total = sum(c.stored_bytes for c in self.chunks)
        shares: list[list[Chunk]] = [[] for _ in range(parts)]
        before = 0
        for i, chunk in enumerate(self.chunks):
            middle = 2 * before + chunk.stored_bytes
            at = middle * parts // (2 * total) if total else i * parts // len(self.chunks)
            shares[min(at, parts - 1)].append(chunk)
            before += chunk.stored_bytes
        return shares


def plan_archive(
    location: ArchiveLocation | str | os.PathLike[str],
    selection: FileSelection | None = None,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> ArchivePlan:
    """Plan the reading of an archive's chosen files, from its index alone.

    The archive is opened (on object storage its index copied once into the location's
    ``cache_dir``), the chosen files listed and cut into chunks, and the archive closed
    again. The selection's ``columns`` are not checked here (see
    :meth:`ArchivePlan.checked_columns`).

    Args:
        location: the archive, its key and options (a path or URL: no key, no options).
        selection: which files (``group_by_stem``: rows are samples, files planned in
            path order); None: all.
        chunk_bytes: the most stored bytes one chunk holds.

    Returns:
        The plan.

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: an encrypted archive without its passphrase; a file without an
            extension with ``group_by_stem``.
        WrongPassphraseBarecatError: a wrong passphrase.
        sqlite3.Error: ``where`` is not a valid condition.
    """
    selection = selection or FileSelection()
    grouped = selection.group_by_stem
    with ArchiveLocation.of(location).open(lookup_table=False) as bc:
        reader = bc.planned_reader()
        rows = bc.plan_files(selection, by_path=grouped)
    chunks, extensions = _cut(rows, chunk_bytes, grouped)
    return ArchivePlan(reader, chunks, grouped, extensions)


def read_chunk(
    reader: PlannedReader,
    plan: pa.Table,
    columns: Sequence[str],
    group_by_stem: bool,
    extensions: Sequence[str],
) -> pa.Table:
    """A chunk's rows (a worker's part): shards are read only for byte columns.

    Args:
        reader: the plan's reader.
        plan: the chunk's ``plan`` table.
        columns: the columns to make, in order.
        group_by_stem: rows are samples.
        extensions: with ``group_by_stem``, every extension of the plan.

    Returns:
        The rows.

    Raises:
        BarecatIntegrityError: bytes do not match their CRC32C or their seal; the
            message names the file.
    """
    if group_by_stem:
        return _samples(reader, plan, columns, extensions)
    arrays: list[pa.Array] = []
    for name in columns:
        if name == "bytes":
            arrays.append(binary_column(reader, plan))
        else:
            arrays.append(plan.column(name).combine_chunks())
    return pa.Table.from_arrays(arrays, names=list(columns))


_MAX_OFFSET = (1 << 31) - 1
"""The most bytes of an Arrow ``binary`` array (its offsets are 32-bit)."""


def binary_column(reader: PlannedReader, plan: pa.Table) -> pa.Array:
    """The contents of a chunk's files as an Arrow ``binary`` array, in the plan's order.

    In a plain archive the array is made over the read itself: the files' bytes are
    read back to back into one Arrow buffer, each CRC32C-checked where it lies
    (:meth:`~barecat.archive.planned_reads.PlannedReader.read_packed`), and the offsets
    are the running sum of the plan's sizes; no ``bytes`` object per file, no copy. A
    sealed archive's files are authenticated and decompressed one by one.

    Args:
        reader: the plan's reader.
        plan: a chunk's ``plan`` table (or some of its rows).

    Returns:
        One value per planned file.

    Raises:
        BarecatIntegrityError: bytes do not match their CRC32C or their seal, or are
            missing; the message names the file.
    """
    files = _planned(plan)
    stored = plan.column("stored")
    total = pc.sum(stored).as_py() or 0
    if reader.sealed or total > _MAX_OFFSET:
        return pa.array(reader.read(files), type=pa.binary())
    data = reader.read_packed(files, _arrow_buffer)
    ends = pc.cumulative_sum(stored.combine_chunks()).cast(pa.int32())
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), ends])
    return pa.Array.from_buffers(
        pa.binary(), len(files), [None, offsets.buffers()[1], pa.py_buffer(data)]
    )


def _arrow_buffer(size: int) -> memoryview:
    """A writable view of a new buffer of Arrow's memory pool (reused, not zeroed)."""
    return memoryview(pa.allocate_buffer(size))


def _planned(plan: pa.Table) -> list[PlannedFile]:
    cols = [plan.column(n).to_pylist() for n in ("path", "shard", "offset", "stored", "crc32c")]
    return list(zip(*cols, strict=True))


def _samples(
    reader: PlannedReader, plan: pa.Table, columns: Sequence[str], extensions: Sequence[str]
) -> pa.Table:
    """One row per sample key of the chunk, in the order keys first appear: the wanted
    files' contents read as one column, then taken into a column per extension (null
    where a sample lacks one)."""
    split = [sample_key(p) for p in plan.column("path").to_pylist()]
    wanted = {c for c in columns if c != KEY_COLUMN}
    keep = [ext in wanted for _, ext in split]
    order: dict[str, int] = {}
    for key, _ in split:
        order.setdefault(key, len(order))
    contents = binary_column(reader, plan.filter(pa.array(keep, pa.bool_())))
    places: dict[str, list[int | None]] = {e: [None] * len(order) for e in extensions}
    for at, (key, ext) in enumerate(s for s, k in zip(split, keep, strict=True) if k):
        places[ext][order[key]] = at
    arrays: list[pa.Array] = []
    for name in columns:
        if name == KEY_COLUMN:
            arrays.append(pa.array(list(order), type=pa.string()))
        else:
            arrays.append(contents.take(pa.array(places[name], type=pa.int64())))
    return pa.Table.from_arrays(arrays, names=list(columns))


__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_TARGET_BYTES",
    "KEY_COLUMN",
    "MAX_CHUNK_FILES",
    "ROW_COLUMNS",
    "ArchivePlan",
    "Chunk",
    "binary_column",
    "plan_archive",
    "read_chunk",
    "sample_key",
]
