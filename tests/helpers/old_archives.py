"""Checking archives of older releases after their upgrade to schema 0.3."""

from __future__ import annotations

import hashlib
from pathlib import Path

import crc32c

import barecat
from barecat.ops.verify import verify_archive


def sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def implied_dirs(paths: list[str], extra: list[str] = ()) -> set[str]:  # type: ignore[assignment]
    out = {""}
    for p in [*paths, *(e + "/x" for e in extra)]:
        parts = p.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def check_upgraded(base: str, expected: dict[str, bytes], dirs: set[str]) -> None:
    """Every file's bytes and CRC32C, the directory set and statistics, full verification."""
    with barecat.Barecat(base) as bc:
        assert bc.index.schema_version == (0, 3)
        files = {f.path: f for f in bc.index.iter_all_fileinfos()}
        assert set(files) == set(expected)
        for path, data in expected.items():
            assert bc[path] == data, path
            assert files[path].crc32c == crc32c.crc32c(data), path
        assert set(bc.index.iter_all_dirpaths()) == dirs
        assert bc.index.find_inconsistencies() == []
        assert verify_archive(bc.index, bc.sharder).ok
