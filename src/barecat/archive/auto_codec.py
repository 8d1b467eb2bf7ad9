"""barecat 0.3.x's codecs on the archive itself, deprecated there and kept working here:
``Barecat(path, auto_codec=True)`` and ``bc.register_codec(...)``.

Either one gives the archive a :class:`~barecat.codecs.DecodedView` over its raw bytes
(``bc.codec_view``), which its dict API (``bc[path]``, ``bc[path] = value``, ``get``,
``items``, ``values``, ``setdefault``) then decodes and encodes through: values by
extension, names without a codec read and written as raw bytes, as 0.3.x did. The
archive stays what it is (a ``Barecat``, or the user's subclass of it): the view is a
part it holds, not a class put before its own, and a plain archive's dict API only sees
that it has none. The archive pickles with its codecs. Everything else (``read``,
``add``, ``open``, listings) stays bytes, as in 0.3.x. New code wraps the archive in a
``DecodedView`` instead. The facade imports this module (when asked for codecs); this
one knows the archive only as a mapping of bytes with a raw read and write.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Protocol, cast

from barecat.codecs import DecodedView
from barecat.codecs.builtin import auto_codec_registry
from barecat.codecs.registry import CodecRegistry
from barecat.codecs.view import KeysOfStore

AUTO_CODEC_DEPRECATED = (
    "auto_codec is deprecated and will be removed in version 1.0. "
    "Use DecodedView instead: dec = DecodedView(bc); dec['file.json'] = data"
)
REGISTER_CODEC_DEPRECATED = (
    "register_codec is deprecated and will be removed in version 1.0. "
    "Use DecodedView instead: dec = DecodedView(bc); dec.register_codec(...)"
)


class _Decodable(Protocol):
    """What the codecs need of an archive (the facade's, which this module must not
    import): where its view goes, and its dict API below the view."""

    codec_view: DecodedView | None

    def _read_raw(self, path: str) -> bytes: ...

    def _write_raw(self, path: str, data: bytes) -> None: ...


class _RawFiles(KeysOfStore):
    """An archive's files as bytes (its dict API below the codecs): the view's store."""

    def __init__(self, archive: MutableMapping[str, Any]) -> None:
        self.store = archive

    def __getitem__(self, path: str) -> bytes:
        return cast(_Decodable, self.store)._read_raw(path)

    def __setitem__(self, path: str, data: bytes) -> None:
        cast(_Decodable, self.store)._write_raw(path, data)


def decode_by_extension(
    archive: MutableMapping[str, Any], codecs: CodecRegistry | None = None
) -> DecodedView:
    """Have ``archive``'s dict API encode and decode by extension from now on.

    Args:
        archive: an open archive; it gets a view over its raw bytes (once).
        codecs: the codecs to start from if it has none yet: 0.3.x's ``auto_codec``
            set by default; an empty registry for ``register_codec`` alone.

    Returns:
        The view its dict API goes through (register further codecs on it).
    """
    coded = cast(_Decodable, archive)
    if coded.codec_view is None:
        coded.codec_view = DecodedView(
            _RawFiles(archive),
            codecs=auto_codec_registry() if codecs is None else codecs,
            raw_fallback=True,
        )
    return coded.codec_view


__all__ = [
    "AUTO_CODEC_DEPRECATED",
    "REGISTER_CODEC_DEPRECATED",
    "decode_by_extension",
]
