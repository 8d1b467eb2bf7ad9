"""Where barecat 0.3.x kept its conversion functions (``from barecat.cli.impl import
wrap_archive``, as its documentation shows); they live in :mod:`barecat.transfer`."""

from barecat.transfer import archive2barecat, barecat2archive, wrap_archive

__all__ = ["archive2barecat", "barecat2archive", "wrap_archive"]
