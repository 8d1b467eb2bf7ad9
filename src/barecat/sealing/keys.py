"""Keys of an encrypted archive: a random data key, wrapped by one derived from a passphrase.

Files are sealed with a 32-byte data key drawn at random when the archive is created. The
index keeps it only wrapped (AES-256-GCM) under a key derived from the passphrase with
scrypt, a memory-hard function, with the salt and cost parameters beside it; so changing
the passphrase (``rekey``) rewraps 32 bytes and rewrites no data, and a wrong passphrase
is known at open, when unwrapping fails, before any file is read. scrypt comes with
Python's hashlib; AES-GCM with the optional ``cryptography`` package.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from barecat.exceptions import BarecatError, WrongPassphraseBarecatError
from barecat.sealing.blocks import aead_cipher

_WRAP_AAD = b"barecat-data-key-v1"
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
        secret = passphrase.encode("utf-8") if isinstance(passphrase, str) else passphrase
        if not secret:
            raise BarecatError("An empty passphrase cannot protect an archive")
        memory = 128 * self.r * (self.n + self.p + 2) + (1 << 20)
        return hashlib.scrypt(
            secret, salt=self.salt, n=self.n, r=self.r, p=self.p, maxmem=memory, dklen=32
        )


def new_data_key() -> bytes:
    return os.urandom(32)


def wrap_key(data_key: bytes, wrapping_key: bytes) -> bytes:
    """``data_key`` encrypted under ``wrapping_key``: nonce, then ciphertext and tag."""
    nonce = os.urandom(_NONCE_SIZE)
    return nonce + bytes(aead_cipher(wrapping_key).encrypt(nonce, data_key, _WRAP_AAD))


def unwrap_key(wrapped: bytes, wrapping_key: bytes) -> bytes:
    """The data key, or ``WrongPassphraseBarecatError`` if ``wrapping_key`` is not the one."""
    aead = aead_cipher(wrapping_key)
    try:
        return bytes(aead.decrypt(wrapped[:_NONCE_SIZE], wrapped[_NONCE_SIZE:], _WRAP_AAD))
    except Exception as e:  # InvalidTag
        raise WrongPassphraseBarecatError("Wrong passphrase for this archive") from e


__all__ = [
    "KeyDerivation",
    "WrongPassphraseBarecatError",
    "new_data_key",
    "unwrap_key",
    "wrap_key",
]
