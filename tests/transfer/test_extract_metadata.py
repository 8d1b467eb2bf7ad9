"""Extraction gives every file exactly its stored mode, owner and mtime, however it is
written: new files made with their final mode when the umask lets it, files already in
place rewritten (their own mode replaced), links in the way replaced, never written
through, and a setgid directory's group not taken for the stored one. Real archives,
real directories."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import barecat
from barecat.transfer import extract_to_directory

MTIME = 1_600_000_000_987_654_321
MODES = {
    "plain": 0o644,
    "all": 0o777,  # group and others' write: the umask would drop them on creation
    "private": 0o600,
    "readonly": 0o444,
    "setuid": 0o4755,
    "sticky": 0o1644,
}


def make_archive(path: Path) -> str:
    ar = str(path)
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("d", mode=0o40755, mtime_ns=MTIME))
        for name, mode in MODES.items():
            bc.add(f"d/{name}", data=name.encode() * 3, mode=stat.S_IFREG | mode, mtime_ns=MTIME)
        bc.add("d/empty", data=b"", mode=0o100640, mtime_ns=MTIME)
        bc.add("d/nomode", data=b"x")
    return ar


def check_tree(out: Path, umask: int) -> None:
    for name, mode in MODES.items():
        st = os.lstat(out / "d" / name)
        assert stat.S_IMODE(st.st_mode) == mode, name
        assert st.st_mtime_ns == MTIME, name
        assert (out / "d" / name).read_bytes() == name.encode() * 3
    empty = os.lstat(out / "d" / "empty")
    assert (empty.st_size, stat.S_IMODE(empty.st_mode), empty.st_mtime_ns) == (0, 0o640, MTIME)
    assert stat.S_IMODE(os.lstat(out / "d" / "nomode").st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
def test_new_files_get_their_stored_mode_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    ar = make_archive(tmp_path / "a.barecat")
    old = os.umask(umask)
    try:
        with barecat.Barecat(ar) as bc:
            result = extract_to_directory(bc, str(tmp_path / "out"))
    finally:
        os.umask(old)
    assert result.failures == [] and result.files == len(MODES) + 2
    check_tree(tmp_path / "out", umask)


def test_files_already_there_are_rewritten_with_the_stored_mode(tmp_path: Path) -> None:
    ar = make_archive(tmp_path / "a.barecat")
    out = tmp_path / "out"
    (out / "d").mkdir(parents=True)
    for name in [*MODES, "empty", "nomode"]:
        (out / "d" / name).write_bytes(b"old contents, longer than the new ones")
        os.chmod(out / "d" / name, 0o604)
    umask = os.umask(0o022)
    os.umask(umask)
    with barecat.Barecat(ar) as bc:
        assert extract_to_directory(bc, str(out)).failures == []
    check_tree(out, umask)


def test_a_link_in_the_way_of_a_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    ar = make_archive(tmp_path / "a.barecat")
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.write_bytes(b"untouched")
    os.chmod(victim, 0o600)
    (out / "d").mkdir(parents=True)
    os.symlink(victim, out / "d" / "plain")
    os.symlink(tmp_path / "nowhere", out / "d" / "private")  # dangling
    with barecat.Barecat(ar) as bc:
        assert extract_to_directory(bc, str(out)).failures == []
    assert victim.read_bytes() == b"untouched" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert not (tmp_path / "nowhere").exists()
    for name in ("plain", "private"):
        assert not (out / "d" / name).is_symlink()
        assert (out / "d" / name).read_bytes() == name.encode() * 3


@pytest.mark.skipif(os.geteuid() != 0, reason="restoring owners needs root")
def test_a_setgid_directory_does_not_give_its_group_to_stored_files(tmp_path: Path) -> None:
    other_gid = os.getegid() + 4242
    ar = str(tmp_path / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add(
            "g/mine",
            data=b"1",
            mode=0o100644,
            uid=os.geteuid(),
            gid=os.getegid(),
            mtime_ns=MTIME,
        )
        bc.add("g/theirs", data=b"2", mode=0o100644, uid=4321, gid=other_gid, mtime_ns=MTIME)
    out = tmp_path / "out"
    (out / "g").mkdir(parents=True)
    os.chown(out / "g", -1, other_gid)
    os.chmod(out / "g", 0o2775)  # files made in it get other_gid, not the process's group
    with barecat.Barecat(ar) as bc:
        assert extract_to_directory(bc, str(out), ["g/mine", "g/theirs"]).failures == []
    mine, theirs = os.lstat(out / "g" / "mine"), os.lstat(out / "g" / "theirs")
    assert (mine.st_uid, mine.st_gid) == (os.geteuid(), os.getegid())
    assert (theirs.st_uid, theirs.st_gid) == (4321, other_gid)


@pytest.mark.skipif(os.geteuid() != 0, reason="restoring owners needs root")
def test_directories_made_below_a_setgid_target_pass_its_group_rule_on(tmp_path: Path) -> None:
    """Directories extraction makes inherit the setgid bit of the target: a stored file
    deep below them still gets its own group, not the target's."""
    other_gid = os.getegid() + 4242
    ar = str(tmp_path / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("n/e/w/mine", data=b"1", mode=0o100644, uid=os.geteuid(), gid=os.getegid())
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, -1, other_gid)
    os.chmod(out, 0o2775)
    with barecat.Barecat(ar) as bc:
        assert extract_to_directory(bc, str(out)).failures == []
    assert os.lstat(out / "n" / "e").st_gid == other_gid  # (made setgid, chmodded later)
    mine = os.lstat(out / "n" / "e" / "w" / "mine")
    assert (mine.st_uid, mine.st_gid) == (os.geteuid(), os.getegid())
