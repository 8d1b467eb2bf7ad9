"""The image viewer: a local web page over an archive (Starlette, served by uvicorn)."""

from barecat.viewer.serving import serve_viewer

__all__ = ["serve_viewer"]
