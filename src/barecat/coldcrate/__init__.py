"""ColdCrate chunks (the format of the ``coldcrate`` package), read and written here with
the same API names: schemas with nested types, append-only entries with per-entry
compression, tombstones, the commit marker, scans that resync past damage, repair."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.coldcrate.chunks import (
        FORMAT_VERSION,
        MAGIC,
        AppendResult,
        ChunkHeader,
        ChunkReader,
        ChunkWriter,
        Entry,
        RawEntry,
        RepairResult,
        repair,
    )
    from barecat.coldcrate.errors import (
        ColdCrateError,
        CompressionError,
        EncryptionError,
        InvalidChunkError,
        InvalidEntryError,
        SchemaError,
    )
    from barecat.coldcrate.schema import Field, FixedArray, Schema, Struct, VarArray
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.coldcrate.chunks": [
                "FORMAT_VERSION",
                "MAGIC",
                "AppendResult",
                "ChunkHeader",
                "ChunkReader",
                "ChunkWriter",
                "Entry",
                "RawEntry",
                "RepairResult",
                "repair",
            ],
            "barecat.coldcrate.errors": [
                "ColdCrateError",
                "CompressionError",
                "EncryptionError",
                "InvalidChunkError",
                "InvalidEntryError",
                "SchemaError",
            ],
            "barecat.coldcrate.schema": ["Field", "FixedArray", "Schema", "Struct", "VarArray"],
        },
    )

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "AppendResult",
    "ChunkHeader",
    "ChunkReader",
    "ChunkWriter",
    "ColdCrateError",
    "CompressionError",
    "EncryptionError",
    "Entry",
    "Field",
    "FixedArray",
    "InvalidChunkError",
    "InvalidEntryError",
    "RawEntry",
    "RepairResult",
    "Schema",
    "SchemaError",
    "Struct",
    "VarArray",
    "repair",
]
