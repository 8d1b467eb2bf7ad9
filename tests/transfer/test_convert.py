"""barecat <-> tar/zip conversion, on real trees, real GNU tar, zip/unzip and real pipes."""

from __future__ import annotations

import hashlib
import importlib
import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

import barecat
from barecat.layout import existing_shard_numbers, shard_path
from helpers import REPO, Run

BARECAT = [sys.executable, "-m", "barecat.cli"]
LONG = "long-" + "x" * 150
MTIME_NS = 1_600_000_000_123_456_789


def needs(tool: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed")


def make_tree(root: Path) -> Path:
    """Files of several sizes (one over the streaming threshold), an empty file and an
    empty directory, a long and a non-ASCII name, a link, odd modes, nanosecond mtimes."""
    (root / "a" / "b").mkdir(parents=True)
    (root / "empty-dir").mkdir()
    (root / "a" / "b" / "small.bin").write_bytes(os.urandom(3000))
    (root / "a" / "big.bin").write_bytes(os.urandom(3 << 20))
    (root / "a" / "empty").write_bytes(b"")
    (root / "a" / "žluťoučký kůň.txt").write_text("unicode name")
    (root / "a" / LONG).write_bytes(b"long name")
    (root / "top.txt").write_bytes(b"top")
    os.symlink("b/small.bin", root / "a" / "link")
    os.chmod(root / "top.txt", 0o600)
    os.chmod(root / "a" / "b", 0o750)
    for path in sorted(root.rglob("*"), reverse=True):  # contents before their directory
        os.utime(path, ns=(MTIME_NS, MTIME_NS), follow_symlinks=False)
    return root


def listing(
    root: Path, mtime_ns: bool = True, link_times: bool = True
) -> dict[str, tuple[object, ...]]:
    """Everything that must survive a round trip, per relative path."""
    out: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        rel = path.relative_to(root).as_posix()
        mtime = st.st_mtime_ns if mtime_ns else st.st_mtime_ns // 10**9
        if stat.S_ISLNK(st.st_mode):
            out[rel] = ("link", os.readlink(path), mtime if link_times else None)
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = ("dir", stat.S_IMODE(st.st_mode), mtime)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[rel] = ("file", stat.S_IMODE(st.st_mode), digest, mtime)
    return out


def tar_cli(*args: str) -> None:
    subprocess.run(["tar", *args], check=True, capture_output=True)


@needs("tar")
def test_gnu_tar_round_trip_keeps_bytes_and_metadata(tmp_path: Path, run: Run) -> None:
    src = make_tree(tmp_path / "src")
    tar_cli("--format=pax", "-cf", str(tmp_path / "in.tar"), "-C", str(src), ".")
    assert run("convert", str(tmp_path / "in.tar"), str(tmp_path / "x.barecat"))[0] == 0
    with barecat.Barecat(str(tmp_path / "x.barecat")) as bc:
        assert bc["a/b/small.bin"] == (src / "a/b/small.bin").read_bytes()
        assert bc.index.lookup_file("a/link").is_symlink_entry
        assert bc.index.lookup_file("top.txt").mtime_ns == MTIME_NS
        assert stat.S_ISREG(bc.index.lookup_file("top.txt").mode or 0)
        assert bc.verify_integrity()
    assert run("convert", str(tmp_path / "x.barecat"), str(tmp_path / "out.tar"))[0] == 0
    out = tmp_path / "out"
    out.mkdir()
    tar_cli("-xf", str(tmp_path / "out.tar"), "-C", str(out))
    assert listing(out) == listing(src)


@pytest.mark.parametrize("fmt", ["tar.gz", "tar.bz2", "tar.xz", "tar.zst"])
def test_each_compression_both_ways(tmp_path: Path, run: Run, fmt: str) -> None:
    """Our tar writer's output is read back by GNU tar; GNU tar's by our reader."""
    src = make_tree(tmp_path / "src")
    flag = {"tar.gz": "-z", "tar.bz2": "-j", "tar.xz": "-J", "tar.zst": "--zstd"}[fmt]
    if fmt == "tar.zst" and shutil.which("zstd") is None:
        pytest.skip("zstd is not installed (GNU tar needs it for --zstd)")
    made = tmp_path / f"gnu.{fmt}"
    tar_cli("--format=pax", flag, "-cf", str(made), "-C", str(src), ".")
    assert run("convert", str(made), str(tmp_path / "x.barecat"))[0] == 0
    ours = tmp_path / f"ours.{fmt}"
    assert run("convert", str(tmp_path / "x.barecat"), str(ours))[0] == 0
    out = tmp_path / "out"
    out.mkdir()
    tar_cli(flag, "-xf", str(ours), "-C", str(out))
    assert listing(out) == listing(src)


@needs("zip")
@needs("unzip")
def test_zip_round_trip_through_zip_and_unzip(tmp_path: Path, run: Run) -> None:
    src = make_tree(tmp_path / "src")
    subprocess.run(["zip", "-q", "-r", "-y", str(tmp_path / "in.zip"), "."], cwd=src, check=True)
    assert run("convert", str(tmp_path / "in.zip"), str(tmp_path / "x.barecat"))[0] == 0
    with barecat.Barecat(str(tmp_path / "x.barecat")) as bc:
        assert bc.index.lookup_file("a/link").is_symlink_entry  # zip -y stores the link
        assert bc.index.lookup_file("top.txt").uid == os.stat(src / "top.txt").st_uid
    assert run("convert", str(tmp_path / "x.barecat"), str(tmp_path / "out.zip"))[0] == 0
    out = tmp_path / "out"
    subprocess.run(["unzip", "-q", str(tmp_path / "out.zip"), "-d", str(out)], check=True)
    # zip keeps whole seconds; unzip does not set a link's own time (checked above instead)
    assert listing(out, False, False) == listing(src, False, False)


def test_zip_from_python_zipfile_deflated(tmp_path: Path, run: Run) -> None:
    data = {f"d/f{i}.txt": (b"text %d " % i) * 500 for i in range(20)}
    with zipfile.ZipFile(tmp_path / "in.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in data.items():
            zf.writestr(name, content)
    assert run("convert", str(tmp_path / "in.zip"), str(tmp_path / "x.barecat"))[0] == 0
    with barecat.Barecat(str(tmp_path / "x.barecat")) as bc:
        assert {p: bc[p] for p in bc} == data


def _barecat_proc(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*BARECAT, *args], cwd=REPO, **kwargs)  # type: ignore[call-overload]


STREAM_WRITER = """
import io, os, sys, tarfile
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|gz") as tar:
    for i in range(int(sys.argv[1])):
        info = tarfile.TarInfo(f"part{i:03d}.bin")
        info.size = 4 << 20
        tar.addfile(info, io.BytesIO(bytes([i % 256]) * info.size))
"""


def test_streams_through_pipes_in_constant_memory(tmp_path: Path) -> None:
    """A 240 MB tar.gz piped in, then the archive piped out as tar to GNU tar; the
    converting process stays far below the stream's size in memory."""
    target = str(tmp_path / "s.barecat")
    with subprocess.Popen(
        [sys.executable, "-c", STREAM_WRITER, "60"], stdout=subprocess.PIPE
    ) as writer:
        code = subprocess.run(
            ["/usr/bin/time", "-f", "%M", *BARECAT, "convert", "--stdin", "tar.gz", target],
            stdin=writer.stdout,
            capture_output=True,
            cwd=REPO,
        )
    assert code.returncode == 0, code.stderr
    peak_kb = int(code.stderr.decode().strip().splitlines()[-1])
    assert peak_kb < 150_000, f"peak RSS {peak_kb} KB while converting a 240 MB stream"
    with barecat.Barecat(target) as bc:
        assert len(bc) == 60 and bc["part007.bin"] == b"\x07" * (4 << 20)
    out = subprocess.run(
        [*BARECAT, "convert", "--stdout", target, "tar"], capture_output=True, cwd=REPO
    )
    assert out.returncode == 0
    names = subprocess.run(
        ["tar", "-tf", "-"], input=out.stdout, capture_output=True, check=True
    ).stdout.split()
    assert names == [f"part{i:03d}.bin".encode() for i in range(60)]


def test_zip_from_stdin_and_to_stdout(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x/y.txt", b"hello")
    target = str(tmp_path / "z.barecat")
    done = subprocess.run(
        [*BARECAT, "convert", "--stdin", "zip", target], input=buf.getvalue(), cwd=REPO
    )
    assert done.returncode == 0
    out = subprocess.run([*BARECAT, "convert", "--stdout", target, "zip"], capture_output=True)
    with zipfile.ZipFile(io.BytesIO(out.stdout)) as zf:
        assert zf.read("x/y.txt") == b"hello"


def test_root_dir_prefixes_every_member(tmp_path: Path, run: Run, make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a/b.txt": b"1", "c.txt": b"2"})
    assert run("convert", "--root-dir", "proj", path, str(tmp_path / "o.tar.gz"))[0] == 0
    with tarfile.open(tmp_path / "o.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["proj", "proj/a", "proj/a/b.txt", "proj/c.txt"]
        assert tar.extractfile("proj/a/b.txt").read() == b"1"  # type: ignore[union-attr]


def hostile_tar(path: Path) -> None:
    with tarfile.open(path, "w") as tar:

        def add(name: str, data: bytes = b"", **attrs: object) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in attrs.items():
                setattr(info, key, value)
            tar.addfile(info, io.BytesIO(data))

        add("ok.txt", b"fine")
        add("../escape.txt", b"evil")
        add("a/../../escape2.txt", b"evil")
        add("/abs/olute.txt", b"leading slash dropped, like tar")
        add("dup.txt", b"first")
        add("dup.txt", b"second")
        add("passwd-link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add("hard", type=tarfile.LNKTYPE, linkname="ok.txt")
        add("dangling-hard", type=tarfile.LNKTYPE, linkname="nowhere")
        add("dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        add("fifo", type=tarfile.FIFOTYPE)


def test_hostile_tar_members_are_skipped_or_tamed(tmp_path: Path, run: Run) -> None:
    hostile_tar(tmp_path / "h.tar")
    code, _, err = run("convert", str(tmp_path / "h.tar"), str(tmp_path / "h.barecat"))
    assert code == 1
    for name in ["../escape.txt", "a/../../escape2.txt", "dangling-hard", "dev", "fifo"]:
        assert f"skipped {name}:" in err
    with barecat.Barecat(str(tmp_path / "h.barecat")) as bc:
        assert sorted(bc) == ["abs/olute.txt", "dup.txt", "hard", "ok.txt", "passwd-link"]
        assert bc["dup.txt"] == b"second"  # the later member wins, as tar extracts
        assert bc["hard"] == b"fine"
        assert bc.index.lookup_file("passwd-link").is_symlink_entry
        assert bc.verify_integrity()
    out = tmp_path / "out"
    code, _, err = run("extract", str(tmp_path / "h.barecat"), "-C", str(out))
    assert code == 1 and "link pointing outside" in err  # the link is kept but never created
    assert not (out / "passwd-link").exists() and not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("cut", [0.3, 0.9])
def test_truncated_input_leaves_no_archive(tmp_path: Path, run: Run, cut: float) -> None:
    src = make_tree(tmp_path / "src")
    tar_cli("-czf", str(tmp_path / "in.tar.gz"), "-C", str(src), ".")
    whole = (tmp_path / "in.tar.gz").read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(whole[: int(len(whole) * cut)])
    code, _, err = run("convert", str(tmp_path / "cut.tar.gz"), str(tmp_path / "x.barecat"))
    assert code == 1 and "corrupt or truncated" in err
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in {"src", "in.tar.gz"}]
    assert leftovers == ["cut.tar.gz"]


def test_existing_output_needs_force(tmp_path: Path, run: Run, make_archive) -> None:  # type: ignore[no-untyped-def]
    tar_path = tmp_path / "t.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("new.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"new"))
    existing = make_archive({"old.txt": b"old"})
    code, _, err = run("convert", str(tar_path), existing)
    assert code == 1 and "already exists" in err
    with barecat.Barecat(existing) as bc:
        assert list(bc) == ["old.txt"]
    assert run("convert", "-f", str(tar_path), existing)[0] == 0
    with barecat.Barecat(existing) as bc:
        assert list(bc) == ["new.txt"]
    code, _, err = run("convert", existing, str(tar_path))
    assert code == 1 and "exists" in err


def test_library_functions_and_legacy_module(tmp_path: Path) -> None:
    tar_path = tmp_path / "t.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("d/f.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    barecat.archive2barecat(str(tar_path), str(tmp_path / "x.barecat"), shard_size_limit=None)
    barecat.barecat2archive(str(tmp_path / "x.barecat"), str(tmp_path / "y.zip"), root_dir="r")
    with zipfile.ZipFile(tmp_path / "y.zip") as zf:
        assert zf.read("r/d/f.txt") == b"hi"
    impl = importlib.import_module("barecat.cli.impl")
    impl.wrap_archive(str(tar_path), str(tmp_path / "w.barecat"))
    with barecat.Barecat(str(tmp_path / "w.barecat")) as bc:
        assert bc["d/f.txt"] == b"hi"


@pytest.mark.parametrize("script", ["archive2barecat", "barecat2archive"])
def test_legacy_scripts(tmp_path: Path, script: str, make_archive) -> None:  # type: ignore[no-untyped-def]
    exe = os.path.join(os.path.dirname(sys.executable), script)
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} is not installed (pyproject.toml declares it)")
    if script == "archive2barecat":
        tar_path = tmp_path / "t.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.addfile(tarfile.TarInfo("empty.txt"))
        args = [str(tar_path), str(tmp_path / "x.barecat")]
    else:
        args = [make_archive({"f.txt": b"x"}), str(tmp_path / "o.tar")]
    done = subprocess.run([exe, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "deprecated" in done.stderr
    assert os.path.exists(args[1])


# -- zero-copy wrap ------------------------------------------------------------------------


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs("tar")
def test_wrap_tar_copies_nothing_and_reads_verified(tmp_path: Path, run: Run) -> None:
    src = make_tree(tmp_path / "src")
    (src / "a" / "hardlinked").unlink(missing_ok=True)
    os.link(src / "top.txt", src / "a" / "hardlinked")
    tar_path = tmp_path / "in.tar"
    tar_cli("-cf", str(tar_path), "-C", str(src), ".")
    before = sha(tar_path)
    target = tmp_path / "w.barecat"
    assert run("convert", "--wrap", str(tar_path), str(target))[0] == 0
    shard0 = Path(shard_path(str(target), 0))
    assert shard0.is_symlink() and shard0.resolve() == tar_path.resolve()
    with barecat.Barecat(str(target)) as bc:
        for rel in ["a/b/small.bin", "a/big.bin", "a/empty", "top.txt", f"a/{LONG}"]:
            assert bc[rel] == (src / rel).read_bytes()
        assert bc["a/hardlinked"] == b"top"  # the target's bytes, in the tar
        assert bc.lookup_file("a/hardlinked").address == bc.lookup_file("top.txt").address
        assert bc.sharder.guarded
        assert bc.read("a/link") == b"b/small.bin"
        assert bc.verify_integrity()
    own_shards = [n for n in existing_shard_numbers(str(target)) if n != 0]
    assert all(Path(shard_path(str(target), n)).stat().st_size <= 64 for n in own_shards)
    with barecat.Barecat(str(target), readonly=False) as bc:  # additions go elsewhere
        bc["added.txt"] = b"new bytes"
    assert sha(tar_path) == before
    with barecat.Barecat(str(target)) as bc:
        assert bc["added.txt"] == b"new bytes" and bc.verify_integrity()


def test_wrap_detects_corruption_of_the_wrapped_file(tmp_path: Path) -> None:
    tar_path = tmp_path / "in.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("f.bin")
        info.size = 1000
        tar.addfile(info, io.BytesIO(b"a" * 1000))
    barecat.transfer.wrap_archive(str(tar_path), str(tmp_path / "w.barecat"))
    with open(tar_path, "r+b") as f:
        f.seek(512 + 10)
        f.write(b"X")
    with (
        barecat.Barecat(str(tmp_path / "w.barecat")) as bc,
        pytest.raises(barecat.BarecatIntegrityError),
    ):
        bc["f.bin"]


def test_wrap_stored_zip_and_refuse_compressed_inputs(tmp_path: Path, run: Run) -> None:
    stored, deflated = tmp_path / "s.zip", tmp_path / "d.zip"
    for path, method in [(stored, zipfile.ZIP_STORED), (deflated, zipfile.ZIP_DEFLATED)]:
        with zipfile.ZipFile(path, "w", method) as zf:
            zf.writestr("dir/", b"")
            zf.writestr("dir/f.txt", b"zip bytes " * 100)
    assert run("convert", "--wrap", str(stored), str(tmp_path / "s.barecat"))[0] == 0
    with barecat.Barecat(str(tmp_path / "s.barecat")) as bc:
        assert bc["dir/f.txt"] == b"zip bytes " * 100 and bc.verify_integrity()
    code, _, err = run("convert", "--wrap", str(deflated), str(tmp_path / "d.barecat"))
    assert code == 1 and "compressed" in err and not (tmp_path / "d.barecat").exists()
    with tarfile.open(tmp_path / "c.tar.gz", "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("x"))
    code, _, err = run("convert", "--wrap", str(tmp_path / "c.tar.gz"), str(tmp_path / "c.bc"))
    assert code == 1 and "gzip-compressed" in err


def test_wrap_many_tar_shards_into_one_archive(tmp_path: Path, run: Run) -> None:
    """WebDataset style: one shard per tar, members of all of them in one namespace."""
    tars = []
    for n in range(3):
        path = tmp_path / f"shard-{n:06d}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(4):
                data = f"sample {n}-{i}".encode()
                info = tarfile.TarInfo(f"{n:02d}{i:02d}.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        tars.append(str(path))
    assert run("convert", "--wrap", *tars, str(tmp_path / "wds.barecat"))[0] == 0
    with barecat.Barecat(str(tmp_path / "wds.barecat")) as bc:
        assert bc["0102.txt"] == b"sample 1-2"
        assert {bc.index.lookup_file(p).shard for p in bc} == {0, 1, 2}
    for n in range(3):
        assert Path(shard_path(str(tmp_path / "wds.barecat"), n)).is_symlink()
    code, _, err = run("convert", *tars[:2], str(tmp_path / "two.barecat"))
    assert code == 1 and "only taken by --wrap" in err


def test_maintenance_never_touches_a_wrapped_file(tmp_path: Path, run: Run) -> None:
    tar_path = tmp_path / "in.tar"
    with tarfile.open(tar_path, "w") as tar:
        for i in range(20):
            info = tarfile.TarInfo(f"f{i:02d}.bin")
            info.size = 700 + i
            tar.addfile(info, io.BytesIO(bytes([i]) * info.size))
    before = sha(tar_path)
    target = str(tmp_path / "w.barecat")
    barecat.transfer.wrap_archive(str(tar_path), target)
    with barecat.Barecat(target, readonly=False) as bc:
        for i in range(0, 20, 2):
            del bc[f"f{i:02d}.bin"]  # holes inside the wrapped file
        bc["own.txt"] = b"in a shard of the archive's own"
    code, _, err = run("defrag", target)  # packing would write into the tar: refused
    assert code == 1 and "convert --wrap" in err
    for command in (["repair", target], ["verify", target]):
        assert run(*command)[0] == 0, command
    assert sha(tar_path) == before
    with barecat.Barecat(target) as bc:
        assert bc["f05.bin"] == b"\x05" * 705 and bc["own.txt"].startswith(b"in a shard")
        assert len(bc) == 11 and bc.verify_integrity()


@needs("zip")
def test_hostile_and_encrypted_zip_members(tmp_path: Path, run: Run) -> None:
    with zipfile.ZipFile(tmp_path / "h.zip", "w") as zf:
        zf.writestr("ok.txt", b"fine")
        zf.writestr("../escape.txt", b"evil")
        zf.writestr("/abs.txt", b"leading slash dropped")
        zf.writestr("dup.txt", b"first")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # zipfile warns: duplicate name
            zf.writestr("dup.txt", b"second")
        link = zipfile.ZipInfo("out-link")
        link.create_system, link.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, b"/etc/passwd")
    code, _, err = run("convert", str(tmp_path / "h.zip"), str(tmp_path / "h.barecat"))
    assert code == 1 and "skipped ../escape.txt:" in err
    with barecat.Barecat(str(tmp_path / "h.barecat")) as bc:
        assert sorted(bc) == ["abs.txt", "dup.txt", "ok.txt", "out-link"]
        assert bc["dup.txt"] == b"second" and bc.index.lookup_file("out-link").is_symlink_entry
    (tmp_path / "secret.txt").write_bytes(b"secret")
    (tmp_path / "plain.txt").write_bytes(b"plain")
    subprocess.run(["zip", "-q", "-P", "pw", "enc.zip", "secret.txt"], cwd=tmp_path, check=True)
    subprocess.run(["zip", "-q", "enc.zip", "plain.txt"], cwd=tmp_path, check=True)
    code, _, err = run("convert", str(tmp_path / "enc.zip"), str(tmp_path / "e.barecat"))
    assert code == 1 and "skipped secret.txt: encrypted" in err
    with barecat.Barecat(str(tmp_path / "e.barecat")) as bc:
        assert dict(bc.items()) == {"plain.txt": b"plain"}
