"""Directory listings handed to the kernel whole: names with offsets, and with every
entry's attributes when the kernel asks for them (``READDIRPLUS``).

mfusepy fills listings with names and modes only, at offset 0, which libfuse 3 then
cannot turn into the kernel's name and attribute cache: every file read after a listing
costs a ``LOOKUP`` first. Filled with offsets and full attributes, the listing itself
creates those entries, so ``find DIR -type f | xargs cat`` through a read-only mount
sends one request per file (the read) instead of two. Because libfuse asks again for
each continuation of a listing (by offset), the operations keep the listings being read
(``ArchiveFilesystem.listing``). Imports mfusepy (the ``mount`` extra) only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import mfusepy

READDIR_PLUS = 1
"""libfuse's ``FUSE_READDIR_PLUS``: the kernel wants attributes with the names."""
FILL_DIR_PLUS = 2
"""libfuse's ``FUSE_FILL_DIR_PLUS``: this entry carries its attributes."""

Listing = Sequence[tuple[bytes, int, Callable[[], dict[str, int]]]]
"""A directory's entries: encoded name, ``st_mode``, and its attributes when asked for."""


class ListingFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE, filling listings from ``operations.listing(path, offset)``."""

    def readdir_fuse_3(
        self, path: bytes | None, buf: Any, filler: Any, offset: int, fip: Any, flags: int
    ) -> int:
        decoded = "/" if path is None else path.decode(self.encoding, self.errors)
        entries: Listing = self.operations.listing(decoded, offset)
        plus = bool(flags & READDIR_PLUS)
        st = mfusepy.c_stat()
        fill = FILL_DIR_PLUS if plus else 0
        for position in range(offset, len(entries)):
            name, mode, attributes = entries[position]
            if plus:
                ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
                mfusepy.set_st_attrs(st, attributes(), use_ns=True)
            else:
                st.st_mode = mode  # all a plain listing passes on
            if filler(buf, name, st, position + 1, fill) != 0:
                break  # the kernel's buffer is full: it asks again from this offset
        return 0


__all__ = ["ListingFUSE"]
