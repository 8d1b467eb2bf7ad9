"""``barecat mount`` of tar and zip files as they are: real files made with tarfile and
zipfile, real FUSE mounts, the bytes read through them, the command's own output."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shlex
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

import barecat
from barecat.mount import is_mounted
from helpers import BARECAT
from helpers.mounting import FUSE_PROBLEM, served

needs_fuse = pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)

LONG_NAME = "deep/" + "a-very-long-directory-name/" * 6 + "and-a-long-file-name.txt"
BIG = os.urandom((1 << 20) + 12345)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache directory of the mounts of this test (handed to every server)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("BARECAT_CACHE_DIR", str(folder))
    return folder


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 1_700_000_000
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def _make_tar(path: Path, fmt: int = tarfile.PAX_FORMAT) -> Path:
    with tarfile.open(path, "w", format=fmt) as tar:
        _add(tar, "dir", type=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "dir/small.txt", b"small\n")
        _add(tar, "dir/big.bin", BIG)
        _add(tar, LONG_NAME, b"long name\n")
        _add(tar, "dir/ünïcødé.txt", b"non-ascii\n")
        _add(tar, "dir/link", type=tarfile.SYMTYPE, linkname="small.txt")
        _add(tar, "dir/hard", type=tarfile.LNKTYPE, linkname="dir/big.bin")
    return path


def _index_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("mounts/*/*.barecat"))


def _mount(*argv: str) -> subprocess.CompletedProcess[str]:
    """``barecat mount ARGV`` in the background, as a user types it."""
    return subprocess.run([BARECAT, "mount", *argv], capture_output=True, text=True)


@needs_fuse
@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])
def test_a_tar_mounts_as_it_is_with_its_members_bytes(
    tmp_path: Path, cache: Path, fmt: int
) -> None:
    tar_path = _make_tar(tmp_path / "data.tar", fmt)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = _mount(str(tar_path), str(mnt))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    try:
        with tarfile.open(tar_path) as tar:
            for member in tar:
                seen = mnt / member.name
                if member.isdir():
                    assert seen.is_dir()
                elif member.issym():
                    assert os.readlink(seen) == member.linkname
                else:
                    source = tar.extractfile(member)
                    assert source is not None
                    assert seen.read_bytes() == source.read(), member.name
        assert (mnt / "dir/hard").read_bytes() == BIG
        assert (mnt / "dir/link").read_bytes() == b"small\n"
        assert sorted(os.listdir(mnt / "dir")) == sorted(
            ["small.txt", "big.bin", "ünïcødé.txt", "link", "hard"]
        )
        with pytest.raises(OSError):
            (mnt / "new.txt").write_bytes(b"read-only")
    finally:
        subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], check=True)
    assert not is_mounted(str(mnt))
    assert len(_index_files(cache)) == 1  # kept in the cache directory, not beside the tar
    assert sorted(os.listdir(tmp_path)) == ["cache", "data.tar", "mnt"]


@needs_fuse
def test_the_index_is_reused_until_the_tar_changes(tmp_path: Path, cache: Path) -> None:
    tar_path = _make_tar(tmp_path / "data.tar")
    mnt = tmp_path / "mnt"
    with served(str(tar_path), mnt):
        assert (mnt / "dir/small.txt").read_bytes() == b"small\n"
    (index,) = _index_files(cache)
    made = index.stat()
    with served(str(tar_path), mnt, "--debug"):  # unchanged: the same index, nothing read
        assert (mnt / "dir/small.txt").read_bytes() == b"small\n"
    assert "reused" in (tmp_path / "mnt.log").read_text()
    again = index.stat()
    assert (again.st_ino, again.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)

    # Same size and modification time, other bytes: told by the sampled checksum.
    before = tar_path.stat()
    data = bytearray(tar_path.read_bytes())
    start = data.index(b"small\n")
    data[start : start + 6] = b"SMALL\n"
    tar_path.write_bytes(bytes(data))
    os.utime(tar_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with served(str(tar_path), mnt):
        assert (mnt / "dir/small.txt").read_bytes() == b"SMALL\n"
    (index,) = _index_files(cache)
    assert index.stat().st_ino != made.st_ino

    with tarfile.open(tar_path, "a") as tar:  # a member appended: another size
        _add(tar, "added.txt", b"added\n")
    with served(str(tar_path), mnt):
        assert (mnt / "added.txt").read_bytes() == b"added\n"
    assert len(_index_files(cache)) == 1


@needs_fuse
def test_several_tars_and_a_stored_zip_mount_as_one_tree_the_later_winning(
    tmp_path: Path, cache: Path
) -> None:
    shards = []
    for number in range(3):
        shard = tmp_path / f"shard-{number:03d}.tar"
        with tarfile.open(shard, "w") as tar:
            _add(tar, f"{number:06d}.jpg", b"jpeg %d" % number)
            _add(tar, f"{number:06d}.cls", b"%d" % number)
            _add(tar, "shared.txt", b"from shard %d" % number)
        shards.append(str(shard))
    stored = tmp_path / "extra.bin"  # a zip, told by its content
    with zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("zipped/notes.txt", b"stored in a zip\n")
        zf.writestr("zipped/big.bin", BIG)
    mnt = tmp_path / "mnt"
    with served([*shards, str(stored)], mnt):
        names = sorted(os.listdir(mnt))
        assert names == [
            "000000.cls", "000000.jpg", "000001.cls", "000001.jpg",
            "000002.cls", "000002.jpg", "shared.txt", "zipped",
        ]  # fmt: skip
        assert (mnt / "000001.jpg").read_bytes() == b"jpeg 1"
        assert (mnt / "shared.txt").read_bytes() == b"from shard 2"
        with zipfile.ZipFile(stored) as zf:
            for name in zf.namelist():
                assert (mnt / name).read_bytes() == zf.read(name)
    (index,) = _index_files(cache)
    assert index.name == "shard-000.tar.barecat"


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize(
    ("name", "compress", "kind"),
    [
        ("data.tar.gz", _gzip, "gzip"),
        ("data.tar.bz2", bz2.compress, "bzip2"),
        ("data.tar.xz", lzma.compress, "xz"),
        ("data.tar.zst", _zstd, "zstd"),
        ("shard-7", _gzip, "gzip"),  # no telling name: the content says
    ],
)
def test_a_compressed_tar_is_refused_with_the_convert_command(
    tmp_path: Path, cache: Path, name: str, compress: object, kind: str
) -> None:
    with tarfile.open(tmp_path / "plain.tar", "w") as tar:
        _add(tar, "dir/small.txt", b"small\n")
    plain = (tmp_path / "plain.tar").read_bytes()
    (tmp_path / name).write_bytes(compress(plain))  # type: ignore[operator]
    (tmp_path / "mnt").mkdir()
    done = subprocess.run(
        [BARECAT, "mount", name, "mnt"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert f"{name} is {kind}-compressed and cannot be mounted in place" in line
    assert not cache.exists()  # nothing left in the cache
    command = line.partition("make an archive of it with: ")[2]
    made = _run_as_typed(command, tmp_path)
    assert made.returncode == 0, made.stderr
    archive = shlex.split(command)[-1 if name.startswith("data") else -3]
    with barecat.Barecat(str(tmp_path / archive)) as bc:
        assert bc["dir/small.txt"] == b"small\n"


def test_a_zip_with_deflated_members_is_refused_with_the_convert_command(
    tmp_path: Path, cache: Path
) -> None:
    with zipfile.ZipFile(tmp_path / "photos.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.txt", b"hello " * 100)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        [BARECAT, "mount", "photos.zip", "mnt"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == (
        "barecat mount: photos.zip has compressed or encrypted members ('a.txt') and cannot "
        "be mounted in place; make an archive of it with: "
        "barecat convert photos.zip photos.barecat\n"
    )
    assert not cache.exists()
    assert not is_mounted(str(mnt))


@needs_fuse
def test_hostile_member_names_are_named_and_the_rest_mounted(tmp_path: Path, cache: Path) -> None:
    tar_path = tmp_path / "hostile.tar"
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        _add(tar, "../escape.txt", b"outside")
        _add(tar, "/etc/absolute.txt", b"absolute")
        _add(tar, "fine.txt", b"fine")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for _ in range(2):  # said again when the index is reused
        done = _mount(str(tar_path), str(mnt))
        assert done.returncode == 0
        assert done.stderr.splitlines() == [
            "barecat mount: left out ../escape.txt: Path escapes the archive root: '../escape.txt'",
            "barecat mount: /etc/absolute.txt is mounted as etc/absolute.txt",
        ]
        try:
            assert sorted(os.listdir(mnt)) == ["etc", "fine.txt"]
            assert (mnt / "etc/absolute.txt").read_bytes() == b"absolute"
            assert (mnt / "fine.txt").read_bytes() == b"fine"
        finally:
            subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], check=True)
    assert not (tmp_path / "escape.txt").exists()


@needs_fuse
def test_members_a_mount_cannot_show_are_left_out_and_the_rest_mounted(
    tmp_path: Path, cache: Path
) -> None:
    """A name longer than FUSE takes would fail the whole listing of its directory, and
    a file below a file cannot be a file at all: each is named, the rest is mounted."""
    tar_path = tmp_path / "hostile.tar"
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "ok.txt", b"ok")
        _add(tar, "ok.txt/child", b"below a file")
        _add(tar, "n" * 5000, b"a long name")
        _add(tar, "dir/" + "m" * 1025, b"longer than 1,024 bytes")
        _add(tar, "dir/fine.txt", b"fine")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = _mount(str(tar_path), str(mnt))
    try:
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            "barecat mount: left out ok.txt/child: A parent of 'ok.txt/child' is a file",
            f"barecat mount: left out {'n' * 5000}: a name of 5,000 bytes, more than the 1,024 "
            "a mount can show",
            f"barecat mount: left out dir/{'m' * 1025}: a name of 1,025 bytes, more than the "
            "1,024 a mount can show",
        ]
        assert sorted(os.listdir(mnt)) == ["dir", "ok.txt"]
        assert os.listdir(mnt / "dir") == ["fine.txt"]
        assert (mnt / "ok.txt").read_bytes() == b"ok"
        assert (mnt / "dir/fine.txt").read_bytes() == b"fine"
    finally:
        if is_mounted(str(mnt)):
            subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], check=True)


@needs_fuse
def test_a_damaged_tar_or_zip_is_one_line_and_leaves_nothing(tmp_path: Path, cache: Path) -> None:
    whole = _make_tar(tmp_path / "whole.tar").read_bytes()
    damaged = bytearray(whole)
    second = whole.index(b"dir/small.txt")  # its header: the name field starts it
    damaged[second + 5] ^= 0x20  # the checksum no longer matches: the rest would be lost
    (tmp_path / "damaged.tar").write_bytes(damaged)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("a.txt", b"a")
    (tmp_path / "cut.zip").write_bytes(zipped.getvalue()[:-10])
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for name, message in [
        (
            "damaged.tar",
            "corrupt or truncated tar (after member 'dir'): a damaged header: bad checksum",
        ),
        ("cut.zip", "corrupt or truncated zip: File is not a zip file"),
    ]:
        done = _mount(str(tmp_path / name), str(mnt))
        try:
            assert done.returncode == 1
            assert done.stderr == f"barecat mount: {tmp_path / name}: {message}\n"
        finally:
            if is_mounted(str(mnt)):
                subprocess.run([BARECAT, "mount", "--unmount", str(mnt)], check=True)
        assert not cache.exists() or not any(cache.rglob("*.barecat"))


@needs_fuse
def test_index_beside_keeps_an_archive_next_to_the_tar(tmp_path: Path, cache: Path) -> None:
    tar_path = _make_tar(tmp_path / "data.tar")
    mnt = tmp_path / "mnt"
    with served(str(tar_path), mnt, "--index-beside"):
        assert (mnt / "dir/big.bin").read_bytes() == BIG
    assert not cache.exists()
    listed = subprocess.run(
        [BARECAT, "ls", str(tmp_path / "data.tar.barecat"), "dir"], capture_output=True, text=True
    )
    assert listed.returncode == 0 and "big.bin" in listed.stdout.split()

    other = tmp_path / "other.tar"
    other.write_bytes(tar_path.read_bytes())
    with barecat.Barecat(str(tmp_path / "other.tar.barecat"), readonly=False) as bc:
        bc["mine.txt"] = b"an archive of the user's own"
    done = _mount("--index-beside", str(other), str(mnt))
    assert done.returncode == 1
    assert "other.tar.barecat" in done.stderr and "not made by barecat mount" in done.stderr
    with barecat.Barecat(str(tmp_path / "other.tar.barecat")) as bc:
        assert bc["mine.txt"] == b"an archive of the user's own"


def test_a_tar_is_not_mounted_read_write(tmp_path: Path, cache: Path) -> None:
    tar_path = _make_tar(tmp_path / "data.tar")
    (tmp_path / "mnt").mkdir()
    done = _mount("--rw", str(tar_path), str(tmp_path / "mnt"))
    assert done.returncode == 1
    assert "tar and zip files mount read-only" in done.stderr
    assert not cache.exists()


@needs_fuse
def test_a_symlinked_cache_directory_keeps_the_links_to_the_tar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """~/.cache is often a link elsewhere: the index's links to the tar hold through it."""
    real = tmp_path / "elsewhere/at/another/depth"
    real.mkdir(parents=True)
    (tmp_path / "cache").symlink_to(real)
    monkeypatch.setenv("BARECAT_CACHE_DIR", str(tmp_path / "cache"))
    tar_path = _make_tar(tmp_path / "data.tar")
    mnt = tmp_path / "mnt"
    with served(str(tar_path), mnt):
        assert (mnt / "dir/big.bin").read_bytes() == BIG
    assert len(list(real.glob("mounts/*/data.tar.barecat"))) == 1


def _run_as_typed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run by a shell, as a user would type it, with this ``barecat`` first on
    the PATH (the venv's, which CI does not activate)."""
    path = f"{Path(BARECAT).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
    )
