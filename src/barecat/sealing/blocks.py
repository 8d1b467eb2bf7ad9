"""Sealing one file's bytes: compression and authenticated encryption, block by block.

A sealed file is a small header, a table of block lengths and the blocks. The bytes are
cut into blocks of ``block_size`` (a power of two); each block is compressed on its own
(kept raw when that does not make it smaller) and, with a key, encrypted with
AES-256-GCM. So a reader of bytes ``a..b`` of a big file decodes and authenticates only
the blocks that hold them. The associated data of every block binds it to everything a
reader trusts: the whole header (version, flags, codec, block size, block count, length),
the block's number and its own entry of the table (stored length, compressed or not),
the file's path and, for files compressed with the archive's trained dictionary, that
dictionary's SHA-256. So bytes moved to another path, blocks swapped, dropped or
appended, a header byte changed or any bit flipped fail authentication; and a sealer
holding a key accepts nothing that is not encrypted. Each file gets a fresh random nonce
base; block ``i`` uses it with ``i`` added in its last four bytes, so no (key, nonce)
pair repeats. Layout, little-endian::

    header   u8 version (2; 1 is still read) | u8 flags (bit 0: encrypted) | u8 codec
             (0 none, 1 zstd, 2 lz4, 3 zstd with the archive's dictionary) |
             u8 log2(block_size) | u32 block count | u64 logical length
    nonce    12 bytes, only when encrypted
    table    u32 per block: stored length, high bit set when the block is compressed
    blocks   each: payload, plus a 16-byte GCM tag when encrypted

Every malformed input is a ``BarecatIntegrityError`` naming the path: the header and
table are checked against each other and against the stored length before any block is
touched, and decompression is capped (``compression``). Knows nothing of SQL, shards or
archives; the caller passes paths as text.
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Any, NamedTuple

from barecat.exceptions import BarecatError, BarecatIntegrityError, MissingDependencyBarecatError
from barecat.sealing.compression import (
    CODECS,
    KNOWN_CODECS,
    ZSTD_WITH_DICTIONARY,
    Dictionary,
    compressor,
    decompress,
)

VERSION = 2
"""The version new files are sealed with. Version 1 (before the header and table were
bound into the associated data) is still read."""
_READABLE = (1, VERSION)
_HEADER = struct.Struct("<BBBBIQ")
_WORD = struct.Struct("<I")
_NONCE_SIZE = 12
_TAG_SIZE = 16
_COMPRESSED = 1 << 31
_ENCRYPTED = 1
_AAD_V2 = b"barecat-sealed-v2\0"
_AAD_BLOCK = struct.Struct("<II")
DEFAULT_BLOCK_SIZE = 256 << 10
MIN_BLOCK_BITS, MAX_BLOCK_BITS = 12, 24  # 4 KiB .. 16 MiB


class SealedLayout(NamedTuple):
    """Where a sealed file's blocks are, read from its header and table (checked)."""

    encrypted: bool
    codec: int
    block_size: int
    logical_size: int
    nonce: bytes
    blocks: tuple[tuple[int, int, bool], ...]  # (offset in the sealed bytes, length, compressed)
    header: bytes
    """The header's bytes as stored (bound into every block of a version-2 file)."""

    def expected_length(self, i: int) -> int:
        """How many bytes block ``i`` holds once decoded."""
        return min(self.block_size, self.logical_size - i * self.block_size)


class Sealer:
    """Seals and unseals file bytes with one set of choices (codec, level, block size, key).

    ``key`` is the archive's 32-byte data key, or None for compression only; a sealer
    with a key reads encrypted files only. ``dictionary`` is the archive's trained zstd
    dictionary, if it has one: zstd compresses with it, and reading a file compressed
    with it needs it.
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
        self._dictionary = Dictionary(dictionary) if dictionary else None
        self._dictionary_digest = hashlib.sha256(dictionary).digest() if dictionary else b""
        self._codec_byte = CODECS[codec]
        if codec == "zstd" and self._dictionary is not None:
            self._codec_byte = ZSTD_WITH_DICTIONARY
        self._compress = compressor(codec, level, self._dictionary)

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
        self, path: str, header: bytes, nonce: bytes, i: int, block: bytes
    ) -> tuple[bytes, int]:
        """Block ``i`` compressed (when that makes it smaller) and encrypted: its payload
        and its entry of the table."""
        packed = self._compress(block) if self._compress is not None else block
        compressed = len(packed) < len(block)
        payload = packed if compressed else block
        flag = _COMPRESSED if compressed else 0
        if self._aead is None:
            return payload, len(payload) | flag
        word = (len(payload) + _TAG_SIZE) | flag
        aad = self._associated_data(path, header, i, word)
        return self._aead.encrypt(_block_nonce(nonce, i), payload, aad), word

    def _associated_data(self, path: str, header: bytes, i: int, word: int) -> bytes:
        """What block ``i`` of a version-2 file is bound to (see the module doc)."""
        digest = self._dictionary_digest if header[2] == ZSTD_WITH_DICTIONARY else b""
        return b"".join([_AAD_V2, header, _AAD_BLOCK.pack(i, word), digest, _path_bytes(path)])

    # -- unsealing -------------------------------------------------------------------------

    def layout(self, head: bytes, path: str, stored_size: int | None = None) -> SealedLayout:
        """The checked layout of a sealed file, refusing a plain one when this sealer has
        a key.

        Args:
            head: at least the file's first ``layout_size_hint`` bytes.
            path: the file's path, for messages.
            stored_size: the sealed file's whole length, when known.

        Returns:
            The layout (see :func:`read_layout`).

        Raises:
            BarecatIntegrityError: a malformed header or table, or (with a key) a file
                that is not encrypted.
            BarecatError: an encrypted file and no key.
        """
        layout = read_layout(head, path, stored_size)
        if self._aead is not None and not layout.encrypted:
            raise BarecatIntegrityError(
                f"{path}: not encrypted, in an encrypted archive (tampered: every file of it "
                "must authenticate)"
            )
        if layout.encrypted and self._aead is None:
            raise BarecatError(f"{path} is encrypted: the archive must be opened with its key")
        return layout

    def unseal(self, path: str, sealed: bytes) -> bytes:
        """The original bytes of a whole sealed file, every block authenticated.

        Raises:
            BarecatIntegrityError: the bytes are damaged, tampered with or not the file's.
        """
        layout = self.layout(sealed, path, len(sealed))
        if len(layout.blocks) == 1:  # small files: no join
            start, length, _ = layout.blocks[0]
            return self.open_block(path, layout, 0, sealed[start : start + length])
        return b"".join(
            self.open_block(path, layout, i, sealed[start : start + length])
            for i, (start, length, _) in enumerate(layout.blocks)
        )

    def open_block(self, path: str, layout: SealedLayout, i: int, payload: bytes) -> bytes:
        """Block ``i`` of a sealed file (``layout`` from :meth:`layout`) decoded, after
        authenticating it when encrypted.

        Raises:
            BarecatIntegrityError: the block is damaged, tampered with or not the file's.
        """
        _, length, compressed = layout.blocks[i]
        if len(payload) != length:
            raise BarecatIntegrityError(f"{path}: block {i} is truncated")
        if layout.encrypted:
            payload = self._authenticate(path, layout, i, payload)
        expected = layout.expected_length(i)
        if compressed:
            payload = self._decompress(path, layout.codec, i, payload, expected)
        if len(payload) != expected:
            raise BarecatIntegrityError(f"{path}: block {i} has the wrong length when decoded")
        return payload

    def _authenticate(self, path: str, layout: SealedLayout, i: int, payload: bytes) -> bytes:
        if self._aead is None:  # (layout() refuses this; a layout made elsewhere may not)
            raise BarecatError(f"{path} is encrypted: the archive must be opened with its key")
        _, length, compressed = layout.blocks[i]
        if layout.header[0] == 1:
            aad = _associated_data_v1(path, i, len(layout.blocks), layout.logical_size)
        else:
            word = length | (_COMPRESSED if compressed else 0)
            aad = self._associated_data(path, layout.header, i, word)
        try:
            return bytes(self._aead.decrypt(_block_nonce(layout.nonce, i), payload, aad))
        except Exception as e:  # cryptography's InvalidTag: the one failure it has
            raise BarecatIntegrityError(
                f"{path}: block {i} fails authentication (tampered, moved or truncated)"
            ) from e

    def _decompress(self, path: str, codec: int, i: int, payload: bytes, expected: int) -> bytes:
        if codec == ZSTD_WITH_DICTIONARY and self._dictionary is None:
            raise BarecatIntegrityError(f"{path}: compressed with a dictionary not at hand")
        try:
            return decompress(codec, payload, expected, self._dictionary)
        except BarecatIntegrityError as e:
            raise BarecatIntegrityError(f"{path}: block {i}: {e}") from None
        except ModuleNotFoundError:
            raise
        except Exception as e:  # zstd's ZstdError, lz4's RuntimeError, MemoryError, ...
            raise BarecatIntegrityError(
                f"{path}: block {i} does not decompress ({type(e).__name__}: {e})"
            ) from None


class SealingStream:
    """One file being sealed block by block (``Sealer.start``)."""

    def __init__(self, sealer: Sealer, path: str, size: int) -> None:
        self._sealer = sealer
        self._path = path
        self.size = size
        self.count = max(1, -(-size // sealer.block_size))
        encrypted = sealer._aead is not None
        self._nonce = os.urandom(_NONCE_SIZE) if encrypted else b""
        flags = _ENCRYPTED if encrypted else 0
        self._header = _HEADER.pack(
            VERSION, flags, sealer._codec_byte, sealer.block_bits, self.count, size
        )
        self._words: list[int] = []
        self.head_size = _HEADER.size + len(self._nonce) + 4 * self.count
        """Bytes the head takes: where the first block goes."""
        self.max_size = self.head_size + size + (self.count * _TAG_SIZE if encrypted else 0)
        """The most the sealed file can take (blocks that do not shrink are kept raw)."""

    def seal_block(self, block: bytes | bytearray | memoryview) -> bytes:
        """The next block (``block_size`` bytes, the last one the rest), sealed."""
        i = len(self._words)
        expected = min(self._sealer.block_size, self.size - i * self._sealer.block_size)
        if i >= self.count or len(block) != expected:
            raise BarecatError(f"{self._path}: block {i} of the wrong length while sealing")
        payload, word = self._sealer._seal_block(
            self._path, self._header, self._nonce, i, bytes(block)
        )
        self._words.append(word)
        return payload

    def head(self) -> bytes:
        """Header, nonce and block table, once every block is sealed."""
        if len(self._words) != self.count:
            raise BarecatError(f"{self._path}: sealed {len(self._words)} of {self.count} blocks")
        return b"".join([self._header, self._nonce, struct.pack(f"<{self.count}I", *self._words)])


def layout_size_hint(head: bytes, path: str = "") -> int:
    """How many leading bytes hold the header, nonce and table (from the first 16).

    Raises:
        BarecatIntegrityError: fewer than 16 bytes.
    """
    if len(head) < _HEADER.size:
        raise BarecatIntegrityError(f"{path}: sealed file shorter than its header")
    _, flags, _, _, count, _ = _HEADER.unpack_from(head)
    return int(_HEADER.size + (_NONCE_SIZE if flags & _ENCRYPTED else 0) + 4 * count)


def read_layout(head: bytes, path: str = "", stored_size: int | None = None) -> SealedLayout:
    """Parse and check the header and table of a sealed file.

    Args:
        head: at least the file's first ``layout_size_hint`` bytes (more is fine).
        path: the file's path, for messages.
        stored_size: the sealed file's whole length when known: the blocks must fill it.

    Returns:
        The layout; every block's stored length is one its decoded length allows.

    Raises:
        BarecatIntegrityError: anything malformed.
    """
    if len(head) < _HEADER.size:
        raise BarecatIntegrityError(f"{path}: sealed file shorter than its header")
    version, flags, codec, bits, count, logical = _HEADER.unpack_from(head)
    if version not in _READABLE or codec not in KNOWN_CODECS or flags & ~_ENCRYPTED:
        raise BarecatIntegrityError(f"{path}: not a sealed file of a known version")
    if not MIN_BLOCK_BITS <= bits <= MAX_BLOCK_BITS or count != max(1, -(-logical >> bits)):
        raise BarecatIntegrityError(f"{path}: damaged sealed-file header")
    encrypted = bool(flags & _ENCRYPTED)
    pos = _HEADER.size + (_NONCE_SIZE if encrypted else 0)
    offset = pos + 4 * count
    if len(head) < offset or (stored_size is not None and stored_size < offset):
        raise BarecatIntegrityError(f"{path}: sealed file shorter than its block table")
    tag = _TAG_SIZE if encrypted else 0
    block_size = 1 << bits
    last = count - 1
    words = (
        _WORD.unpack_from(head, pos) if count == 1 else struct.unpack_from(f"<{count}I", head, pos)
    )
    blocks = []
    for i, word in enumerate(words):
        size = word & ~_COMPRESSED
        expected = block_size if i < last else logical - last * block_size
        # a raw block is exactly its bytes (and tag); a compressed one only ever shrank
        if word & _COMPRESSED:
            if not tag < size < expected + tag or codec == CODECS["none"]:
                raise BarecatIntegrityError(f"{path}: block {i} has an impossible stored length")
            blocks.append((offset, size, True))
        elif size == expected + tag:
            blocks.append((offset, size, False))
        else:
            raise BarecatIntegrityError(f"{path}: block {i} has an impossible stored length")
        offset += size
    if stored_size is not None and offset != stored_size:
        raise BarecatIntegrityError(
            f"{path}: sealed file of {stored_size} bytes whose blocks say {offset}"
        )
    nonce = head[_HEADER.size : pos]
    return SealedLayout(
        encrypted, codec, block_size, logical, nonce, tuple(blocks), head[: _HEADER.size]
    )


def _path_bytes(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _associated_data_v1(path: str, block: int, count: int, logical_size: int) -> bytes:
    """What a block of a version-1 file is bound to: path, block number, count, length."""
    return (
        b"barecat-sealed-v1\0" + _path_bytes(path) + struct.pack("<IIQ", block, count, logical_size)
    )


def _block_nonce(base: bytes, block: int) -> bytes:
    if not block:
        return base
    counter = (int.from_bytes(base[8:], "little") + block) & 0xFFFFFFFF
    return base[:8] + counter.to_bytes(4, "little")


def aead_cipher(key: bytes) -> Any:
    """AES-256-GCM with ``key`` (the optional ``cryptography`` package)."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ModuleNotFoundError as e:
        raise MissingDependencyBarecatError(
            "Encrypted archives need cryptography", "sealing", e
        ) from e
    return AESGCM(key)


__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "VERSION",
    "SealedLayout",
    "Sealer",
    "SealingStream",
    "aead_cipher",
    "layout_size_hint",
    "read_layout",
]
