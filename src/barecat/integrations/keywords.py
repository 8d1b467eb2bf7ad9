"""The keyword arguments the engines' public functions share, declared once: which files
and which archive for a reader (:class:`ReaderKeywords`: :class:`FileSelection`'s fields
and :class:`ArchiveLocation`'s key and options), and how the output is made and where
for a writer (:class:`WriterKeywords`: :class:`~barecat.integrations.parts.OutputSettings`'
fields and the location's key and options).

A public function takes them as ``**keywords: Unpack[ReaderKeywords]`` (so type checkers
check each one), turns them into the two values at its top (:func:`reader_values`,
:func:`writer_values`; a keyword it does not know is the ``TypeError`` Python raises),
and is marked :func:`shows_keywords`, which writes them out in its signature
(``inspect.signature``, ``help``): each keyword with its type and default, the defaults
being the values' own. Imports ``selection`` and ``parts`` (pyarrow).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ForwardRef, TypedDict, TypeVar

from barecat.integrations.parts import OutputSettings
from barecat.integrations.selection import ArchiveLocation, FileSelection

if TYPE_CHECKING:
    from barecat.archive import Passphrase

_F = TypeVar("_F", bound=Callable[..., Any])
_V = TypeVar("_V")


class ReaderKeywords(TypedDict, total=False):
    """What an engine reader reads: which files (``pattern``, ``where``, ``params``,
    ``columns``, ``group_by_stem``: the fields of :class:`FileSelection`, each as its
    attribute says) and the archive's key and options (``passphrase``,
    ``storage_options``, ``cache_dir``, ``remote_mode``: :class:`ArchiveLocation`'s).
    The passphrase is used where the plan is made (the driver, Dask's client): the read
    tasks get the data key, never the passphrase; ``cache_dir`` is where that side keeps
    a remote archive's index copy."""

    pattern: str | None
    where: str | None
    params: Sequence[object]
    columns: Sequence[str] | None
    group_by_stem: bool
    passphrase: Passphrase | None
    storage_options: dict[str, Any] | None
    cache_dir: str | None
    remote_mode: str | None


class WriterKeywords(TypedDict, total=False):
    """How an engine writer makes its output (``overwrite``, ``shard_size_limit``,
    ``compression``, ``compression_level``: the fields of
    :class:`~barecat.integrations.parts.OutputSettings`, each as its attribute says),
    and the output's key and options (:class:`ArchiveLocation`'s). ``passphrase``
    encrypts the output: a function giving one is asked once, on the driver; it travels
    to the write tasks, never shown by ``repr``, and the parts share the output's data
    key, so the join re-encrypts nothing. ``storage_options`` are fsspec's for a URL
    output (credentials, endpoint): the driver's and every write task's."""

    overwrite: bool
    shard_size_limit: int | str | None
    compression: str | None
    compression_level: int | None
    passphrase: Passphrase | None
    storage_options: dict[str, Any] | None


_LOCATION = ("passphrase", "storage_options", "cache_dir", "remote_mode")
"""The location's fields a reader takes as keywords (its path is the first argument)."""


def _defaults(*values: type[Any]) -> dict[str, Any]:
    """The fields' defaults of dataclasses (the keywords' defaults)."""
    return {f.name: f.default for value in values for f in dataclasses.fields(value)}


_DEFAULTS = _defaults(FileSelection, ArchiveLocation, OutputSettings)


def _given(keywords: Mapping[str, Any], known: type[Any], function: str) -> dict[str, Any]:
    """Every keyword of ``known``: those given, the others at their defaults.

    Raises:
        TypeError: a keyword ``function`` does not take, as Python words it.
    """
    unknown = sorted(keywords.keys() - known.__annotations__.keys())
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    return {**_DEFAULTS, **keywords}


def _fields(value: type[_V], given: Mapping[str, Any]) -> list[Any]:
    """The values of a dataclass's fields, in order, among ``given``."""
    return [given[f.name] for f in dataclasses.fields(value)]  # type: ignore[arg-type]


def reader_values(
    path_or_url: str | os.PathLike[str], keywords: Mapping[str, Any], function: str
) -> tuple[ArchiveLocation, FileSelection]:
    """Which archive (with its key and options) and which files a reader's keywords
    (those given to the reader named ``function``) say.

    Raises:
        TypeError: a keyword that is none of :class:`ReaderKeywords`.
    """
    given = _given(keywords, ReaderKeywords, function)
    location = ArchiveLocation.of(path_or_url, *(given[k] for k in _LOCATION))
    return location, FileSelection.of(*_fields(FileSelection, given))


def writer_values(
    path: str | os.PathLike[str], keywords: Mapping[str, Any], function: str
) -> tuple[ArchiveLocation, OutputSettings]:
    """Where the output of the writer named ``function`` goes (with its key and
    options) and how it is made, from the keywords given to it.

    Raises:
        TypeError: a keyword that is none of :class:`WriterKeywords`.
    """
    given = _given(keywords, WriterKeywords, function)
    location = ArchiveLocation.of(path, given["passphrase"], given["storage_options"])
    return location, OutputSettings(*_fields(OutputSettings, given))


def _parameters(keywords: type[Any], defaults: Mapping[str, Any]) -> list[inspect.Parameter]:
    """The keys of a keywords ``TypedDict`` as keyword-only parameters, with their types
    (as written) and ``defaults``."""
    parameters = []
    for name, annotation in keywords.__annotations__.items():
        if isinstance(annotation, ForwardRef):
            annotation = annotation.__forward_arg__
        elif not isinstance(annotation, str):  # (Python 3.10 may have evaluated it)
            annotation = inspect.formatannotation(annotation)
        kind = inspect.Parameter.KEYWORD_ONLY
        default = defaults[name]
        parameters.append(inspect.Parameter(name, kind, default=default, annotation=annotation))
    return parameters


def shows_keywords(
    keywords: type[Any], more: type[Any] | None = None, after: Mapping[str, str] | None = None
) -> Callable[[_F], _F]:
    """Mark a function taking ``**keywords: Unpack[keywords]``: its signature shows each
    keyword written out, before its own keyword-only parameters (see the module doc).

    Args:
        keywords: :class:`ReaderKeywords`, :class:`WriterKeywords`, or a ``TypedDict``
            adding keys to one of them.
        more: a dataclass whose fields give the defaults of the added keys.
        after: keywords shown elsewhere than in order: each after the one named
            (Hugging Face's ``images``, after ``group_by_stem``).

    Returns:
        The decorator (it returns the function itself, with ``__signature__`` set).
    """
    shared = _parameters(keywords, {**_DEFAULTS, **({} if more is None else _defaults(more))})
    for name, before in (after or {}).items():
        moved = next(p for p in shared if p.name == name)
        shared.remove(moved)
        shared.insert(1 + [p.name for p in shared].index(before), moved)

    def mark(function: _F) -> _F:
        signature = inspect.signature(function)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        at = next((i for i, p in enumerate(own) if p.kind is p.KEYWORD_ONLY), len(own))
        parameters = [*own[:at], *shared, *own[at:]]
        function.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return function

    return mark


__all__ = [
    "ReaderKeywords",
    "WriterKeywords",
    "reader_values",
    "shows_keywords",
    "writer_values",
]
