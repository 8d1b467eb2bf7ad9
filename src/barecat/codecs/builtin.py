"""The codecs barecat knows out of the box, registered by extension.

Standard library: JSON, pickle (flagged as running code when decoded), gzip, bzip2 and
LZMA layers; zstd through ``zstandard`` (a dependency). NumPy formats (``.npy``, ``.npz``),
MessagePack with NumPy arrays (in msgpack-numpy's layout, so files written by barecat
0.3.x read back) and LZ4 need optional packages, imported on first use: a missing one
raises ``ModuleNotFoundError`` naming what to install. Images live in ``images.py``.
Every codec is a module-level function (or a partial of one), so registries pickle.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import json
import lzma
import pickle
import zipfile
from typing import Any

import zstandard

from barecat.codecs.dependencies import optional_module
from barecat.codecs.images import IMAGE_EXTENSIONS, decode_image, encode_image
from barecat.codecs.registry import CodecRegistry, Decoder, Encoder

# -- data formats ------------------------------------------------------------------------


def _json_encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _pickle_encode(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _npy_encode(value: Any) -> bytes:
    np = optional_module("numpy", ".npy files")
    buf = io.BytesIO()
    np.save(buf, np.asarray(value), allow_pickle=False)  # object arrays: use .pkl
    return buf.getvalue()


def _npy_decode(data: bytes) -> Any:
    np = optional_module("numpy", ".npy files")
    return np.load(io.BytesIO(data), allow_pickle=False)


def _npz_encode(value: Any) -> bytes:
    np = optional_module("numpy", ".npz files")
    buf = io.BytesIO()
    arrays = value if isinstance(value, dict) else {"arr_0": value}
    for key in arrays:
        if not isinstance(key, str) or not key or "\x00" in key:
            raise ValueError(f"An .npz key must be a non-empty str without NUL, not {key!r}")
    # (as np.savez lays it out, one KEY.npy a member; not savez itself, whose own
    # parameters, such as "file", cannot be keys)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as npz:
        for key, a in arrays.items():
            with npz.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(a), allow_pickle=False)
    return buf.getvalue()


def _npz_decode(data: bytes) -> dict[str, Any]:
    np = optional_module("numpy", ".npz files")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


# MessagePack with NumPy values, laid out as msgpack-numpy does: arrays become maps with
# b"nd": True, b"type" (dtype string, or its descr for structured types), b"kind",
# b"shape" and b"data"; NumPy scalars b"nd": False with b"type" and b"data".


def _msgpack_default(obj: Any) -> Any:
    np = optional_module("numpy", "NumPy values in .msgpack files")
    if isinstance(obj, np.ndarray):
        structured = obj.dtype.kind == "V"
        return {
            b"nd": True,
            b"type": obj.dtype.descr if structured else obj.dtype.str,
            b"kind": b"V" if structured else b"",
            b"shape": list(obj.shape),
            b"data": np.ascontiguousarray(obj).tobytes(),
        }
    if isinstance(obj, (np.bool_, np.number)):
        return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
    if isinstance(obj, complex):
        return {b"complex": True, b"data": repr(obj)}
    raise TypeError(f"Cannot store {type(obj).__name__} in MessagePack")


def _msgpack_object_hook(obj: dict[Any, Any]) -> Any:
    if b"nd" in obj:
        np = optional_module("numpy", "NumPy values in .msgpack files")
        kind = obj.get(b"kind", b"")
        descr = obj[b"type"]
        if kind == b"V":
            descr = [tuple(_text(v) if isinstance(v, bytes) else v for v in f) for f in descr]
        dtype = np.dtype(_text(descr) if isinstance(descr, bytes) else descr)
        if obj[b"nd"]:
            return np.frombuffer(obj[b"data"], dtype=dtype).reshape(obj[b"shape"])
        return np.frombuffer(obj[b"data"], dtype=dtype)[0]
    if b"complex" in obj:
        return complex(_text(obj[b"data"]))
    return obj


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _msgpack_encode(value: Any) -> bytes:
    msgpack = optional_module("msgpack", ".msgpack files")
    return bytes(msgpack.packb(value, default=_msgpack_default, use_bin_type=True))


def _msgpack_decode(data: bytes) -> Any:
    msgpack = optional_module("msgpack", ".msgpack files")
    return msgpack.unpackb(data, object_hook=_msgpack_object_hook, raw=False, strict_map_key=False)


# -- compression layers ------------------------------------------------------------------


def _gzip_encode(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)  # no timestamp: the same value, the same bytes


def _lz4_encode(data: bytes) -> bytes:
    return bytes(optional_module("lz4.frame", ".lz4 files").compress(data))


def _lz4_decode(data: bytes) -> bytes:
    return bytes(optional_module("lz4.frame", ".lz4 files").decompress(data))


def _zstd_encode(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def _zstd_decode(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def _image_codec(ext: str) -> tuple[Encoder, Decoder]:
    # partials of module-level functions, not closures: a view's codecs travel to
    # spawned DataLoader workers by pickle
    return functools.partial(encode_image, ext=ext), functools.partial(decode_image, ext=ext)


_NEWER_LAYERS = (".zst", ".zstd", ".lz4")
"""Layers barecat 0.3.x's ``auto_codec`` did not know."""


def default_registry() -> CodecRegistry:
    """A registry with every built-in codec."""
    reg = CodecRegistry()
    reg.register([".json"], _json_encode, json.loads)
    reg.register([".pkl", ".pickle"], _pickle_encode, pickle.loads, runs_code=True)
    reg.register([".npy"], _npy_encode, _npy_decode)
    reg.register([".npz"], _npz_encode, _npz_decode)
    reg.register([".msgpack"], _msgpack_encode, _msgpack_decode)
    for ext in IMAGE_EXTENSIONS:
        reg.register([ext], *_image_codec(ext))
    reg.register([".gz", ".gzip"], _gzip_encode, gzip.decompress, nonfinal=True)
    reg.register([".bz2"], bz2.compress, bz2.decompress, nonfinal=True)
    reg.register([".xz", ".lzma"], lzma.compress, lzma.decompress, nonfinal=True)
    reg.register([".zst", ".zstd"], _zstd_encode, _zstd_decode, nonfinal=True)
    reg.register([".lz4"], _lz4_encode, _lz4_decode, nonfinal=True)
    return reg


def auto_codec_registry() -> CodecRegistry:
    """The codecs of barecat 0.3.x's ``auto_codec=True``: the built-in ones but the zstd
    and LZ4 layers, which it did not know (such names read and wrote raw bytes there,
    and so they still do for code written for it)."""
    reg = default_registry()
    reg.unregister(_NEWER_LAYERS)
    return reg


__all__ = ["auto_codec_registry", "default_registry"]
