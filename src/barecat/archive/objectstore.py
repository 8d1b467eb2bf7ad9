"""Opening the two halves of an archive that lives on object storage (``s3://``, or any
fsspec URL): the index as a local copy, the shards as ranged reads; and putting a whole
local archive there (:func:`upload_archive`: shards first, index last).

The index is downloaded once into the cache directory and reused for as long as the
store reports the same version of it (the ETag on S3), so opening costs one metadata
request when nothing changed. The copy is opened immutable: SQLite takes no locks and
reads it like any local index, the lookup table included. Imports ``index``, ``shards``,
``remote`` and ``layout``.
"""

from __future__ import annotations

import os
from typing import Any

from barecat.entries import parse_size
from barecat.exceptions import FileNotFoundBarecatError
from barecat.index import Index
from barecat.layout import (
    OLD_INDEX_SUFFIX,
    SHARD_INFIX,
    existing_shard_numbers,
    index_path,
    shard_path,
)
from barecat.objectstore import (
    ArchiveCache,
    ObjectStore,
    ObjectVersion,
    default_cache_root,
    trim_cache,
    url_protocol,
)
from barecat.shards.objectstore import ObjectStoreSharder

CACHE_LIMIT_ENV = "BARECAT_CACHE_LIMIT"
"""A size (``50G``): opening a remote archive first deletes the caches of the archives
used longest ago until the cache directory takes at most this much disk."""


def _find_index(store: ObjectStore, url: str) -> ObjectVersion:
    """The index object: ``URL`` or, in the reference's older naming, ``URL-sqlite-index``."""
    try:
        return store.describe(url)
    except FileNotFoundBarecatError:
        pass
    try:
        return store.describe(url + OLD_INDEX_SUFFIX)
    except FileNotFoundBarecatError:
        raise FileNotFoundBarecatError(url, "Archive") from None


def open_objectstore_halves(
    url: str,
    storage_options: dict[str, Any] | None,
    cache_dir: str | None,
    block_cache: bool,
    threadsafe: bool,
    lookup_table: bool | None,
) -> tuple[Index, ObjectStoreSharder]:
    """The index (a cached local copy) and the shards of the remote archive at ``url``."""
    protocol = url_protocol(url)
    assert protocol is not None
    store = ObjectStore(protocol, storage_options)
    cache = ArchiveCache(cache_dir or default_cache_root(), url)
    limit = os.environ.get(CACHE_LIMIT_ENV)
    if limit:
        trim_cache(cache.root, parse_size(limit), keep=cache.directory)
    local_index = cache.copy_of(store, _find_index(store, url))
    index = Index(
        local_index,
        readonly=True,
        readonly_is_immutable=True,
        threadsafe=threadsafe,
        lookup_table=lookup_table,
    )
    try:
        sharder = ObjectStoreSharder(
            url, store, index.num_used_shards, cache if block_cache else None
        )
    except BaseException:
        index.close()
        raise
    return index, sharder


def upload_archive(local: str, url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Put the whole local archive at ``local`` on object storage as ``url``: any archive
    there is removed first (its index first, so it stops being one at once), then the
    shards go up, and the index last, so ``url`` is an archive, to anyone looking, only
    once it is whole.

    Args:
        local: the local archive (closed; its index and shards).
        url: where it goes (``s3://bucket/name.barecat``; its shards beside it).
        storage_options: fsspec's options for the store (credentials, endpoint).

    Raises:
        RemoteStorageBarecatError: the store failed or refused a request.
    """
    protocol = url_protocol(url)
    assert protocol is not None, url
    store = ObjectStore(protocol, storage_options)
    old_shards = store.names_with_prefix(url + SHARD_INFIX)
    store.remove([url, url + OLD_INDEX_SUFFIX])
    store.remove(old_shards)
    for number in existing_shard_numbers(local):
        store.upload(shard_path(local, number), shard_path(url, number))
    store.upload(index_path(local), url)


__all__ = ["open_objectstore_halves", "upload_archive"]
