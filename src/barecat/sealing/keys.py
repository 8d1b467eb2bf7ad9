"""Keys of an encrypted archive: a random data key, wrapped by one derived from a passphrase.

Files are sealed with a 32-byte data key drawn at random when the archive is created. The
index keeps it only wrapped (AES-256-GCM) under a key derived from the passphrase with
scrypt, a memory-hard function, with the salt and cost parameters beside it; so changing
the passphrase (``rekey``) rewraps 32 bytes and rewrites no data, and a wrong passphrase
is known at open, when unwrapping fails, before any file is read. scrypt comes with
Python's hashlib; AES-GCM with the optional ``cryptography`` package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from barecat.exceptions import WrongPassphraseBarecatError
from barecat.kdf import scrypt_key
from barecat.sealing.blocks import aead_cipher

_WRAP_AAD = b"barecat-data-key-v2"
_WRAP_AAD_BEFORE_DIGESTS = b"barecat-data-key-v1"
_NONCE_SIZE = 12
DEFAULT_SCRYPT_N = 1 << 15  # 32 MiB of memory with r=8; about 0.1 s here
DEFAULT_SCRYPT_R = 8
DEFAULT_SCRYPT_P = 1


@dataclass(frozen=True, slots=True)
class KeyDerivation:
    """scrypt's salt and costs, as stored in the index."""

    salt: bytes
    n: int = DEFAULT_SCRYPT_N
    r: int = DEFAULT_SCRYPT_R
    p: int = DEFAULT_SCRYPT_P

    @classmethod
    def fresh(cls) -> KeyDerivation:
        return cls(os.urandom(16))

    def derive(self, passphrase: str | bytes) -> bytes:
        """The wrapping key for ``passphrase``; costs above barecat's ceiling (see
        ``barecat.kdf``) are refused before deriving."""
        secret = passphrase.encode("utf-8") if isinstance(passphrase, str) else passphrase
        return scrypt_key(secret, self.salt, self.n, self.r, self.p, "sealing settings")


def new_data_key() -> bytes:
    return os.urandom(32)


def wrap_key(data_key: bytes, wrapping_key: bytes) -> bytes:
    """``data_key`` encrypted under ``wrapping_key``: nonce, then ciphertext and tag. The
    associated data says the archive keeps an index digest (``sealing/digest.py``), so
    that promise cannot be taken back without the passphrase."""
    nonce = os.urandom(_NONCE_SIZE)
    return nonce + bytes(aead_cipher(wrapping_key).encrypt(nonce, data_key, _WRAP_AAD))


def unwrap_key(wrapped: bytes, wrapping_key: bytes) -> tuple[bytes, bool]:
    """The data key, and whether the archive promises an index digest (False for keys
    wrapped before digests existed).

    Raises:
        WrongPassphraseBarecatError: ``wrapping_key`` is not the one (a wrong passphrase,
            or damaged key-derivation settings or wrapped key).
    """
    aead = aead_cipher(wrapping_key)
    for aad, keeps_digest in ((_WRAP_AAD, True), (_WRAP_AAD_BEFORE_DIGESTS, False)):
        try:
            key = aead.decrypt(wrapped[:_NONCE_SIZE], wrapped[_NONCE_SIZE:], aad)
        except Exception:  # InvalidTag
            continue
        return bytes(key), keeps_digest
    raise WrongPassphraseBarecatError("Wrong passphrase for this archive")


__all__ = [
    "KeyDerivation",
    "WrongPassphraseBarecatError",
    "new_data_key",
    "unwrap_key",
    "wrap_key",
]
