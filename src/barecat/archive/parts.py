"""How the :class:`~barecat.archive.Barecat` facade offers the methods of its parts as its
own: ``read = _reading(ArchiveReading.read)`` in the class body makes ``bc.read`` the
``read`` of the part the archive holds as ``bc._reading``, bound to it, and
``Barecat.read`` the part's function itself, so ``help``, ``inspect.signature`` and type
checkers see the part's signature and docstring.

The bound method is made once per archive and kept in the archive's ``__dict__`` (as
``functools.cached_property`` keeps its value), so calling a part's method costs what
calling the facade's own did, and less. It is not kept when a subclass overrides the
name (``super().read`` from the override must not replace it). Imports nothing of
barecat.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class PartMethod(Generic[_T, _P, _R]):
    """A method of the part held in the attribute ``part``, offered by its owner: on an
    instance, the part's bound method (see the module doc); on the class, the part's
    function."""

    def __init__(self, part: str, method: Callable[Concatenate[_T, _P], _R]) -> None:
        self.part = part
        self.method = method
        self.name = method.__name__
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[Concatenate[_T, _P], _R]: ...

    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Callable[_P, _R]: ...

    def __get__(self, obj: object, owner: type[Any] | None = None) -> Callable[..., _R]:
        if obj is None:
            return self.method
        bound = types.MethodType(self.method, getattr(obj, self.part))
        if _found_in(type(obj), self.name) is self:  # not overridden
            obj.__dict__[self.name] = bound
        return bound


def _found_in(cls: type[Any], name: str) -> object:
    """What the class attribute ``name`` of ``cls`` is, as defined (not bound)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


class Parts:
    """Makes the :class:`PartMethod` s of the part held in the attribute ``part``."""

    def __init__(self, part: str) -> None:
        self.part = part

    def __call__(self, method: Callable[Concatenate[_T, _P], _R]) -> PartMethod[_T, _P, _R]:
        return PartMethod(self.part, method)


__all__ = ["PartMethod", "Parts"]
