"""Extraction writes a file's zero blocks as holes, as ``tar -S`` and ``cp --sparse=auto``
do: a 50 MB file holding 4 KiB of data takes a few KiB again after a round trip through
``barecat create`` and ``extract`` (and ``rsync`` out of an archive), its bytes exactly
the same; files with random zero runs, small and streamed, come back byte for byte.
Real archives on the real file system under the test's temporary directory (skipped,
saying so, where that file system cannot make holes)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import barecat
from barecat.kernels.sparse import HOLE_BLOCK, SPARSE_MIN
from barecat.transfer import extract_to_directory
from barecat.transfer.extraction import COPY_CHUNK
from helpers import Run
from helpers.fuzzing import fuzz_settings

MB = 1_000_000


def allocated(path: Path) -> int:
    """Bytes the file system gave ``path``."""
    return os.stat(path).st_blocks * 512


def makes_holes(directory: Path) -> bool:
    """Whether the file system of ``directory`` makes holes (a tmpfs and ext4 do)."""
    probe = directory / "hole-probe"
    with open(probe, "wb") as f:
        f.truncate(1 << 20)
        f.write(b"x")
    made = allocated(probe) < 1 << 20
    probe.unlink()
    return made


@pytest.fixture
def holes(tmp_path: Path) -> Path:
    """The test's directory, if its file system makes holes."""
    if not makes_holes(tmp_path):
        pytest.skip(f"the file system of {tmp_path} makes no holes (a file's st_blocks)")
    return tmp_path


def sparse_source(path: Path, size: int, data_at: list[int]) -> bytes:
    """A sparse file of ``size`` bytes with 4 KiB of random data at each of ``data_at``;
    returns its data blocks, for comparing."""
    blocks = b""
    with open(path, "wb") as f:
        f.truncate(size)
        for at in data_at:
            block = random.Random(at).randbytes(HOLE_BLOCK)
            f.seek(at)
            f.write(block)
            blocks += block
    return blocks


def same_bytes(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            ca, cb = fa.read(COPY_CHUNK), fb.read(COPY_CHUNK)
            if ca != cb:
                return False
            if not ca:
                return True


@pytest.mark.parametrize("sealing", [[], ["--compress", "zstd"]], ids=["plain", "zstd"])
def test_a_sparse_file_comes_back_sparse_from_create_and_extract(
    holes: Path, run: Run, sealing: list[str]
) -> None:
    src = holes / "src"
    src.mkdir()
    sparse_source(src / "disk.img", 50 * MB, [20 * MB - 20 * MB % HOLE_BLOCK])
    sparse_source(src / "tail", 3 * MB, [0])  # ends in a hole: its size still right
    sparse_source(src / "middle", 300_000, [HOLE_BLOCK, 200_704])  # one read, not streamed
    (src / "zeros").write_bytes(bytes(5 * MB))  # written dense: all of it a hole now
    assert allocated(src / "disk.img") <= 64 * 1024
    ar = str(holes / "a.barecat")
    assert run("create", "-q", *sealing, "-C", str(src), ar, ".")[0] == 0
    assert run("extract", "-q", ar, "-C", str(holes / "out"))[0] == 0
    for name in ("disk.img", "tail", "middle", "zeros"):
        out = holes / "out" / name
        assert os.stat(out).st_size == os.stat(src / name).st_size, name
        assert same_bytes(out, src / name), name
    assert allocated(holes / "out" / "disk.img") <= 64 * 1024  # was 50 MB
    assert allocated(holes / "out" / "tail") <= 64 * 1024
    assert allocated(holes / "out" / "middle") <= 64 * 1024
    assert allocated(holes / "out" / "zeros") <= 64 * 1024


def test_rsync_out_of_an_archive_writes_holes_too(holes: Path, run: Run) -> None:
    ar = str(holes / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc["d/big"] = bytes(3 * MB) + b"end"
        bc["d/small"] = b"s" * 100
    assert run("rsync", f"{ar}::d/", f"{holes / 'back'}/")[0] == 0
    assert (holes / "back" / "big").read_bytes() == bytes(3 * MB) + b"end"
    assert allocated(holes / "back" / "big") <= 64 * 1024
    assert (holes / "back" / "small").read_bytes() == b"s" * 100


def test_a_small_file_is_written_whole(holes: Path) -> None:
    """Under ``SPARSE_MIN`` a file is not looked at (each small file's cost): dense."""
    ar = str(holes / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc["small"] = bytes(SPARSE_MIN - 1)
    with barecat.Barecat(ar) as bc:
        extract_to_directory(bc, str(holes / "out"))
    assert (holes / "out" / "small").read_bytes() == bytes(SPARSE_MIN - 1)


SEGMENTS = st.lists(
    st.tuples(st.booleans(), st.integers(1, 3 * HOLE_BLOCK) | st.integers(1, 600_000)),
    max_size=12,
)
"""A file as runs: (zeros?, length); lengths cross block, ``SPARSE_MIN`` and the 1 MiB at
which files are streamed."""


@pytest.mark.fuzz
@fuzz_settings(40)
@given(files=st.lists(SEGMENTS, min_size=1, max_size=4), seed=st.integers(0, 2**32))
def test_files_with_random_zero_runs_come_back_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[tuple[bool, int]]], seed: int
) -> None:
    where = tmp_path_factory.mktemp("sparse")
    rng = random.Random(seed)
    contents = [
        b"".join(bytes(n) if zeros else rng.randbytes(n) for zeros, n in runs) for runs in files
    ]
    ar = str(where / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        for k, data in enumerate(contents):
            bc[f"f{k}"] = data
    with barecat.Barecat(ar) as bc:
        result = extract_to_directory(bc, str(where / "out"))
    assert result.failures == []
    for k, data in enumerate(contents):
        out = where / "out" / f"f{k}"
        assert out.read_bytes() == data
        if len(data) >= SPARSE_MIN and makes_holes(where):
            # no more room than its blocks that are not all zero, and the file system's own
            dense = sum(
                data[at : at + HOLE_BLOCK] != bytes(HOLE_BLOCK)
                for at in range(0, len(data), HOLE_BLOCK)
            )
            assert allocated(out) <= (dense + 8) * HOLE_BLOCK
