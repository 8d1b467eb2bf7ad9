"""The SQLite index: the only package that speaks SQL. Re-exports :class:`Index` and
:class:`ReadOnlyIndex` (``index.py``: an index composed of parts, barecat 0.3.1's names
on it too)."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.index.index import Index, ReadOnlyIndex, writable
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__, {"barecat.index.index": ["Index", "ReadOnlyIndex", "writable"]}
    )

__all__ = ["Index", "ReadOnlyIndex", "writable"]
