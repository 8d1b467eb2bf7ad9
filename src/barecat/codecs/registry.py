"""The codec registry: which encoder and decoder a file name's extensions call for.

A name is read from the right: final codecs (``.json``, ``.npy``, ``.png``, ...) turn
values into bytes; non-final ones (``.gz``, ``.zst``, ...) turn bytes into bytes and may
stack on top of a final one, so ``data.npy.bz2`` is NumPy inside bzip2. Extensions match
case-insensitively. A name with no final codec under its compression layers has no codec:
``ValueError``, as in barecat 0.3.x's ``DecodedView``, so a typo never silently stores raw
bytes; asked with ``raw_fallback`` (0.3.x's ``auto_codec``), such a name is raw bytes
under its layers instead. Imports nothing of barecat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]


@dataclass(frozen=True, slots=True)
class Codec:
    """One registered format: its two directions, whether it is a stackable layer, and
    whether decoding can run code that came with the data (pickle)."""

    encode: Encoder
    decode: Decoder
    nonfinal: bool = False
    runs_code: bool = False


@dataclass(frozen=True, slots=True)
class CodecChain:
    """What a name calls for: a final codec under zero or more layers (outermost first),
    and the extensions they stand for (``.npy.gz``; only the layers' for raw bytes)."""

    final: Codec
    suffix: str
    layers: tuple[Codec, ...]

    def encode(self, value: Any) -> bytes:
        data = self.final.encode(value)
        for layer in reversed(self.layers):
            data = layer.encode(data)
        return data

    def decode(self, data: bytes) -> Any:
        for layer in self.layers:
            data = layer.decode(data)
        return self.final.decode(data)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(
        f"A name without a codec holds raw bytes, not {type(value).__name__}: "
        "give it an extension that has one (.json, .npy, .pkl, ...)"
    )


def _unchanged(data: bytes) -> bytes:
    return data


RAW = Codec(_as_bytes, _unchanged)
"""The final "codec" of a name without one, when raw bytes are asked for."""


class CodecRegistry:
    """Extensions (with their dot, lower case) mapped to codecs."""

    def __init__(self, codecs: dict[str, Codec] | None = None) -> None:
        self._codecs: dict[str, Codec] = dict(codecs or {})

    def copy(self) -> CodecRegistry:
        return CodecRegistry(self._codecs)

    def register(
        self,
        exts: Iterable[str],
        encoder: Encoder,
        decoder: Decoder,
        nonfinal: bool = False,
        runs_code: bool = False,
    ) -> None:
        """Add (or replace) the codec for each of ``exts`` (``'.yaml'`` or ``'yaml'``)."""
        codec = Codec(encoder, decoder, nonfinal, runs_code)
        for ext in exts:
            self._codecs["." + ext.lower().lstrip(".")] = codec

    def clear(self) -> None:
        self._codecs.clear()

    def unregister(self, exts: Iterable[str]) -> None:
        """Forget the codecs of ``exts`` (those not registered are ignored)."""
        for ext in exts:
            self._codecs.pop("." + ext.lower().lstrip("."), None)

    def extensions(self) -> list[str]:
        return sorted(self._codecs)

    def chain_for(self, path: str, raw_fallback: bool = False) -> CodecChain:
        """The codecs ``path`` calls for.

        Args:
            path: a file name or path; its extensions are read from the right.
            raw_fallback: a name with no final codec under its layers (``x.bin``,
                ``x.gz``, ``x``) stands for raw bytes (under those layers) instead of
                an error.

        Returns:
            The final codec and the layers over it, outermost first.

        Raises:
            ValueError: no final codec (without ``raw_fallback``), naming the extension.
        """
        name = path.rsplit("/", 1)[-1].lower()
        stem = name
        layers: list[Codec] = []
        while True:
            dot = stem.rfind(".", 1)  # a leading dot is a hidden name, not an extension
            ext = stem[dot:] if dot > 0 else ""
            codec = self._codecs.get(ext)
            if codec is None:
                if raw_fallback:
                    return CodecChain(RAW, name[len(stem) :], tuple(layers))
                raise ValueError(
                    f"No codec registered for {ext!r}. Use the store directly for raw bytes."
                )
            if not codec.nonfinal:
                return CodecChain(codec, name[dot:], tuple(layers))
            layers.append(codec)
            stem = stem[:dot]


__all__ = ["RAW", "Codec", "CodecChain", "CodecRegistry", "Decoder", "Encoder"]
