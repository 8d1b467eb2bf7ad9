"""``barecat.core.index.Index``: the public :class:`barecat.Index` under the module path
that barecat 0.3.1's merge how-to imports it from. Nothing else of 0.3.1's private
layout is kept here; new code imports ``barecat.Index``."""

from barecat.index import Index

__all__ = ["Index"]
