"""Hugging Face ``datasets`` and barecat archives (the ``hf`` extra): an archive's files as
a sharded ``IterableDataset`` (:func:`iterable_dataset`) or a materialised ``Dataset``
(:func:`to_dataset`), both from :func:`plan_shards`' plan (``hf/_shards.py``: planned
once from the index, as the Ray and Dask readers plan, ``read_plans.py``; each shard read
from the archive's shards alone, never the index).
"""

from barecat.integrations.hf._shards import (
    IMAGE_EXTENSIONS,
    BarecatShards,
    generate_rows,
    iterable_dataset,
    plan_shards,
    to_dataset,
)
from barecat.integrations.read_plans import KEY_COLUMN

__all__ = [
    "IMAGE_EXTENSIONS",
    "KEY_COLUMN",
    "BarecatShards",
    "generate_rows",
    "iterable_dataset",
    "plan_shards",
    "to_dataset",
]
