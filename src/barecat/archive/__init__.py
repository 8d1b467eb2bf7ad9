"""The :class:`Barecat` facade: the archive as a mapping and a small filesystem, and
:class:`ReadableArchive`, the read API it shares with the HTTP client."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.archive.facade import COMMIT_EVERY_FILES, Barecat
    from barecat.archive.readable import ReadableArchive
    from barecat.archive.sealed import IfEncrypted, Passphrase
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.archive.facade": ["COMMIT_EVERY_FILES", "Barecat"],
            "barecat.archive.readable": ["ReadableArchive"],
            "barecat.archive.sealed": ["IfEncrypted", "Passphrase"],
        },
    )

if TYPE_CHECKING:

    def _barecat_is_readable(bc: Barecat) -> ReadableArchive:
        return bc  # mypy checks that the facade satisfies the protocol


__all__ = ["COMMIT_EVERY_FILES", "Barecat", "IfEncrypted", "Passphrase", "ReadableArchive"]
