"""The part-archives of an output on object storage, when no filesystem is shared: what
``parts.PartArchives`` does with a URL output (the Ray and Dask writers).

Each task writes its part in a temporary folder of its own machine, uploads the part's
shards and then its index under the write's staging prefix on the output's store
(:func:`upload_part`: ``.NAME.ENGINE-HOST-PID-ID/part-NNNNN-ID`` beside the output,
hidden, named after the driver's machine and process), removes its local copy and hands
back a :class:`WrittenPart`: the part's URL and its shards' sizes. The driver then fetches
the parts' indices, only those (:func:`stand_ins`): beside each it makes stand-in shard
files of the right sizes, sparse and never read, so the merge machinery
(``Barecat.merge(..., symlink=True)``) joins the indices as it joins local parts,
renumbering the shards and refusing a path two parts share; each link of the joined
archive names the part shard that becomes that shard of the output
(:func:`shard_sources`), copied into place on the store's side
(``archive.objectstore.publish_archive``, index last). A staging prefix whose driver died
is found by :func:`abandoned_prefixes`. Imports ``layout`` and ``objectstore``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from barecat.exceptions import BarecatError
from barecat.layout import abandoned_names, existing_shard_numbers, index_path, shard_path
from barecat.objectstore import ObjectStore


@dataclass(frozen=True, slots=True)
class WrittenPart:
    """What a task hands back for the part it wrote: small, whatever the part holds.

    Attributes:
        location: the part's path (beside a local output) or URL (under the staging
            prefix of an output on object storage).
        shard_sizes: the size of each of its shards, in order.
    """

    location: str
    shard_sizes: tuple[int, ...]


def staging_prefix(url: str, engine: str) -> str:
    """The beginning of the staging prefixes of writes to ``url`` made by drivers on this
    machine (``FOLDER/.NAME.ENGINE-HOST-``): a driver's process id follows."""
    folder, name = url.rsplit("/", 1)
    host = socket.gethostname().replace("/", "_") or "host"
    return f"{folder}/.{name}.{engine}-{host}-"


def abandoned_prefixes(store: ObjectStore, prefix: str) -> list[str]:
    """The staging prefixes starting with ``prefix`` (see :func:`staging_prefix`) whose
    driver, a process of this machine, ended."""
    folder, start = prefix.rsplit("/", 1)
    names = [url.rsplit("/", 1)[1] for url in store.names_with_prefix(prefix)]
    dead = abandoned_names(names, start)
    return [f"{folder}/{name}" for entries in dead.values() for name in entries]


def part_sizes(local: str) -> tuple[int, ...]:
    """The sizes of the local archive's shards, which must be numbered without gaps.

    Raises:
        BarecatError: a shard is missing between others.
    """
    numbers = existing_shard_numbers(local)
    if numbers != list(range(len(numbers))):
        raise BarecatError(f"{local}: its shards are numbered with gaps ({numbers})")
    return tuple(os.path.getsize(shard_path(local, n)) for n in numbers)


def upload_part(store: ObjectStore, local: str, url: str) -> WrittenPart:
    """Put the local part-archive at ``url`` on the store: its shards, then its index.

    Args:
        store: the output's store.
        local: the part (closed).
        url: where it goes, under the staging prefix.

    Returns:
        Its handle.

    Raises:
        RemoteStorageBarecatError: the store failed or refused a request.
    """
    sizes = part_sizes(local)
    for number in range(len(sizes)):
        store.upload(shard_path(local, number), shard_path(url, number))
    store.upload(index_path(local), url)
    return WrittenPart(url, sizes)


def stand_ins(
    store: ObjectStore, parts: Sequence[WrittenPart], folder: str
) -> tuple[list[str], dict[str, str]]:
    """Each part as a local archive in ``folder``: its index fetched, its shards stand-ins
    of the right sizes (sparse files, never read).

    Args:
        store: the output's store.
        parts: the parts on the store, in order.
        folder: an empty local folder.

    Returns:
        The local parts, in order, and for each stand-in shard (its real path) the URL
        of the shard it stands for.

    Raises:
        RemoteStorageBarecatError, FileNotFoundBarecatError: a part's index could not be
            fetched.
    """
    local_parts = []
    origins = {}
    for i, part in enumerate(parts):
        local = os.path.join(folder, f"part-{i:05d}")
        store.download(part.location, local)
        for number, size in enumerate(part.shard_sizes):
            stand_in = shard_path(local, number)
            with open(stand_in, "xb") as f:
                f.truncate(size)
            origins[os.path.realpath(stand_in)] = shard_path(part.location, number)
        local_parts.append(local)
    return local_parts, origins


def shard_sources(joined: str, origins: dict[str, str]) -> list[str]:
    """Where each shard of the local archive ``joined``, made by linking the stand-ins'
    shards, really is: the URL of the part's shard a link points to, or the local file
    itself (one of the joined archive's own, empty).

    Raises:
        BarecatError: a shard of ``joined`` is neither.
    """
    sources = []
    for number in range(len(existing_shard_numbers(joined))):
        shard = shard_path(joined, number)
        if os.path.islink(shard):
            sources.append(origins[os.path.realpath(shard)])
        elif os.path.getsize(shard) == 0:
            sources.append(shard)
        else:  # (the join writes no byte of its own)
            raise BarecatError(f"{shard}: the join wrote bytes of its own")
    return sources


__all__ = [
    "WrittenPart",
    "abandoned_prefixes",
    "part_sizes",
    "shard_sources",
    "stand_ins",
    "staging_prefix",
    "upload_part",
]
