"""Archives on object storage and other fsspec filesystems: the store, ranged and
coalesced reads, pinned reads (one version per open, retried, ``Range`` checked), the
local cache (index copy, shard blocks) and the in-memory page cache. The archive, index
and shard layers build remote archives from these; this package knows no archive
layout."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.objectstore.cache import ArchiveCache, default_cache_root, trim_cache
    from barecat.objectstore.location import (
        ObjectStore,
        ObjectVersion,
        TransferStats,
        is_remote_url,
        local_path_of,
        url_protocol,
    )
    from barecat.objectstore.objects import StoredObject
    from barecat.objectstore.page_cache import PageCache, page_cache_bytes
    from barecat.objectstore.pinned import PinnedObject, Retries, read_many
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.objectstore.cache": ["ArchiveCache", "default_cache_root", "trim_cache"],
            "barecat.objectstore.location": [
                "ObjectStore",
                "ObjectVersion",
                "TransferStats",
                "is_remote_url",
                "local_path_of",
                "url_protocol",
            ],
            "barecat.objectstore.objects": ["StoredObject"],
            "barecat.objectstore.page_cache": ["PageCache", "page_cache_bytes"],
            "barecat.objectstore.pinned": ["PinnedObject", "Retries", "read_many"],
        },
    )

__all__ = [
    "ArchiveCache",
    "ObjectStore",
    "ObjectVersion",
    "PageCache",
    "PinnedObject",
    "Retries",
    "StoredObject",
    "TransferStats",
    "default_cache_root",
    "is_remote_url",
    "local_path_of",
    "page_cache_bytes",
    "read_many",
    "trim_cache",
    "url_protocol",
]
