"""Sealing one file's bytes: compression and authenticated encryption, block by block.

A sealed file is a small header, a table of block lengths and the blocks. The bytes are
cut into blocks of ``block_size`` (a power of two); each block is compressed on its own
(kept raw when that does not make it smaller) and, with a key, encrypted with
AES-256-GCM. So a reader of bytes ``a..b`` of a big file decodes and authenticates only
the blocks that hold them. The associated data of every block binds it to the file's
path, its block number, the block count and the file's length: bytes moved to another
path, blocks swapped, dropped or appended, or any bit flipped, fail authentication. Each
file gets a fresh random nonce base; block ``i`` uses it with ``i`` added in its last four
bytes, so no (key, nonce) pair repeats. Layout, little-endian::

    header   u8 version (1) | u8 flags (bit 0: encrypted) | u8 codec (0 none, 1 zstd,
             2 lz4, 3 zstd with the archive's dictionary) | u8 log2(block_size) |
             u32 block count | u64 logical length
    nonce    12 bytes, only when encrypted
    table    u32 per block: stored length, high bit set when the block is compressed
    blocks   each: payload, plus a 16-byte GCM tag when encrypted

Knows nothing of SQL, shards or archives; the caller passes paths as text.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import zstandard

from barecat.exceptions import BarecatError, BarecatIntegrityError

VERSION = 1
CODECS = {"none": 0, "zstd": 1, "lz4": 2}
ZSTD_WITH_DICTIONARY = 3
"""The codec byte of files compressed with zstd and the archive's trained dictionary."""
_KNOWN_CODECS = frozenset((*CODECS.values(), ZSTD_WITH_DICTIONARY))
_HEADER = struct.Struct("<BBBBIQ")
_NONCE_SIZE = 12
_TAG_SIZE = 16
_WORD = struct.Struct("<I")
_COMPRESSED = 1 << 31
_ENCRYPTED = 1
DEFAULT_BLOCK_SIZE = 256 << 10
MIN_BLOCK_BITS, MAX_BLOCK_BITS = 12, 24  # 4 KiB .. 16 MiB


@dataclass(frozen=True, slots=True)
class SealedLayout:
    """Where a sealed file's blocks are, read from its header and table."""

    encrypted: bool
    codec: int
    block_size: int
    logical_size: int
    nonce: bytes
    blocks: tuple[tuple[int, int, bool], ...]  # (offset in the sealed bytes, length, compressed)


class Sealer:
    """Seals and unseals file bytes with one set of choices (codec, level, block size, key).

    ``key`` is the archive's 32-byte data key, or None for compression only.
    ``dictionary`` is the archive's trained zstd dictionary, if it has one: zstd
    compresses with it, and reading a file compressed with it needs it.
    """

    def __init__(
        self,
        codec: str = "zstd",
        level: int = 3,
        block_size: int = DEFAULT_BLOCK_SIZE,
        key: bytes | None = None,
        dictionary: bytes | None = None,
    ) -> None:
        if codec not in CODECS:
            raise BarecatError(f"Unknown compression {codec!r}; known: {', '.join(CODECS)}")
        bits = max(0, block_size.bit_length() - 1)
        if block_size != 1 << bits or not MIN_BLOCK_BITS <= bits <= MAX_BLOCK_BITS:
            raise BarecatError(f"Block size must be a power of two, 4 KiB to 16 MiB: {block_size}")
        if key is not None and len(key) != 32:
            raise BarecatError("The data key must be 32 bytes (AES-256)")
        self.codec = codec
        self.level = level
        self.block_bits = bits
        self.block_size = block_size
        self._aead = aead_cipher(key) if key is not None else None
        self._dictionary = zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        self._codec_byte = CODECS[codec]
        if codec == "zstd" and self._dictionary is not None:
            self._codec_byte = ZSTD_WITH_DICTIONARY
        self._compress = _compressor(codec, level, self._dictionary)

    # -- sealing ---------------------------------------------------------------------------

    def seal(self, path: str, data: bytes | bytearray | memoryview) -> bytes:
        """The sealed form of ``data``, bound to ``path`` when encrypted."""
        view = memoryview(data).cast("B")
        stream = self.start(path, len(view))
        bs = self.block_size
        payloads = [stream.seal_block(view[i * bs : (i + 1) * bs]) for i in range(stream.count)]
        return b"".join([stream.head(), *payloads])

    def start(self, path: str, size: int) -> SealingStream:
        """Seal a file of ``size`` bytes block by block, for files too big to hold: each
        block is sealed as it comes; the head, which goes before the blocks, is known
        once they are all sealed."""
        return SealingStream(self, path, size)

    def _seal_block(
        self, path: str, nonce: bytes, i: int, count: int, size: int, block: bytes
    ) -> tuple[bytes, bool]:
        packed = self._compress(block) if self._compress is not None else block
        compressed = len(packed) < len(block)
        payload = packed if compressed else block
        if self._aead is not None:
            aad = _associated_data(path, i, count, size)
            payload = self._aead.encrypt(_block_nonce(nonce, i), payload, aad)
        return payload, compressed

    # -- unsealing -------------------------------------------------------------------------

    def unseal(self, path: str, sealed: bytes) -> bytes:
        """The original bytes of a whole sealed file, every block authenticated."""
        version, flags, codec, bits, count, logical = _HEADER.unpack_from(sealed)
        if count == 1 and version == VERSION and MIN_BLOCK_BITS <= bits <= MAX_BLOCK_BITS:
            # one block, the common case of small files: no layout object to build
            if logical > 1 << bits or codec not in _KNOWN_CODECS:
                raise BarecatIntegrityError(f"{path}: damaged sealed-file header")
            pos = _HEADER.size
            nonce = b""
            if flags & _ENCRYPTED:
                nonce = sealed[pos : pos + _NONCE_SIZE]
                pos += _NONCE_SIZE
            (word,) = _WORD.unpack_from(sealed, pos)
            payload = sealed[pos + 4 : pos + 4 + (word & ~_COMPRESSED)]
            return self._decode(
                path, nonce, codec, 0, 1, logical, bool(word & _COMPRESSED), payload, logical
            )
        layout = read_layout(sealed[: layout_size_hint(sealed)], path)
        return b"".join(
            self.open_block(path, layout, i, sealed[start : start + length])
            for i, (start, length, _) in enumerate(layout.blocks)
        )

    def open_block(self, path: str, layout: SealedLayout, i: int, payload: bytes) -> bytes:
        """Block ``i`` of a sealed file decoded, after authenticating it when encrypted."""
        count, logical = len(layout.blocks), layout.logical_size
        expected = min(layout.block_size, logical - i * layout.block_size)
        nonce = layout.nonce if layout.encrypted else b""
        compressed = layout.blocks[i][2]
        return self._decode(
            path, nonce, layout.codec, i, count, logical, compressed, payload, expected
        )

    def _decode(
        self,
        path: str,
        nonce: bytes,
        codec: int,
        i: int,
        count: int,
        logical: int,
        compressed: bool,
        payload: bytes,
        expected: int,
    ) -> bytes:
        """Authenticate (when ``nonce``: encrypted), then decompress, one block."""
        if nonce:
            if self._aead is None:
                raise BarecatError(f"{path} is encrypted: the archive must be opened with its key")
            aad = _associated_data(path, i, count, logical)
            try:
                payload = self._aead.decrypt(_block_nonce(nonce, i), payload, aad)
            except Exception as e:  # cryptography's InvalidTag: the one failure it has
                raise BarecatIntegrityError(
                    f"{path}: block {i} fails authentication (tampered, moved or truncated)"
                ) from e
        if compressed:
            if codec == ZSTD_WITH_DICTIONARY and self._dictionary is None:
                raise BarecatIntegrityError(f"{path}: compressed with a dictionary not at hand")
            payload = _decompress(codec, payload, expected, self._dictionary)
        if len(payload) != expected:
            raise BarecatIntegrityError(f"{path}: block {i} has the wrong length when decoded")
        return payload


class SealingStream:
    """One file being sealed block by block (``Sealer.start``)."""

    def __init__(self, sealer: Sealer, path: str, size: int) -> None:
        self._sealer = sealer
        self._path = path
        self.size = size
        self.count = max(1, -(-size // sealer.block_size))
        encrypted = sealer._aead is not None
        self._nonce = os.urandom(_NONCE_SIZE) if encrypted else b""
        self._lengths: list[int] = []
        self.head_size = _HEADER.size + len(self._nonce) + 4 * self.count
        """Bytes the head takes: where the first block goes."""
        self.max_size = self.head_size + size + (self.count * _TAG_SIZE if encrypted else 0)
        """The most the sealed file can take (blocks that do not shrink are kept raw)."""

    def seal_block(self, block: bytes | bytearray | memoryview) -> bytes:
        """The next block (``block_size`` bytes, the last one the rest), sealed."""
        i = len(self._lengths)
        expected = min(self._sealer.block_size, self.size - i * self._sealer.block_size)
        if i >= self.count or len(block) != expected:
            raise BarecatError(f"{self._path}: block {i} of the wrong length while sealing")
        payload, compressed = self._sealer._seal_block(
            self._path, self._nonce, i, self.count, self.size, bytes(block)
        )
        self._lengths.append(len(payload) | (_COMPRESSED if compressed else 0))
        return payload

    def head(self) -> bytes:
        """Header, nonce and block table, once every block is sealed."""
        if len(self._lengths) != self.count:
            raise BarecatError(f"{self._path}: sealed {len(self._lengths)} of {self.count} blocks")
        flags = _ENCRYPTED if self._nonce else 0
        s = self._sealer
        header = _HEADER.pack(VERSION, flags, s._codec_byte, s.block_bits, self.count, self.size)
        return b"".join([header, self._nonce, struct.pack(f"<{self.count}I", *self._lengths)])


def layout_size_hint(head: bytes) -> int:
    """How many leading bytes hold the header, nonce and table (from the first 8 bytes)."""
    if len(head) < _HEADER.size:
        raise BarecatIntegrityError("Sealed file shorter than its header")
    _, flags, _, _, count, _ = _HEADER.unpack_from(head)
    return int(_HEADER.size + (_NONCE_SIZE if flags & _ENCRYPTED else 0) + 4 * count)


def read_layout(head: bytes, path: str = "") -> SealedLayout:
    """Parse the header and table of a sealed file (``head``: at least its first
    ``layout_size_hint`` bytes)."""
    version, flags, codec, bits, count, logical = _HEADER.unpack_from(head)
    if version != VERSION or codec not in _KNOWN_CODECS:
        raise BarecatIntegrityError(f"{path}: not a sealed file of a known version")
    if not MIN_BLOCK_BITS <= bits <= MAX_BLOCK_BITS or count != max(1, -(-logical >> bits)):
        raise BarecatIntegrityError(f"{path}: damaged sealed-file header")
    encrypted = bool(flags & _ENCRYPTED)
    pos = _HEADER.size
    nonce = head[pos : pos + _NONCE_SIZE] if encrypted else b""
    pos += len(nonce)
    lengths = struct.unpack_from(f"<{count}I", head, pos)
    offset = pos + 4 * count
    blocks = []
    for word in lengths:
        size = word & ~_COMPRESSED
        blocks.append((offset, size, bool(word & _COMPRESSED)))
        offset += size
    return SealedLayout(encrypted, codec, 1 << bits, logical, nonce, tuple(blocks))


def _associated_data(path: str, block: int, count: int, logical_size: int) -> bytes:
    return (
        b"barecat-sealed-v1\0"
        + path.encode("utf-8", "surrogateescape")
        + struct.pack("<IIQ", block, count, logical_size)
    )


def _block_nonce(base: bytes, block: int) -> bytes:
    counter = (int.from_bytes(base[8:], "little") + block) & 0xFFFFFFFF
    return base[:8] + counter.to_bytes(4, "little")


def aead_cipher(key: bytes) -> Any:
    """AES-256-GCM with ``key`` (the optional ``cryptography`` package)."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "Encrypted archives need the 'cryptography' package: "
            "pip install 'barecat[sealing]' (or pip install cryptography)",
            name="cryptography",
        ) from e
    return AESGCM(key)


_contexts: dict[tuple[int, str, object], Any] = {}
"""zstd contexts by (native thread, kind, settings). They are not safe for simultaneous
use and costly to create per block, so each thread keeps its own; keyed by the thread's
identity rather than thread-local storage, which callbacks from threads Python did not
start (a FUSE server's) lose after every call. A thread that ends leaves its contexts to
the next one given its identity."""


Dictionary = zstandard.ZstdCompressionDict


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


def _compressor(
    codec: str, level: int, dictionary: Dictionary | None
) -> Callable[[bytes], bytes] | None:
    if codec == "zstd":
        return lambda data: _zstd_compressor(level, dictionary).compress(data)
    if codec == "lz4":
        frame = _lz4_frame()
        return lambda data: bytes(frame.compress(data, compression_level=level))
    return None


def _decompress(codec: int, payload: bytes, limit: int, dictionary: Dictionary | None) -> bytes:
    if codec in (CODECS["zstd"], ZSTD_WITH_DICTIONARY):
        chosen = dictionary if codec == ZSTD_WITH_DICTIONARY else None
        return bytes(_zstd_decompressor(chosen).decompress(payload, max_output_size=limit))
    if codec == CODECS["lz4"]:
        return bytes(_lz4_frame().decompress(payload))
    raise BarecatIntegrityError("A block marked compressed in a file sealed without a codec")


def _lz4_frame() -> Any:
    """``lz4.frame`` (the optional ``lz4`` package), or an error saying how to get it."""
    try:
        import lz4.frame
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "lz4-compressed files need the 'lz4' package: pip install 'barecat[sealing]' "
            "(or pip install lz4)",
            name="lz4",
        ) from e
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
    "DEFAULT_BLOCK_SIZE",
    "SealingStream",
    "dictionary_id",
    "train_dictionary",
    "SealedLayout",
    "Sealer",
    "aead_cipher",
    "layout_size_hint",
    "read_layout",
]
