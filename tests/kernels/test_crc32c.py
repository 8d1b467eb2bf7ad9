"""CRC32C of both kernel modules (and the compiled core's portable tables, whatever the
CPU has): the published test vectors, every length up to 2000 and the block boundaries
of the three-stream loop, with and without a starting value, on every kind of buffer,
against the ``crc32c`` package."""

from __future__ import annotations

import mmap
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from helpers.crc_vectors import BOUNDARIES, LONG_BLOCK, VECTOR_NAMES, VECTORS, expected


@pytest.fixture(params=["crc32c", "_crc32c_portable"])
def compiled_crc(request: pytest.FixtureRequest, compiled: ModuleType) -> Callable[..., int]:
    """The compiled core's CRC32C: as dispatched (the CPU's instruction where it has one),
    and with the portable tables alone."""
    function: Callable[..., int] = getattr(compiled, request.param)
    return function


@pytest.fixture(params=["python", "compiled", "compiled portable"])
def crc(request: pytest.FixtureRequest, python: ModuleType) -> Callable[..., int]:
    """Each CRC32C the kernels have."""
    if request.param == "python":
        function: Callable[..., int] = python.crc32c
        return function
    compiled = request.getfixturevalue("compiled")
    return compiled.crc32c if request.param == "compiled" else compiled._crc32c_portable


@pytest.mark.parametrize(
    ("data", "want"),
    VECTORS,
    ids=VECTOR_NAMES,
)
def test_vectors(crc: Callable[..., int], data: bytes, want: int) -> None:
    assert crc(data) == want


def test_vectors_in_pieces(crc: Callable[..., int]) -> None:
    """A CRC continued from the value of the bytes before it is the CRC of the whole."""
    for data, want in VECTORS:
        for cut in range(len(data) + 1):
            assert crc(data[cut:], crc(data[:cut])) == want
            assert crc(data[cut:], value=crc(data[:cut])) == want


def test_every_length_up_to_2000(crc: Callable[..., int]) -> None:
    rng = random.Random(37)
    data = rng.randbytes(2000 + 8)
    for n in range(2001):
        start = n % 8  # (every alignment of the start too)
        piece = data[start : start + n]
        assert crc(piece) == expected(piece), n
        value = rng.getrandbits(32)
        assert crc(piece, value) == expected(piece, value), n


@pytest.mark.parametrize("n", BOUNDARIES)
def test_block_boundaries(crc: Callable[..., int], n: int) -> None:
    rng = random.Random(n)
    data = rng.randbytes(n + 8)
    value = rng.getrandbits(32)
    for start in (0, 1, 3, 7):  # unaligned memoryview slices
        view = memoryview(data)[start : start + n]
        assert crc(view) == expected(view)
        assert crc(view, value=value) == expected(view, value)


def test_every_buffer_type(crc: Callable[..., int]) -> None:
    rng = random.Random(2)
    data = rng.randbytes(3 * LONG_BLOCK + 5)
    want = expected(data)
    with mmap.mmap(-1, len(data)) as mapped:
        mapped.write(data)
        for kind in (data, bytearray(data), memoryview(data), mapped):
            assert crc(kind) == want, type(kind)
            assert crc(kind, 12345) == expected(data, 12345), type(kind)


def test_value_is_taken_modulo_2_32(compiled_crc: Callable[..., int], python: ModuleType) -> None:
    """A starting value past 32 bits, or negative, is read as its low 32 bits by both."""
    for value in (1 << 32, (1 << 32) + 5, -1, -(1 << 40) + 3, (1 << 64) + 9):
        assert compiled_crc(b"abc", value) == python.crc32c(b"abc", value), value


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {}),
        (("text",), {}),
        ((b"x", 1, 2, 3), {}),  # (the package's own takes a third: gil_release_mode)
        ((b"x",), {"seed": 1}),
        ((b"x",), {"value": 1, "seed": 2}),
        ((b"x", 1), {"value": 1}),
        ((b"x",), {"data": b"y"}),
        ((), {"value": 1}),
        ((b"x",), {"value": "1"}),
        ((b"x",), {"value": 1.5}),
        ((None,), {}),
        ((12,), {}),
    ],
)
def test_wrong_arguments_raise_typeerror(
    compiled_crc: Callable[..., int],
    python: ModuleType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    for function in (python.crc32c, compiled_crc):
        with pytest.raises(TypeError):
            function(*args, **kwargs)


def test_arguments_by_name(crc: Callable[..., int]) -> None:
    """``data`` and ``value`` may be given by name, in any order (as the crc32c package
    takes them; the compiled one once refused ``data=``)."""
    want = expected(b"123456789", 7)
    assert crc(data=b"123456789", value=7) == want
    assert crc(value=7, data=b"123456789") == want
    assert crc(b"123456789", value=7) == want
    assert crc(data=b"123456789") == VECTORS[4][1]


def test_instructions_named(compiled: ModuleType) -> None:
    assert compiled.CRC32C_INSTRUCTIONS in ("sse4.2", "armv8-crc", "portable")
