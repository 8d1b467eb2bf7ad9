"""Values stored as bytes by file extension: the codec registry and ``DecodedView``."""

from barecat.codecs.registry import Codec, CodecChain, CodecRegistry
from barecat.codecs.view import DecodedView, UnsafePickleWarning

__all__ = ["Codec", "CodecChain", "CodecRegistry", "DecodedView", "UnsafePickleWarning"]
