"""The ColdCrate error classes, under the names the ``coldcrate`` package uses.

They join barecat's error tree: a ``ColdCrateError`` is a ``BarecatError`` (so the
command line reports it as one line) and a ``ValueError`` (bad bytes or arguments).
Imports only ``barecat.exceptions``.
"""

from __future__ import annotations

from barecat.exceptions import BarecatError


class ColdCrateError(BarecatError, ValueError):
    """Base of every error a ColdCrate chunk raises."""


class InvalidChunkError(ColdCrateError):
    """Not a valid chunk: bad magic, version or header, oversized schema, or dirty."""


class InvalidEntryError(ColdCrateError):
    """A malformed or truncated entry, or a row that does not fit the schema."""


class SchemaError(ColdCrateError):
    """An invalid schema, or a row value that does not match it."""


class CompressionError(ColdCrateError):
    """A missing backend, or a failed compression or decompression."""


class EncryptionError(ColdCrateError):
    """A missing passphrase or backend, bad KDF parameters, or unsupported encryption."""


__all__ = [
    "ColdCrateError",
    "CompressionError",
    "EncryptionError",
    "InvalidChunkError",
    "InvalidEntryError",
    "SchemaError",
]
