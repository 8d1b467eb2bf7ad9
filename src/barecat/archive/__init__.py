"""The :class:`Barecat` facade: the archive as a mapping and a small filesystem."""

from barecat.archive.facade import COMMIT_EVERY_FILES, Barecat

__all__ = ["COMMIT_EVERY_FILES", "Barecat"]
