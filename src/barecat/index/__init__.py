"""The SQLite index: the only package that speaks SQL. Re-exports :class:`Index`."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.index.index import Index
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(__name__, {"barecat.index.index": ["Index"]})

__all__ = ["Index"]
