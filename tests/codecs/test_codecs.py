"""DecodedView and its codecs: round trips for every format, stacking, custom codecs,
the pickle policy, hostile bytes and missing optional packages."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import barecat
from barecat import DecodedView, UnsafePickleWarning
from helpers import REPO
from helpers.reference import reference_python

DTYPES = st.sampled_from(
    ["u1", "i2", "<u4", ">i8", "f2", "<f4", ">f8", "c8", "c16", "?", "U5", "S3"]
)


def view() -> DecodedView:
    return DecodedView({}, allow_pickle=True)


@settings(max_examples=150, deadline=None)
@given(
    hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)),
    st.sampled_from(["x.npy", "x.npy.gz", "x.npy.zst"]),
)
def test_npy_round_trips_any_dtype_and_shape(array: np.ndarray, name: str) -> None:
    dec = view()
    dec[name] = array
    back = dec[name]
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8),
        hnp.arrays(st.sampled_from(["u1", "<f4", ">i4", "?"]), hnp.array_shapes(max_dims=3)),
        max_size=4,
    )
)
@example({"file": np.zeros(2, "u1"), "allow_pickle": np.ones(1, "?"), "args": np.zeros(0)})
def test_npz_round_trips_dicts_of_arrays(arrays: dict[str, np.ndarray]) -> None:
    dec = view()
    dec["x.npz"] = arrays
    back = dec["x.npz"]
    assert back.keys() == arrays.keys()
    for key, array in arrays.items():
        np.testing.assert_array_equal(back[key], array)
        assert back[key].dtype == array.dtype


def test_npz_refuses_keys_it_cannot_keep() -> None:
    for key in ["", "a\x00b"]:
        with pytest.raises(ValueError, match="npz key"):
            view()["x.npz"] = {key: np.zeros(1)}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES, st.sampled_from(["a.json", "a.json.bz2", "a.JSON.GZ", "a.json.xz.lz4"]))
def test_json_round_trips_through_stacked_layers(value: Any, name: str) -> None:
    dec = view()
    dec[name] = value
    assert dec[name] == value


def test_msgpack_keeps_numpy_arrays_and_scalars() -> None:
    dec = view()
    value = {
        "image": np.arange(24, dtype=np.uint16).reshape(2, 3, 4),
        "scale": np.float32(0.5),
        "points": [np.array([1.5, -2.0]), "label", b"raw", 7, None],
        "record": np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]),
    }
    dec["m.msgpack"] = value
    back = dec["m.msgpack"]
    np.testing.assert_array_equal(back["image"], value["image"])
    assert back["image"].dtype == np.uint16
    assert back["scale"] == np.float32(0.5) and isinstance(back["scale"], np.float32)
    np.testing.assert_array_equal(back["points"][0], value["points"][0])
    assert back["points"][1:] == ["label", b"raw", 7, None]
    assert back["record"].dtype == value["record"].dtype
    assert back["record"][0]["b"] == 2.0


def test_pickle_round_trip_and_policy() -> None:
    store: dict[str, bytes] = {}
    value = {"set": {1, 2}, "tuple": (1, "a"), "bytes": b"x"}
    DecodedView(store)["o.pkl"] = value  # writing is always allowed
    DecodedView(store)["o.pickle.gz"] = value
    assert DecodedView(store, allow_pickle=True)["o.pkl"] == value
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = DecodedView(store)
        assert default["o.pkl"] == value and default["o.pickle.gz"] == value
    assert [w.category for w in caught] == [UnsafePickleWarning]  # once per view
    with pytest.raises(PermissionError, match="allow_pickle=False"):
        DecodedView(store, allow_pickle=False)["o.pkl"]


class _Exploit:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (os.path.join(os.environ["EXPLOIT_DIR"], "pwned"),))


def test_refused_pickles_and_object_npy_run_no_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPLOIT_DIR", str(tmp_path))
    payload = pickle.dumps(_Exploit())
    buf = io.BytesIO()
    np.save(buf, np.array([_Exploit()], dtype=object), allow_pickle=True)
    store = {"evil.pkl": payload, "evil.npy": buf.getvalue()}
    with pytest.raises(PermissionError):
        DecodedView(store, allow_pickle=False)["evil.pkl"]
    with pytest.raises(ValueError, match="allow_pickle"):
        DecodedView(store, allow_pickle=True)["evil.npy"]  # .npy never unpickles
    with pytest.raises(ValueError, match="allow_pickle"):
        DecodedView(store)["object.npy"] = np.array([{"a": 1}], dtype=object)
    assert not (tmp_path / "pwned").exists()


def smooth_image(h: int, w: int, channels: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 3 % 256)]
    image = np.stack(planes[:channels] + [np.full((h, w), 200)] * (channels - 3), axis=-1)
    return image.astype(np.uint8)


@pytest.mark.parametrize("ext", [".png", ".bmp", ".tiff", ".tif", ".webp"])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_lossless_images_round_trip_exactly(ext: str, channels: int) -> None:
    image = smooth_image(17, 23, max(channels, 3))[:, :, :channels]
    if channels == 1:
        image = image[:, :, 0]
    dec = view()
    if ext == ".bmp" and channels == 4:
        with pytest.raises(ValueError, match="alpha"):  # rather than dropping it silently
            dec["img" + ext] = image
        return
    dec["img" + ext] = image
    back = dec["img" + ext]
    if ext == ".webp" and channels == 1:  # WebP has no grey mode: it comes back as RGB
        back = back[:, :, 0]
    assert back.shape == image.shape and back.dtype == np.uint8
    np.testing.assert_array_equal(back, image)


def test_png_keeps_16_bit_and_gif_keeps_few_colours() -> None:
    dec = view()
    deep = (np.arange(12 * 7, dtype=np.uint16).reshape(12, 7) * 700).astype(np.uint16)
    dec["deep.png"] = deep
    np.testing.assert_array_equal(dec["deep.png"], deep)
    palette = np.array([[0, 0, 0], [255, 0, 0], [0, 128, 255]], dtype=np.uint8)
    indexed = palette[np.random.default_rng(0).integers(0, 3, size=(9, 11))]
    dec["few.gif"] = indexed
    np.testing.assert_array_equal(dec["few.gif"], indexed)


def raw_png(array: np.ndarray, colour_type: int) -> bytes:
    """A PNG written by hand (for what Pillow cannot write: 16-bit colour)."""
    import struct
    import zlib

    depth = 16 if array.dtype == np.uint16 else 8
    pixels = array.astype(">u2" if depth == 16 else "u1")
    rows = b"".join(b"\x00" + row.tobytes() for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    h, w = array.shape[:2]
    header = struct.pack(">IIBBBBB", w, h, depth, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pil_file(mode: str, fmt: str = "PNG", **save: Any) -> tuple[bytes, Any]:
    """A real file of a Pillow mode made from a smooth RGBA image, and that image."""
    from PIL import Image

    rgba = Image.fromarray(smooth_image(9, 13, 4))
    image = rgba.convert(mode) if mode != "P" else rgba.convert("RGB").quantize(8)
    buf = io.BytesIO()
    image.save(buf, format=fmt, **save)
    return buf.getvalue(), image


def test_decoded_images_have_one_writable_layout() -> None:
    """Grey (H, W), colour (H, W, 3) RGB, anything with alpha (H, W, 4) RGBA; always a new,
    writable, C-contiguous array (torch.from_numpy warns on read-only ones)."""
    from PIL import Image

    grey16 = (np.arange(9 * 13, dtype=np.uint16).reshape(9, 13) * 500).astype(np.uint16)
    colour16 = np.stack([grey16, grey16 // 2, grey16 // 3], axis=-1)
    store: dict[str, bytes] = {
        "grey.png": pil_file("L")[0],
        "grey-alpha.png": pil_file("LA")[0],
        "palette.png": pil_file("P")[0],
        "palette-transparent.png": pil_file("P", transparency=0)[0],
        "rgb.png": pil_file("RGB")[0],
        "rgba.png": pil_file("RGBA")[0],
        "bilevel.png": pil_file("1")[0],
        "grey16.png": raw_png(grey16, 0),
        "colour16.png": raw_png(colour16, 2),
        "cmyk.jpg": pil_file("CMYK", "JPEG", quality=95)[0],
        "grey.tiff": pil_file("L", "TIFF")[0],
    }
    expected = {
        "grey.png": ((9, 13), np.uint8),
        "grey-alpha.png": ((9, 13, 4), np.uint8),
        "palette.png": ((9, 13, 3), np.uint8),
        "palette-transparent.png": ((9, 13, 4), np.uint8),
        "rgb.png": ((9, 13, 3), np.uint8),
        "rgba.png": ((9, 13, 4), np.uint8),
        "bilevel.png": ((9, 13), np.uint8),
        "grey16.png": ((9, 13), np.uint16),
        "colour16.png": ((9, 13, 3), np.uint8),  # Pillow keeps 8 bits per colour channel
        "cmyk.jpg": ((9, 13, 3), np.uint8),
        "grey.tiff": ((9, 13), np.uint8),
    }
    dec = DecodedView(store)
    for name, (shape, dtype) in expected.items():
        array = dec[name]
        assert (array.shape, array.dtype) == (shape, dtype), name
        assert array.flags.writeable and array.flags.c_contiguous and array.flags.owndata, name
        array[0, 0] = 0  # really writable
    assert dec["bilevel.png"].max() == 255 and set(np.unique(dec["bilevel.png"])) <= {0, 255}
    np.testing.assert_array_equal(dec["grey16.png"], grey16)
    np.testing.assert_array_equal(dec["colour16.png"], (colour16 >> 8).astype(np.uint8))
    la = np.asarray(Image.open(io.BytesIO(store["grey-alpha.png"])))  # grey, alpha
    rgba = dec["grey-alpha.png"]
    for channel in range(3):
        np.testing.assert_array_equal(rgba[:, :, channel], la[:, :, 0])
    np.testing.assert_array_equal(rgba[:, :, 3], la[:, :, 1])
    _, quantized = pil_file("P")
    np.testing.assert_array_equal(dec["palette.png"], np.asarray(quantized.convert("RGB")))
    transparent = dec["palette-transparent.png"]
    assert (transparent[:, :, 3] == 0).any() and (transparent[:, :, 3] == 255).any()
    cmyk = dec["cmyk.jpg"].astype(int)
    assert np.abs(cmyk - smooth_image(9, 13, 3)).mean() < 8.0  # back in RGB, not CMYK


@pytest.mark.parametrize("name", ["photo.jpg", "photo.JPEG", "photo.jpg.gz"])
def test_jpeg_is_close_to_the_original(name: str) -> None:
    image = smooth_image(64, 48, 3)
    dec = view()
    dec[name] = image
    back = dec[name]
    assert back.shape == image.shape and back.dtype == np.uint8
    assert np.abs(back.astype(int) - image).mean() < 2.0  # quality 95


@pytest.mark.parametrize(
    "layer", [".gz", ".gzip", ".bz2", ".xz", ".lzma", ".zst", ".zstd", ".lz4", ".GZ"]
)
def test_every_compression_layer_and_alias(layer: str) -> None:
    store: dict[str, bytes] = {}
    dec = DecodedView(store)
    value = {"text": "abc " * 1000}
    dec["v.json" + layer] = value
    assert len(store["v.json" + layer]) < 500  # really compressed
    assert dec["v.json" + layer] == value


def test_exr_without_a_library_for_it_says_what_to_install() -> None:
    import importlib.util

    if any(importlib.util.find_spec(m) for m in ("cv2", "imageio")):
        pytest.skip("a library that may handle .exr is installed here")
    with pytest.raises(ModuleNotFoundError, match="OpenEXR"):
        view()["hdr.exr"] = np.zeros((2, 2, 3), np.float32)


def test_stacked_layers_are_applied_in_order() -> None:
    store: dict[str, bytes] = {}
    dec = DecodedView(store)
    dec["a.json.gz.bz2"] = {"k": "v"}
    outer = store["a.json.gz.bz2"]
    assert outer.startswith(b"BZh")  # the last extension is the outermost layer
    assert json_bytes(gzip.decompress(bz2.decompress(outer))) == {"k": "v"}
    dec["b.npy.xz"] = np.ones(3)
    assert np.load(io.BytesIO(lzma.decompress(store["b.npy.xz"]))).tolist() == [1, 1, 1]
    dec["c.json.zst"] = [1]
    assert zstandard.ZstdDecompressor().decompressobj().decompress(store["c.json.zst"]) == b"[1]"


def json_bytes(data: bytes) -> Any:
    import json

    return json.loads(data)


def test_custom_codecs_are_per_view_and_can_stack() -> None:
    store: dict[str, bytes] = {}
    dec = DecodedView(store)
    dec.register_codec([".csv"], lambda rows: "\n".join(map(",".join, rows)).encode(),
                       lambda b: [line.split(",") for line in b.decode().split("\n")])  # fmt: skip
    dec.register_codec(["rev"], lambda b: b[::-1], lambda b: b[::-1], nonfinal=True)
    assert {".csv", ".rev", ".json"} <= set(dec.extensions)
    assert ".csv" not in DecodedView(store).extensions
    dec["t.csv.rev"] = [["a", "b"], ["c", "d"]]
    assert store["t.csv.rev"] == b"d,c\nb,a"
    assert dec["t.csv.rev"] == [["a", "b"], ["c", "d"]]
    with pytest.raises(ValueError, match=r"'\.csv'"):
        DecodedView(store)["t.csv"] = [["x"]]  # another view does not see it
    dec.clear_codecs()
    assert dec.extensions == []
    with pytest.raises(ValueError, match=r"No codec registered for '\.json'"):
        dec["x.json"] = 1


@pytest.mark.parametrize("name", ["data.xyz", "data", "data.gz", ".hidden", "a.bz2.gz"])
def test_names_without_a_final_codec_are_refused(name: str) -> None:
    store: dict[str, bytes] = {}
    with pytest.raises(ValueError, match="No codec registered"):
        DecodedView(store)[name] = b"raw"
    assert store == {}


@pytest.mark.parametrize(
    ("name", "garbage"),
    [
        ("bad.json", b"{not json"),
        ("bad.npy", b"\x93NUMPY\x01\x00truncated"),
        ("bad.npz", b"PK\x03\x04 not really"),
        ("bad.png", b"\x89PNG\r\n\x1a\n broken"),
        ("bad.jpg", b"\xff\xd8\xff garbage"),
        ("bad.msgpack", b"\xc1"),
        ("bad.json.gz", b"\x1f\x8b not gzip"),
        ("bad.json.zst", b"\x28\xb5\x2f\xfd junk"),
    ],
)
def test_hostile_bytes_raise_an_error(name: str, garbage: bytes) -> None:
    with pytest.raises(ValueError, match=f"^{name}: cannot be decoded as "):
        DecodedView({name: garbage}, allow_pickle=True)[name]


def test_view_over_a_real_archive(tmp_path: Path) -> None:
    path = str(tmp_path / "d.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        dec = DecodedView(bc)
        dec["cfg/run.json"] = {"lr": 0.001}
        dec["arrays/w.npy.gz"] = np.full((3, 3), 7, dtype=np.int32)
        dec["img/a.png"] = smooth_image(8, 8, 3)
        bc["raw.bin"] = b"raw bytes stay raw"
        del dec["img/a.png"]
    with barecat.Barecat(path) as bc:
        dec = DecodedView(bc)
        assert dec["cfg/run.json"] == {"lr": 0.001}
        assert dec["arrays/w.npy.gz"].sum() == 63
        assert sorted(dec) == ["arrays/w.npy.gz", "cfg/run.json", "raw.bin"]
        assert len(dec) == 3 and "raw.bin" in dec and "img/a.png" not in dec
        with pytest.raises(KeyError):
            dec["missing.json"]
        with pytest.raises(ValueError, match=r"'\.bin'"):
            dec["raw.bin"]


BLOCKED = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed
from barecat import DecodedView
try:
    DecodedView({{}})[{name!r}] = {value}
except ModuleNotFoundError as e:
    print(e)
"""


@pytest.mark.parametrize(
    ("blocked", "name", "value", "package"),
    [
        (["numpy"], "a.npy", "[1, 2]", "numpy"),
        (["msgpack"], "a.msgpack", "{'a': 1}", "msgpack"),
        (["lz4", "lz4.frame"], "a.json.lz4", "[1]", "lz4"),
        (["PIL", "cv2", "imageio"], "a.png", "__import__('numpy').zeros((2, 2), 'u1')", "Pillow"),
    ],
)
def test_missing_optional_packages_say_what_to_install(
    blocked: list[str], name: str, value: str, package: str
) -> None:
    script = BLOCKED.format(blocked=blocked, name=name, value=value)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "pip install '.[codecs]'" in out.stdout and package in out.stdout


# -- barecat 0.3.x's codecs on the archive itself (deprecated, kept working) --------------


def opened_with_auto_codec(path: str, **options: Any) -> barecat.Barecat:
    with pytest.warns(DeprecationWarning, match="auto_codec is deprecated.*DecodedView") as w:
        bc = barecat.Barecat(path, auto_codec=True, **options)
    assert [x.filename for x in w] == [__file__]  # the caller's line, where it can be fixed
    return bc


def test_auto_codec_encodes_and_decodes_by_extension(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    image = smooth_image(12, 10, 3)
    with opened_with_auto_codec(path, readonly=False) as bc:
        bc["cfg.json"] = {"k": [1, 2]}
        bc["w.npy"] = np.arange(6).reshape(2, 3)
        bc["obj.pkl"] = {"set": {1, 2}}
        bc["img.png"] = image
        bc["log.json.gz"] = {"v": "x" * 100}
        bc["raw.xyz"] = b"raw bytes"
        bc["noext"] = b"no extension"
        bc["data.zst"] = b"0.3.x knew no zstd: raw"
        assert bc.setdefault("new.json", [7]) == [7]
    with barecat.Barecat(path) as plain:  # on disk: the encoded bytes 0.3.x wrote
        assert type(plain) is barecat.Barecat
        assert plain["cfg.json"] == b'{"k": [1, 2]}'
        assert gzip.decompress(plain["log.json.gz"]) == b'{"v": "' + b"x" * 100 + b'"}'
        assert plain["raw.xyz"] == b"raw bytes" and plain["data.zst"].startswith(b"0.3")
    with opened_with_auto_codec(path) as bc:
        assert bc["cfg.json"] == {"k": [1, 2]} and bc.get("new.json") == [7]
        np.testing.assert_array_equal(bc["w.npy"], np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(bc["img.png"], image)
        assert bc["log.json.gz"] == {"v": "x" * 100}
        assert bc["raw.xyz"] == b"raw bytes" and bc["noext"] == b"no extension"
        assert bc["data.zst"] == b"0.3.x knew no zstd: raw"
        with pytest.warns(UnsafePickleWarning):  # our pickle policy still holds
            assert bc["obj.pkl"] == {"set": {1, 2}}
        assert dict(bc.items())["cfg.json"] == {"k": [1, 2]}
        assert bc.read("cfg.json") == b'{"k": [1, 2]}'  # read() stays bytes, as in 0.3.x
        assert bc.get("missing.json", "dflt") == "dflt"
        with pytest.raises(ValueError, match=r"^cfg\.json: cannot be decoded"):
            bc.codec_view.decode("cfg.json", b"{broken")


def test_auto_codec_refuses_values_where_bytes_belong(tmp_path: Path) -> None:
    with opened_with_auto_codec(str(tmp_path / "a.barecat"), readonly=False) as bc:
        with pytest.raises(TypeError, match="raw bytes, not dict"):
            bc["x.xyz"] = {"a": 1}
        assert len(bc) == 0


def test_barecat_open_with_auto_codec_warns_at_the_caller(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    with pytest.warns(DeprecationWarning, match="auto_codec") as w:
        bc = barecat.open(path, mode="w+", auto_codec=True)
    assert [x.filename for x in w] == [__file__]
    with bc:
        bc["a.json"] = [1]
    with barecat.Barecat(path) as plain:
        assert plain["a.json"] == b"[1]"


def upper(data: bytes) -> bytes:
    return data.upper()


def test_register_codec_is_deprecated_and_decodes_only_what_it_names(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        with pytest.warns(DeprecationWarning, match="register_codec is deprecated.*DecodedView"):
            bc.register_codec([".json"], lambda v: repr(v).encode(), lambda b: b.decode())
        with pytest.warns(DeprecationWarning):
            bc.register_codec(["Z"], bytes.lower, upper, nonfinal=True)
        bc["a.json"] = [1]
        bc["b.txt.z"] = b"ABC"  # a layer over a name without a codec: raw bytes inside
        bc["c.npy"] = b"not decoded: no codec registered for it"
    with barecat.Barecat(path) as plain:
        assert plain["a.json"] == b"[1]" and plain["b.txt.z"] == b"abc"
        with pytest.warns(DeprecationWarning):
            plain.register_codec([".z"], bytes.lower, upper, nonfinal=True)
        assert plain["b.txt.z"] == b"ABC" and plain["a.json"] == b"[1]"
        assert plain["c.npy"].startswith(b"not decoded")


class PlainSubclass(barecat.Barecat):
    """A user's subclass: it keeps its methods when its dict API gets codecs."""

    def shout(self) -> str:
        return self.path.upper()


def test_archives_with_codecs_pickle_with_them(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        DecodedView(bc)["a.json"] = {"x": 1}
        bc["b.z"] = b"abc"
    reader = opened_with_auto_codec(path)
    writer = opened_with_auto_codec(str(tmp_path / "w.barecat"), readonly=False)
    with writer, pytest.raises(TypeError, match="writable"):
        pickle.dumps(writer)
    copy = pickle.loads(pickle.dumps(reader))
    assert copy["a.json"] == {"x": 1}
    with pytest.warns(DeprecationWarning):
        sub = PlainSubclass(path, auto_codec=True)
    with pytest.warns(DeprecationWarning):
        sub.register_codec([".z"], bytes.lower, upper, nonfinal=True)
    assert type(reader) is barecat.Barecat and type(copy) is barecat.Barecat
    for obj in (sub, pickle.loads(pickle.dumps(sub))):  # the class stays the user's own
        assert type(obj) is PlainSubclass and obj.shout() == path.upper()
        assert obj["a.json"] == {"x": 1} and obj["b.z"] == b"ABC"
    for bc in (reader, copy, sub):
        bc.close()


def test_auto_codec_reads_what_barecat_0_3_1_wrote_with_it(tmp_path: Path) -> None:
    path = str(tmp_path / "ref.barecat")
    snippet = (
        "import sys, warnings, numpy as np, barecat\n"
        "warnings.simplefilter('ignore')\n"
        "with barecat.Barecat(sys.argv[1], readonly=False, auto_codec=True) as bc:\n"
        "    bc['a.json'] = {'k': [1, 2]}\n"
        "    bc['b.npy.gz'] = np.arange(5)\n"
        "    bc['c.pkl.xz'] = {'set': {1, 2}}\n"
        "    bc['d.bin'] = b'raw'\n"
    )
    made = subprocess.run([reference_python(), "-I", "-c", snippet, path], capture_output=True)
    assert made.returncode == 0, made.stderr
    with opened_with_auto_codec(path) as bc:
        assert bc["a.json"] == {"k": [1, 2]} and bc["d.bin"] == b"raw"
        np.testing.assert_array_equal(bc["b.npy.gz"], np.arange(5))
        bc.codec_view.allow_pickle = True  # an archive we made
        assert bc["c.pkl.xz"] == {"set": {1, 2}}


def test_raw_fallback_views_pass_names_without_codecs_through() -> None:
    store: dict[str, bytes] = {}
    dec = DecodedView(store, raw_fallback=True)
    dec["a.bin"] = b"x"
    dec["b.gz"] = b"inside gzip"
    dec["c.json"] = [1]
    assert store["a.bin"] == b"x" and gzip.decompress(store["b.gz"]) == b"inside gzip"
    assert (dec["a.bin"], dec["b.gz"], dec["c.json"]) == (b"x", b"inside gzip", [1])
    assert dec.encode("d.json", {"a": 1}) == b'{"a": 1}'
    with pytest.raises(ValueError, match=r"^x\.gz: cannot be decoded as \.gz: "):
        DecodedView({"x.gz": b"junk"}, raw_fallback=True)["x.gz"]
    with pytest.raises(ValueError, match=r"^x\.json\.gz: cannot be decoded as \.json\.gz: "):
        dec.decode("x.json.gz", b"junk")


def test_views_pickle_with_their_store_and_codecs(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    files = {"a.json.zst": [1], "b.png": smooth_image(6, 6, 3), "c.upper": b"abc"}
    with barecat.Barecat(path, readonly=False) as bc:
        dec = DecodedView(bc)
        dec.register_codec([".upper"], bytes.lower, upper)
        for name, value in files.items():
            dec[name] = value
    with barecat.Barecat(path) as bc:
        dec = DecodedView(bc, allow_pickle=False)
        dec.register_codec([".upper"], bytes.lower, upper)
        copy = pickle.loads(pickle.dumps(dec))
        assert copy.allow_pickle is False and copy.extensions == dec.extensions
        assert copy["a.json.zst"] == [1] and copy["c.upper"] == b"ABC"
        np.testing.assert_array_equal(copy["b.png"], files["b.png"])
        copy.store.close()


def test_get_cached_reader_decodes_unless_told_not_to_as_0_3_1(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        DecodedView(bc)["a.json"] = {"x": 1}
    raw = barecat.get_cached_reader(path, auto_codec=False)
    assert raw["a.json"] == b'{"x": 1}' and barecat.get_cached_reader(path, False) is raw
    with pytest.warns(FutureWarning, match="auto_codec=False") as w:
        default = barecat.get_cached_reader(path)
    assert [x.filename for x in w] == [__file__]
    assert default["a.json"] == {"x": 1} and raw["a.json"] == b'{"x": 1}'
    with pytest.warns(DeprecationWarning, match="auto_codec is deprecated"):
        assert barecat.get_cached_reader(path, auto_codec=True) is default
