"""Publishing a local archive for lazy remote reading: ``barecat publish ARCHIVE``.

A published archive is an ordinary one (barecat 0.3.1 reads and writes it) whose index
is laid out for reading a page at a time over ranged requests (64 KiB pages, a rollback
journal, vacuumed: ``index/publishing.py``) and which has a sidecar beside it
(``ARCHIVE-sidecar``, ``index/sidecar.py``): the pages every open needs, the interior
b-tree pages, and a lookup table in buckets, so that a remote reader finds a file with
one request and reads it with one more. The steps, under barecat's writer lock: rewrite
the index when its layout is not yet the published one (every row checked to be there
after), build the sidecar, check it against the index (every file row's address, a
sample of absent paths, every copied page byte for byte). An archive already published
and unchanged since is left alone, byte for byte. Local archives only: publish before
uploading. Library code: the outcome as a :class:`PublishSummary`; no SQL of its own.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from barecat.exceptions import BarecatIntegrityError, InvalidPathBarecatError
from barecat.index.connection import writers_locked_out
from barecat.index.publishing import IndexLayout, commits_held_off, read_layout, rewrite, stamp
from barecat.index.sidecar import (
    SidecarSummary,
    build_sidecar,
    check_sidecar,
    is_fresh,
)
from barecat.layout import archive_exists, archive_not_found, base_path, index_path, sidecar_path


@dataclass(frozen=True, slots=True)
class PublishSummary:
    """What :func:`publish` did.

    ``already_published``: the archive was published and unchanged since, so nothing was
    written (``sidecar`` is then None). ``rewritten``: the index was rewritten into the
    published layout (``layout_before`` was what it had). ``files_checked``: the file rows
    whose addresses were checked in the sidecar.
    """

    index_path: str
    sidecar_path: str
    already_published: bool
    rewritten: bool
    layout_before: IndexLayout
    index_size_before: int
    index_size: int
    sidecar: SidecarSummary | None
    sidecar_size: int
    files_checked: int
    seconds: float


def publish(path: str | os.PathLike[str]) -> PublishSummary:
    """Prepare the local archive at ``path`` for lazy reading from object storage or a
    web server (see the module doc); idempotent.

    Args:
        path: the archive (its index file), on a local filesystem.

    Returns:
        What was done, with the sizes of each part of the sidecar.

    Raises:
        InvalidPathBarecatError: ``path`` is a URL: publish before uploading.
        FileNotFoundBarecatError: no archive at ``path``.
        ArchiveLockedBarecatError: a writer has it open.
        SchemaVersionBarecatError: a sealed archive, or an older schema.
        DamagedIndexBarecatError: a file row no sidecar can hold.
        BarecatIntegrityError: the sidecar built disagrees with the index (never seen).
    """
    text = os.fspath(path)
    if "://" in text:
        raise InvalidPathBarecatError(
            f"{text}: barecat publish works on a local archive; publish it before uploading "
            "(then upload ARCHIVE, ARCHIVE-sidecar and the shards)"
        )
    if not archive_exists(text):
        raise archive_not_found(text)
    started = time.monotonic()
    base = base_path(text)
    index, sidecar = index_path(base), sidecar_path(base)
    with writers_locked_out(index, "before publishing"):
        layout = read_layout(index)
        size_before = os.path.getsize(index)
        kept = _checked(index, sidecar) if layout.published and is_fresh(index, sidecar) else None
        built = None
        if kept is None:
            if not layout.published:
                rewrite(index)
            stamp(index)  # (the header the sidecar records: this index's own)
            with commits_held_off(index):  # (the check must see the state built from)
                built = build_sidecar(index, sidecar)
                kept = check_sidecar(index, sidecar)
        return PublishSummary(
            index_path=index,
            sidecar_path=sidecar,
            already_published=built is None,
            rewritten=not layout.published,
            layout_before=layout,
            index_size_before=size_before,
            index_size=os.path.getsize(index),
            sidecar=built,
            sidecar_size=os.path.getsize(sidecar),
            files_checked=kept,
            seconds=time.monotonic() - started,
        )


def _checked(index: str, sidecar: str) -> int | None:
    """The rows an existing fresh sidecar holds if it passes the full check, else None
    (it is then built again)."""
    try:
        return check_sidecar(index, sidecar)
    except BarecatIntegrityError:
        return None
