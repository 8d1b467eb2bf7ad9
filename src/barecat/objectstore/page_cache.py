"""A bounded in-memory cache of byte strings (pages of a remote index), least recently
used first out, bounded by the bytes it holds, and how big it is by default. Imports
``entries`` only (to read sizes such as ``64M``).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable

from barecat.entries import parse_size

DEFAULT_PAGE_CACHE_BYTES = 64 << 20
"""The page cache's size when neither the caller nor ``BARECAT_PAGE_CACHE`` sets one."""


def page_cache_bytes(explicit: int | str | None = None) -> int:
    """The page cache's size in bytes: ``explicit`` if given (an int or a size such as
    ``"256M"``), else the environment variable ``BARECAT_PAGE_CACHE``, else 64 MiB.

    Raises:
        ValueError: the size given, or the variable's, is not a size.
    """
    if explicit is not None:
        return parse_size(explicit)
    text = os.environ.get("BARECAT_PAGE_CACHE", "").strip()
    if not text:
        return DEFAULT_PAGE_CACHE_BYTES
    try:
        return parse_size(text)
    except ValueError as e:
        raise ValueError(f"BARECAT_PAGE_CACHE: {e}") from None


class PageCache:
    """Values (bytes) by key, holding at most ``max_bytes`` bytes of values: a ``put``
    that would pass the bound drops the least recently used entries first, and a value
    larger than the bound is not kept at all. Safe to share between threads.

    Args:
        max_bytes: The bound, in bytes of values held (0 keeps nothing).
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"a page cache cannot hold {max_bytes} bytes")
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"PageCache({self._bytes}/{self.max_bytes} bytes, {len(self)} entries)"

    @property
    def nbytes(self) -> int:
        """Bytes of values held now."""
        return self._bytes

    def get(self, key: Hashable) -> bytes | None:
        """The value of ``key`` (now the most recently used), or None if not held."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: bytes) -> None:
        """Hold ``value`` under ``key`` (replacing any value it had), as the most recently
        used, dropping the least recently used entries to stay within the bound."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            if len(value) > self.max_bytes:
                return
            self._entries[key] = value
            self._bytes += len(value)
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        """Drop every entry (the counts of hits and misses stay)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


__all__ = ["DEFAULT_PAGE_CACHE_BYTES", "PageCache", "page_cache_bytes"]
