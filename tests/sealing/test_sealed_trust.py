"""A sealed archive as an attacker and a careless user meet it: bytes that do not
authenticate are never served, malformed sealed files are integrity errors, hostile
key-derivation costs are refused before deriving."""

from __future__ import annotations

import os
import random
import sqlite3
import struct
import tracemalloc
from pathlib import Path

import crc32c
import pytest
import zstandard
from hypothesis import example, given
from hypothesis import strategies as st

import barecat
from barecat import coldcrate as cc
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    KeyDerivationCostBarecatError,
)
from barecat.kdf import MAX_MEMORY, MAX_WORK, check_scrypt_costs
from barecat.sealing import Sealer
from barecat.sealing.blocks import layout_size_hint
from barecat.sealing.reader import SealedFileReader
from helpers import PASSPHRASE, Run
from helpers.fuzzing import fuzz_settings

KEY = bytes(range(32))
BLOCK = 4096
SECRET = b"the real contents, never to be replaced " * 10
FORGED = b"attacker's text"


def encrypted_archive(tmp_path: Path) -> str:
    path = str(tmp_path / "private.barecat")
    with barecat.Barecat(path, readonly=False, passphrase=PASSPHRASE) as bc:
        bc["doc.txt"] = SECRET
        bc["other.txt"] = b"another file"
    return path


def point_row_at(archive: str, path: str, stored: bytes, logical: int) -> None:
    """What someone without the key can do: append bytes to the shard, repoint a row."""
    shard = archive + "-shard-00000"
    offset = os.path.getsize(shard)
    with open(shard, "ab") as f:
        f.write(stored)
    with sqlite3.connect(archive) as conn:
        conn.execute(
            "UPDATE files SET offset = ?, size = ?, crc32c = ?, logical_size = ? WHERE path = ?",
            (offset, len(stored), crc32c.crc32c(stored), logical, path),
        )


def stored_bytes_of(archive: str, path: str) -> bytes:
    with sqlite3.connect(archive) as conn:
        shard, offset, size = conn.execute(
            "SELECT shard, offset, size FROM files WHERE path = ?", (path,)
        ).fetchone()
    with open(f"{archive}-shard-{shard:05d}", "rb") as f:
        f.seek(offset)
        return f.read(size)


def forgeries(tmp_path: Path) -> dict[str, bytes]:
    """Sealed bytes for ``doc.txt`` that an attacker without the key can make: sealed
    without encryption (compressed, or not), and the same path's stored bytes spliced
    from a compression-only archive."""
    packed = str(tmp_path / "packed.barecat")
    with barecat.Barecat(packed, readonly=False, compression="zstd") as bc:
        bc["doc.txt"] = FORGED
    return {
        "zstd": Sealer("zstd", 3).seal("doc.txt", FORGED),
        "none": Sealer("none", 0).seal("doc.txt", FORGED),
        "spliced": stored_bytes_of(packed, "doc.txt"),
    }


@pytest.mark.parametrize("kind", ["zstd", "none", "spliced"])
def test_a_plain_blob_in_an_encrypted_archive_is_an_integrity_error(
    tmp_path: Path, run: Run, pw_file: str, kind: str
) -> None:
    archive = encrypted_archive(tmp_path)
    point_row_at(archive, "doc.txt", forgeries(tmp_path)[kind], len(FORGED))
    with barecat.Barecat(archive, passphrase=PASSPHRASE) as bc:
        for read in (
            lambda: bc["doc.txt"],
            lambda: bc.read("doc.txt"),
            lambda: bc.read("doc.txt", 2, 5),
            lambda: bc.open("doc.txt", "rb").read(),
            lambda: bc.get_many(["other.txt", "doc.txt"]),
        ):
            with pytest.raises(BarecatIntegrityError, match=r"^doc\.txt: not encrypted"):
                read()
        assert bc["other.txt"] == b"another file"
        assert [p for p, _ in bc.verify_seals()] == ["doc.txt"]
    code, out, err = run("cat", "--passphrase-file", pw_file, archive, "doc.txt")
    assert code == 1 and "attacker" not in out and "doc.txt: not encrypted" in err
    code, out, _ = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 1 and "doc.txt: not encrypted" in out and "authenticated" not in out


def test_the_server_refuses_a_plain_blob_in_an_encrypted_archive(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx", reason="the server extra is not installed")
    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    from helpers.serving import serving

    archive = encrypted_archive(tmp_path)
    point_row_at(archive, "doc.txt", forgeries(tmp_path)["zstd"], len(FORGED))
    with (
        serving(archive, env={"BARECAT_PASSPHRASE": PASSPHRASE}) as (url, _),
        httpx.Client(base_url=url) as http,
    ):
        answer = http.get("/a/private/files/doc.txt")
        assert answer.status_code >= 500 and b"attacker" not in answer.content
        assert http.get("/a/private/files/other.txt").content == b"another file"


def test_a_mount_refuses_a_plain_blob_in_an_encrypted_archive(tmp_path: Path) -> None:
    from helpers.mounting import FUSE_PROBLEM, served

    if FUSE_PROBLEM:
        pytest.skip(FUSE_PROBLEM)
    archive = encrypted_archive(tmp_path)
    point_row_at(archive, "doc.txt", forgeries(tmp_path)["zstd"], len(FORGED))
    mnt = tmp_path / "mnt"
    with served(archive, mnt, env={"BARECAT_PASSPHRASE": PASSPHRASE}):
        with pytest.raises(OSError) as e:
            (mnt / "doc.txt").read_bytes()
        assert e.value.errno == 5  # EIO
        assert (mnt / "other.txt").read_bytes() == b"another file"


def sealed_sample(sealer: Sealer, size: int, seed: int = 0) -> tuple[bytes, bytes]:
    rng = random.Random(seed)
    text = (b"label: cat, box: [1, 2, 3]\n" * (size // 27 + 1))[: size // 2]
    data = text + rng.randbytes(size - len(text))
    return data, sealer.seal("a/file.bin", data)


@pytest.mark.parametrize("size", [0, 100, 3 * BLOCK + 5])
def test_every_byte_of_the_head_is_authenticated(size: int) -> None:
    """Flipping any bit of the header, nonce or block table of an encrypted file is an
    integrity error: never a codec error, never ignored (a changed block size of a
    one-block file used to be)."""
    sealer = Sealer("zstd", 3, BLOCK, key=KEY)
    data, sealed = sealed_sample(sealer, size)
    head = layout_size_hint(sealed)
    for i in range(head):
        for mask in (0x01, 0x10, 0x80):
            damaged = bytearray(sealed)
            damaged[i] ^= mask
            with pytest.raises(BarecatIntegrityError, match=r"^a/file\.bin"):
                sealer.unseal("a/file.bin", bytes(damaged))
    assert sealer.unseal("a/file.bin", sealed) == data


def test_files_sealed_by_version_1_still_read() -> None:
    """Version 1 bound each block to path, number, count and length only; its files (made
    before version 2) decode, and a version-2 file relabelled 1 does not authenticate."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    data = b"sealed by version one " * 30
    nonce = bytes(12)
    aad = b"barecat-sealed-v1\0" + b"old/file" + struct.pack("<IIQ", 0, 1, len(data))
    block = AESGCM(KEY).encrypt(nonce, data, aad)
    v1 = struct.pack("<BBBBIQ", 1, 1, 0, 12, 1, len(data)) + nonce
    v1 += struct.pack("<I", len(block)) + block
    sealer = Sealer("none", 0, BLOCK, key=KEY)
    assert sealer.unseal("old/file", v1) == data
    v2 = bytearray(sealer.seal("old/file", data))
    v2[0] = 1
    with pytest.raises(BarecatIntegrityError, match="fails authentication"):
        sealer.unseal("old/file", bytes(v2))


def hand_sealed(codec: int, bits: int, logical: int, payload: bytes) -> bytes:
    """A one-block sealed file (no key) whose block is ``payload``, marked compressed."""
    head = struct.pack("<BBBBIQ", 2, 0, codec, bits, 1, logical)
    return head + struct.pack("<I", len(payload) | 1 << 31) + payload


def test_a_frame_claiming_more_than_its_block_allocates_nothing() -> None:
    """A 2 KB stored file whose zstd frame says 64 MiB used to make the reader allocate
    it; lz4 had no limit at all. Now neither decodes past the block's length."""
    bomb = zstandard.ZstdCompressor().compress(bytes(64 << 20))
    import lz4.frame

    lz4_bomb = lz4.frame.compress(bytes(64 << 20))
    cases = [
        (hand_sealed(1, 12, BLOCK, bomb), "states 67108864 bytes"),
        (hand_sealed(2, 24, 16 << 20, lz4_bomb), "not one whole frame"),
    ]
    for sealed, why in cases:
        tracemalloc.start()
        try:
            with pytest.raises(BarecatIntegrityError, match=why):
                Sealer("zstd").unseal("bomb", sealed)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 40 << 20


def sealers() -> list[Sealer]:
    return [
        Sealer("zstd", 3, BLOCK, key=KEY),
        Sealer("lz4", 0, BLOCK, key=KEY),
        Sealer("zstd", 3, BLOCK),
        Sealer("lz4", 0, BLOCK),
        Sealer("none", 0, BLOCK),
    ]


SAMPLES = [(s, *sealed_sample(s, size, size)) for s in sealers() for size in (0, 70, 9000)]


@pytest.mark.fuzz
@fuzz_settings(400)
@given(
    st.integers(0, len(SAMPLES) - 1),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=6),
    st.one_of(st.none(), st.integers(0, 1 << 20)),
    st.binary(max_size=40),
)
@example(1, [(2, 2)], None, b"")  # an lz4 file relabelled none with compressed blocks
@example(2, [(3, 24)], None, b"")  # a zstd file's block size raised past its bytes
@example(0, [(8, 0xFF), (9, 0xFF), (10, 0xFF), (11, 0xFF)], None, b"")  # huge count
def test_the_sealed_block_reader_takes_any_bytes(
    which: int, flips: list[tuple[int, int]], cut: int | None, tail: bytes
) -> None:
    """Whatever the stored bytes, a sealed file decodes to the original (keyed: exactly
    the bytes sealed) or raises a ``BarecatError``: never struct, codec or memory
    errors."""
    sealer, data, sealed = SAMPLES[which]
    damaged = bytearray(sealed)
    for at, value in flips:
        if damaged:
            damaged[at % len(damaged)] = value
    if cut is not None:
        damaged = damaged[: cut % (len(damaged) + 1)]
    damaged += tail
    stored = bytes(damaged)
    keyed = which // 3 < 2  # (SAMPLES: three sizes for each sealer, the keyed ones first)
    try:
        got = sealer.unseal("a/file.bin", stored)
    except BarecatError:
        got = None
    if keyed and got is not None:
        assert got == data
    try:
        reader = SealedFileReader(sealer, "a/file.bin", lambda o, n: stored[o : o + n], len(stored))
        reader.seek(len(data) // 3)
        part = reader.read(BLOCK + 10)
    except BarecatError:
        return
    if keyed:
        assert part == data[len(data) // 3 : len(data) // 3 + BLOCK + 10]


def test_scrypt_costs_are_checked_before_deriving() -> None:
    check_scrypt_costs(1 << 15, 8, 1)
    check_scrypt_costs(MAX_MEMORY // (128 * 8), 8, 1)  # the ceiling itself is allowed
    for n, r, p, why in [
        (1 << 21, 8, 1, "MiB"),  # 2 GiB of memory
        (1 << 15, 8, MAX_WORK // (1 << 18) + 1, "default work"),
        (1000, 8, 1, "invalid"),
        (1 << 15, 0, 1, "invalid"),
    ]:
        with pytest.raises(KeyDerivationCostBarecatError, match=why):
            check_scrypt_costs(n, r, p)


def test_the_ceiling_can_be_raised_for_costs_meant(monkeypatch: pytest.MonkeyPatch) -> None:
    costs = (1 << 15, 8, MAX_WORK // (1 << 18) * 2)  # twice the ceiling's work
    with pytest.raises(KeyDerivationCostBarecatError, match="BARECAT_SCRYPT_MAX_WORK"):
        check_scrypt_costs(*costs)
    monkeypatch.setenv("BARECAT_SCRYPT_MAX_WORK", str(2 * MAX_WORK))
    check_scrypt_costs(*costs)
    monkeypatch.setenv("BARECAT_SCRYPT_MAX_MEMORY", "1G")
    with pytest.raises(BarecatError, match="whole number"):
        check_scrypt_costs(*costs)


def test_a_raised_scrypt_cost_in_a_sealed_archive_is_refused(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    archive = encrypted_archive(tmp_path)
    with sqlite3.connect(archive) as conn:
        conn.execute("UPDATE config SET value_int = 1000000 WHERE key = 'sealing_kdf_p'")
    with pytest.raises(KeyDerivationCostBarecatError, match="sealing settings: scrypt costs"):
        barecat.Barecat(archive, passphrase=PASSPHRASE)
    code, out, err = run("cat", "--passphrase-file", pw_file, archive, "doc.txt")
    assert code == 1 and out == "" and "scrypt costs" in err and len(err.splitlines()) == 1
    code, out, _ = run("ls", archive)  # listing needs no key, so no derivation
    assert code == 0 and "doc.txt" in out


def test_a_raised_scrypt_cost_in_a_coldcrate_header_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "secret.cc")
    schema = cc.Schema([cc.Field("data", "bytes")])
    with cc.ChunkWriter.create(path, schema, encryption="aes-256-xts", passphrase="pw",
                               kdf=(10, 8, 1)) as w:  # fmt: skip
        w.append(b"id", {"data": b"x"})
    with open(path, "r+b") as f:  # header bytes 58-60: log2 N, r, p
        f.seek(58)
        f.write(bytes([30, 8, 1]))
    with pytest.raises(cc.EncryptionError, match="scrypt costs"):
        cc.ChunkReader.open(path, passphrase="pw")
