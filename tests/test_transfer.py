"""Extracting archives to real directories: bytes, metadata, empty dirs, hostile paths."""

from __future__ import annotations

import os
import sqlite3

import pytest

import barecat


def test_extract_restores_bytes_metadata_and_empty_dirs(archive_path: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    big = os.urandom(3 << 20)
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc.add("a/b/small.txt", data=b"small", mode=0o100640, mtime_ns=1_500_000_000_000_000_000)
        bc.add("a/big.bin", data=big, mode=0o100600, mtime_ns=1_400_000_000_000_000_000)
        bc.add(
            barecat.BarecatDirInfo("empty/dir", mode=0o40700, mtime_ns=1_300_000_000_000_000_000)
        )
    out = tmp_path / "out"
    barecat.extract(archive_path, str(out))
    assert (out / "a/b/small.txt").read_bytes() == b"small"
    assert (out / "a/big.bin").read_bytes() == big
    assert os.stat(out / "a/b/small.txt").st_mode & 0o777 == 0o640
    assert os.stat(out / "a/big.bin").st_mtime_ns == 1_400_000_000_000_000_000
    assert (out / "empty/dir").is_dir() and os.listdir(out / "empty/dir") == []
    assert os.stat(out / "empty/dir").st_mode & 0o777 == 0o700
    assert os.stat(out / "empty/dir").st_mtime_ns == 1_300_000_000_000_000_000


def test_extract_subset(make_archive, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"keep/x": b"1", "keep/y/z": b"2", "drop/w": b"3", "keep2": b"4"})
    with barecat.Barecat(path) as bc:
        n = barecat.transfer.extract_to_directory(bc, str(tmp_path / "o"), paths=["keep"])
    assert n == 2
    found = sorted(
        os.path.relpath(os.path.join(d, f), tmp_path / "o")
        for d, _, fs in os.walk(tmp_path / "o")
        for f in fs
    )
    assert found == ["keep/x", "keep/y/z"]


def test_extract_refuses_paths_escaping_the_target(make_archive, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"ok": b"fine"})
    with sqlite3.connect(path) as conn:  # what another tool (or the reference) can store
        conn.execute("PRAGMA recursive_triggers = ON")
        conn.execute("INSERT INTO files (path, shard, offset, size) VALUES ('../evil', 0, 0, 4)")
    target = tmp_path / "inner" / "target"
    with pytest.raises(barecat.InvalidPathBarecatError, match="outside"):
        barecat.extract(path, str(target))
    assert not (tmp_path / "inner" / "evil").exists()


def test_extract_detects_corruption(make_archive, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"f": b"hello"})
    with open(path + "-shard-00000", "r+b") as f:
        f.write(b"J")
    with pytest.raises(barecat.BarecatIntegrityError):
        barecat.extract(path, str(tmp_path / "o"))
