"""The image viewer: a local web page over an archive (Starlette, served by uvicorn)."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.web.viewer.serving import serve_viewer
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(__name__, {"barecat.web.viewer.serving": ["serve_viewer"]})

__all__ = ["serve_viewer"]
