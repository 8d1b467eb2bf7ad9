"""barecat 0.3.x's codecs on the archive itself, deprecated there and kept working here:
``Barecat(path, auto_codec=True)`` and ``bc.register_codec(...)``.

Either one puts :class:`CodecDictAPI` in front of the archive's class (``Barecat``
becomes ``CodecBarecat``, a subclass ``X`` becomes ``CodecX``): its dict API (``bc[path]``,
``bc[path] = value``, ``get``, ``items``, ``values``, ``setdefault``) goes through a
:class:`~barecat.codecs.DecodedView` over its raw bytes: values encoded and decoded by
extension, names without a codec read and written as raw bytes, as 0.3.x did. Archives
that use neither stay plain ``Barecat`` objects, so the raw dict API pays nothing for
this. (Pickles name the class the archive had, so spawned workers need no class made at
run time.) Everything else (``read``, ``add``, ``open``, listings) stays bytes, as in
0.3.x. New code wraps the archive in a ``DecodedView`` instead. The facade imports this
module (when asked for codecs); this one knows the archive only as a mapping of bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, MutableMapping
from typing import Any, Protocol, cast

from barecat.codecs import DecodedView
from barecat.codecs.builtin import auto_codec_registry
from barecat.codecs.registry import CodecRegistry

AUTO_CODEC_DEPRECATED = (
    "auto_codec is deprecated and will be removed in version 1.0. "
    "Use DecodedView instead: dec = DecodedView(bc); dec['file.json'] = data"
)
REGISTER_CODEC_DEPRECATED = (
    "register_codec is deprecated and will be removed in version 1.0. "
    "Use DecodedView instead: dec = DecodedView(bc); dec.register_codec(...)"
)


class _Picklable(Protocol):
    """What an archive's pickling offers (the facade's ``__getstate__``/``__setstate__``)."""

    def __getstate__(self) -> dict[str, Any]: ...

    def __setstate__(self, state: dict[str, Any]) -> None: ...


class _RawFiles(MutableMapping[str, bytes]):
    """An archive's files as bytes (its dict API below the codecs): the view's store."""

    __slots__ = ("archive",)

    def __init__(self, archive: CodecDictAPI) -> None:
        self.archive = archive

    def __getitem__(self, path: str) -> bytes:
        data: bytes = super(CodecDictAPI, self.archive).__getitem__(path)
        return data

    def __setitem__(self, path: str, data: bytes) -> None:
        super(CodecDictAPI, self.archive).__setitem__(path, data)

    def __delitem__(self, path: str) -> None:
        del self.archive[path]

    def __contains__(self, path: object) -> bool:
        return path in self.archive

    def __iter__(self) -> Iterator[str]:
        return iter(self.archive)

    def __len__(self) -> int:
        return len(self.archive)


class CodecDictAPI(MutableMapping[str, Any]):
    """Put before an archive's class (``type(f"Codec{name}", (CodecDictAPI, cls), ...)``,
    made by :func:`decode_by_extension`): the archive's dict API encodes and decodes
    values by extension (0.3.x's ``auto_codec``/``register_codec``)."""

    __slots__ = ()  # (the archive's own layout, so its class may change to this one's)

    codec_view: DecodedView
    """The view the dict API goes through (its store is this archive's raw bytes)."""
    _plain_class: type[MutableMapping[str, bytes]]
    """The class the archive had before its codecs."""

    def __getitem__(self, path: str) -> Any:
        return self.codec_view[path]

    def __setitem__(self, path: str, value: Any) -> None:
        self.codec_view[path] = value

    def __reduce__(self) -> tuple[Any, ...]:
        """A read-only archive pickles as its plain class's state plus its codecs (which
        pickle if their functions do); a writable one refuses, as a plain one does."""
        view = self.codec_view
        state = cast(_Picklable, self).__getstate__()
        return _reopen, (self._plain_class, state, view.codecs, view.allow_pickle)


def _reopen(
    cls: type[MutableMapping[str, bytes]],
    state: dict[str, Any],
    codecs: CodecRegistry,
    allow_pickle: bool | None,
) -> MutableMapping[str, bytes]:
    archive = cls.__new__(cls)
    cast(_Picklable, archive).__setstate__(state)
    decode_by_extension(archive, codecs).allow_pickle = allow_pickle
    return archive


@functools.cache
def _coded_class(cls: type[MutableMapping[str, bytes]]) -> type[CodecDictAPI]:
    attributes = {"__module__": cls.__module__, "__slots__": (), "_plain_class": cls}
    made = type(f"Codec{cls.__name__}", (CodecDictAPI, cls), attributes)
    made.__qualname__ = f"Codec{cls.__qualname__}"
    return made


def decode_by_extension(
    archive: MutableMapping[str, bytes], codecs: CodecRegistry | None = None
) -> DecodedView:
    """Have ``archive``'s dict API encode and decode by extension from now on.

    Args:
        archive: an open archive; its class gets :class:`CodecDictAPI` before it (once).
        codecs: the codecs to start from if it has none yet: 0.3.x's ``auto_codec``
            set by default; an empty registry for ``register_codec`` alone.

    Returns:
        The view its dict API goes through (register further codecs on it).
    """
    if isinstance(archive, CodecDictAPI):
        return archive.codec_view
    archive.__class__ = _coded_class(type(archive))
    coded = cast(CodecDictAPI, archive)
    coded.codec_view = DecodedView(
        _RawFiles(coded),
        codecs=auto_codec_registry() if codecs is None else codecs,
        raw_fallback=True,
    )
    return coded.codec_view


__all__ = [
    "AUTO_CODEC_DEPRECATED",
    "REGISTER_CODEC_DEPRECATED",
    "CodecDictAPI",
    "decode_by_extension",
]
