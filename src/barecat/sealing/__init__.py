"""Per-file compression and authenticated encryption of stored bytes (no SQL, no paths
beyond the text a caller binds a file to)."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.sealing.blocks import DEFAULT_BLOCK_SIZE, SealedLayout, Sealer, read_layout
    from barecat.sealing.compression import train_dictionary
    from barecat.sealing.keys import (
        KeyDerivation,
        WrongPassphraseBarecatError,
        new_data_key,
        unwrap_key,
        wrap_key,
    )
    from barecat.sealing.reader import SealedFileReader
    from barecat.sealing.settings import SealingSettings
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.sealing.blocks": [
                "DEFAULT_BLOCK_SIZE",
                "SealedLayout",
                "Sealer",
                "read_layout",
            ],
            "barecat.sealing.compression": ["train_dictionary"],
            "barecat.sealing.keys": [
                "KeyDerivation",
                "WrongPassphraseBarecatError",
                "new_data_key",
                "unwrap_key",
                "wrap_key",
            ],
            "barecat.sealing.reader": ["SealedFileReader"],
            "barecat.sealing.settings": ["SealingSettings"],
        },
    )

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "KeyDerivation",
    "SealedFileReader",
    "SealedLayout",
    "Sealer",
    "SealingSettings",
    "WrongPassphraseBarecatError",
    "new_data_key",
    "read_layout",
    "train_dictionary",
    "unwrap_key",
    "wrap_key",
]
