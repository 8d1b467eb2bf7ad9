"""ColdCrate's per-entry compression: a u64 original length, then an LZ4 block or a zstd
frame, with the (de)compressor objects made once per chunk, not per entry.

The length prefix sizes the output buffer, so decompression first holds it to what the
compressed bytes can make (and, for zstd, to the frame's own content size): a damaged or
hostile prefix raises ``CompressionError`` instead of allocating gigabytes. Imports
``zstandard`` and, for LZ4 chunks, ``lz4``.
"""

from __future__ import annotations

import struct
from typing import Any

import zstandard

from barecat.coldcrate.errors import CompressionError
from barecat.exceptions import install_hint

COMPRESSIONS = {"none": 0, "lz4": 1, "zstd": 2}
_MAX_RATIO = {COMPRESSIONS["lz4"]: 256, COMPRESSIONS["zstd"]: 32768}
"""Most bytes one compressed byte can make: LZ4 spends a byte per 255 bytes of a match,
zstd 4 bytes on a run of 128 KiB (an RLE block)."""
_U64 = struct.Struct("<Q")


class Codec:
    """A chunk's compression, with its (de)compressor objects made once, not per entry."""

    def __init__(self, algo: int, level: int | None = None) -> None:
        self.algo = algo
        self._level = level
        self._zstd_c: Any = None
        self._zstd_d: Any = None
        self._lz4: Any = _lz4_block() if algo == COMPRESSIONS["lz4"] else None

    def compress(self, data: bytes) -> bytes:
        if self.algo == COMPRESSIONS["zstd"]:
            if self._zstd_c is None:
                level = 3 if self._level is None else self._level
                self._zstd_c = zstandard.ZstdCompressor(level=level)
            packed = self._zstd_c.compress(data)
        else:
            extra: dict[str, Any] = {}
            if self._level is not None:
                extra = {"mode": "high_compression", "compression": self._level}
            packed = self._lz4.compress(data, store_size=False, **extra)
        return _U64.pack(len(data)) + bytes(packed)

    def decompress(self, stored: bytes) -> bytes:
        """The original bytes of a stored payload, the length prefix checked before it
        sizes a buffer (see the module doc)."""
        if len(stored) < 8:
            raise CompressionError("A compressed payload shorter than its length prefix")
        (size,) = _U64.unpack_from(stored)
        data = stored[8:]
        if self.algo not in _MAX_RATIO:
            raise CompressionError("An entry marked compressed in a chunk without it")
        if size > _MAX_RATIO[self.algo] * len(data) + 64:
            raise CompressionError(f"A length prefix of {size} bytes for {len(data)} compressed")
        try:
            if self.algo == COMPRESSIONS["zstd"]:
                out = self._unzstd(data, size)
            else:
                out = self._lz4.decompress(data, uncompressed_size=size)
        except CompressionError:
            raise
        except Exception as e:  # the backends' own error types
            raise CompressionError(f"Decompression failed: {e}") from e
        if len(out) != size:
            raise CompressionError(f"Decompressed to {len(out)} bytes, expected {size}")
        return bytes(out)

    def _unzstd(self, data: bytes, size: int) -> bytes:
        if self._zstd_d is None:
            self._zstd_d = zstandard.ZstdDecompressor()
        declared = zstandard.frame_content_size(data)
        if declared < 0:  # not in the frame: the output grows as it is made
            return bytes(self._zstd_d.decompressobj().decompress(data))
        if declared != size:
            raise CompressionError(f"The zstd frame holds {declared} bytes, the entry {size}")
        return bytes(self._zstd_d.decompress(data, max_output_size=size))


def _lz4_block() -> Any:
    try:
        import lz4.block
    except ModuleNotFoundError:
        raise CompressionError(
            f"LZ4 chunks need the 'lz4' package: {install_hint('sealing')}"
        ) from None
    return lz4.block


__all__ = ["COMPRESSIONS", "Codec"]
