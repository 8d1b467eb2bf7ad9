"""The SQLite index: the only package that speaks SQL. Re-exports :class:`Index`
(``compat.py``: the core index of ``index.py`` under barecat 0.3.1's names too)."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.index.compat import Index
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(__name__, {"barecat.index.compat": ["Index"]})

__all__ = ["Index"]
