"""Imports put off until first use: a package's public names (PEP 562), so importing a
package loads none of its submodules (``import barecat`` costs a few milliseconds, and
each name brings in only the modules it needs when it is first looked up). Imports
nothing from barecat.

A package lists its names here for the interpreter and, under ``if TYPE_CHECKING:``,
imports them for type checkers (which then see no module ``__getattr__``)::

    if TYPE_CHECKING:
        from barecat.index.index import Index
    else:
        __getattr__, __dir__ = lazy_exports(__name__, {"barecat.index.index": ["Index"]})
"""

from __future__ import annotations

import importlib
import sys
import types

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (8 ms) at start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of a package whose names load lazily.

    A name is imported from its module on first access and kept in the package's
    namespace, so later accesses are plain lookups. A subpackage or submodule not yet
    imported is imported when named as an attribute (``barecat.index`` after
    ``import barecat``), and a name exported under the name of a submodule
    (``barecat.transfer.ingest``: the function, not the package ``barecat/transfer/ingest/``)
    stays the export when that submodule is imported: both as they were when the package
    imported everything up front.

    Args:
        package: the package's ``__name__`` (its namespace keeps the names resolved).
        exports: each module (absolute name) and the public names it provides.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.

    Raises:
        ValueError: a name listed for two modules.
    """
    namespace = sys.modules[package].__dict__
    home: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if home.setdefault(name, module) != module:
                raise ValueError(f"{package}: {name!r} listed for {home[name]} and {module}")

    class LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in home and getattr(value, "__name__", None) == f"{package}.{name}":
                return  # the import system binding a submodule that an export shadows
            super().__setattr__(name, value)

    sys.modules[package].__class__ = LazyPackage

    def getattr_(name: str) -> Any:
        module = home.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
        elif not name.startswith("__") and _is_submodule(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(home))

    return getattr_, dir_


def _is_submodule(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
