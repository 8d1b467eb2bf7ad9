"""The :class:`Barecat` facade: the archive as a mapping and a small filesystem."""

from barecat.archive.facade import COMMIT_EVERY_FILES, Barecat
from barecat.archive.sealed import Passphrase

__all__ = ["COMMIT_EVERY_FILES", "Barecat", "Passphrase"]
