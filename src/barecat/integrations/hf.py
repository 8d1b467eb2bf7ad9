"""Hugging Face ``datasets`` and barecat archives (the ``hf`` extra): an archive's files as
an ``IterableDataset`` (:func:`iterable_dataset`) or a materialised ``Dataset``
(:func:`to_dataset`).

Planned as Ray Data's reader plans (``archive/planned_reads.py``): the archive is opened
once, here, and the chosen files (a glob ``pattern`` and an SQL ``where`` on the index's
columns, both run by SQLite) listed in storage order (shard, offset), cut into runs of
at most ``chunk_bytes`` (and a quarter of a shard's share) and the runs dealt into
``num_shards`` contiguous shards of about equal bytes. The shards are the list in
``from_generator``'s ``gen_kwargs``, so ``datasets`` hands each node of
``split_dataset_by_node``, each DataLoader worker and each process of ``num_proc`` its
own shards: each reads only its own address ranges, from the shards alone (one read
per run on a local disk, one ranged request per run on object storage), never the
index. Every file's bytes are CRC-checked, and in a sealed
archive authenticated and decompressed bound to its path; the data key travels inside
the reader, never the passphrase.

Rows are ``path``, ``bytes``, ``size``, ``mtime_ns``, ``crc32c`` (the index's: of the
stored bytes); with ``images=True`` the ``bytes`` column is ``image``, a
``datasets.Image()`` (decoded with Pillow when read). ``group_by_stem=True`` makes one
row per sample, as the Ray reader does: ``__key__`` and one column per extension (null
where a sample lacks one; with ``images=True`` image extensions are ``Image()``). Imports
``datasets`` (the ``hf`` extra) and the archive layer.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import datasets  # type: ignore[import-untyped]
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        f"barecat.integrations.hf needs Hugging Face datasets ({e}): pip install 'barecat[hf]'"
    ) from e

from barecat.archive import Barecat, Passphrase
from barecat.archive.planned_reads import (
    RUN_BYTES,
    PlannedReader,
    contiguous_groups,
    cut_runs,
    group_samples,
    plan_files,
    planned_reader,
    sample_key,
)
from barecat.exceptions import BarecatError

KEY_COLUMN = "__key__"
"""The sample key's column with ``group_by_stem`` (WebDataset's name)."""
IMAGE_EXTENSIONS = frozenset({"bmp", "gif", "jpeg", "jpg", "png", "tif", "tiff", "webp"})
"""Extensions whose columns are ``datasets.Image()`` with ``images=True`` and grouping."""
DEFAULT_NUM_SHARDS = 64
"""Shards by default (a multiple of most world sizes times DataLoader workers)..."""
DEFAULT_SHARD_BYTES = 1 << 30
"""...or more, in multiples of 64, so that a shard holds at most about 1 GiB."""

_ROWS_VERSION = 1
"""Part of every fingerprint: bumped when the rows made from the same plan change."""

PlannedRow = tuple[str, int, int, int, "int | None", "int | None", "int | None"]
"""(path, shard, offset, stored size, crc32c, size, mtime_ns) of one planned file."""
Shard = tuple[tuple[PlannedRow, ...], ...]
"""One shard: runs of planned files, each read in one go."""


@dataclass(frozen=True)
class _Layout:
    """What the rows hold (tuples only: ``datasets`` splits the lists of gen_kwargs)."""

    columns: tuple[str, ...]
    group_by_stem: bool
    image_columns: frozenset[str]


@dataclass(frozen=True)
class BarecatShards:
    """An archive's chosen files, planned into shards for ``from_generator``.

    Attributes:
        reader: reads planned files from the shards (holds an encrypted archive's data
            key, never shown by ``repr``).
        shards: the shards, each contiguous runs of files in storage order.
        features: the rows' ``datasets.Features``.
        location: the archive's path or URL.
    """

    reader: PlannedReader
    shards: list[Shard]
    features: datasets.Features
    location: str
    _layout: _Layout

    @property
    def num_files(self) -> int:
        """How many files the shards read."""
        return sum(len(run) for shard in self.shards for run in shard)

    def gen_kwargs(self) -> dict[str, Any]:
        """``from_generator``'s ``gen_kwargs``: the list of shards, the reader, the layout."""
        return {"shards": self.shards, "reader": self.reader, "layout": self._layout}

    def fingerprint(self) -> str:
        """A digest of the plan (every file's address and checksum, the columns): the
        cache name of a materialised dataset, changing whenever a file does."""
        h = hashlib.sha256(f"{_ROWS_VERSION}\0{self.location}\0".encode())
        h.update(repr(self._layout).encode())
        for shard in self.shards:
            h.update(b"\1")
            for run in shard:
                h.update(repr(run).encode())
        return h.hexdigest()[:32]


def plan_shards(
    path_or_url: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    where: str | None = None,
    params: Sequence[object] = (),
    columns: Sequence[str] | None = None,
    group_by_stem: bool = False,
    images: bool = False,
    passphrase: Passphrase | None = None,
    storage_options: dict[str, Any] | None = None,
    cache_dir: str | None = None,
    num_shards: int | None = None,
    chunk_bytes: int = RUN_BYTES,
) -> BarecatShards:
    """Plan an archive's files into shards (see the module doc).

    Args:
        path_or_url: the archive (a local path, or ``s3://...`` and other fsspec URLs).
        pattern: a glob over paths (``**`` recursive, hidden names included); None: all.
        where: an SQL condition on the index's ``files`` columns (``size``, ``mtime_ns``,
            ``mode``, ``path``, ...; in a sealed archive ``size`` is the sealed length and
            ``logical_size`` the file's own), ``?`` placeholders filled from ``params``.
        params: values for ``where``'s placeholders.
        columns: the columns to produce (default: all).
        group_by_stem: one row per sample (``__key__`` and a column per extension).
        images: contents as ``datasets.Image()`` (the ``image`` column; with grouping,
            the columns of image extensions).
        passphrase: an encrypted archive's passphrase.
        storage_options: fsspec options for a URL (credentials, endpoint).
        cache_dir: where a remote archive's index copy is kept.
        num_shards: how many shards (default: 64, or a multiple of 64 keeping shards
            at most about 1 GiB); a multiple of world size times DataLoader workers
            lets every worker read its own.
        chunk_bytes: the most bytes read in one go.

    Returns:
        The plan.

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: an encrypted archive without its passphrase; a file without an
            extension with ``group_by_stem``; an unknown column.
        WrongPassphraseBarecatError: a wrong passphrase.
        ValueError: ``num_shards`` or ``chunk_bytes`` below 1.
        sqlite3.Error: ``where`` is not a valid condition.
    """
    if (num_shards is not None and num_shards < 1) or chunk_bytes < 1:
        raise ValueError("num_shards and chunk_bytes are at least 1")
    location = os.fspath(path_or_url)
    with Barecat(
        location,
        passphrase=passphrase,
        storage_options=storage_options,
        cache_dir=cache_dir,
        lookup_table=False,
    ) as bc:
        reader = planned_reader(bc)
        files = list(plan_files(bc, pattern, where, params, by_path=group_by_stem))
    total = sum(f.stored_size for f in files)
    if num_shards is None:
        per_default = DEFAULT_NUM_SHARDS * DEFAULT_SHARD_BYTES
        num_shards = DEFAULT_NUM_SHARDS * max(1, -(-total // per_default))
    run_bytes = max(1, min(chunk_bytes, total // (4 * num_shards)))  # a few runs a shard
    runs: list[tuple[PlannedRow, ...]] = []
    extensions: set[str] = set()
    for run in cut_runs(files, run_bytes, group_by_stem=group_by_stem):
        runs.append(tuple((f.path, *f.address, f.size, f.mtime_ns) for f in run))
        if group_by_stem:
            extensions.update(sample_key(f.path)[1] for f in run)
    weights = [sum(row[3] for row in run) for run in runs]
    shards = [tuple(g) for g in contiguous_groups(runs, weights, num_shards)]
    layout, features = _layout(columns, group_by_stem, images, sorted(extensions))
    return BarecatShards(reader, shards, features, location, layout)


def _layout(
    columns: Sequence[str] | None, group_by_stem: bool, images: bool, extensions: list[str]
) -> tuple[_Layout, datasets.Features]:
    """The rows' columns and their features."""
    content = datasets.Image() if images else datasets.Value("binary")
    number = datasets.Value("int64")
    every: dict[str, Any]
    if group_by_stem:
        every = {KEY_COLUMN: datasets.Value("string")}
        for ext in extensions:
            image = images and ext.lower() in IMAGE_EXTENSIONS
            every[ext] = datasets.Image() if image else datasets.Value("binary")
    else:
        every = {
            "path": datasets.Value("string"),
            "image" if images else "bytes": content,
            "size": number,
            "mtime_ns": number,
            "crc32c": number,
        }
    if columns is not None:
        unknown = [c for c in columns if c not in every]
        if unknown:
            known = ", ".join(every)
            raise BarecatError(f"Unknown column {unknown[0]!r}; this archive has: {known}")
        every = {c: t for c, t in every.items() if c in columns}
    chosen = tuple(every)
    image_columns = frozenset(c for c, t in every.items() if isinstance(t, datasets.Image))
    return _Layout(chosen, group_by_stem, image_columns), datasets.Features(every)


def generate_rows(
    shards: Sequence[Shard], reader: PlannedReader, layout: _Layout
) -> Iterator[dict[str, Any]]:
    """The rows of some shards, in order: the generator behind both datasets.

    Args:
        shards: the shards this call reads (``datasets`` passes each worker its own).
        reader: the archive's planned reader.
        layout: the columns to produce.

    Returns:
        One row (a dict of the layout's columns) per file, or per sample with grouping.

    Raises:
        BarecatIntegrityError: bytes that do not match their CRC32C or seal (named).
    """
    for shard in shards:
        for run in shard:
            if layout.group_by_stem:
                yield from _samples(run, reader, layout)
            else:
                yield from _files(run, reader, layout)


def _files(
    run: tuple[PlannedRow, ...], reader: PlannedReader, layout: _Layout
) -> Iterator[dict[str, Any]]:
    content = "image" if "image" in layout.columns else "bytes"
    contents = reader.read([row[:5] for row in run]) if content in layout.columns else None
    for i, (path, _, _, _, crc, size, mtime_ns) in enumerate(run):
        values: dict[str, Any] = {"path": path, "size": size, "mtime_ns": mtime_ns, "crc32c": crc}
        if contents is not None:
            values[content] = contents[i]
        yield {c: values[c] for c in layout.columns}


def _samples(
    run: tuple[PlannedRow, ...], reader: PlannedReader, layout: _Layout
) -> Iterator[dict[str, Any]]:
    paths = [row[0] for row in run]
    keep = [sample_key(p)[1] in layout.columns for p in paths]
    read = [row[:5] for row, k in zip(run, keep, strict=True) if k]
    found = iter(reader.read(read) if read else [])
    values = [next(found) if k else None for k in keep]
    for key, files in group_samples(paths, values).items():
        yield {c: key if c == KEY_COLUMN else files.get(c) for c in layout.columns}


def iterable_dataset(
    path_or_url: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    where: str | None = None,
    params: Sequence[object] = (),
    columns: Sequence[str] | None = None,
    group_by_stem: bool = False,
    images: bool = False,
    passphrase: Passphrase | None = None,
    storage_options: dict[str, Any] | None = None,
    cache_dir: str | None = None,
    num_shards: int | None = None,
    chunk_bytes: int = RUN_BYTES,
    split: str = "train",
) -> datasets.IterableDataset:
    """An archive's files as a sharded ``datasets.IterableDataset`` (see the module doc).

    ``split_dataset_by_node`` (when ``num_shards`` is a multiple of the world size) and
    DataLoader workers each read their own shards; ``shuffle`` shuffles the shards' order
    and then rows in a buffer.

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        pattern: a glob over paths (``**`` recursive, hidden names included).
        where: an SQL condition on the index's columns, with ``?`` placeholders.
        params: values for ``where``'s placeholders.
        columns: the columns to produce (default: all).
        group_by_stem: one row per sample: ``__key__`` and a column per extension.
        images: contents as ``datasets.Image()`` (see :func:`plan_shards`).
        passphrase: an encrypted archive's passphrase.
        storage_options: fsspec options for a URL.
        cache_dir: where a remote archive's index copy is kept.
        num_shards: how many shards (see :func:`plan_shards`).
        chunk_bytes: the most bytes read in one go.
        split: the split's name.

    Returns:
        The dataset (the plan is made now, the bytes read while iterating).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: see :func:`plan_shards`.
    """
    plan = plan_shards(
        path_or_url,
        pattern=pattern,
        where=where,
        params=params,
        columns=columns,
        group_by_stem=group_by_stem,
        images=images,
        passphrase=passphrase,
        storage_options=storage_options,
        cache_dir=cache_dir,
        num_shards=num_shards,
        chunk_bytes=chunk_bytes,
    )
    # what IterableDataset.from_generator does, with the plan's own fingerprint: without
    # one, datasets names the builder by hashing the whole plan (seconds per 100,000 files)
    from datasets.io.generator import GeneratorDatasetInputStream  # type: ignore[import-untyped]

    stream = GeneratorDatasetInputStream(
        generator=generate_rows,
        features=plan.features,
        gen_kwargs=plan.gen_kwargs(),
        streaming=True,
        split=datasets.NamedSplit(split),
        fingerprint=plan.fingerprint(),
    )
    dataset: datasets.IterableDataset = stream.read()
    return dataset


def to_dataset(
    path_or_url: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    where: str | None = None,
    params: Sequence[object] = (),
    columns: Sequence[str] | None = None,
    group_by_stem: bool = False,
    images: bool = False,
    passphrase: Passphrase | None = None,
    storage_options: dict[str, Any] | None = None,
    cache_dir: str | None = None,
    num_shards: int | None = None,
    chunk_bytes: int = RUN_BYTES,
    num_proc: int | None = None,
    dataset_cache_dir: str | os.PathLike[str] | None = None,
    keep_in_memory: bool = False,
    split: str = "train",
) -> datasets.Dataset:
    """An archive's files materialised as a ``datasets.Dataset`` (Arrow files in the
    ``datasets`` cache, named by the plan's :meth:`~BarecatShards.fingerprint`: made once
    per content, reused while no chosen file changes).

    The cache holds the files' contents as read: an encrypted archive's in the clear
    (``keep_in_memory=True`` loads the table into memory but the cache files are still
    written: give an encrypted archive a ``dataset_cache_dir`` where its contents may be).

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        pattern: a glob over paths (``**`` recursive, hidden names included).
        where: an SQL condition on the index's columns, with ``?`` placeholders.
        params: values for ``where``'s placeholders.
        columns: the columns to produce (default: all).
        group_by_stem: one row per sample: ``__key__`` and a column per extension.
        images: contents as ``datasets.Image()`` (see :func:`plan_shards`).
        passphrase: an encrypted archive's passphrase.
        storage_options: fsspec options for a URL.
        cache_dir: where a remote archive's index copy is kept.
        num_shards: how many shards (see :func:`plan_shards`).
        chunk_bytes: the most bytes read in one go.
        num_proc: processes that read shards at once (``datasets``' own).
        dataset_cache_dir: the ``datasets`` cache (default: its own, ``HF_DATASETS_CACHE``).
        keep_in_memory: load the table into memory (rather than memory-map it).
        split: the split's name.

    Returns:
        The dataset, rows in storage order (in path order with grouping).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: see :func:`plan_shards`.
        datasets.exceptions.DatasetGenerationError: a read failed; its cause is the
            ``BarecatIntegrityError`` naming the damaged file.
    """
    plan = plan_shards(
        path_or_url,
        pattern=pattern,
        where=where,
        params=params,
        columns=columns,
        group_by_stem=group_by_stem,
        images=images,
        passphrase=passphrase,
        storage_options=storage_options,
        cache_dir=cache_dir,
        num_shards=num_shards,
        chunk_bytes=chunk_bytes,
    )
    dataset: datasets.Dataset = datasets.Dataset.from_generator(
        generate_rows,
        features=plan.features,
        gen_kwargs=plan.gen_kwargs(),
        num_proc=num_proc,
        cache_dir=None if dataset_cache_dir is None else os.fspath(dataset_cache_dir),
        keep_in_memory=keep_in_memory,
        split=datasets.NamedSplit(split),
        fingerprint=plan.fingerprint(),
    )
    return dataset


__all__ = [
    "IMAGE_EXTENSIONS",
    "KEY_COLUMN",
    "BarecatShards",
    "generate_rows",
    "iterable_dataset",
    "plan_shards",
    "to_dataset",
]
