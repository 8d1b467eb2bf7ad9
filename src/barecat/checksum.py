"""CRC32C (Castagnoli), hardware-accelerated: the ``crc32c`` package's C extension,
loaded without running the package's own start-up.

The package's ``__init__`` looks its version up in the installed packages' metadata and
imports its command line: 20-45 ms, which every fresh process that checks one file
would pay (``barecat cat`` in a shell loop, a script reading one file). Its extension
loads in half a millisecond. It is found in the package's folder (``find_spec`` of a
top-level package finds it without running it) and loaded under its own name, so a later
``import crc32c`` anywhere in the process takes it from ``sys.modules``. Where it cannot
be found that way, the package is imported as usual. Imports nothing of barecat.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType

_EXTENSION = "crc32c._crc32c"


def _extension() -> ModuleType:
    """The module holding ``crc32c``: the extension alone, or the whole package."""
    loaded = sys.modules.get(_EXTENSION)
    if loaded is not None:
        return loaded
    try:
        package = importlib.util.find_spec("crc32c")
        for folder in (package.submodule_search_locations or []) if package else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_crc32c" + suffix)
                if not os.path.exists(path):
                    continue
                spec = importlib.util.spec_from_file_location(_EXTENSION, path)
                if spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[_EXTENSION] = module
                return module
    except (ImportError, OSError):
        pass
    import crc32c as whole_package

    return whole_package


crc32c: Callable[..., int] = _extension().crc32c
"""``crc32c(data, value=0)``: the CRC32C of a bytes-like ``data``, continuing from
``value`` (the C function itself: nothing between a caller and it)."""

__all__ = ["crc32c"]
