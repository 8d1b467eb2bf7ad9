"""Values stored as bytes by file extension: the codec registry and ``DecodedView``."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.codecs.registry import Codec, CodecChain, CodecRegistry
    from barecat.codecs.view import DecodedView, UnsafePickleWarning
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.codecs.registry": ["Codec", "CodecChain", "CodecRegistry"],
            "barecat.codecs.view": ["DecodedView", "UnsafePickleWarning"],
        },
    )

__all__ = ["Codec", "CodecChain", "CodecRegistry", "DecodedView", "UnsafePickleWarning"]
