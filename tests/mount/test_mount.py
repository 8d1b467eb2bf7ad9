"""Real FUSE mounts of archives: what programs see through them, read-only and read-write."""

from __future__ import annotations

import errno
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import barecat
from barecat.exceptions import BarecatError
from barecat.mount import is_mounted
from helpers import BARECAT
from helpers.damaging import damage
from helpers.mounting import (
    FUSE_PROBLEM,
    logged_requests,
    numbered_files,
    served,
    wait_for,
)
from helpers.trees import make_tree, tree_state

pytestmark = pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)


@pytest.fixture
def tree_archive(tmp_path: Path) -> tuple[str, Path]:
    src = make_tree(tmp_path / "src")
    archive = str(tmp_path / "t.barecat")
    done = subprocess.run([BARECAT, "create", "-q", "-C", str(src), archive, "."])
    assert done.returncode == 0
    return archive, src


def test_a_read_only_mount_shows_the_tree_exactly(
    tree_archive: tuple[str, Path], tmp_path: Path
) -> None:
    archive, src = tree_archive
    mnt = tmp_path / "mnt"
    with served(archive, mnt):
        assert tree_state(mnt) == tree_state(src)  # bytes, modes, mtimes, links, empty dirs
        listing = subprocess.run(["ls", "-lR", str(mnt)], capture_output=True, text=True)
        assert listing.returncode == 0 and "big.bin" in listing.stdout
        found = subprocess.run(["find", str(mnt)], capture_output=True, text=True).stdout
        assert len(found.splitlines()) == len(tree_state(src)) + 1
        copy = tmp_path / "copy"
        assert subprocess.run(["cp", "-a", f"{mnt}/.", str(copy)]).returncode == 0
        assert tree_state(copy) == tree_state(src)
        du = subprocess.run(["du", "-sb", str(mnt)], capture_output=True, text=True)
        assert du.returncode == 0 and int(du.stdout.split()[0]) >= 3 << 20
        with pytest.raises(OSError) as e:
            (mnt / "new.txt").write_bytes(b"x")
        assert e.value.errno == errno.EROFS
        for missing in (mnt / "no/such", os.fsencode(mnt) + b"/a/not-utf-8-\xff"):
            with pytest.raises(OSError) as e:
                os.stat(missing)
            assert e.value.errno == errno.ENOENT
        with pytest.raises(OSError) as e:
            os.stat(mnt / "a/x.txt/below")
        assert e.value.errno == errno.ENOTDIR
        with pytest.raises(OSError) as e:
            open(mnt / "a").read()  # noqa: SIM115
        assert e.value.errno == errno.EISDIR
        statfs = os.statvfs(mnt)
        assert statfs.f_files > 0
    assert not is_mounted(str(mnt))


def test_damaged_bytes_read_whole_give_eio(tmp_path: Path) -> None:
    archive = str(tmp_path / "d.barecat")
    big = os.urandom(6 << 20)  # above VERIFY_AT_OPEN: checked as it is read in order
    with barecat.Barecat(archive, readonly=False) as bc:
        bc["small.txt"] = b"hello\n"
        bc["big.bin"] = big
        bc["fine.txt"] = b"fine"
    damage(archive, "small.txt", 2)
    damage(archive, "big.bin", len(big) - 10)
    mnt = tmp_path / "mnt"
    with served(archive, mnt):
        for name in ("small.txt", "big.bin"):
            with pytest.raises(OSError) as e:
                (mnt / name).read_bytes()
            assert e.value.errno == errno.EIO, name
        assert (mnt / "fine.txt").read_bytes() == b"fine"
        with open(mnt / "big.bin", "rb") as f:  # a part away from the damage reads
            assert f.read(4096) == big[:4096]


def test_a_read_write_session_ends_in_a_verified_archive(
    tree_archive: tuple[str, Path], tmp_path: Path
) -> None:
    archive, src = tree_archive
    mnt = tmp_path / "mnt"
    big = os.urandom(5 << 20)
    with served(archive, mnt, "--rw"):
        (mnt / "new.txt").write_text("first\n")
        with open(mnt / "new.txt", "a") as f:
            f.write("second\n")
        (mnt / "dir/sub").mkdir(parents=True)
        (mnt / "dir/sub/big.bin").write_bytes(big)
        os.rename(mnt / "new.txt", mnt / "dir/renamed.txt")
        os.truncate(mnt / "a/b/big.bin", 100)
        os.chmod(mnt / "dir/renamed.txt", 0o600)
        os.utime(mnt / "dir/renamed.txt", ns=(1_600_000_000_000_000_000,) * 2)
        os.unlink(mnt / ".hidden")
        os.rmdir(mnt / "empty")
        with pytest.raises(OSError) as e:
            os.rmdir(mnt / "a")
        assert e.value.errno == errno.ENOTEMPTY
        os.replace(mnt / "a/x.txt", mnt / "private/secret")  # replaces a file
        assert (mnt / "dir/renamed.txt").read_text() == "first\nsecond\n"
        assert (mnt / "dir/sub/big.bin").read_bytes() == big
    done = subprocess.run([BARECAT, "verify", archive], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with barecat.Barecat(archive) as bc:
        assert bc["dir/renamed.txt"] == b"first\nsecond\n"
        info = bc.stat("dir/renamed.txt")
        assert stat.S_IMODE(info.mode or 0) == 0o600
        assert info.mtime_ns == 1_600_000_000_000_000_000
        assert bc["dir/sub/big.bin"] == big
        assert bc["a/b/big.bin"] == (src / "a/b/big.bin").read_bytes()[:100]
        assert bc["private/secret"] == b"hello\n"
        assert not bc.exists(".hidden") and not bc.exists("empty") and not bc.exists("a/x.txt")
        assert bc.stat("dir/sub/big.bin").uid == os.getuid()


def test_cp_a_into_a_read_write_mount_keeps_modes_owners_and_times(tmp_path: Path) -> None:
    """``cp -a`` sets a file's mode, owner and times on its open descriptor, before it
    closes it: they are kept with the file stored at the close."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    files = {"a.txt": (b"alpha\n", 0o640), "sub/b.bin": (os.urandom(70_000), 0o600)}
    for i, (name, (data, mode)) in enumerate(files.items()):
        (src / name).write_bytes(data)
        os.chmod(src / name, mode)
        os.utime(src / name, ns=(1_000_000_000_000_000_000 + i,) * 2)
        if os.geteuid() == 0:
            os.chown(src / name, 1234 + i, 4321 + i)
    archive = str(tmp_path / "cp.barecat")
    barecat.Barecat(archive, readonly=False).close()
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--rw"):
        done = subprocess.run(["cp", "-a", str(src), str(mnt / "copy")], capture_output=True)
        assert done.returncode == 0, done.stderr
    with barecat.Barecat(archive) as bc:
        for i, (name, (data, mode)) in enumerate(files.items()):
            info = bc.stat(f"copy/{name}")
            assert bc[f"copy/{name}"] == data
            assert stat.S_IMODE(info.mode or 0) == mode
            assert info.mtime_ns == 1_000_000_000_000_000_000 + i
            if os.geteuid() == 0:
                assert (info.uid, info.gid) == (1234 + i, 4321 + i)


def test_sigterm_unmounts_cleanly_and_keeps_what_was_written(
    tree_archive: tuple[str, Path], tmp_path: Path
) -> None:
    archive, _ = tree_archive
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--rw") as server:
        (mnt / "kept.txt").write_bytes(b"kept")
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        assert not is_mounted(str(mnt))
    with barecat.Barecat(archive) as bc:
        assert bc["kept.txt"] == b"kept" and bc.verify_integrity()


def test_a_killed_server_is_unmounted_by_barecat(
    tree_archive: tuple[str, Path], tmp_path: Path
) -> None:
    archive, _ = tree_archive
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--rw") as server:
        (mnt / "closed.txt").write_bytes(b"closed before the kill")

        def closed_is_committed() -> bool:
            (mnt / "tick.txt").write_bytes(b"x")  # a change: commits once an interval passed
            with barecat.Barecat(archive) as bc:
                return "closed.txt" in bc

        wait_for(closed_is_committed, "the server to commit closed.txt")
        (mnt / "other.txt").write_bytes(b"x")
        server.kill()
        server.wait(timeout=30)
        with pytest.raises(OSError) as e:
            os.listdir(mnt)
        assert e.value.errno == errno.ENOTCONN
        assert is_mounted(str(mnt))
        done = subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], capture_output=True)
        assert done.returncode == 0, done.stderr
        assert not is_mounted(str(mnt)) and os.listdir(mnt) == []
    subprocess.run([BARECAT, "repair", "-q", archive], check=True)
    with barecat.Barecat(archive) as bc:
        assert bc.verify_integrity()
        assert bc["closed.txt"] == b"closed before the kill"


def test_background_mount_of_an_encrypted_archive(tmp_path: Path) -> None:
    archive = str(tmp_path / "e.barecat")
    with barecat.Barecat(archive, readonly=False, passphrase="mount me") as bc:
        bc["secret/plan.txt"] = b"the plan\n"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {**os.environ, "BARECAT_PASSPHRASE": "wrong"}
    wrong = subprocess.run([BARECAT, "mount", archive, str(mnt)], env=env, capture_output=True)
    assert wrong.returncode == 1 and b"Wrong passphrase" in wrong.stderr
    assert not is_mounted(str(mnt))
    env["BARECAT_PASSPHRASE"] = "mount me"
    done = subprocess.run([BARECAT, "mount", archive, str(mnt)], env=env, capture_output=True)
    try:
        assert done.returncode == 0, done.stderr
        assert (mnt / "secret/plan.txt").read_bytes() == b"the plan\n"
        server_env = [p for p in os.listdir("/proc") if p.isdigit() and _is_server(p, str(mnt))]
        assert server_env and all(_environ_lacks(p, b"mount me") for p in server_env)
    finally:
        subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], check=True)
    assert not is_mounted(str(mnt))


def _is_server(pid: str, mountpoint: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return mountpoint.encode() in f.read()
    except OSError:
        return False


def _environ_lacks(pid: str, secret: bytes) -> bool:
    """The passphrase reached the server through a pipe: not in its argv or environment."""
    with open(f"/proc/{pid}/environ", "rb") as f, open(f"/proc/{pid}/cmdline", "rb") as g:
        return secret not in f.read() and secret not in g.read()


def test_mount_errors_are_one_line(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        [BARECAT, "mount", str(tmp_path / "missing.barecat"), str(mnt)], capture_output=True
    )
    assert done.returncode == 1 and b"Archive not found" in done.stderr
    script = (
        "import sys; sys.modules['mfusepy'] = None\n"
        "from barecat.mount import check_fuse\n"
        "check_fuse()\n"
    )
    no_binding = subprocess.run([sys.executable, "-c", script], capture_output=True)
    hint = b"pip install '.[mount]' in a checkout of barecat (the 'mount' extra)"
    assert hint in no_binding.stderr


def test_a_read_only_mount_reads_files_without_openlogged_requests(tmp_path: Path) -> None:
    """The first open is declined (ENOSYS), so the kernel reads the rest of the files
    without OPEN and RELEASE requests; the listing carries every file's attributes, so
    no LOOKUP precedes the reads; files larger than one read keep their state by path,
    and every byte still arrives right."""
    archive = str(tmp_path / "r.barecat")
    files = {f"d/{i:03d}.bin": os.urandom(i * 9000) for i in range(40)}  # up to 350 KB
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many(files.items())
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug", "--no-read-ahead"):
        assert sorted(os.listdir(mnt / "d")) == sorted(n.split("/")[1] for n in files)
        for name in sorted(files):
            assert (mnt / name).read_bytes() == files[name]
        with open(mnt / "d/039.bin", "rb") as f:  # a ranged read, after a whole one
            f.seek(200_000)
            assert f.read(1000) == files["d/039.bin"][200_000:201_000]
    opcodes, stores = logged_requests(tmp_path / "mnt.log")
    assert opcodes.count("READ") >= len(files) - 1  # (the empty file needs none)
    assert opcodes.count("OPEN") == 1 and "RELEASE" not in opcodes
    assert opcodes.count("LOOKUP") <= 1  # the directory's own, before its listing
    assert stores == 0  # (read-ahead was turned off)


def test_listing_a_big_directory_asks_the_index_once_per_directory(tmp_path: Path) -> None:
    """``ls -l`` of 3,000 files: readdir fetches every record, getattr needs no query."""
    archive = str(tmp_path / "many.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"d/{i:05d}.txt", b"%d" % i) for i in range(3000))
    mnt = tmp_path / "mnt"
    with served(archive, mnt):
        listing = subprocess.run(["ls", "-l", str(mnt / "d")], capture_output=True, text=True)
        assert listing.returncode == 0 and len(listing.stdout.splitlines()) == 3001
        names = sorted(os.listdir(mnt / "d"))
        assert names[0] == "00000.txt" and len(names) == 3000
        assert (mnt / "d/02999.txt").read_bytes() == b"2999"


@pytest.mark.parametrize("plain", [False, True])
def test_files_of_a_big_listed_directory_are_read_without_lookups(
    tmp_path: Path, plain: bool
) -> None:
    """Every part of a listing carries attributes, not only the first (libfuse's default
    "auto"): a file of an 8,000-file directory (listed in more than one part even with
    1 MiB parts) read after its listing costs no LOOKUP; ``--plain-listings`` lists names
    only, and each file read costs a LOOKUP first."""
    archive = str(tmp_path / "many.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"d/{i:05d}.txt", b"%d" % i) for i in range(8000))
    mnt = tmp_path / "mnt"
    options = ["--plain-listings"] if plain else []
    with served(archive, mnt, "--debug", "--no-read-ahead", *options):
        names = os.listdir(mnt / "d")
        assert len(names) == 8000
        picked = names[::257]
        for name in picked:
            assert (mnt / "d" / name).read_bytes() == b"%d" % int(name[:5])
    opcodes, _ = logged_requests(tmp_path / "mnt.log")
    assert opcodes.count("READ") == len(picked)
    if plain:  # names only: a LOOKUP before each read
        assert "READDIR" in opcodes and opcodes.count("LOOKUP") >= len(picked)
    else:
        assert opcodes.count("READDIRPLUS") > 2 and "READDIR" not in opcodes
        assert opcodes.count("LOOKUP") <= 1


def test_the_archive_is_closed_for_writers_while_mounted_rw(
    tree_archive: tuple[str, Path], tmp_path: Path
) -> None:
    archive, _ = tree_archive
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--rw"):
        with pytest.raises(BarecatError, match="already open for writing"):
            barecat.Barecat(archive, readonly=False)
        with sqlite3.connect(archive) as conn:  # readers are welcome
            assert conn.execute("SELECT count(*) FROM files").fetchone()[0] > 0


@settings(max_examples=300, deadline=None)
@given(
    mode=st.integers(0, 0o177777),
    nlink=st.integers(0, 2**32),
    uid=st.integers(0, 2**32 - 1),
    gid=st.integers(0, 2**32 - 1),
    size=st.integers(0, 2**62),
    blocks=st.integers(0, 2**53),
    mtime_ns=st.integers(0, 2**62),
)
def test_listing_attributes_are_packed_as_mfusepy_fills_them(
    mode: int, nlink: int, uid: int, gid: int, size: int, blocks: int, mtime_ns: int
) -> None:
    """The one-struct packing of listing attributes gives the very bytes mfusepy's own
    field-by-field filling (``set_st_attrs``) gives for the same attributes."""
    import mfusepy

    from barecat.mount.listing import packed_stat

    expected = mfusepy.c_stat()
    attrs = {"st_mode": mode, "st_nlink": nlink, "st_uid": uid, "st_gid": gid}
    attrs |= {"st_size": size, "st_blocks": blocks}
    attrs |= {"st_atime": mtime_ns, "st_mtime": mtime_ns, "st_ctime": mtime_ns}
    mfusepy.set_st_attrs(expected, attrs, use_ns=True)
    assert packed_stat(mode, nlink, uid, gid, size, blocks, mtime_ns) == bytes(expected)


def test_background_mounts_pass_the_listing_and_read_ahead_options_on(tmp_path: Path) -> None:
    """``barecat mount`` without ``-f`` starts a server with the same options (its argv
    says so), and files read through it are the archive's."""
    archive = str(tmp_path / "r.barecat")
    files = numbered_files(archive, 40)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    started = subprocess.run(
        [BARECAT, "mount", "--no-read-ahead", "--plain-listings", archive, str(mnt)],
        capture_output=True,
    )
    try:
        assert started.returncode == 0, started.stderr
        servers = [p for p in os.listdir("/proc") if p.isdigit() and _is_server(p, str(mnt))]
        assert servers
        with open(f"/proc/{servers[0]}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert b"--no-read-ahead" in argv and b"--plain-listings" in argv
        for name in sorted(files):
            assert (mnt / name).read_bytes() == files[name], name
    finally:
        subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], check=True)


def test_listing_fuse_refuses_operations_it_cannot_serve(tmp_path: Path) -> None:
    """A filesystem without ``listing`` and ``packed_attributes`` is refused before any
    mount (rather than mounted with a ``getattr`` that fails)."""
    import mfusepy

    from barecat.mount.listing import ListingFUSE

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with pytest.raises(TypeError, match="packed_attributes"):
        ListingFUSE(type("OnlyListing", (mfusepy.Operations,), {"listing": print})(), str(mnt))
    assert not is_mounted(str(mnt))


def _lists_in_big_parts() -> bool:
    """Whether this kernel sizes FUSE listing requests by the reader's buffer (Linux 6.16
    and newer; before, one page per request whatever the buffer)."""
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return release is not None and (int(release[1]), int(release[2])) >= (6, 16)


def test_a_walk_costs_requests_per_directory_not_per_entry(tmp_path: Path) -> None:
    """Directories report a block size their listing fits in, so ``find`` lists each in
    one request with every entry's attributes (a 3,000-file directory took 15 at the 32
    KiB readers use otherwise; a small one keeps the default, as a bigger buffer costs
    the kernel), and neither ``find`` nor a ``stat`` of every entry after it asks for a
    name or attributes again."""
    if not _lists_in_big_parts():
        pytest.skip(f"Linux {os.uname().release} lists FUSE directories a page at a time")
    archive = str(tmp_path / "many.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"d/{i:05d}.txt", b"%d" % i) for i in range(3000))
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug", "--no-read-ahead"):
        assert os.stat(mnt / "d").st_blksize == 1 << 20
        assert os.stat(mnt).st_blksize <= 32 << 10  # (one entry)
        walked = subprocess.run(["find", str(mnt)], capture_output=True, text=True, check=True)
        assert len(walked.stdout.splitlines()) == 3002
        for name in os.listdir(mnt / "d"):
            assert os.stat(mnt / "d" / name).st_size in (1, 2, 3, 4)
    opcodes, _ = logged_requests(tmp_path / "mnt.log")
    # the root and d by find, d again by listdir: each in one part, then the end
    assert opcodes.count("READDIRPLUS") <= 6
    assert opcodes.count("LOOKUP") + opcodes.count("GETATTR") <= 2


def test_plain_listings_carry_types_and_no_attributes(tmp_path: Path) -> None:
    """``--plain-listings`` lists without attributes (no READDIRPLUS at all, so the kernel
    makes no inode per entry), names and types only: ``find -type`` needs no request
    per entry, and still tells links from files."""
    archive = str(tmp_path / "typed.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"d/{i:05d}.txt", b"%d" % i) for i in range(1000))
        bc.add("d/link", data=b"00001.txt", mode=stat.S_IFLNK | 0o777)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--debug", "--no-read-ahead", "--plain-listings"):
        found = subprocess.run(
            ["find", str(mnt), "-type", "l"], capture_output=True, text=True, check=True
        )
        assert found.stdout.split() == [str(mnt / "d/link")]
        found = subprocess.run(
            ["find", str(mnt), "-type", "f"], capture_output=True, text=True, check=True
        )
        assert len(found.stdout.split()) == 1000
        assert os.readlink(mnt / "d/link") == "00001.txt"
    opcodes, _ = logged_requests(tmp_path / "mnt.log")
    assert "READDIR" in opcodes and "READDIRPLUS" not in opcodes
    assert opcodes.count("LOOKUP") <= 3  # d, and the link read after the walks
