"""What the viewer makes of a file's bytes: a thumbnail that keeps transparency, and a
preview of a file that is not an image (its text, or a hex dump).

Thumbnails are made with Pillow, turned the way the photo's EXIF orientation says (as the
browser turns the full image). An image with transparent pixels gets a WebP thumbnail
with its alpha (PNG where Pillow lacks WebP), so the page can show it over a
checkerboard; an opaque one gets a JPEG, the smallest for photographs.
"""

from __future__ import annotations

import codecs
import io
from typing import Any

PREVIEW_TEXT_BYTES = 16 << 10
"""How much of a file the text preview shows."""
PREVIEW_HEX_BYTES = 2 << 10
"""How much of a file the hex dump shows."""
HEX_ROW = 16


class NotAnImageError(ValueError):
    """Pillow cannot read the bytes as an image."""


def thumbnail(data: bytes, size: int) -> tuple[bytes, str]:
    """A thumbnail of the image ``data``, at most ``size`` pixels wide and high (never
    enlarged: the page scales it).

    Args:
        data: an image file's bytes.
        size: the largest width or height.

    Returns:
        The thumbnail's bytes and media type: ``image/webp`` (or ``image/png``) when the
        image has transparent pixels, ``image/jpeg`` otherwise.

    Raises:
        NotAnImageError: Pillow cannot read it.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError, features

    try:
        with Image.open(io.BytesIO(data)) as opened:
            image = ImageOps.exif_transpose(opened)
            alpha = _has_transparent_pixels(image)
            image = image.convert("RGBA" if alpha else "RGB")
            image.thumbnail((size, size))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise NotAnImageError(str(e)) from e
    out = io.BytesIO()
    if not alpha:
        image.save(out, "JPEG", quality=85)
        return out.getvalue(), "image/jpeg"
    if features.check("webp"):
        image.save(out, "WEBP", quality=85, alpha_quality=100)
        return out.getvalue(), "image/webp"
    image.save(out, "PNG", optimize=True)
    return out.getvalue(), "image/png"


def _has_transparent_pixels(image: Any) -> bool:
    """Whether some pixel of a Pillow image is not fully opaque (an alpha channel that is
    255 everywhere does not count)."""
    if not image.has_transparency_data:
        return False
    low, _ = image.convert("RGBA").getchannel("A").getextrema()
    return bool(low < 255)


def preview(head: bytes, size: int) -> dict[str, Any]:
    """What the page shows of a file that is not an image: its beginning as text when it
    is UTF-8 (without NUL bytes), else a hex dump with offsets and printable characters.

    Args:
        head: the file's first bytes (at least ``PREVIEW_TEXT_BYTES`` of them when it has
            that many).
        size: the file's whole size.

    Returns:
        ``{"kind": "text" | "hex", "text": ..., "shown": bytes shown, "size": size}``.
    """
    text = _as_text(head[:PREVIEW_TEXT_BYTES])
    if text is not None:
        shown = min(len(head), PREVIEW_TEXT_BYTES)
        return {"kind": "text", "text": text, "shown": shown, "size": size}
    part = head[:PREVIEW_HEX_BYTES]
    return {"kind": "hex", "text": hex_dump(part), "shown": len(part), "size": size}


def _as_text(head: bytes) -> str | None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(head, final=False)  # a character cut at the end is left out
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def hex_dump(data: bytes) -> str:
    """``data`` as rows of 16 bytes: the offset, the bytes in hex (two groups of eight) and
    the printable ASCII ones (``.`` for the rest).

    Args:
        data: the bytes.

    Returns:
        The rows, joined by newlines.
    """
    rows = []
    for start in range(0, len(data), HEX_ROW):
        row = data[start : start + HEX_ROW]
        hexes = " ".join(f"{b:02x}" for b in row[:8]) + "  " + " ".join(f"{b:02x}" for b in row[8:])
        shown = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        rows.append(f"{start:08x}  {hexes:<49}|{shown}|")
    return "\n".join(rows)


__all__ = ["NotAnImageError", "hex_dump", "preview", "thumbnail"]
