"""``barecat mount ... -o OPTIONS``: barecat 0.3.1's mount options, on real FUSE mounts
(skipped, with the reason, where FUSE is not usable)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

import barecat
from helpers import BARECAT, Run
from helpers.mounting import FUSE_PROBLEM, served, wait_for

needs_fuse = pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)


@pytest.fixture
def archive(make_archive) -> str:  # type: ignore[no-untyped-def]
    return str(make_archive({"old/a.txt": b"a" * 100, "old/b.txt": b"b" * 100}))


@needs_fuse
def test_o_rw_in_the_background_as_0_3_1_documents(archive: str, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run([BARECAT, "mount", archive, str(mnt), "-o", "rw"], capture_output=True)
    assert done.returncode == 0, done.stderr
    try:
        (mnt / "new.txt").write_bytes(b"written through the mount")
        os.remove(mnt / "old/a.txt")
    finally:
        assert subprocess.run([BARECAT, "mount", "-u", str(mnt)]).returncode == 0
    wait_for(lambda: _closed(archive), "the server to close the archive")
    with barecat.Barecat(archive) as bc:
        assert bc["new.txt"] == b"written through the mount" and "old/a.txt" not in bc


def _closed(archive: str) -> bool:
    try:  # the writer lock is free once the server has committed and gone
        with barecat.Barecat(archive, readonly=False):
            return True
    except barecat.BarecatError:
        return False


@needs_fuse
def test_append_only_adds_but_changes_nothing(archive: str, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "-o", "rw,append_only", "-o", "shard_size_limit=1K,mmap"):
        (mnt / "new.txt").write_bytes(b"n" * 600)
        (mnt / "more.txt").write_bytes(b"m" * 600)
        with pytest.raises(OSError) as removing:
            os.remove(mnt / "old/a.txt")
        assert removing.value.errno == errno.EROFS
        with pytest.raises(OSError) as rewriting:
            (mnt / "old/b.txt").write_bytes(b"changed")
        assert rewriting.value.errno == errno.EROFS
    with barecat.Barecat(archive) as bc:
        assert bc["old/a.txt"] == b"a" * 100 and bc["old/b.txt"] == b"b" * 100
        assert bc["new.txt"] == b"n" * 600 and bc.shard_size_limit == 1024
        assert bc.sharder.num_shards == 2  # 200 + 600 bytes, then the next 600 in a new one


@needs_fuse
def test_defrag_compacts_the_archive_once_unmounted(archive: str, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "-o", "rw,defrag"):
        os.remove(mnt / "old/a.txt")
    with barecat.Barecat(archive) as bc:
        assert bc.total_physical_size_seek == bc.total_logical_size == 100
        assert bc["old/b.txt"] == b"b" * 100


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("rw,nosuch", "unknown mount option -o nosuch (known: ro, rw, fg/foreground"),
        ("rw,shard_size_limit=lots", "lots"),
        ("defrag", "-o defrag changes the archive once unmounted: add -o rw"),
        ("rw,defrag,ro", "add -o rw"),  # the last of ro and rw wins
    ],
)
def test_a_bad_option_is_one_line(
    run: Run, archive: str, tmp_path: Path, options: str, words: str
) -> None:
    code, out, err = run("mount", archive, str(tmp_path), "-o", options)
    assert (code, out) == (1, "") and words in err and err.count("\n") == 1
