"""``DecodedView``: a mapping that stores values as the bytes their file extension says.

Wraps any ``MutableMapping[str, bytes]`` (a ``Barecat``, a dict): writing
``view['a.json'] = {...}`` stores JSON bytes, reading decodes them again; ``.npy.gz`` is
NumPy inside gzip. A name without a codec raises ``ValueError`` rather than passing raw
bytes through. Unpickling runs whatever code the pickle names, so ``.pkl`` reads are
governed by ``allow_pickle``: ``True`` for archives you made or trust, ``False`` to refuse
them, and by default allowed with an ``UnsafePickleWarning`` the first time (barecat
0.3.x code keeps working, and says what it is doing). Bytes a decoder rejects raise
``ValueError`` naming the path, whatever the decoder's own error type. A view pickles
(with its store and codecs) when its store and its registered functions do, so it can be
handed to spawned DataLoader workers. Never imports the facade.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any

from barecat.codecs.builtin import default_registry
from barecat.codecs.registry import CodecChain, CodecRegistry, Decoder, Encoder

_DEFAULTS = default_registry()


class UnsafePickleWarning(UserWarning):
    """A pickle was loaded from an archive: that can run code the archive's maker chose."""


class KeysOfStore(MutableMapping[str, Any]):
    """A mapping over ``store``, another mapping: its names, their number and deletions
    are the store's; what a name's value is, the subclass says (``__getitem__``,
    ``__setitem__``)."""

    store: MutableMapping[str, Any]

    def __delitem__(self, path: str) -> None:
        del self.store[path]

    def __contains__(self, path: object) -> bool:
        return path in self.store

    def __iter__(self) -> Iterator[str]:
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)


class DecodedView(KeysOfStore):
    """Values in, values out; bytes in the store underneath, as the extensions say.

    Args:
        store: the bytes underneath (a ``Barecat``, a dict, any mapping of bytes).
        allow_pickle: ``True`` loads pickles silently, ``False`` refuses them
            (``PermissionError``), ``None`` loads them with an ``UnsafePickleWarning``
            the first time.
        codecs: the codecs to start from (copied); the built-in ones by default.
        raw_fallback: names without a final codec (``x.bin``, or ``x.gz`` under a
            layer) hold raw bytes instead of raising ``ValueError``, as with barecat
            0.3.x's ``auto_codec``.
    """

    def __init__(
        self,
        store: MutableMapping[str, bytes],
        allow_pickle: bool | None = None,
        *,
        codecs: CodecRegistry | None = None,
        raw_fallback: bool = False,
    ) -> None:
        self.store = store
        self.allow_pickle = allow_pickle
        self.raw_fallback = raw_fallback
        self._codecs = (_DEFAULTS if codecs is None else codecs).copy()
        self._warned = False

    @property
    def codecs(self) -> CodecRegistry:
        """A copy of this view's codecs (to start another view from)."""
        return self._codecs.copy()

    @property
    def extensions(self) -> list[str]:
        """The extensions this view has codecs for."""
        return self._codecs.extensions()

    def register_codec(
        self, exts: Iterable[str], encoder: Encoder, decoder: Decoder, nonfinal: bool = False
    ) -> None:
        """Add a codec for ``exts`` (in this view only); ``nonfinal`` makes it a layer
        that stacks over another format, as compression does."""
        self._codecs.register(exts, encoder, decoder, nonfinal)

    def clear_codecs(self) -> None:
        """Forget every codec of this view, the built-in ones included."""
        self._codecs.clear()

    def __getitem__(self, path: str) -> Any:
        return self.decode(path, self.store[path])

    def decode(self, path: str, data: bytes) -> Any:
        """``data`` decoded as the file ``path`` would be (for bytes fetched in batches)."""
        chain = self._codecs.chain_for(path, self.raw_fallback)
        self._check_pickle(chain, path)
        try:
            return chain.decode(data)
        except ModuleNotFoundError:
            raise
        except Exception as e:  # each decoder has its own error types: one for callers
            raise ValueError(f"{path}: cannot be decoded as {chain.suffix}: {e}") from e

    def encode(self, path: str, value: Any) -> bytes:
        """``value`` as the bytes the file ``path`` would hold.

        Raises:
            ValueError: no codec for ``path`` (unless ``raw_fallback``).
        """
        return self._codecs.chain_for(path, self.raw_fallback).encode(value)

    def __setitem__(self, path: str, value: Any) -> None:
        self.store[path] = self.encode(path, value)

    def _check_pickle(self, chain: CodecChain, path: str) -> None:
        if not chain.final.runs_code or self.allow_pickle:
            return
        if self.allow_pickle is False:
            raise PermissionError(
                f"{path}: loading pickles is disabled (allow_pickle=False); a pickle can "
                "run any code when loaded"
            )
        if not self._warned:
            self._warned = True
            warnings.warn(
                UnsafePickleWarning(
                    f"{path}: loading a pickle runs whatever code it names; pass "
                    "allow_pickle=True to DecodedView for archives you trust (this warning "
                    "goes away), or allow_pickle=False to refuse pickles"
                ),
                stacklevel=3,
            )


__all__ = ["DecodedView", "KeysOfStore", "UnsafePickleWarning"]
