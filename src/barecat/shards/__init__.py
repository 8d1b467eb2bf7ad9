"""Shard files: the only package that reads or writes archive bytes."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.shards.fileobj import (
        BarecatFileObject,
        BarecatReadOnlyFileObject,
        BarecatReadWriteFileObject,
    )
    from barecat.shards.sharder import Sharder
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.shards.fileobj": [
                "BarecatFileObject",
                "BarecatReadOnlyFileObject",
                "BarecatReadWriteFileObject",
            ],
            "barecat.shards.sharder": ["Sharder"],
        },
    )

__all__ = [
    "BarecatFileObject",
    "BarecatReadOnlyFileObject",
    "BarecatReadWriteFileObject",
    "Sharder",
]
