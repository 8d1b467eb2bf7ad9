"""Shard files: the only package that reads or writes archive bytes."""

from barecat.shards.fileobj import (
    BarecatFileObject,
    BarecatReadOnlyFileObject,
    BarecatReadWriteFileObject,
)
from barecat.shards.sharder import Sharder

__all__ = [
    "BarecatFileObject",
    "BarecatReadOnlyFileObject",
    "BarecatReadWriteFileObject",
    "Sharder",
]
