"""The SQLite index: the only package that speaks SQL. Re-exports :class:`Index`
(``compat.py``: the core index of ``index.py`` under barecat 0.3.1's names too)."""

from barecat.index.compat import Index

__all__ = ["Index"]
