"""The SQLite index: the only package that speaks SQL. Re-exports :class:`Index`."""

from barecat.index.index import Index

__all__ = ["Index"]
