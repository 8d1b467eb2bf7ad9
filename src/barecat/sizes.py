"""Byte sizes written by humans ('500M', '1.5G', '4096') turned into integers.

Binary multiples, as the reference's ``-s 1G`` means 2**30 bytes. Imports nothing.
"""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """``'500M'`` -> 524288000; integers pass through; anything else is a ValueError."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"Not a size: {text!r} (expected e.g. 4096, 500M, 1.5G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
