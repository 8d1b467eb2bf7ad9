"""An archive's files planned into Hugging Face shards (:func:`plan_shards`) and read as
an ``IterableDataset`` (:func:`iterable_dataset`) or a materialised ``Dataset``
(:func:`to_dataset`); the face is ``barecat.integrations.hf``.

Planned as the Ray and Dask readers plan (``integrations/read_plans.py``): the archive
is opened once, here, and the chosen files (a glob ``pattern`` and an SQL ``where`` on
the index's columns, both run by SQLite) listed in storage order (shard, offset), cut
into chunks of at most ``chunk_bytes`` (finer when the archive is small, so that every
shard gets some) and the chunks dealt into ``num_shards`` contiguous shards of about
equal bytes. The shards are the list in ``from_generator``'s ``gen_kwargs``, so
``datasets`` hands each node of ``split_dataset_by_node``, each DataLoader worker and
each process of ``num_proc`` its own shards: each reads only its own address ranges,
from the shards alone (one read per chunk on a local disk, one ranged request per chunk
on object storage), never the index. Every file's bytes are CRC-checked, and in a
sealed archive authenticated and decompressed bound to its path; the data key travels
inside the reader, never the passphrase.

Rows are ``path``, ``bytes``, ``size``, ``mtime_ns``, ``crc32c`` (the index's: of the
stored bytes); with ``images=True`` the ``bytes`` column is ``image``, a
``datasets.Image()`` (decoded with Pillow when read). ``group_by_stem=True`` makes one
row per sample, as the Ray reader does: ``__key__`` and one column per extension (null
where a sample lacks one; with ``images=True`` image extensions are ``Image()``). Imports
``datasets`` (the ``hf`` extra), ``read_plans`` and the archive layer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing(
    "barecat.integrations.hf needs Hugging Face datasets", "hf"
):
    import datasets  # type: ignore[import-untyped]
    import pyarrow as pa

from barecat.archive.planned_reads import PlannedReader
from barecat.exceptions import BarecatError
from barecat.integrations.keywords import ReaderKeywords, reader_values, shows_keywords
from barecat.integrations.read_plans import (
    DEFAULT_CHUNK_BYTES,
    KEY_COLUMN,
    Chunk,
    plan_archive,
    read_chunk,
)
from barecat.integrations.selection import ArchiveLocation, FileSelection

if TYPE_CHECKING:
    from typing_extensions import Unpack

IMAGE_EXTENSIONS = frozenset({"bmp", "gif", "jpeg", "jpg", "png", "tif", "tiff", "webp"})
"""Extensions whose columns are ``datasets.Image()`` with ``images=True`` and grouping."""
DEFAULT_NUM_SHARDS = 64
"""Shards by default (a multiple of most world sizes times DataLoader workers)..."""
DEFAULT_SHARD_BYTES = 1 << 30
"""...or more, in multiples of 64, so that a shard holds at most about 1 GiB."""
_ROWS_VERSION = 1
"""Part of every fingerprint: bumped when the rows made from the same plan change."""

Shard = tuple[Chunk, ...]
"""One shard: chunks of planned files in storage order, each read in one go."""


@dataclass(frozen=True)
class _Layout:
    """What the rows hold (tuples only: ``datasets`` splits the lists of gen_kwargs)."""

    read: tuple[str, ...]  # read_chunk's columns
    names: tuple[str, ...]  # the rows' (``image`` for ``bytes`` with images=True)
    group_by_stem: bool
    extensions: tuple[str, ...]


@dataclass(frozen=True)
class BarecatShards:
    """An archive's chosen files, planned into shards for ``from_generator``.

    Attributes:
        reader: reads planned files from the shards (holds an encrypted archive's data
            key, never shown by ``repr``).
        shards: the shards, each contiguous chunks of files in storage order.
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
        return sum(chunk.plan.num_rows for shard in self.shards for chunk in shard)

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
            for chunk in shard:
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, chunk.plan.schema) as writer:
                    writer.write_table(chunk.plan)
                h.update(sink.getvalue())
        return h.hexdigest()[:32]


@dataclass(frozen=True)
class Sharding:
    """How :func:`plan_shards` makes rows and shards of the chosen files (its own
    keywords, besides a reader's).

    Attributes:
        images: contents as ``datasets.Image()`` (the ``image`` column, and ``image``
            for ``bytes`` in ``columns``; with grouping, the columns of image
            extensions).
        num_shards: how many shards (default: 64, or a multiple of 64 keeping shards
            at most about 1 GiB); a multiple of world size times DataLoader workers
            lets every worker read its own.
        chunk_bytes: the most bytes read in one go.
    """

    images: bool = False
    num_shards: int | None = None
    chunk_bytes: int = DEFAULT_CHUNK_BYTES


class ShardKeywords(ReaderKeywords, total=False):
    """The keywords of :func:`plan_shards`, :func:`iterable_dataset` and
    :func:`to_dataset`: a reader's (which files, the archive's key and options) and
    :class:`Sharding`'s fields."""

    images: bool
    num_shards: int | None
    chunk_bytes: int


_shows_keywords = shows_keywords(ShardKeywords, Sharding, {"images": "group_by_stem"})
"""Writes out the three functions' keywords in their signatures (``images`` where it
always stood)."""


@_shows_keywords
def plan_shards(
    path_or_url: str | os.PathLike[str], **keywords: Unpack[ShardKeywords]
) -> BarecatShards:
    """Plan an archive's files into shards (see the module doc).

    Args:
        path_or_url: the archive (a local path, or ``s3://...`` and other fsspec URLs).
        **keywords: which files and the archive's key and options (``pattern``,
            ``where``, ``params``, ``columns``, ``group_by_stem``, ``passphrase``,
            ``storage_options``, ``cache_dir``: see
            :class:`~barecat.integrations.keywords.ReaderKeywords`), and how their rows
            and shards are made (``images``, ``num_shards``, ``chunk_bytes``: see
            :class:`Sharding`).

    Returns:
        The plan.

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: an encrypted archive without its passphrase; a file without an
            extension with ``group_by_stem``; an unknown column.
        WrongPassphraseBarecatError: a wrong passphrase.
        ValueError: ``num_shards`` or ``chunk_bytes`` below 1.
        sqlite3.Error: ``where`` is not a valid condition.
        TypeError: a keyword none of these.
    """
    return _planned(path_or_url, keywords, "plan_shards")


def _planned(
    path_or_url: str | os.PathLike[str], keywords: Mapping[str, Any], function: str
) -> BarecatShards:
    """:func:`plan_shards` for the function named ``function``."""
    own = {f.name for f in dataclasses.fields(Sharding)}
    read = {k: v for k, v in keywords.items() if k not in own}
    location, selection = reader_values(path_or_url, read, function)
    sharding = Sharding(**{k: v for k, v in keywords.items() if k in own})
    return _shards_of(location, selection, sharding)


def _shards_of(
    location: ArchiveLocation, selection: FileSelection, sharding: Sharding
) -> BarecatShards:
    """:func:`plan_shards` of the two values (which archive, which files) and the
    sharding."""
    images, num_shards, chunk_bytes = sharding.images, sharding.num_shards, sharding.chunk_bytes
    if (num_shards is not None and num_shards < 1) or chunk_bytes < 1:
        raise ValueError("num_shards and chunk_bytes are at least 1")
    plan = plan_archive(location, selection, chunk_bytes=chunk_bytes)
    total = sum(c.stored_bytes for c in plan.chunks)
    if num_shards is None:
        per_default = DEFAULT_NUM_SHARDS * DEFAULT_SHARD_BYTES
        num_shards = DEFAULT_NUM_SHARDS * max(1, -(-total // per_default))
    finer = max(1, total // (4 * num_shards))  # a few chunks a shard
    if finer < chunk_bytes and len(plan.chunks) < min(4 * num_shards, plan.num_files):
        plan = plan_archive(location, selection, chunk_bytes=finer)  # a small archive
    grouped = selection.group_by_stem
    renamed = {"bytes": "image"} if images and not grouped else {}
    every = [renamed.get(c, c) for c in plan.all_columns]
    if selection.columns is not None:
        unknown = [c for c in selection.columns if c not in every]
        if unknown:
            known = ", ".join(every)
            raise BarecatError(f"Unknown column {unknown[0]!r}; this archive has: {known}")
        every = [c for c in every if c in selection.columns]
    back = {v: k for k, v in renamed.items()}
    layout = _Layout(
        tuple(back.get(c, c) for c in every), tuple(every), grouped, tuple(plan.extensions)
    )
    features = datasets.Features({c: _feature(c, images, grouped) for c in every})
    shards = [tuple(share) for share in plan.shares(num_shards)]
    return BarecatShards(plan.reader, shards, features, location.path, layout)


def _feature(column: str, images: bool, group_by_stem: bool) -> Any:
    """A column's ``datasets`` feature."""
    if column in ("path", KEY_COLUMN):
        return datasets.Value("string")
    if column == "image" or (group_by_stem and images and column.lower() in IMAGE_EXTENSIONS):
        return datasets.Image()
    if column == "bytes" or group_by_stem:
        return datasets.Value("binary")
    return datasets.Value("int64")


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
        for chunk in shard:
            read = list(layout.read)
            table = read_chunk(reader, chunk.plan, read, layout.group_by_stem, layout.extensions)
            if layout.names != layout.read:
                table = table.rename_columns(list(layout.names))
            yield from table.to_pylist()


@_shows_keywords
def iterable_dataset(
    path_or_url: str | os.PathLike[str],
    *,
    split: str = "train",
    **keywords: Unpack[ShardKeywords],
) -> datasets.IterableDataset:
    """An archive's files as a sharded ``datasets.IterableDataset`` (see the module doc).

    ``split_dataset_by_node`` (when ``num_shards`` is a multiple of the world size) and
    DataLoader workers each read their own shards; ``shuffle`` shuffles the shards' order
    and then rows in a buffer.

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        split: the split's name.
        **keywords: which files, the archive's key and options, and the sharding
            (see :func:`plan_shards`).

    Returns:
        The dataset (the plan is made now, the bytes read while iterating).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: see :func:`plan_shards`.
    """
    plan = _planned(path_or_url, keywords, "iterable_dataset")
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


@_shows_keywords
def to_dataset(
    path_or_url: str | os.PathLike[str],
    *,
    num_proc: int | None = None,
    dataset_cache_dir: str | os.PathLike[str] | None = None,
    keep_in_memory: bool = False,
    split: str = "train",
    **keywords: Unpack[ShardKeywords],
) -> datasets.Dataset:
    """An archive's files materialised as a ``datasets.Dataset`` (Arrow files in the
    ``datasets`` cache, named by the plan's :meth:`~BarecatShards.fingerprint`: made once
    per content, reused while no chosen file changes).

    The cache holds the files' contents as read: an encrypted archive's in the clear
    (``keep_in_memory=True`` loads the table into memory but the cache files are still
    written: give an encrypted archive a ``dataset_cache_dir`` where its contents may be).

    Args:
        path_or_url: the archive (a local path, or an fsspec URL such as ``s3://...``).
        num_proc: processes that read shards at once (``datasets``' own).
        dataset_cache_dir: the ``datasets`` cache (default: its own, ``HF_DATASETS_CACHE``).
        keep_in_memory: load the table into memory (rather than memory-map it).
        split: the split's name.
        **keywords: which files, the archive's key and options, and the sharding
            (see :func:`plan_shards`).

    Returns:
        The dataset, rows in storage order (in path order with grouping).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: see :func:`plan_shards`.
        datasets.exceptions.DatasetGenerationError: a read failed; its cause is the
            ``BarecatIntegrityError`` naming the damaged file.
    """
    plan = _planned(path_or_url, keywords, "to_dataset")
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
