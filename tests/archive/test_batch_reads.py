"""Reads into buffers the caller owns (``readinto``, ``readinto_many``) and ``read`` of a
path, answered from the lookup table as ``bc[path]`` is: the same bytes, checks and errors
as the reads through the file's record."""

from __future__ import annotations

import os
import random

import pytest

import barecat
from barecat.exceptions import (
    BarecatIntegrityError,
    FileNotFoundBarecatError,
    FileTooLargeBarecatError,
    IsADirectoryBarecatError,
)
from helpers.damaging import damage

FILES = {
    **{f"img/{i % 4}/{i:03d}.jpg": random.Random(i).randbytes(1 + i * 37) for i in range(60)},
    "empty.txt": b"",
    "labels.json": b'{"cat": 0}',
}
WANTED = ["labels.json", "img/1/005.jpg", "empty.txt", "img/3/059.jpg", "/img//1/005.jpg"]


def expected(paths: list[str]) -> list[bytes]:
    return [FILES[barecat.paths.normalize(p)] for p in paths]


@pytest.fixture
def archive(make_archive) -> str:  # type: ignore[no-untyped-def]
    return str(make_archive(FILES))


@pytest.mark.parametrize("table", [True, False], ids=["lookup-table", "sqlite"])
def test_read_of_a_path_is_the_read_of_its_record(archive: str, table: bool) -> None:
    with barecat.Barecat(archive, lookup_table=table) as bc:
        assert (bc.index.lookup_table_size is not None) == table
        for path, data in FILES.items():
            record = bc.lookup_file(path)
            for offset, size in [(0, -1), (0, len(data)), (0, 10**6), (3, 5), (-2, 4), (5, -1)]:
                want = data[max(offset, 0) :][: size if size >= 0 else None]
                assert bc.read(path, offset, size) == want == bc.read(record, offset, size)
            assert bc.read(path, offset=len(data) + 9) == b""
        with pytest.raises(FileNotFoundBarecatError):
            bc.read("img/nope.jpg")
        with pytest.raises(IsADirectoryBarecatError):
            bc.read("img/1")


@pytest.mark.parametrize("table", [True, False], ids=["lookup-table", "sqlite"])
def test_damaged_bytes_fail_read_and_readinto_naming_the_file(archive: str, table: bool) -> None:
    damage(archive, "img/1/005.jpg", at=2)
    with barecat.Barecat(archive, lookup_table=table) as bc:
        for read in (bc.read, lambda p: bc.readinto(p, bytearray(1000))):
            with pytest.raises(BarecatIntegrityError, match=r"img/1/005\.jpg"):
                read("img/1/005.jpg")
        buffer = bytearray(10**5)
        with pytest.raises(BarecatIntegrityError, match=r"img/1/005\.jpg"):
            bc.readinto_many(["labels.json", "img/1/005.jpg"], buffer)
        assert bc.read("img/1/005.jpg", offset=0, size=1) == FILES["img/1/005.jpg"][:1]
        places = bc.readinto_many(["labels.json", "img/2/006.jpg"], buffer)
        assert [bytes(buffer[a : a + n]) for a, n in places] == expected(
            ["labels.json", "img/2/006.jpg"]
        )


def test_readinto_many_places_files_back_to_back_in_request_order(archive: str) -> None:
    with barecat.Barecat(archive) as bc:
        buffer = bytearray(b"\xee" * 10_000)
        places = bc.readinto_many(WANTED, buffer)
        sizes = [len(d) for d in expected(WANTED)]
        assert places == [(sum(sizes[:i]), n) for i, n in enumerate(sizes)]
        assert [bytes(buffer[a : a + n]) for a, n in places] == expected(WANTED)
        assert buffer[sum(sizes) :] == b"\xee" * (10_000 - sum(sizes))  # nothing past them
        assert bc.readinto_many([], bytearray()) == []
        everything = list(FILES)
        random.Random(3).shuffle(everything)
        room = bytearray(sum(map(len, FILES.values())))
        places = bc.readinto_many(everything, memoryview(room))
        assert [bytes(room[a : a + n]) for a, n in places] == expected(everything)


def test_readinto_many_refuses_what_it_cannot_fill(archive: str) -> None:
    with barecat.Barecat(archive) as bc:
        need = sum(len(d) for d in expected(WANTED))
        buffer = bytearray(b"\xee" * (need - 1))
        with pytest.raises(FileTooLargeBarecatError, match=r"img/1/005\.jpg.*do not fit"):
            bc.readinto_many(WANTED, buffer)
        assert buffer == b"\xee" * (need - 1)  # nothing was read
        with pytest.raises(KeyError, match="nope"):
            bc.readinto_many(["labels.json", "nope"], bytearray(100))
        for read_only in (bytes(100), memoryview(bytearray(100)).toreadonly()):
            with pytest.raises(TypeError, match="writable"):
                bc.readinto_many(["labels.json"], read_only)
            with pytest.raises(TypeError, match="writable"):
                bc.readinto("labels.json", read_only)
        with pytest.raises(TypeError, match="C-contiguous"):
            bc.readinto("labels.json", memoryview(bytearray(100))[::2])


@pytest.mark.parametrize("kind", ["numpy-uint8", "numpy-float32-2d", "torch"])
def test_numpy_arrays_and_tensors_are_filled_in_place(archive: str, kind: str) -> None:
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    need = sum(len(d) for d in expected(WANTED))
    if kind == "torch":
        torch = pytest.importorskip("torch", reason="torch is not installed")
        tensor = torch.zeros(need + 8, dtype=torch.uint8)
        buffer, raw = tensor.numpy(), lambda: tensor.numpy().tobytes()
    elif kind == "numpy-uint8":
        buffer = np.zeros(need + 8, dtype=np.uint8)
        raw = buffer.tobytes
    else:  # a typed, 2-d array: its bytes are filled
        buffer = np.zeros((2, (need + 8) // 8 + 1), dtype=np.float32)
        raw = buffer.tobytes
    with barecat.Barecat(archive) as bc:
        places = bc.readinto_many(WANTED, buffer)
        assert [raw()[a : a + n] for a, n in places] == expected(WANTED)
        n = bc.readinto("img/3/059.jpg", buffer)
        assert raw()[:n] == FILES["img/3/059.jpg"]


def test_readinto_keeps_the_reference_contract_of_as_much_as_fits(archive: str) -> None:
    data = FILES["img/3/059.jpg"]
    with barecat.Barecat(archive) as bc:
        small = bytearray(10)
        assert bc.readinto("img/3/059.jpg", small) == 10 and small == data[:10]
        assert bc.readinto("img/3/059.jpg", small, offset=len(data) - 4) == 4
        assert small[:4] == data[-4:]
        assert bc.readinto("img/3/059.jpg", small, offset=len(data) + 1) == 0
        with pytest.raises(FileNotFoundBarecatError):
            bc.readinto("img/nope.jpg", small)


@pytest.mark.parametrize(
    "sealing",
    [{"compression": "zstd"}, {"compression": "none", "passphrase": "correct horse"}],
    ids=["zstd", "encrypted"],
)
def test_sealed_files_are_unsealed_into_the_buffer(
    tmp_path: os.PathLike[str], sealing: dict[str, str]
) -> None:
    pytest.importorskip("cryptography", reason="the sealing extra is not installed")
    path = os.path.join(os.fspath(tmp_path), "sealed.barecat")
    with barecat.Barecat(path, readonly=False, **sealing) as bc:  # type: ignore[arg-type]
        for p, data in FILES.items():
            bc[p] = data
    passphrase = sealing.get("passphrase")
    with barecat.Barecat(path, passphrase=passphrase) as bc:
        buffer = bytearray(10_000)
        places = bc.readinto_many(WANTED, buffer)
        assert [bytes(buffer[a : a + n]) for a, n in places] == expected(WANTED)
        for p in WANTED:
            assert bc.read(p) == FILES[barecat.paths.normalize(p)]
        with pytest.raises(FileTooLargeBarecatError, match="do not fit"):
            bc.readinto_many(WANTED, bytearray(100))
    damage(path, "img/1/005.jpg", at=2)
    with (
        barecat.Barecat(path, passphrase=passphrase) as bc,
        pytest.raises(BarecatIntegrityError, match=r"img/1/005\.jpg"),
    ):
        bc.readinto_many(WANTED, bytearray(10_000))
