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
        n = barecat.transfer.extract_to_directory(bc, str(tmp_path / "o"), paths=["keep"]).files
    assert n == 2
    found = sorted(
        os.path.relpath(os.path.join(d, f), tmp_path / "o")
        for d, _, fs in os.walk(tmp_path / "o")
        for f in fs
    )
    assert found == ["keep/x", "keep/y/z"]


def test_extract_relative_to_a_directory(archive_path: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    mtime = 1_300_000_000_000_000_000
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("a/b", mode=0o40750, mtime_ns=mtime))
        bc.add("top", data=b"0")
        bc.add("a/x", data=b"1")
        bc.add("a/b/y", data=b"2", mtime_ns=mtime)
        bc.add("ab/z", data=b"3")  # shares a prefix with 'a' but is not under it
        out = tmp_path / "o"
        result = barecat.transfer.extract_to_directory(bc, str(out), relative_to="a/")
        assert (result.files, result.failures) == (2, [])
        with pytest.raises(FileNotFoundError):
            barecat.transfer.extract_to_directory(bc, str(tmp_path / "p"), relative_to="nope")
    found = sorted(
        os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs
    )
    assert found == ["b/y", "x"]
    assert (out / "b/y").read_bytes() == b"2"
    assert os.stat(out / "b").st_mode & 0o777 == 0o750  # the directories' metadata too
    assert os.stat(out / "b").st_mtime_ns == mtime
    assert not (tmp_path / "p").exists()


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


def _tree_listing(root) -> dict[str, tuple[str, bytes | str, int]]:  # type: ignore[no-untyped-def]
    """{relative path: (kind, content or link target, permission bits)} of a real tree."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full), 0)
            elif os.path.isdir(full):
                out[rel] = ("dir", b"", st.st_mode & 0o777)
            else:
                with open(full, "rb") as f:
                    out[rel] = ("file", f.read(), st.st_mode & 0o777)
    return out


def test_add_directory_then_extract_round_trips(tmp_path, archive_path: str) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a" / "b" / "f.bin").write_bytes(os.urandom(5000))
    (src / "a" / "big.bin").write_bytes(os.urandom(3 << 20))
    (src / "top.txt").write_bytes(b"top")
    os.chmod(src / "top.txt", 0o600)
    os.symlink("b/f.bin", src / "a" / "link_to_f")
    os.symlink("../a", src / "empty" / "link_to_dir")
    os.utime(src / "top.txt", ns=(1, 1_234_567_890_123_456_789))
    with barecat.Barecat(archive_path, readonly=False) as bc:
        n = barecat.transfer.add_directory(bc, str(src), workers=2)
        assert n == 5  # 3 files + 2 links
        link = bc.index.lookup_file("a/link_to_f")
        assert link.is_symlink_entry and bc["a/link_to_f"] == b"b/f.bin"
        assert bc.index.lookup_file("top.txt").mtime_ns == 1_234_567_890_123_456_789
        assert bc.isdir("empty") and bc.index.find_inconsistencies() == []
    out = tmp_path / "out"
    barecat.extract(archive_path, str(out))
    assert _tree_listing(out) == _tree_listing(src)
    assert os.stat(out / "top.txt").st_mtime_ns == 1_234_567_890_123_456_789


def test_add_directory_under_a_prefix_and_following_links(tmp_path, archive_path: str) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    src.mkdir()
    (src / "real").write_bytes(b"data")
    os.symlink("real", src / "alias")
    with barecat.Barecat(archive_path, readonly=False) as bc:
        barecat.transfer.add_directory(bc, str(src), "in/here", follow_symlinks=True)
        assert bc["in/here/alias"] == b"data"
        assert not bc.index.lookup_file("in/here/alias").is_symlink_entry
        with pytest.raises(barecat.FileExistsBarecatError):
            barecat.transfer.add_directory(bc, str(src), "in/here")


def test_extract_refuses_links_pointing_outside(archive_path: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import stat

    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc.add("evil", data=b"../../etc/passwd", mode=stat.S_IFLNK | 0o777)
    with pytest.raises(barecat.InvalidPathBarecatError, match="outside"):
        barecat.extract(archive_path, str(tmp_path / "o"))
    assert not os.path.lexists(tmp_path / "o" / "evil")
