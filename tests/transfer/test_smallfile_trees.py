"""Small-file trees through ``barecat create`` and ``barecat extract``, as tar users run
them: empty files, empty directories, links and metadata come back exactly, and a file
that cannot be read in the middle of a tree is named while the rest is stored. Real
commands, real trees."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import Run

MTIME = 1_400_000_000_111_222_333


def make_tree(root: Path) -> None:
    (root / "empty_dir" / "nested_empty").mkdir(parents=True)
    (root / "a" / "b").mkdir(parents=True)
    for i in range(40):  # more than one read chunk and index batch would need at this size
        (root / "a" / f"f{i:02d}").write_bytes(b"x" * (i * 37))
    (root / "a" / "b" / "zero").write_bytes(b"")
    (root / "a" / "b" / "exec").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "a" / "b" / "exec", 0o750)
    os.symlink("../f01", root / "a" / "b" / "link")
    os.symlink("missing", root / "a" / "dangling")
    for path in sorted(root.rglob("*"), reverse=True):
        os.utime(path, ns=(MTIME, MTIME), follow_symlinks=False)


def listing(root: Path) -> dict[str, tuple[object, ...]]:
    """Each entry's kind, mode, mtime and contents (or link target)."""
    out: dict[str, tuple[object, ...]] = {}
    for path in root.rglob("*"):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            what: object = os.readlink(path)
        elif stat.S_ISDIR(st.st_mode):
            what = "dir"
        else:
            what = path.read_bytes()
        mode = None if stat.S_ISLNK(st.st_mode) else stat.S_IMODE(st.st_mode)
        mtime = None if stat.S_ISLNK(st.st_mode) else st.st_mtime_ns
        out[str(path.relative_to(root))] = (what, mode, mtime)
    return out


def test_a_small_file_tree_comes_back_whole(run: Run, tmp_path: Path) -> None:
    src, out, ar = tmp_path / "src", tmp_path / "out", str(tmp_path / "t.barecat")
    make_tree(src)
    code, _, err = run("create", "-q", ar, "-C", str(src), ".")
    assert code == 0, err
    code, _, err = run("extract", "-q", ar, "-C", str(out))
    assert code == 0, err
    assert listing(out) == listing(src)
    assert (out / "a" / "b" / "zero").stat().st_size == 0
    assert list((out / "empty_dir").iterdir()) == [out / "empty_dir" / "nested_empty"]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can enter (pytest's own is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="barecat-smallfiles-"))
    os.chmod(path, 0o777)
    yield path
    shutil.rmtree(path)


def test_an_unreadable_file_in_the_middle_is_named_and_the_rest_stored(shared_dir: Path) -> None:
    """Run as an unprivileged user (``setpriv``, when the tests run as root), since root
    reads any file."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv (util-linux) is missing")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    src, out = shared_dir / "src", shared_dir / "out"
    make_tree(src)
    os.chmod(src / "a" / "f20", 0)  # in the middle of the first directory's files
    if prefix:  # the tree is the unprivileged user's, but for the unreadable file
        for path in [src, *src.rglob("*")]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
        os.chown(src / "a" / "f20", 0, 0)
    ar = str(shared_dir / "t.barecat")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    barecat = [*prefix, sys.executable, "-m", "barecat"]
    proc = subprocess.run(
        [*barecat, "create", ar, "-C", str(src), "."], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr  # the one file, named with its reason
    assert "a/f20: Permission denied" in proc.stderr
    proc = subprocess.run(
        [*barecat, "extract", "-q", ar, "-C", str(out)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    expected = listing(src)
    del expected["a/f20"]
    assert listing(out) == expected  # everything else, as it was
