"""The :class:`Barecat` facade: the archive as a mapping and a small filesystem."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.archive.facade import COMMIT_EVERY_FILES, Barecat
    from barecat.archive.sealed import Passphrase
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.archive.facade": ["COMMIT_EVERY_FILES", "Barecat"],
            "barecat.archive.sealed": ["Passphrase"],
        },
    )

__all__ = ["COMMIT_EVERY_FILES", "Barecat", "Passphrase"]
