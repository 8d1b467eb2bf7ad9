"""Whole conversions between barecat and tar/zip files or streams (``barecat convert``).

A barecat target is built under a hidden temporary name beside it and renamed into place
only when complete (shards first, index last: :mod:`barecat.transfer.building`); a failed,
interrupted or killed conversion leaves no archive at the target, so a half-converted
input is never taken for a finished one. A tar or zip target is written to a temporary
file and renamed the same way.
Streams (stdin, stdout) go through in constant memory, except a zip read from a stream,
which must be spooled to a temporary file first (its table of contents is at its end).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import BinaryIO

from barecat.archive import Barecat, Passphrase
from barecat.entries import BarecatFileInfo, Order
from barecat.exceptions import BarecatError
from barecat.transfer.building import ArchiveOptions, building_archive, building_file
from barecat.transfer.convert.formats import format_of_file, format_of_name
from barecat.transfer.convert.tar_zip_export import ExportResult, OnExported, export_tar, export_zip
from barecat.transfer.convert.tar_zip_import import (
    ImportResult,
    OnStored,
    import_tar,
    import_zip,
    input_name,
)

COPY_BATCH_BYTES = 64 << 20
"""Bytes ``barecat2barecat`` holds before storing them."""


def archive2barecat(
    src_path: str,
    target_path: str,
    shard_size_limit: int | str | None = None,
    overwrite: bool = False,
    *,
    on_stored: OnStored | None = None,
    archive_options: ArchiveOptions | None = None,
) -> ImportResult:
    """Convert a tar (plain or compressed) or zip file into a new barecat archive."""
    fmt = format_of_file(src_path)
    with open(src_path, "rb") as f:
        return stream2barecat(
            f,
            fmt,
            target_path,
            shard_size_limit,
            overwrite,
            on_stored=on_stored,
            archive_options=archive_options,
        )


def stream2barecat(
    stream: BinaryIO,
    fmt: str,
    target_path: str,
    shard_size_limit: int | str | None = None,
    overwrite: bool = False,
    *,
    on_stored: OnStored | None = None,
    archive_options: ArchiveOptions | None = None,
) -> ImportResult:
    """Convert a tar stream (any compression) or a zip of format ``fmt``; a zip that
    cannot seek (a pipe) is spooled to a temporary file first."""
    source = input_name(stream)
    with building_archive(target_path, overwrite, shard_size_limit, archive_options) as bc:
        if fmt != "zip":
            return import_tar(bc, stream, on_stored, source=source)
        if stream.seekable():
            return import_zip(bc, stream, on_stored, name=source)
        with tempfile.TemporaryFile(dir=os.path.dirname(os.path.abspath(target_path))) as spool:
            shutil.copyfileobj(stream, spool, 1 << 20)
            spool.seek(0)
            return import_zip(bc, spool, on_stored, name=source)


def barecat2archive(
    src_path: str,
    target_path: str,
    root_dir: str | None = None,
    *,
    overwrite: bool = True,
    on_entry: OnExported | None = None,
    passphrase: Passphrase | None = None,
) -> ExportResult:
    """Convert a barecat archive into a tar (compressed as its name says) or zip file
    (``passphrase``: of an encrypted archive)."""
    fmt = format_of_name(target_path)
    if fmt is None:
        raise BarecatError(
            f"Cannot tell the format of {target_path!r}: name it .tar, .tar.gz, .tgz, "
            ".tar.bz2, .tar.xz, .tar.zst or .zip"
        )
    with building_file(target_path, overwrite) as staging, open(staging, "wb") as out:
        return barecat2stream(
            src_path, out, fmt, root_dir, on_entry=on_entry, passphrase=passphrase
        )


def barecat2stream(
    src_path: str,
    stream: BinaryIO,
    fmt: str,
    root_dir: str | None = None,
    *,
    on_entry: OnExported | None = None,
    passphrase: Passphrase | None = None,
) -> ExportResult:
    """Write a barecat archive to ``stream`` as format ``fmt`` (a tar format or zip); an
    encrypted one's file rows are checked against its index digest first."""
    with Barecat(src_path, passphrase=passphrase) as bc:
        bc.check_index_digest()
        if fmt == "zip":
            return export_zip(bc, stream, root_dir, on_entry)
        return export_tar(bc, stream, fmt, root_dir, on_entry)


def barecat2barecat(
    src_path: str,
    target_path: str,
    shard_size_limit: int | str | None = None,
    overwrite: bool = False,
    *,
    passphrase: Passphrase | None = None,
    archive_options: ArchiveOptions | None = None,
    on_stored: OnStored | None = None,
) -> ImportResult:
    """Copy an archive file by file into a new one made with ``archive_options`` (to seal
    a plain archive, unseal a sealed one, or change its compression, key or shard size).

    Unlike merge and subset, which move stored bytes as they are, every file is read
    (``passphrase``: of an encrypted source, whose file rows are checked against its
    index digest first) and written anew. Metadata comes along."""
    result = ImportResult()
    with Barecat(src_path, passphrase=passphrase) as src:
        src.check_index_digest()
        with building_archive(target_path, overwrite, shard_size_limit, archive_options) as out:
            _copy_files(src, out, result, on_stored)
    return result


def _copy_files(
    src: Barecat, out: Barecat, result: ImportResult, on_stored: OnStored | None
) -> None:
    """Every directory and file of ``src`` into ``out``, read and written anew."""
    out.add_dirs(src.iter_dirinfos())
    batch: list[tuple[BarecatFileInfo, bytes]] = []
    held = 0
    for info in src.iter_fileinfos(Order.ADDRESS):
        data = src.read(info)
        batch.append(
            (BarecatFileInfo(info.path, info.mode, info.uid, info.gid, info.mtime_ns), data)
        )
        held += len(data)
        if held >= COPY_BATCH_BYTES or len(batch) >= 4096:
            _store_batch(out, batch, result, on_stored)
            batch, held = [], 0
    _store_batch(out, batch, result, on_stored)


def _store_batch(
    out: Barecat,
    batch: list[tuple[BarecatFileInfo, bytes]],
    result: ImportResult,
    on_stored: OnStored | None,
) -> None:
    out.add_many(batch)
    nbytes = sum(len(data) for _, data in batch)
    result.files += len(batch)
    result.bytes += nbytes
    if on_stored is not None and batch:
        on_stored(len(batch), nbytes)


__all__ = [
    "barecat2barecat",
    "archive2barecat",
    "barecat2archive",
    "barecat2stream",
    "stream2barecat",
]
