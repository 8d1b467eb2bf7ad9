"""Images as NumPy arrays: encoded and decoded by the first image library present.

Decoded arrays are new, writable and C-contiguous (``torch.from_numpy`` takes them
without a copy or a warning), in one layout whatever the file or the library:

- ``(H, W)`` for grey: ``uint8``, or ``uint16`` for 16-bit grey files; bilevel (1-bit)
  images are ``uint8`` 0 and 255;
- ``(H, W, 3)`` RGB ``uint8`` for colour: palette, CMYK, YCbCr and the like are expanded
  to RGB (OpenCV's BGR is turned around);
- ``(H, W, 4)`` RGBA ``uint8`` for every image with transparency: RGBA, palette with a
  transparent entry, and grey with alpha (``LA``, whose grey fills R, G and B, as
  Pillow's ``convert("RGBA")`` and OpenCV's ``IMREAD_UNCHANGED`` give it), so a model's
  input has 1, 3 or 4 channels and never 2.

Pillow keeps 8 bits per colour channel: 16-bit colour PNGs come back as ``uint8`` (the
high byte) when Pillow decodes them, ``uint16`` when OpenCV does. 32-bit integer and
float TIFFs stay ``int32`` / ``float32`` ``(H, W)``. For each format the backend is
chosen once, on first use: Pillow, then OpenCV, then imageio, the first that has the
format (for JPEG decoding jpeg4py goes first when installed: it is the fastest). JPEG is
written at quality 95. A format no installed library can handle (``.exr`` without OpenCV
built with OpenEXR, say) raises ``ModuleNotFoundError`` saying what to install.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import cache
from typing import Any

from barecat.codecs.dependencies import EXTRA_HINT, available, optional_module

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tiff", ".tif", ".webp", ".exr")
JPEG_QUALITY = 95

_PIL_FORMATS = {
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".png": "PNG",
    ".bmp": "BMP",
    ".gif": "GIF",
    ".tiff": "TIFF",
    ".tif": "TIFF",
    ".webp": "WEBP",
}

_PIL_AS_RGB = ("CMYK", "YCbCr", "LAB", "HSV")
"""Pillow's colour modes that are not RGB: converted to it."""

Encode = Callable[[Any, str], bytes]
Decode = Callable[[bytes, str], Any]


# -- Pillow ------------------------------------------------------------------------------


def _pil_supports(ext: str) -> bool:
    if ext not in _PIL_FORMATS or not available("PIL"):
        return False
    from PIL import features

    return ext != ".webp" or bool(features.check("webp"))


def _pil_encode(value: Any, ext: str) -> bytes:
    np = optional_module("numpy", "Images")
    image_module = optional_module("PIL.Image", "Images")
    array = np.asarray(value)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if ext == ".bmp" and array.ndim == 3 and array.shape[2] == 4:
        raise ValueError("BMP (as Pillow writes it) cannot keep an alpha channel: use .png")
    image = image_module.fromarray(array)
    buf = io.BytesIO()
    options = {"quality": JPEG_QUALITY} if _PIL_FORMATS[ext] == "JPEG" else {}
    if _PIL_FORMATS[ext] == "WEBP":
        options = {"lossless": True}
    image.save(buf, format=_PIL_FORMATS[ext], **options)
    return buf.getvalue()


def _pil_decode(data: bytes, ext: str) -> Any:
    np = optional_module("numpy", "Images")
    image_module = optional_module("PIL.Image", "Images")
    with image_module.open(io.BytesIO(data)) as image:
        if image.mode in ("P", "PA"):  # palette indices mean nothing outside the file
            alpha = image.mode == "PA" or "transparency" in image.info
            image = image.convert("RGBA" if alpha else "RGB")
        elif image.mode in _PIL_AS_RGB:
            image = image.convert("RGB")
        elif image.mode in ("LA", "La", "RGBa"):
            image = image.convert("RGBA")
        return np.asarray(image)  # read-only (Pillow's bytes): decode_image copies it


# -- OpenCV ------------------------------------------------------------------------------


def _cv2_supports(ext: str) -> bool:
    if not available("cv2"):
        return False
    cv2 = optional_module("cv2", "Images")
    return bool(cv2.haveImageWriter("x" + ext)) and bool(cv2.haveImageReader("x" + ext))


def _swap_rgb(array: Any) -> Any:
    if array.ndim == 3 and array.shape[2] in (3, 4):
        order = [2, 1, 0, 3][: array.shape[2]]
        return array[:, :, order]
    return array


def _cv2_encode(value: Any, ext: str) -> bytes:
    np = optional_module("numpy", "Images")
    cv2 = optional_module("cv2", "Images")
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if ext in (".jpg", ".jpeg") else []
    ok, encoded = cv2.imencode(ext, _swap_rgb(np.asarray(value)), params)
    if not ok:
        raise ValueError(f"OpenCV could not encode this array as {ext}")
    return bytes(encoded)


def _cv2_decode(data: bytes, ext: str) -> Any:
    np = optional_module("numpy", "Images")
    cv2 = optional_module("cv2", "Images")
    array = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if array is None:
        raise ValueError(f"OpenCV could not decode these bytes as {ext}")
    return _swap_rgb(array)


# -- imageio -----------------------------------------------------------------------------


def _imageio_encode(value: Any, ext: str) -> bytes:
    iio = optional_module("imageio.v3", "Images")
    return bytes(iio.imwrite("<bytes>", value, extension=ext))


def _imageio_decode(data: bytes, ext: str) -> Any:
    iio = optional_module("imageio.v3", "Images")
    return iio.imread(data, extension=ext)


# -- jpeg4py (decoding JPEG only) --------------------------------------------------------


def _jpeg4py_decode(data: bytes, ext: str) -> Any:
    np = optional_module("numpy", "Images")
    jpeg4py = optional_module("jpeg4py", "Images")
    return jpeg4py.JPEG(np.frombuffer(data, np.uint8)).decode()


@cache
def _backend(ext: str, decoding: bool) -> Encode | Decode:
    if decoding and ext in (".jpg", ".jpeg") and available("jpeg4py"):
        return _jpeg4py_decode
    if _pil_supports(ext):
        return _pil_decode if decoding else _pil_encode
    if _cv2_supports(ext):
        return _cv2_decode if decoding else _cv2_encode
    if available("imageio"):
        return _imageio_decode if decoding else _imageio_encode
    hint = "opencv-python built with OpenEXR" if ext == ".exr" else "Pillow"
    raise ModuleNotFoundError(
        f"No installed image library handles {ext} files: {EXTRA_HINT} (or install {hint})"
    )


def encode_image(value: Any, ext: str) -> bytes:
    """An image array as the bytes of an ``ext`` file."""
    encode: Encode = _backend(ext, False)
    return encode(value, ext)


def decode_image(data: bytes, ext: str) -> Any:
    """The bytes of an ``ext`` file as an image array, in the module doc's layout.

    Args:
        data: the file's bytes.
        ext: its extension (``.png``), which chooses the library.

    Returns:
        A new, writable, C-contiguous NumPy array: ``(H, W)``, ``(H, W, 3)`` RGB or
        ``(H, W, 4)`` RGBA.

    Raises:
        ModuleNotFoundError: no installed library decodes ``ext``.
        Exception: the library's own error for bytes that are not such an image.
    """
    decode: Decode = _backend(ext, True)
    return _in_layout(decode(data, ext))


def _in_layout(array: Any) -> Any:
    """Any backend's array in the module doc's layout, writable and C-contiguous."""
    np = optional_module("numpy", "Images")
    array = np.asarray(array)
    if array.dtype == np.bool_:  # bilevel
        array = array.astype(np.uint8) * np.uint8(255)
    elif not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    elif array.ndim == 3 and array.shape[2] == 2:  # grey and alpha: RGBA
        array = array[:, :, [0, 0, 0, 1]]
    return np.require(array, requirements=("C_CONTIGUOUS", "WRITEABLE"))


__all__ = ["IMAGE_EXTENSIONS", "JPEG_QUALITY", "decode_image", "encode_image"]
