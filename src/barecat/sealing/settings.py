"""What a sealed archive records about its sealing, and the rules for moving sealed bytes.

An archive is sealed or plain as a whole. A sealed one keeps, in ``sealing_*`` config
rows: the compression new files get by default (every sealed file also names its own
codec in its header, so a later writer may choose another), the block size, and when it
is encrypted the scrypt parameters, the wrapped data key and a random key id. The key id
names the data key without revealing it, so two archives can be compared for "same key"
without a passphrase: sealed bytes may move between archives only when their readers will
hold the key that sealed them. Knows nothing of SQL; the index stores these records.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass, replace

from barecat.exceptions import BarecatError, BarecatIntegrityError
from barecat.sealing.blocks import DEFAULT_BLOCK_SIZE
from barecat.sealing.compression import CODECS, dictionary_id
from barecat.sealing.keys import KeyDerivation, new_data_key, unwrap_key, wrap_key

ConfigValue = str | int
DEFAULT_LEVELS = {"zstd": 3, "lz4": 0, "none": 0}


@dataclass(frozen=True, slots=True)
class SealingSettings:
    """An archive's sealing, as stored in its config rows (see the module doc)."""

    codec: str = "zstd"
    level: int = 3
    block_size: int = DEFAULT_BLOCK_SIZE
    key_derivation: KeyDerivation | None = None
    wrapped_key: bytes = b""
    key_id: str = ""
    dictionary: bytes = b""
    """A trained zstd dictionary used by every zstd-compressed file, or empty."""

    @property
    def encrypted(self) -> bool:
        return self.key_derivation is not None

    @classmethod
    def new(
        cls,
        codec: str = "zstd",
        level: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        passphrase: str | bytes | None = None,
        dictionary: bytes = b"",
    ) -> tuple[SealingSettings, bytes | None]:
        """Settings for a new sealed archive, and its data key (None unless encrypted)."""
        if codec not in CODECS:
            raise BarecatError(f"Unknown compression {codec!r}; known: {', '.join(CODECS)}")
        if dictionary and codec != "zstd":
            raise BarecatError("A compression dictionary is for zstd only")
        level = DEFAULT_LEVELS[codec] if level is None else level
        settings = cls(codec, level, block_size, dictionary=dictionary)
        if passphrase is None:
            return settings, None
        data_key = new_data_key()
        return settings.with_passphrase(data_key, passphrase, os.urandom(8).hex()), data_key

    def with_passphrase(
        self, data_key: bytes, passphrase: str | bytes, key_id: str | None = None
    ) -> SealingSettings:
        """The same settings with ``data_key`` wrapped under a new passphrase (a fresh
        salt each time), keeping the key id unless one is given."""
        derivation = KeyDerivation.fresh()
        return replace(
            self,
            key_derivation=derivation,
            wrapped_key=wrap_key(data_key, derivation.derive(passphrase)),
            key_id=self.key_id if key_id is None else key_id,
        )

    def unlock(self, passphrase: str | bytes) -> tuple[bytes, bool]:
        """The data key, and whether the archive promises an index digest.

        Raises:
            WrongPassphraseBarecatError: a wrong passphrase.
            KeyDerivationCostBarecatError: key-derivation costs above the ceiling.
        """
        if self.key_derivation is None:
            raise BarecatError("This archive is not encrypted: it has no passphrase")
        return unwrap_key(self.wrapped_key, self.key_derivation.derive(passphrase))

    def binding(self) -> bytes:
        """The choices an encrypted archive's index digest is bound to: the key id, the
        default compression and block size, and the dictionary's SHA-256."""
        dictionary = hashlib.sha256(self.dictionary).hexdigest() if self.dictionary else ""
        return repr((self.key_id, self.codec, self.level, self.block_size, dictionary)).encode()

    def to_config(self) -> dict[str, ConfigValue]:
        records: dict[str, ConfigValue] = {
            "sealing_codec": self.codec,
            "sealing_level": self.level,
            "sealing_block_size": self.block_size,
        }
        if self.dictionary:
            records.update(
                sealing_zstd_dictionary=base64.b64encode(self.dictionary).decode("ascii"),
                sealing_zstd_dictionary_id=dictionary_id(self.dictionary),
                sealing_zstd_dictionary_sha256=hashlib.sha256(self.dictionary).hexdigest(),
            )
        if self.key_derivation is not None:
            kd = self.key_derivation
            records.update(
                sealing_kdf="scrypt",
                sealing_kdf_salt=kd.salt.hex(),
                sealing_kdf_n=kd.n,
                sealing_kdf_r=kd.r,
                sealing_kdf_p=kd.p,
                sealing_wrapped_key=self.wrapped_key.hex(),
                sealing_key_id=self.key_id,
            )
        return records

    @classmethod
    def from_config(cls, records: dict[str, ConfigValue]) -> SealingSettings:
        try:
            derivation = None
            if "sealing_kdf" in records:
                if records["sealing_kdf"] != "scrypt":
                    raise BarecatError(
                        f"Unknown key derivation {records['sealing_kdf']!r} in this archive; "
                        "a newer barecat may read it"
                    )
                derivation = KeyDerivation(
                    bytes.fromhex(str(records["sealing_kdf_salt"])),
                    int(records["sealing_kdf_n"]),
                    int(records["sealing_kdf_r"]),
                    int(records["sealing_kdf_p"]),
                )
            dictionary = base64.b64decode(str(records.get("sealing_zstd_dictionary", "")))
            settings = cls(
                str(records["sealing_codec"]),
                int(records["sealing_level"]),
                int(records["sealing_block_size"]),
                derivation,
                bytes.fromhex(str(records.get("sealing_wrapped_key", ""))),
                str(records.get("sealing_key_id", "")),
                dictionary,
            )
        except (KeyError, ValueError, TypeError, binascii.Error) as e:
            raise BarecatError(f"Damaged sealing settings in the archive's config: {e}") from e
        stated = records.get("sealing_zstd_dictionary_sha256")
        if stated is not None and stated != hashlib.sha256(dictionary).hexdigest():
            raise BarecatIntegrityError(
                "The archive's compression dictionary is damaged (its SHA-256 differs from "
                "the one recorded): files compressed with it cannot be read"
            )
        return settings

    def can_take_bytes_from(self, source: SealingSettings | None, prefix: str) -> str | None:
        """Why sealed bytes of an archive sealed with ``source`` (None: plain) cannot be
        copied as they are into one sealed with these settings; None if they can."""
        if source is None:
            return "a plain archive's files cannot join a sealed archive as they are"
        if source.key_id != self.key_id:  # ('' for both when neither is encrypted)
            return "the archives are not encrypted with the same key"
        if self.encrypted and prefix:
            return "encrypted files are bound to their paths, so they cannot move under a prefix"
        if source.dictionary and source.dictionary != self.dictionary:
            return "the source's files need its compression dictionary, which differs"
        return None


__all__ = ["DEFAULT_LEVELS", "SealingSettings"]
