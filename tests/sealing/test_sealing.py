"""Sealing file bytes: compression and AES-256-GCM per block, bound to the file's path."""

from __future__ import annotations

import os
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barecat.exceptions import BarecatIntegrityError, WrongPassphraseBarecatError
from barecat.sealing import KeyDerivation, Sealer, new_data_key, read_layout, unwrap_key, wrap_key
from barecat.sealing.blocks import layout_size_hint
from barecat.sealing.reader import SealedFileReader

KEY = bytes(range(32))
BLOCK = 4096


def sealers() -> list[Sealer]:
    return [
        Sealer("zstd", 3, BLOCK),
        Sealer("lz4", 0, BLOCK),
        Sealer("none", 0, BLOCK, key=KEY),
        Sealer("zstd", 19, BLOCK, key=KEY),
    ]


def mixed_bytes(rng: random.Random, size: int) -> bytes:
    """Half text (compresses), half random (does not): both block kinds in one file."""
    text = (b"label: cat, box: [1, 2, 3]\n" * (size // 54 + 1))[: size // 2]
    return text + rng.randbytes(size - len(text))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5 * BLOCK + 17), st.integers(0, 2**32 - 1))
def test_seal_then_unseal_and_any_range(size: int, seed: int) -> None:
    rng = random.Random(seed)
    data = mixed_bytes(rng, size)
    for sealer in sealers():
        sealed = sealer.seal("dir/file.bin", data)
        assert sealer.unseal("dir/file.bin", sealed) == data
        start = rng.randint(0, size + 3)
        length = rng.randint(0, size + 3)
        fetched: list[int] = []

        def fetch(offset: int, n: int, sealed: bytes = sealed, log: list[int] = fetched) -> bytes:
            log.append(n)
            return sealed[offset : offset + n]

        reader = SealedFileReader(sealer, "dir/file.bin", fetch, len(sealed))
        reader.seek(start)
        got = reader.read(length)
        assert got == data[start : start + length]
        # only the blocks that hold the range, plus the header and table, were read
        touched = max(0, -(-(min(start + length, size)) // BLOCK) - start // BLOCK)
        assert len(fetched) <= 2 + touched


def test_incompressible_blocks_are_kept_raw_and_text_shrinks() -> None:
    sealer = Sealer("zstd", 3, BLOCK)
    noise = os.urandom(3 * BLOCK)
    sealed = sealer.seal("n", noise)
    layout = read_layout(sealed[: layout_size_hint(sealed)])
    assert [compressed for _, _, compressed in layout.blocks] == [False, False, False]
    assert len(sealed) == len(noise) + 16 + 4 * 3
    text = b"the same line again\n" * 1000
    assert len(sealer.seal("t", text)) < len(text) // 10


def test_tampering_is_detected_and_names_the_path() -> None:
    sealer = Sealer("zstd", 3, BLOCK, key=KEY)
    data = mixed_bytes(random.Random(1), 3 * BLOCK)
    sealed = sealer.seal("a/x", data)
    layout = read_layout(sealed[: layout_size_hint(sealed)])
    for offset, size, _ in layout.blocks:  # one flipped bit anywhere in any block
        flipped = bytearray(sealed)
        flipped[offset + size // 2] ^= 0x04
        with pytest.raises(BarecatIntegrityError, match="a/x"):
            sealer.unseal("a/x", bytes(flipped))
    with pytest.raises(BarecatIntegrityError):  # the same bytes under another path
        sealer.unseal("a/y", sealed)
    other = sealer.seal("a/z", mixed_bytes(random.Random(2), 3 * BLOCK))
    with pytest.raises(BarecatIntegrityError):  # another file's bytes swapped in
        sealer.unseal("a/x", other)
    (o1, s1, _), (o2, s2, _) = layout.blocks[0], layout.blocks[1]
    swapped = sealed[:o1] + sealed[o2 : o2 + s2] + sealed[o1 : o1 + s1] + sealed[o2 + s2 :]
    head = bytearray(swapped[: layout_size_hint(swapped)])
    table = layout_size_hint(swapped) - 4 * len(layout.blocks)
    words = list(struct.unpack_from("<3I", head, table))
    words[0], words[1] = words[1], words[0]
    struct.pack_into("<3I", head, table, *words)
    with pytest.raises(BarecatIntegrityError):  # two blocks exchanged, table to match
        sealer.unseal("a/x", bytes(head) + swapped[len(head) :])
    with pytest.raises(BarecatIntegrityError):  # the last block cut off
        sealer.unseal("a/x", sealed[: layout.blocks[-1][0]])


def test_encrypted_files_need_the_key_and_hide_their_bytes() -> None:
    secret = b"password=hunter2 " * 200
    sealed = Sealer("none", 0, BLOCK, key=KEY).seal("s", secret)
    assert b"hunter2" not in sealed
    with pytest.raises(Exception, match="key"):
        Sealer("none", 0, BLOCK).unseal("s", sealed)
    with pytest.raises(BarecatIntegrityError):
        Sealer("none", 0, BLOCK, key=bytes(32)).unseal("s", sealed)
    again = Sealer("none", 0, BLOCK, key=KEY).seal("s", secret)
    assert again != sealed  # a fresh nonce per file: equal files do not look equal


def test_passphrase_wraps_the_data_key() -> None:
    kdf = KeyDerivation(os.urandom(16), n=1 << 12)
    data_key = new_data_key()
    wrapped = wrap_key(data_key, kdf.derive("correct horse"))
    assert unwrap_key(wrapped, kdf.derive("correct horse")) == (data_key, True)
    with pytest.raises(WrongPassphraseBarecatError):  # known at unwrap, before any file
        unwrap_key(wrapped, kdf.derive("wrong horse"))
    rewrapped = wrap_key(data_key, kdf.derive("new horse"))  # rekey: 32 bytes, no data
    assert unwrap_key(rewrapped, kdf.derive("new horse")) == (data_key, True)
    with pytest.raises(Exception, match="empty passphrase"):
        kdf.derive("")


@pytest.mark.parametrize("bad", [0, 1000, 1 << 25])
def test_block_size_must_be_a_sane_power_of_two(bad: int) -> None:
    with pytest.raises(Exception, match="power of two"):
        Sealer("zstd", 3, bad)
