"""Opening the two halves of an archive that lives on object storage (``s3://``, ``https://``
or any fsspec URL), in the reader mode asked for (``lazy_remote.py`` owns the modes and
the lazy ones); and making an archive there (:func:`publish_archive`: shards first,
copied on the store's side or uploaded, index last).

In download mode the index is downloaded once into the cache directory and reused for
as long as the store reports the same version of it (the ETag on S3), so opening costs
one metadata request when nothing changed. The copy is opened immutable: SQLite takes
no locks and reads it like any local index, the lookup table included. The shards are
ranged reads in every mode. Imports ``index``, ``shards``, ``objectstore`` and ``layout``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from barecat.archive.lazy_remote import open_remote_halves, resolve_mode
from barecat.entries import parse_size
from barecat.exceptions import FileNotFoundBarecatError
from barecat.index import ReadOnlyIndex
from barecat.layout import (
    OLD_INDEX_SUFFIX,
    SHARD_INFIX,
    shard_path,
)
from barecat.objectstore import (
    ArchiveCache,
    ObjectStore,
    ObjectVersion,
    default_cache_root,
    is_remote_url,
    trim_cache,
    url_protocol,
)
from barecat.objectstore.page_cache import PageCache, page_cache_bytes
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
    remote_mode: str | None = None,
    page_cache: int | str | None = None,
) -> tuple[ReadOnlyIndex, ObjectStoreSharder]:
    """The index and the shards of the remote archive at ``url``, read in the reader mode
    ``remote_mode`` (see ``lazy_remote.py``; download mode: a cached local copy of the
    index).

    Raises:
        RemoteModeBarecatError: an unknown mode.
        FileNotFoundBarecatError: no archive at ``url``.
        RemoteStorageBarecatError: the store failed, or an object changed while open.
    """
    mode = resolve_mode(remote_mode)
    protocol = url_protocol(url)
    assert protocol is not None
    store = ObjectStore(protocol, storage_options)
    cache = ArchiveCache(cache_dir or default_cache_root(), url)
    limit = os.environ.get(CACHE_LIMIT_ENV)
    if limit:
        trim_cache(cache.root, parse_size(limit), keep=cache.directory)

    def download(version: ObjectVersion | None) -> tuple[ReadOnlyIndex, ObjectStoreSharder]:
        version = version or _find_index(store, url)
        return _download_halves(url, store, cache, version, block_cache, threadsafe, lookup_table)

    return open_remote_halves(
        url, store, cache, mode, PageCache(page_cache_bytes(page_cache)), block_cache,
        threadsafe, download,
    )  # fmt: skip


def _download_halves(
    url: str,
    store: ObjectStore,
    cache: ArchiveCache,
    version: ObjectVersion,
    block_cache: bool,
    threadsafe: bool,
    lookup_table: bool | None,
) -> tuple[ReadOnlyIndex, ObjectStoreSharder]:
    """Download mode: the index (this version of it) a cached local copy, each shard
    looked up once."""
    local_index = cache.copy_of(store, version)
    index = ReadOnlyIndex(
        local_index,
        readonly=True,
        readonly_is_immutable=True,
        threadsafe=threadsafe,
        lookup_table=lookup_table,
    )
    try:
        sharder = ObjectStoreSharder(
            url, store, index.lookups.num_used_shards, cache if block_cache else None
        )
    except BaseException:
        index.close()
        raise
    return index, sharder


def publish_archive(store: ObjectStore, url: str, local_index: str, shards: Sequence[str]) -> None:
    """Make ``url`` an archive on object storage: its shards ``shards`` (shard ``i`` from
    ``shards[i]``: the URL of an object already on the store, copied there on the store's
    side, so no byte passes through this process; or a local file, uploaded), its index
    the local file ``local_index``. Any archive there stops being one first (its index is
    removed), its shards are replaced or, beyond the new ones, removed, and the index goes
    up last, so ``url`` is an archive, to anyone looking, only once it is whole. When this
    fails, nothing is left at ``url``: no index, no shard.

    Args:
        store: the store of ``url``.
        url: where the archive goes (``s3://bucket/name.barecat``; its shards beside it).
        local_index: the new archive's index (a closed local SQLite file).
        shards: where each of its shards is now, in order.

    Raises:
        RemoteStorageBarecatError: the store failed or refused a request.
        FileNotFoundBarecatError: a shard's object is missing.
    """
    old_shards = store.names_with_prefix(url + SHARD_INFIX)
    store.remove([url, url + OLD_INDEX_SUFFIX])
    try:
        new_shards = [shard_path(url, number) for number in range(len(shards))]
        for source, target in zip(shards, new_shards, strict=True):
            if is_remote_url(source):
                store.copy(source, target)
            else:
                store.upload(source, target)
        store.remove(sorted(set(old_shards) - set(new_shards)))
        store.upload(local_index, url)
    except BaseException:
        with contextlib.suppress(Exception):  # shards of no archive: the index is gone
            store.remove(store.names_with_prefix(url + SHARD_INFIX))
        raise


__all__ = ["open_objectstore_halves", "publish_archive"]
