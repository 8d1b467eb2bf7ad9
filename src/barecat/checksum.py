"""CRC32C (Castagnoli), the checksum of every stored file: the compiled kernels' (the
CPU's instruction) where they are built, else the ``crc32c`` package's C function (see
``barecat.kernels``). Imports nothing of barecat but the kernels.
"""

from __future__ import annotations

from collections.abc import Callable

from barecat.kernels import crc32c as _crc32c

crc32c: Callable[..., int] = _crc32c
"""``crc32c(data, value=0)``: the CRC32C of a bytes-like ``data``, continuing from
``value`` (the C function itself: nothing between a caller and it)."""

__all__ = ["crc32c"]
