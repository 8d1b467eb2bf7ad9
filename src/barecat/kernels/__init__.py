"""The per-file kernels: CRC32C, a checked pread (one and a batch), the lookup table's
probe and whole get, and extraction's loop writing plain files (over index rows the
compiled core reads itself, by SQLite's C interface); compiled where the extension was
built, else the pure-Python reference.

Which one runs is decided here, once, at import: the compiled module
(``barecat.kernels._compiled``, built by ``pip install`` where a C compiler is found)
unless ``BARECAT_PUREPYTHON=1`` is set or it is not installed; :data:`IMPLEMENTATION`
and :data:`WHY` say which and why (``barecat --version`` shows them). Both answer the
same for every input (``python.py`` and ``python_writes.py`` document the contract and are
the reference; the fuzz tests compare them): the checked bytes, or None (a row handed
back) where the caller's careful path must answer. The kernels decide nothing: the
callers in ``shards/``, ``index/`` and ``transfer/`` own every rule. Imports nothing of
barecat but its own parts.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any, Protocol

from barecat.kernels import python as _python

_module: Any
if os.environ.get("BARECAT_PUREPYTHON", "") not in ("", "0"):
    _module, IMPLEMENTATION, WHY = _python, "python", "BARECAT_PUREPYTHON is set"
else:
    try:
        _module = importlib.import_module("barecat.kernels._compiled")
        IMPLEMENTATION, WHY = "compiled", "built at install"
    except ImportError as e:  # (no compiler at install, or a platform it does not build on)
        _module, IMPLEMENTATION, WHY = (
            _python,
            "python",
            f"the compiled core is not installed ({e})",
        )
if IMPLEMENTATION == "compiled":
    _writes: Any = _module
else:  # (imported only here: a compiled process has no need of it)
    from barecat.kernels import python_writes as _writes

crc32c: Callable[..., int] = _module.crc32c
read_checked: Callable[[int, int, int, int | None], bytes | None] = _module.read_checked
read_each: Callable[[dict[int, int], list[Any]], list[bytes | None]] = _module.read_each
AddressTable: type[_python.AddressTable] = _module.AddressTable
canonical: Callable[[object], bool] = _module.canonical
fill_table: Callable[[Any, bytearray, list[Any], Callable[[bytes], int], int], int] = (
    _module.fill_table
)
write_files: Callable[
    [int, dict[int, int], list[Any], bytearray, int, int, dict[str, int], int | None],
    tuple[list[int], int, int],
] = _writes.write_files
CRC32C_INSTRUCTIONS: str = _module.CRC32C_INSTRUCTIONS
"""What computes CRC32C: ``sse4.2``, ``armv8-crc``, ``portable`` (compiled) or
``crc32c package`` (Python)."""
SPAN = _python.SPAN


class IndexRows(Protocol):
    """Rows :func:`read_rows` read in the core (``python_writes.read_rows`` says what
    they do)."""

    def __len__(self) -> int: ...

    def odd(self) -> list[tuple[Any, ...]]:
        """The rows whose path is not surely in normal form, in order."""
        ...

    def write(
        self,
        root: int,
        fds: dict[int, int],
        buffer: bytearray,
        limit: int,
        umask: int,
        dirs: dict[str, int],
        euid: int | None,
        on_files: Callable[[int, int], None] | None,
        batch: int,
    ) -> tuple[list[tuple[Any, ...]], int, int]:
        """``write_files`` over every row, ``batch`` at a time: the rows left, files and
        bytes."""
        ...


read_rows: Callable[[str, str], IndexRows | None] = _writes.read_rows
"""Every row of a statement on an index file, read by SQLite in the core, or None (the
caller then reads them through sqlite3): see ``python_writes.read_rows``."""


def describe() -> str:
    """One line saying which kernels run and why (for ``--version`` and bug reports).

    Returns:
        E.g. ``compiled core (CRC32C: sse4.2)`` or ``pure Python (BARECAT_PUREPYTHON is
        set)``.
    """
    if IMPLEMENTATION == "compiled":
        return f"compiled core (CRC32C: {CRC32C_INSTRUCTIONS})"
    return f"pure Python ({WHY})"


__all__ = [
    "CRC32C_INSTRUCTIONS",
    "IMPLEMENTATION",
    "SPAN",
    "WHY",
    "AddressTable",
    "IndexRows",
    "canonical",
    "crc32c",
    "describe",
    "fill_table",
    "read_checked",
    "read_each",
    "read_rows",
    "write_files",
]
