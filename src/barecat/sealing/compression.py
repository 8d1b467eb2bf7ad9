"""The codecs of sealed blocks: zstd (with or without a trained dictionary) and lz4.

Each block is one frame that states its content size. Decompression never produces more
than the block's expected length, whatever its frame claims: a hostile frame cannot make
a small stored file allocate megabytes. Knows nothing of layouts, keys or archives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import zstandard

from barecat.exceptions import BarecatError, BarecatIntegrityError, MissingDependencyBarecatError

CODECS = {"none": 0, "zstd": 1, "lz4": 2}
ZSTD_WITH_DICTIONARY = 3
"""The codec byte of files compressed with zstd and the archive's trained dictionary."""
KNOWN_CODECS = frozenset((*CODECS.values(), ZSTD_WITH_DICTIONARY))

Dictionary = zstandard.ZstdCompressionDict
Compress = Callable[[bytes], bytes]

_contexts: dict[tuple[int, str, object], Any] = {}
"""zstd contexts by (native thread, kind, settings). They are not safe for simultaneous
use and costly to create per block, so each thread keeps its own; keyed by the thread's
identity rather than thread-local storage, which callbacks from threads Python did not
start (a FUSE server's) lose after every call. A thread that ends leaves its contexts to
the next one given its identity."""


def _zstd_compressor(level: int, dictionary: Dictionary | None) -> zstandard.ZstdCompressor:
    key = (threading.get_ident(), "compress", (level, _identity(dictionary)))
    found: zstandard.ZstdCompressor | None = _contexts.get(key)
    if found is None:
        found = _contexts[key] = zstandard.ZstdCompressor(level=level, dict_data=dictionary)
    return found


def _zstd_decompressor(dictionary: Dictionary | None) -> zstandard.ZstdDecompressor:
    key = (threading.get_ident(), "decompress", _identity(dictionary))
    found: zstandard.ZstdDecompressor | None = _contexts.get(key)
    if found is None:
        found = _contexts[key] = zstandard.ZstdDecompressor(dict_data=dictionary)
    return found


def _identity(dictionary: Dictionary | None) -> tuple[int, int]:
    """What tells dictionaries apart in the per-thread caches: zstd's id and the length."""
    return (0, 0) if dictionary is None else (dictionary.dict_id(), len(dictionary))


def compressor(codec: str, level: int, dictionary: Dictionary | None) -> Compress | None:
    """A function compressing one block with ``codec`` (None for ``"none"``)."""
    if codec == "zstd":
        return lambda data: _zstd_compressor(level, dictionary).compress(data)
    if codec == "lz4":
        frame = lz4_frame()
        return lambda data: bytes(frame.compress(data, compression_level=level))
    return None


def decompress(codec: int, payload: bytes, expected: int, dictionary: Dictionary | None) -> bytes:
    """One compressed block, never decoded past ``expected`` bytes.

    Args:
        codec: the file's codec byte.
        payload: the block's compressed bytes (authenticated first when encrypted).
        expected: how many bytes the block holds.
        dictionary: the archive's dictionary, for ``ZSTD_WITH_DICTIONARY``.

    Returns:
        The decoded bytes (the caller checks their length).

    Raises:
        BarecatIntegrityError: a frame that states another length, or is not one whole
            frame; the codecs' own errors for frames they cannot decode.
    """
    if codec in (CODECS["zstd"], ZSTD_WITH_DICTIONARY):
        stated = zstandard.frame_content_size(payload)
        if stated not in (-1, expected):  # zstd would allocate what the frame states
            raise BarecatIntegrityError(f"its frame states {stated} bytes, not {expected}")
        chosen = dictionary if codec == ZSTD_WITH_DICTIONARY else None
        return bytes(_zstd_decompressor(chosen).decompress(payload, max_output_size=expected))
    if codec == CODECS["lz4"]:
        decompressor = lz4_frame().LZ4FrameDecompressor()
        data = decompressor.decompress(payload, max_length=expected + 1)
        if not decompressor.eof or decompressor.unused_data:
            raise BarecatIntegrityError("its lz4 frame is not one whole frame of the block")
        return bytes(data)
    raise BarecatIntegrityError("marked compressed in a file sealed without a codec")


def lz4_frame() -> Any:
    """``lz4.frame`` (the optional ``lz4`` package), or an error saying how to get it."""
    try:
        import lz4.frame
    except ModuleNotFoundError as e:
        raise MissingDependencyBarecatError("lz4-compressed files need lz4", "sealing", e) from e
    return lz4.frame


def train_dictionary(samples: Sequence[bytes], size: int = 112_640) -> bytes:
    """A zstd dictionary of at most ``size`` bytes trained on ``samples`` (typical files:
    zstd wants about a hundred times the dictionary's size in all)."""
    try:
        return bytes(zstandard.train_dictionary(size, list(samples)).as_bytes())
    except zstandard.ZstdError as e:
        raise BarecatError(
            f"Could not train a dictionary on {len(samples)} samples ({e}); it needs more, "
            "or bigger, sample files"
        ) from e


def dictionary_id(dictionary: bytes) -> int:
    """The id zstd gave a trained dictionary (0 for none)."""
    return int(zstandard.ZstdCompressionDict(dictionary).dict_id()) if dictionary else 0


__all__ = [
    "CODECS",
    "KNOWN_CODECS",
    "ZSTD_WITH_DICTIONARY",
    "Dictionary",
    "compressor",
    "decompress",
    "dictionary_id",
    "lz4_frame",
    "train_dictionary",
]
