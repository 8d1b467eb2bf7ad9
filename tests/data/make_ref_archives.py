"""Recreate the checked-in archives written by the reference barecat 0.3.1.

Run with the *reference* interpreter, from the repository root::

    rm -f tests/data/ref031-*
    .venv-ref/bin/python tests/data/make_ref_archives.py

The module-level constants are also what ``tests/interop/test_interop.py`` expects to read back
(it loads them with ``runpy`` without running ``main``, so no barecat is imported then).
"""

from __future__ import annotations

import os


def pattern(n: int, seed: int) -> bytes:
    """``n`` deterministic bytes that differ per ``seed``."""
    return bytes((seed * 31 + i * 7) % 256 for i in range(n))


META = {"mode": 0o100750, "uid": 1234, "gid": 5678, "mtime_ns": 1_700_000_000_123_456_789}

# ref031-small.barecat: one shard (default, unlimited shard size).
SMALL_FILES: dict[str, bytes] = {
    "hello.txt": b"Hello from barecat 0.3.1\n",
    "empty.bin": b"",
    "dir/sub/deeper/leaf.bin": pattern(100, 1),
    "dir/sub/other.bin": pattern(33, 2),
    "dir/empty_in_dir.txt": b"",
    "ünï/日本/データ.txt": "ユニコード".encode(),
    "with space/file name.txt": b"spaces",
    "meta/tool.sh": b"#!/bin/sh\nexit 0\n",
}
SMALL_EMPTY_DIRS = ["empty_dir", "empty_dir/nested"]
SMALL_META_PATH = "meta/tool.sh"

# ref031-sharded.barecat: 64-byte shards; then one file removed (leaves a hole) and one
# directory renamed, both by the reference.
SHARDED_LIMIT = 64
SHARDED_ADDED: dict[str, bytes] = {f"s/{i // 3}/f{i}.bin": pattern(8 + 7 * i, i) for i in range(8)}
SHARDED_REMOVED = "s/0/f1.bin"
SHARDED_RENAMED = ("s/1", "s/one")

# ref031-oldnaming: index renamed to 'ref031-oldnaming-sqlite-index' (the old naming).
OLD_FILES: dict[str, bytes] = {"old/a.txt": b"old naming a", "old/b/c.txt": b"old naming c"}


def sharded_final() -> dict[str, bytes]:
    """The sharded archive's files after the reference's remove and rename."""
    old, new = SHARDED_RENAMED
    out = {}
    for path, data in SHARDED_ADDED.items():
        if path == SHARDED_REMOVED:
            continue
        out[new + path[len(old) :] if path.startswith(old + "/") else path] = data
    return out


def main() -> None:
    import barecat  # the reference; only imported when run as a script

    assert barecat.__version__ == "0.3.1", barecat.__version__
    here = os.path.dirname(os.path.abspath(__file__))

    with barecat.Barecat(os.path.join(here, "ref031-small.barecat"), readonly=False) as bc:
        for path, data in SMALL_FILES.items():
            if path == SMALL_META_PATH:
                bc.add(barecat.BarecatFileInfo(path=path, **META), data=data)
            else:
                bc[path] = data
        for d in SMALL_EMPTY_DIRS:
            bc.mkdir(d)

    sharded = os.path.join(here, "ref031-sharded.barecat")
    with barecat.Barecat(sharded, readonly=False, shard_size_limit=SHARDED_LIMIT) as bc:
        for path, data in SHARDED_ADDED.items():
            bc[path] = data
    with barecat.Barecat(sharded, readonly=False) as bc:
        bc.remove(SHARDED_REMOVED)
        bc.rename(*SHARDED_RENAMED)

    old = os.path.join(here, "ref031-oldnaming")
    with barecat.Barecat(old, readonly=False) as bc:
        for path, data in OLD_FILES.items():
            bc[path] = data
    os.rename(old, old + "-sqlite-index")


if __name__ == "__main__":
    main()
