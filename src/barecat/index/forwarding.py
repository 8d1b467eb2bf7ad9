"""The descriptor that hands a name of the index to one of its parts, typed.

An index (``index.py``) is composed of parts (connection, lookups, listing, edits); its
older names (``index.add_file``, barecat 0.3.1's and the ones barecat had before the
parts) stay on it as a table of :class:`Forward` entries, one line each, instead of a
method per name that calls the part. Each entry is typed with the part's own signature
(:func:`to`), and with the index type it may be used on: an edit's entry is typed for
the writable index only, so mypy refuses ``read_only_index.add_file(...)``, and at run
time such a use raises :class:`~barecat.exceptions.ReadOnlyBarecatError`, as an edit of
an index opened read-only always did. Imports only ``exceptions``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from barecat.exceptions import ReadOnlyBarecatError

_O = TypeVar("_O")
_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class Forward(Generic[_O, _T]):
    """The attribute ``name`` (by default, the name this is bound to) of the part held
    as ``part``, on an index of type ``_O``; the value is of type ``_T``. Setting it
    sets the part's attribute. On the class, it is ``target`` when given (the part's
    method: its signature and documentation, for ``help()`` and ``inspect``).

    Args:
        part: the attribute of the index that holds the part.
        name: the part's attribute (None: the same name as on the index).
        target: what the class shows under this name.
    """

    __slots__ = ("name", "part", "target")

    def __init__(self, part: str, name: str | None = None, target: object = None) -> None:
        self.part = part
        self.name = name or ""
        self.target = target

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = self.name or name

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Any: ...

    @overload
    def __get__(self, obj: _O, owner: type[Any] | None = None) -> _T: ...

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self if self.target is None else self.target
        try:
            part = getattr(obj, self.part)
        except AttributeError:  # the edits of an index opened read-only
            raise ReadOnlyBarecatError(
                f"Archive index {obj.path} is open read-only: {self.name} is an edit"
            ) from None
        return getattr(part, self.name)

    def __set__(self, obj: _O, value: _T) -> None:
        setattr(getattr(obj, self.part), self.name, value)


def to(part: str, method: Callable[Concatenate[Any, _P], _R]) -> Forward[Any, Callable[_P, _R]]:
    """An entry that forwards to ``method`` of the part held as ``part``, typed with its
    signature, usable on any index (the reading parts' names).

    Args:
        part: the attribute of the index that holds the part.
        method: the part's method (e.g. ``IndexLookups.lookup_file``); its name is the
            part's attribute.

    Returns:
        The descriptor.
    """
    return Forward(part, method.__name__, method)


__all__ = ["Forward", "to"]
