"""The read-ahead of a read-only mount, on real FUSE mounts served with ``--debug``: files
read in turn are stored in the kernel's cache ahead of the reader, never damaged or
undecrypted bytes, the worker never asks its own server and never keeps an unmount
waiting."""

from __future__ import annotations

import errno
import os
import re
import subprocess
from pathlib import Path

import pytest

import barecat
from barecat.mount import is_mounted
from helpers.damaging import damage
from helpers.mounting import (
    FUSE_PROBLEM,
    logged_requests,
    numbered_files,
    served,
    server_log,
    wait_for,
)

pytestmark = pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)


def _threads(server: subprocess.Popen[bytes]) -> set[int]:
    return {int(tid) for tid in os.listdir(f"/proc/{server.pid}/task")}


def _asked_by(log: Path, threads: set[int]) -> list[str]:
    """The requests a ``--debug`` server got from the given threads (libfuse logs the
    thread that caused each request as its ``pid``)."""
    asked = re.findall(r"opcode: ([A-Z]+) .*, pid: (\d+)", log.read_text())
    return [opcode for opcode, pid in asked if int(pid) in threads]


def _read_in_turn(mnt: Path, names: list[str], files: dict[str, bytes]) -> None:
    """Read files one after another, as a program going through a folder does, each once
    the server's read-ahead worker is idle (so what it stores ahead is there in time, on
    a machine however loaded), and return once it is idle again (its stores all made)."""
    log = server_log(mnt)
    wait_for(lambda: _read_ahead_idle(log), "the read-ahead worker")
    for name in names:
        assert (mnt / name).read_bytes() == files[name], name
        wait_for(lambda: _read_ahead_idle(log), f"the read-ahead worker after {name}")


def _read_ahead_idle(log: Path) -> bool:
    """Whether the worker of a ``--debug`` server took every read reported to it and
    stored all it had to. A read is reported before the server answers it, so once a
    read returned, its report (if any) is in the log; the worker's idle line counts the
    reports it took before it (a line being written, without its newline, is not yet
    read as one)."""
    text = log.read_text()
    reported = text.count("read-ahead report queued: ")
    taken = re.findall(r"read-ahead idle after (\d+) reports\n", text)
    return max(map(int, taken), default=0) >= reported


@pytest.mark.parametrize(("threads", "folder"), [("--no-threads", "d/"), ("--threads", "")])
def test_files_read_in_turn_are_read_ahead(tmp_path: Path, threads: str, folder: str) -> None:
    """After two files of a directory were read one after the other, the server stores
    the next ones in the kernel's cache before they are asked for: reading 120 files
    costs a handful of READ requests, and every byte is the archive's (in a folder and
    at the top of the archive, served on one thread or on libfuse's workers)."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 120, folder)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug", threads):
        order = [f"{folder}{name}" for name in os.listdir(mnt / folder)]  # listing order
        assert sorted(order) == sorted(files)
        _read_in_turn(mnt, order, files)
    opcodes, stores = logged_requests(tmp_path / "mnt.log")
    reads = opcodes.count("READ")
    assert reads <= 20 and stores >= 100, (reads, stores)


def test_files_read_out_of_turn_start_no_read_ahead(tmp_path: Path) -> None:
    """A reader that never reads the file after the one before (a shuffled dataset) gets
    nothing stored for it: no work and no cache spent on guesses."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 120)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug"):
        listed = [f"d/{name}" for name in os.listdir(mnt / "d")]
        strided = [listed[i * 37 % len(listed)] for i in range(len(listed))]  # no neighbours
        _read_in_turn(mnt, strided, files)
    opcodes, stores = logged_requests(tmp_path / "mnt.log")
    assert stores == 0 and opcodes.count("READ") == len(files)


def test_a_reader_that_turns_sequential_is_read_ahead_soon(tmp_path: Path) -> None:
    """Checks back off while a directory's reads are shuffled, but not for good: once the
    reader goes file after file, read-ahead starts within a few dozen files."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 300)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug"):
        listed = [f"d/{name}" for name in os.listdir(mnt / "d")]
        _read_in_turn(mnt, [listed[i * 37 % 100] for i in range(100)], files)
        _read_in_turn(mnt, listed[100:], files)
    opcodes, stores = logged_requests(tmp_path / "mnt.log")
    assert stores >= 120 and opcodes.count("READ") <= 180, (stores, opcodes.count("READ"))


def test_read_ahead_never_stores_damaged_bytes(tmp_path: Path) -> None:
    """A damaged file in the middle of a directory read in turn fails with EIO, each time
    it is read: the worker checks what it stores and leaves the damaged file out."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 60)
    damage(archive, "d/030.bin", 700)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug"):
        os.listdir(mnt / "d")  # (read-ahead stores the files of listed directories)
        _read_in_turn(mnt, [f"d/{i:03d}.bin" for i in range(30)], files)
        for _ in range(2):
            with pytest.raises(OSError) as e:
                (mnt / "d/030.bin").read_bytes()
            assert e.value.errno == errno.EIO
        _read_in_turn(mnt, [f"d/{i:03d}.bin" for i in range(31, 60)], files)
    _, stores = logged_requests(tmp_path / "mnt.log")
    assert stores >= 40


def test_an_encrypted_archive_is_read_ahead_decrypted(tmp_path: Path) -> None:
    archive = str(tmp_path / "e.barecat")
    files = numbered_files(archive, 50, passphrase="ahead")
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug", env={"BARECAT_PASSPHRASE": "ahead"}):
        os.listdir(mnt / "d")
        _read_in_turn(mnt, sorted(files), files)
    _, stores = logged_requests(tmp_path / "mnt.log")
    assert stores >= 30


def _unmount_at_once(mnt: Path, server: subprocess.Popen[bytes]) -> None:
    done = subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # (not EBUSY)
    assert server.wait(timeout=30) == 0
    assert not is_mounted(str(mnt))


def test_a_mount_reading_ahead_unmounts_at_once(tmp_path: Path) -> None:
    """The worker holds nothing open on the mount and never waits for its own server
    while walking it: ``fusermount3 -u`` right after a reader stopped, while the worker
    still stores files ahead, unmounts (no EBUSY)."""
    archive = str(tmp_path / "r.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"d/{i:04d}.txt", b"x" * 3000) for i in range(3000))
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug") as server:
        for name in sorted(os.listdir(mnt / "d"))[:3]:
            assert (mnt / "d" / name).read_bytes() == b"x" * 3000
        threads = _threads(server)
        _unmount_at_once(mnt, server)
    assert _asked_by(tmp_path / "mnt.log", threads) == []


def test_read_ahead_walks_the_mount_only_while_the_read_that_queued_files_is_open(
    tmp_path: Path,
) -> None:
    """Any walk on the mount makes ``umount`` fail with EBUSY, so the worker finds the
    node ids of a window before the read that fetched it is answered (the reader holds
    the mount then): with the mount detached (``fusermount3 -u -z``) as soon as that read
    returned, its directory kept open, every file of the window it fetched is stored (a
    worker walking after the read found none of them: the mount was gone)."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 300)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug") as server:
        names = sorted(os.listdir(mnt / "d"))  # (their names, with attributes, in the kernel)
        _read_in_turn(mnt, ["d/000.bin", "d/001.bin", "d/002.bin", "d/010.bin"], files)
        directory = os.open(mnt / "d", os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert (mnt / "d/042.bin").read_bytes() == files["d/042.bin"]  # (window 170-299)
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=True)
            wait_for(lambda: _read_ahead_idle(tmp_path / "mnt.log"), "the read-ahead worker")
            before = logged_requests(tmp_path / "mnt.log")[0].count("READ")
            for name in names[171:]:  # (170: the window's marker)
                with open(os.open(name, os.O_RDONLY, dir_fd=directory), "rb") as f:
                    assert f.read() == files[f"d/{name}"], name
            assert logged_requests(tmp_path / "mnt.log")[0].count("READ") == before
        finally:
            os.close(directory)  # (the detached mount ends with it)
        assert server.wait(timeout=30) == 0


def test_read_ahead_never_asks_its_own_server_for_names(tmp_path: Path) -> None:
    """Files read by name, their directory never listed: the worker stores those whose
    names the kernel holds, and skips the others rather than look them up (a lookup by
    the worker holds the mount until the server answers it, which made an unmount right
    after the reader failed with EBUSY whenever the kernel had dropped the names, as it
    does under memory pressure)."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 20)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug") as server:
        known = ["d/003.bin", "d/009.bin"]
        for name in known:  # looked up by this process: the kernel holds their names
            assert os.stat(mnt / name).st_size == len(files[name])
        _read_in_turn(mnt, ["d/000.bin", "d/001.bin"], files)  # 003-009 to store (002: marker)
        wait_for(lambda: logged_requests(tmp_path / "mnt.log")[1] >= len(known), "the stores")
        threads = _threads(server)
        for name in known:
            assert (mnt / name).read_bytes() == files[name]
        _unmount_at_once(mnt, server)
    opcodes, stores = logged_requests(tmp_path / "mnt.log")
    assert _asked_by(tmp_path / "mnt.log", threads) == []
    assert stores == len(known) and opcodes.count("READ") == 2  # (the known files were cached)
