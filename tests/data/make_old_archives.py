"""Recreate the checked-in archives in the schemas that predate 0.3 (for ``barecat upgrade``).

Two older index layouts exist (``docs/format.md``, "Older schemas"):

* schema 0.2, written by PyPI barecat 0.2.5, 0.2.6 and 0.2.7 (all three write the same
  index); the index is always named ``ARCHIVE-sqlite-index``;
* the unversioned layout of 2023 (tables ``files`` and ``directories``, no ``config``),
  never published on PyPI. Its archives are built here by hand with the standard library,
  from the layout the reference documents (``files(path, parent, shard, offset, size,
  crc32)``, ``directories(path, parent, has_subdirs, has_files, total_size,
  total_file_count)``; ``crc32`` held zlib's CRC-32, not CRC32C).

Run from the repository root, each archive by the interpreter that can write it::

    rm -f tests/data/ref025-* tests/data/ref027-* tests/data/prev-*
    python3 -m venv /tmp/bc025 && /tmp/bc025/bin/pip install barecat==0.2.5
    python3 -m venv /tmp/bc027 && /tmp/bc027/bin/pip install barecat==0.2.7
    /tmp/bc025/bin/python tests/data/make_old_archives.py ref025
    /tmp/bc027/bin/python tests/data/make_old_archives.py ref027
    python3 tests/data/make_old_archives.py prev

The module-level constants are also what ``tests/ops/test_ops_upgrade.py`` expects after an
upgrade (it loads them with ``runpy`` without running ``main``).
"""

from __future__ import annotations

import importlib.metadata
import os
import sqlite3
import sys
import zlib
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def pattern(n: int, seed: int) -> bytes:
    """``n`` deterministic bytes that differ per ``seed``."""
    return bytes((seed * 37 + i * 11) % 256 for i in range(n))


# ref027-small: barecat 0.2.7, one shard; files and directories with metadata, empty dirs.
FILE_META = {"mode": 0o100640, "uid": 1001, "gid": 2002, "mtime_ns": 1_600_000_000_111_222_333}
DIR_META = {"mode": 0o40700, "uid": 1001, "gid": 2002, "mtime_ns": 1_600_000_000_444_555_666}
SMALL_FILES: dict[str, bytes] = {
    "readme.txt": b"made by barecat 0.2.7\n",
    "empty.bin": b"",
    "a/b/c/deep.bin": pattern(120, 1),
    "a/b/side.bin": pattern(45, 2),
    "a/top.txt": b"top of a",
    "ünï/名前.txt": "ユニコード".encode(),
    "with space/x y.txt": b"spaces",
    "meta/tool.sh": b"#!/bin/sh\nexit 0\n",
}
SMALL_META_PATH = "meta/tool.sh"
SMALL_EMPTY_DIRS = ["empty_dir", "empty_dir/inner"]
SMALL_META_DIR = "empty_dir"  # made with DIR_META

# ref025-sharded: barecat 0.2.5, 64-byte shards; then, in a second session, one file
# removed (a hole), one file moved to another directory and one subtree removed. The 0.2
# trigger for a deleted directory subtracts its direct file count from its parent's, so
# the root's `num_files` is wrong afterwards: the upgrade has to recompute statistics.
# (0.2 cannot rename a non-empty directory: its foreign keys refuse.)
SHARDED_LIMIT = 64
SHARDED_ADDED: dict[str, bytes] = {f"s/{i // 3}/f{i}.bin": pattern(9 + 6 * i, i) for i in range(9)}
SHARDED_ADDED["gone/x.bin"] = pattern(12, 50)
SHARDED_ADDED["gone/deeper/y.bin"] = pattern(20, 51)
SHARDED_REMOVED = "s/0/f1.bin"
SHARDED_RENAMED = ("s/1/f3.bin", "s/2/moved.bin")
SHARDED_RMTREE = "gone"

# prev-small: unversioned layout, two shards written by hand.
PREV_FILES: dict[str, list[tuple[str, bytes]]] = {
    # shard number -> files in shard order
    "0": [("root.txt", b"unversioned root"), ("d/e/f.bin", pattern(70, 3))],
    "1": [("d/g.txt", b"second shard"), ("d/e/empty", b""), ("h/i.bin", pattern(33, 4))],
}


def final_files(name: str) -> dict[str, bytes]:
    """Every file of archive ``name`` (``ref027-small``, ``ref025-sharded``,
    ``prev-small``) as it reads after the edits above."""
    if name == "ref027-small":
        return dict(SMALL_FILES)
    if name == "prev-small":
        return {p: d for files in PREV_FILES.values() for p, d in files}
    old, new = SHARDED_RENAMED
    out = {}
    for path, data in SHARDED_ADDED.items():
        if path == SHARDED_REMOVED or path.startswith(SHARDED_RMTREE + "/"):
            continue
        out[new if path == old else path] = data
    return out


def _release(version: str) -> Any:
    """The installed barecat, which must be exactly ``version`` (only imported when run as
    a script: the tests load this module without any barecat 0.2)."""
    import barecat

    installed = importlib.metadata.version("barecat")
    assert installed == version, f"needs barecat {version}, found {installed}"
    return barecat


def make_ref027() -> None:
    barecat = _release("0.2.7")
    with barecat.Barecat(os.path.join(HERE, "ref027-small"), readonly=False) as bc:
        for path, data in SMALL_FILES.items():
            meta = FILE_META if path == SMALL_META_PATH else {}
            bc.add(barecat.BarecatFileInfo(path=path, **meta), data=data)
        for d in SMALL_EMPTY_DIRS:
            meta = DIR_META if d == SMALL_META_DIR else {}
            bc.add(barecat.BarecatDirInfo(path=d, **meta))


def make_ref025() -> None:
    barecat = _release("0.2.5")
    path = os.path.join(HERE, "ref025-sharded")
    with barecat.Barecat(path, readonly=False, shard_size_limit=SHARDED_LIMIT) as bc:
        for p, data in SHARDED_ADDED.items():
            bc[p] = data
    with barecat.Barecat(path, readonly=False) as bc:
        bc.remove(SHARDED_REMOVED)
        bc.rename(*SHARDED_RENAMED)
        bc.remove_recursively(SHARDED_RMTREE)


def make_prev() -> None:
    base = os.path.join(HERE, "prev-small")
    conn = sqlite3.connect(base + "-sqlite-index")
    conn.execute(
        "CREATE TABLE files (path TEXT PRIMARY KEY, parent TEXT, shard INTEGER, "
        "offset INTEGER, size INTEGER, crc32 INTEGER NULL)"
    )
    conn.execute(
        "CREATE TABLE directories (path TEXT PRIMARY KEY, parent TEXT, "
        "has_subdirs BOOLEAN DEFAULT FALSE, has_files BOOLEAN DEFAULT FALSE, "
        "total_size INTEGER DEFAULT 0, total_file_count INTEGER DEFAULT 0)"
    )
    conn.execute("CREATE INDEX idx_directories_parent ON directories (parent)")
    conn.execute("CREATE INDEX idx_files_parent ON files (parent)")
    for shard, files in PREV_FILES.items():
        offset = 0
        with open(f"{base}-shard-{int(shard):05d}", "wb") as f:
            for path, data in files:
                f.write(data)
                parent = path.rpartition("/")[0]
                conn.execute(
                    "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)",
                    (path, parent, int(shard), offset, len(data), zlib.crc32(data)),
                )
                _add_ancestors(conn, path, len(data))
                offset += len(data)
    conn.commit()
    conn.close()


def _add_ancestors(conn: sqlite3.Connection, path: str, size: int) -> None:
    """The statistics the unversioned layout kept for every ancestor of a file."""
    parts = path.split("/")[:-1]
    ancestors = [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for depth, anc in enumerate(ancestors):
        direct = depth == len(ancestors) - 1
        conn.execute(
            "INSERT INTO directories (path, parent, has_subdirs, has_files, total_size, "
            "total_file_count) VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT (path) DO UPDATE SET "
            "has_subdirs = has_subdirs OR excluded.has_subdirs, "
            "has_files = has_files OR excluded.has_files, "
            "total_size = total_size + excluded.total_size, "
            "total_file_count = total_file_count + 1",
            (anc, b"\x00" if anc == "" else anc.rpartition("/")[0], not direct, direct, size),
        )


def main(which: str) -> None:
    {"ref025": make_ref025, "ref027": make_ref027, "prev": make_prev}[which]()


if __name__ == "__main__":
    main(sys.argv[1])
