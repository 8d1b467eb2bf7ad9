"""Optional packages the codecs need (NumPy, MessagePack, LZ4, image libraries), imported
on first use so that ``import barecat`` stays light; a missing one is a
``MissingDependencyBarecatError`` (a ``ModuleNotFoundError``) that says what to install."""

from __future__ import annotations

import importlib
from typing import Any

from barecat.exceptions import MissingDependencyBarecatError, install_hint

EXTRA_HINT = install_hint("codecs")
_PACKAGES = {"msgpack": "msgpack", "lz4.frame": "lz4", "PIL": "Pillow", "cv2": "opencv-python"}


def optional_module(name: str, purpose: str) -> Any:
    """Import ``name``, or raise naming the package that brings it and the extra."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        package = _PACKAGES.get(name, name.split(".")[0])
        raise MissingDependencyBarecatError(
            f"{purpose} need the '{package}' package", "codecs", e
        ) from e


def available(name: str) -> bool:
    """True if ``name`` can be imported (tried once per call; callers cache)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


__all__ = ["EXTRA_HINT", "available", "optional_module"]
