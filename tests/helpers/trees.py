"""Real directory trees to archive, and everything observable about one."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def make_numbered_tree(root: Path, dirs: int, per_dir: int) -> dict[str, bytes]:
    """``dNN/III`` files of distinct, size-varying bytes; returns {relative path: bytes}."""
    expected = {}
    for d in range(dirs):
        (root / f"d{d:02}").mkdir(parents=True)
        for i in range(per_dir):
            data = b"%d/%d;" % (d, i) * (i % 50 + 1)
            (root / f"d{d:02}/{i:03}").write_bytes(data)
            expected[f"d{d:02}/{i:03}"] = data
    return expected


def make_tree(root: Path) -> Path:
    """A small tree with everything create/extract must keep: modes, mtimes, empty and
    private directories, file and directory links, a dangling link, odd names."""
    (root / "a/b").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "private").mkdir(mode=0o700)
    (root / "a/x.txt").write_bytes(b"hello\n")
    (root / "a/b/big.bin").write_bytes(os.urandom(3 << 20))
    (root / "a/b/zero").write_bytes(b"")
    (root / "name with spaces ü.txt").write_bytes(b"spaces")
    (root / ".hidden").write_bytes(b"h")
    (root / "private/secret").write_bytes(b"s")
    os.chmod(root / "private/secret", 0o600)
    os.chmod(root / "a/x.txt", 0o640)
    os.symlink("../name with spaces ü.txt", root / "a/link_to_file")
    os.symlink("a/b", root / "link_to_dir")
    os.symlink("does-not-exist", root / "dangling")
    for i, p in enumerate(sorted(root.rglob("*"), reverse=True)):
        os.utime(p, ns=(1_500_000_000_000_000_000 + i, 1_500_000_000_000_000_000 + i),
                 follow_symlinks=False)  # fmt: skip
    return root


def tree_state(root: Path) -> dict[str, tuple[object, ...]]:
    """Everything observable about a tree: type, permission bits, mtime, bytes or target."""
    state: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                state[str(p.relative_to(root))] = ("link", os.readlink(p), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                state[str(p.relative_to(root))] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                content = p.read_bytes()
                state[str(p.relative_to(root))] = (
                    "file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, content,
                )  # fmt: skip
    return state
