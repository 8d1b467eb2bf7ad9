"""ColdCrate chunks into barecat archives and back, with one documented mapping.

Barecat -> chunk: one entry per file, ``resource_id`` = the path (UTF-8, at most 512
bytes), fields ``data`` (bytes) and the nullable ``mode``, ``uid``, ``gid`` (u32) and
``mtime_ns`` (i64) — the *file schema* below. Symbolic-link entries keep their mode, so
they come back as links.

Chunk -> barecat: entries are taken in order, the latest one for a ``resource_id``
winning and a tombstone deleting it, as coldcrate's own docs resolve them; the id
becomes the path. A chunk in the file schema gives back the files with their metadata.
Any other schema is kept whole: the file ``<id>`` holds the row's first top-level
``bytes`` field (the blob, if the schema has one), and ``<id>.row.json`` the other fields
(bytes as ``{"base64": ...}``, UUIDs as text); the chunk's schema goes to
``.coldcrate/schema.json``. Ids that are not valid paths are skipped and reported, as
are damaged stretches of the chunk (named by their offsets) and entries whose checksummed
bytes do not decode (their flags and the schema are not checksummed); the rest is
converted. Uses the public Barecat API; never prints.
"""

from __future__ import annotations

import base64
import json
import stat
import uuid
from collections.abc import Callable
from typing import Any

from barecat.archive import Barecat, Passphrase
from barecat.coldcrate import (
    ChunkReader,
    ChunkWriter,
    ColdCrateError,
    EncryptionError,
    Field,
    Schema,
)
from barecat.entries import BarecatFileInfo, Order
from barecat.exceptions import InvalidPathBarecatError
from barecat.paths import normalize
from barecat.transfer.building import ArchiveOptions, building_archive, building_file
from barecat.transfer.convert.tar_zip_import import ImportResult

FILE_SCHEMA = Schema(
    [
        Field("data", "bytes"),
        Field("mode", "u32", nullable=True),
        Field("uid", "u32", nullable=True),
        Field("gid", "u32", nullable=True),
        Field("mtime_ns", "i64", nullable=True),
    ],
    description="files of a barecat archive: resource_id is the path",
)
SCHEMA_PATH = ".coldcrate/schema.json"
MAX_RID = 512

OnStored = Callable[[int, int], None]


def barecat2coldcrate(
    src_path: str,
    target_path: str,
    *,
    compression: str = "zstd",
    passphrase: str | bytes | None = None,
    overwrite: bool = False,
    on_stored: OnStored | None = None,
    archive_passphrase: Passphrase | None = None,
) -> ImportResult:
    """Write every file of an archive to a new chunk, which appears at ``target_path``
    only when complete. ``passphrase`` encrypts the chunk; ``archive_passphrase`` opens
    an encrypted source archive (whose file rows are checked against its index digest
    first)."""
    result = ImportResult()
    secret: dict[str, Any] = {}
    if passphrase is not None:
        secret = {"encryption": "aes-256-xts", "passphrase": passphrase}
    with (
        Barecat(src_path, passphrase=archive_passphrase) as bc,
        building_file(target_path, overwrite) as staging,
        ChunkWriter.create(staging, FILE_SCHEMA, compression=compression, **secret) as w,
    ):
        bc.check_index_digest()
        for info in bc.iter_fileinfos(Order.PATH):
            rid = info.path.encode("utf-8", "surrogateescape")
            if len(rid) > MAX_RID:
                result.skipped.append((info.path, f"path longer than {MAX_RID} bytes"))
                continue
            data = bc.read(info)
            row = {"data": data, "mode": info.mode, "uid": info.uid, "gid": info.gid}
            w.append(rid, {**row, "mtime_ns": info.mtime_ns})
            result.files += 1
            result.bytes += len(data)
            if on_stored is not None:
                on_stored(1, len(data))
        w.flush(sync=True)
    return result


def coldcrate2barecat(
    src_path: str,
    target_path: str,
    shard_size_limit: int | str | None = None,
    overwrite: bool = False,
    *,
    passphrase: str | bytes | None = None,
    on_stored: OnStored | None = None,
    archive_options: ArchiveOptions | None = None,
) -> ImportResult:
    """Convert a chunk into a new archive, by the mapping in this module's docstring
    (``passphrase``: of an encrypted chunk; ``archive_options``: of the new archive)."""
    result = ImportResult()
    with ChunkReader.open(src_path, passphrase=passphrase) as reader:
        schema = reader.schema
        if schema is None:
            raise EncryptionError(f"{src_path} is encrypted: give its passphrase")
        live = _latest_entries(src_path, reader, result)
        as_files = schema.to_dict()["fields"] == FILE_SCHEMA.to_dict()["fields"]
        with building_archive(target_path, overwrite, shard_size_limit, archive_options) as bc:
            if not as_files:
                bc[SCHEMA_PATH] = json.dumps(schema.to_dict(), indent=2).encode()
            for path, offset in sorted(live.items()):
                try:
                    fields = reader.read_at(offset).fields or {}
                except ColdCrateError as e:  # (checksummed bytes, but flags or schema bad)
                    result.skipped.append((f"{src_path}: {path} (at {offset})", str(e)))
                    continue
                nbytes = _store(bc, path, fields, schema, as_files)
                result.files += 1
                result.bytes += nbytes
                if on_stored is not None:
                    on_stored(1, nbytes)
    return result


def _latest_entries(src_path: str, reader: ChunkReader, result: ImportResult) -> dict[str, int]:
    """Path -> offset of the latest entry of each id not deleted (ids only, no rows);
    ids that are not paths, and damaged stretches of the chunk, go to ``result.skipped``."""

    def damaged(start: int, end: int) -> None:
        result.skipped.append((f"{src_path}: bytes {start}-{end}", "damaged, not read"))

    live: dict[str, int] = {}
    for raw in reader.scan_raw(on_damage=damaged):
        rid = reader.resource_id(raw)
        try:
            path = normalize(rid.decode("utf-8", "surrogateescape"))
        except InvalidPathBarecatError as e:
            result.skipped.append((f"{src_path}: {rid!r}", str(e)))
            continue
        if not path:
            result.skipped.append((f"{src_path}: {rid!r}", "empty path"))
        elif raw.tombstone:
            live.pop(path, None)
        else:
            live[path] = raw.offset
    return live


def _store(bc: Barecat, path: str, fields: dict[str, Any], schema: Schema, as_files: bool) -> int:
    if as_files:
        info = BarecatFileInfo(path, fields["mode"], fields["uid"], fields["gid"])
        info.mtime_ns = fields["mtime_ns"]
        if info.mode is not None and stat.S_IFMT(info.mode) not in (0, stat.S_IFREG, stat.S_IFLNK):
            info.mode = None  # a file's row cannot make a directory or a device
        bc.add(info, data=fields["data"])
        return len(fields["data"])
    blob_field = next((f.name for f in schema.fields if f.type == "bytes" and not f.nullable), None)
    blob = fields.pop(blob_field) if blob_field is not None else b""
    bc[path] = blob
    bc[path + ".row.json"] = json.dumps(_plain(fields), ensure_ascii=False).encode("utf-8")
    return len(blob)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


__all__ = ["FILE_SCHEMA", "SCHEMA_PATH", "barecat2coldcrate", "coldcrate2barecat"]
