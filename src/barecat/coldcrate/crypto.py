"""ColdCrate's AES-256-XTS encryption, keyed by a passphrase (confidentiality only).

The chunk key is scrypt(passphrase, salt, 2**log2n, r, p), 32 bytes, with the salt and
costs in the header. What is encrypted at a given offset of the chunk (an entry's
payload or resource id, or the schema at offset 128) is cut into 16 MiB units; unit
``i`` uses the 64-byte key BLAKE2b(u64 offset ‖ u64 i, key=chunk key, person=domain),
payloads and the schema in one domain and resource ids in another, with XTS tweak ``i``
(16 bytes, little-endian). XTS needs a whole AES block, so a unit shorter than 16 bytes
uses AES-256-CTR with the first half of its key and the same counter block. Length is
preserved, so entries keep their framing; there is no authentication (the XXH64 checksum
finds corruption, not tampering), exactly as in the ``coldcrate`` package.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from barecat.coldcrate.errors import EncryptionError
from barecat.exceptions import BarecatError, install_hint
from barecat.kdf import scrypt_key

UNIT_SIZE = 1 << 24
DEFAULT_KDF = (15, 8, 1)  # log2 N, r, p
MAX_LOG2N = 32
SCHEMA_OFFSET = 128
_PAYLOAD_DOMAIN = b"coldcrt-ekey\x00\x00\x00\x00"
_RID_DOMAIN = b"coldcrt-rkey\x00\x00\x00\x00"


def check_kdf(log2n: int, r: int, p: int) -> None:
    """Refuse scrypt costs that do not fit the header's bytes or make no sense."""
    for name, value in (("log2n", log2n), ("r", r), ("p", p)):
        if not isinstance(value, int) or not 1 <= value <= 255:
            raise EncryptionError(f"kdf {name} must be an int in 1..255, not {value!r}")
    if log2n > MAX_LOG2N:
        raise EncryptionError(f"kdf log2n {log2n} exceeds {MAX_LOG2N}")


def chunk_key(passphrase: str | bytes, salt: bytes, log2n: int, r: int, p: int) -> bytes:
    """The chunk key; costs above barecat's ceiling (``barecat.kdf``) are refused."""
    check_kdf(log2n, r, p)
    if not isinstance(passphrase, str | bytes | bytearray):
        raise EncryptionError("The passphrase must be str or bytes")
    secret = passphrase.encode("utf-8") if isinstance(passphrase, str) else bytes(passphrase)
    try:
        return scrypt_key(secret, salt, 1 << log2n, r, p, "ColdCrate chunk header")
    except (BarecatError, ValueError, OverflowError, MemoryError) as e:
        raise EncryptionError(f"Key derivation refused: {e}") from None


@functools.cache
def _cipher_parts() -> Any:
    """cryptography's cipher classes, imported once (this is on every entry's path)."""
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ModuleNotFoundError:
        raise EncryptionError(
            f"Encrypted chunks need the 'cryptography' package: {install_hint('sealing')}"
        ) from None
    return Cipher, algorithms.AES, modes.XTS, modes.CTR


def _unit(key: bytes, offset: int, index: int, domain: bytes, data: bytes, encrypt: bool) -> bytes:
    unit_key = hashlib.blake2b(
        offset.to_bytes(8, "little") + index.to_bytes(8, "little"),
        key=key, person=domain, digest_size=64,
    ).digest()  # fmt: skip
    cipher_cls, aes, xts, ctr = _cipher_parts()
    tweak = index.to_bytes(16, "little")
    if len(data) >= 16:
        cipher = cipher_cls(aes(unit_key), xts(tweak))
    else:
        cipher = cipher_cls(aes(unit_key[:32]), ctr(tweak))
    op = cipher.encryptor() if encrypt else cipher.decryptor()
    return bytes(op.update(data) + op.finalize())


def _transform(key: bytes, offset: int, data: bytes, encrypt: bool, domain: bytes) -> bytes:
    return b"".join(
        _unit(key, offset, i, domain, data[start : start + UNIT_SIZE], encrypt)
        for i, start in enumerate(range(0, len(data), UNIT_SIZE))
    )


def encrypt_payload(key: bytes, offset: int, data: bytes) -> bytes:
    return _transform(key, offset, data, True, _PAYLOAD_DOMAIN)


def decrypt_payload(key: bytes, offset: int, data: bytes) -> bytes:
    return _transform(key, offset, data, False, _PAYLOAD_DOMAIN)


def encrypt_rid(key: bytes, offset: int, rid: bytes) -> bytes:
    return _transform(key, offset, rid, True, _RID_DOMAIN)


def decrypt_rid(key: bytes, offset: int, rid: bytes) -> bytes:
    return _transform(key, offset, rid, False, _RID_DOMAIN)


__all__ = [
    "DEFAULT_KDF",
    "SCHEMA_OFFSET",
    "check_kdf",
    "chunk_key",
    "decrypt_payload",
    "decrypt_rid",
    "encrypt_payload",
    "encrypt_rid",
]
