"""An encrypted archive's index digest: a keyed multiset hash over its file rows.

Each file row (path, stored size, CRC32C of the stored bytes, logical size) has a keyed
BLAKE2b term; the digest is their sum modulo 2^256 and the number of rows. A change to
one row subtracts its old term and adds its new one, so keeping the digest costs the
same for every change whatever the archive's size. The terms need the data key, so
nobody without it can compute what a row adds: a file row put back from an older index
(its old ciphertext still in a hole), added, removed or edited leaves rows that no longer
sum to the digest, which :meth:`IndexDigest.of_rows` over all rows shows.

The digest is kept encrypted (AES-256-GCM under a key derived from the data key, a fresh
nonce each time, the archive's sealing choices as associated data): were the sums
visible, two snapshots of the index would tell an attacker what one row's change adds,
and let them undo it alone. What a user may pin and compare (:meth:`IndexDigest.pin`)
is a keyed hash of the sum, which reveals nothing of it.

Not covered: where a row's bytes are (defrag and reshard move them without the key; the
stored size and CRC32C say which bytes they must be), metadata, directories; and the
whole index rolled back together with its digest to an older state, which only a pinned
digest tells apart. Knows nothing of SQL.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Iterable

from barecat.exceptions import BarecatIntegrityError
from barecat.sealing.blocks import aead_cipher

_MODULUS = 1 << 256
_NONCE_SIZE = 12
_PLAIN = struct.Struct("<32sQ")
_DOMAIN = b"barecat-index-digest-v1\0"

Row = tuple[object, object, object, object]
"""A file row as the digest sees it: (path, size, crc32c, logical_size)."""


class IndexDigest:
    """The digest arithmetic for one archive (see the module doc).

    Args:
        data_key: the archive's 32-byte data key.
        binding: the archive's sealing choices as bytes, bound into every stored digest.
    """

    def __init__(self, data_key: bytes, binding: bytes) -> None:
        self._term_key = _subkey(data_key, b"terms")
        self._pin_key = _subkey(data_key, b"pin")
        self._aead = aead_cipher(_subkey(data_key, b"seal"))
        self._aad = _DOMAIN + binding
        self._last: tuple[str, int, int] = ("", 0, 0)

    def term(self, row: Row) -> int:
        """What one file row adds to the sum."""
        text = repr(tuple(row)).encode("utf-8", "backslashreplace")
        digest = hashlib.blake2b(text, key=self._term_key, digest_size=32).digest()
        return int.from_bytes(digest, "little")

    def of_rows(self, rows: Iterable[Row]) -> tuple[int, int]:
        """(sum, count) over ``rows``."""
        total, count = 0, 0
        for row in rows:
            total += self.term(row)
            count += 1
        return total % _MODULUS, count

    def seal(self, total: int, count: int) -> str:
        """The stored form of a digest: hex of nonce and ciphertext."""
        nonce = os.urandom(_NONCE_SIZE)
        plain = _PLAIN.pack(total.to_bytes(32, "little"), count)
        text = (nonce + bytes(self._aead.encrypt(nonce, plain, self._aad))).hex()
        self._last = (text, total, count)
        return text

    def open(self, text: object) -> tuple[int, int]:
        """(sum, count) of a stored digest.

        Raises:
            BarecatIntegrityError: missing, damaged, forged, or stored for other sealing
                choices.
        """
        last_text, total, count = self._last
        if text == last_text and text:
            return total, count
        try:
            sealed = bytes.fromhex(text)  # type: ignore[arg-type]
            plain = self._aead.decrypt(sealed[:_NONCE_SIZE], sealed[_NONCE_SIZE:], self._aad)
        except Exception as e:  # not text, not hex, InvalidTag
            raise BarecatIntegrityError(
                "the index digest is missing or fails authentication (the index, or its "
                "sealing settings, were changed without the key)"
            ) from e
        raw, count = _PLAIN.unpack(plain)
        return int.from_bytes(raw, "little"), count

    def step(self, text: object, sign: int, path: object, size: object, crc: object,
             logical: object) -> str:  # fmt: skip
        """The stored digest after a row was added (``sign`` 1) or taken away (-1)."""
        total, count = self.open(text)
        total = (total + sign * self.term((path, size, crc, logical))) % _MODULUS
        return self.seal(total, count + sign)

    def pin(self, total: int, count: int) -> str:
        """A digest of the index to write down and compare later (32 hex digits): keyed,
        so it reveals nothing of the sum."""
        plain = _PLAIN.pack(total.to_bytes(32, "little"), count)
        return hashlib.blake2b(plain, key=self._pin_key, digest_size=16).hexdigest()


def lookup_table_tagger(data_key: bytes) -> Callable[[bytes], bytes]:
    """The tag of a saved lookup table (``index/table_trust.py``) under the data key: it
    tells a reader holding the key that someone holding it made the table, for this state
    of the index and its digest. A keyed BLAKE2b-256 under a key of its own."""
    key = _subkey(data_key, b"lookup table")

    def tag(data: bytes) -> bytes:
        return hashlib.blake2b(data, key=key, digest_size=32).digest()

    return tag


def _subkey(data_key: bytes, purpose: bytes) -> bytes:
    return hashlib.blake2b(purpose, key=data_key, digest_size=32, person=b"barecat-index").digest()


__all__ = ["IndexDigest", "Row", "lookup_table_tagger"]
