"""barecat rsync: planning rules, both directions, archive to archive, and rsync's results."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import barecat
from barecat.transfer.sync.driver import sync
from barecat.transfer.sync.locations import Place, parse_location, server_address
from barecat.transfer.sync.plan import (
    Entry,
    Kind,
    SyncOptions,
    plan_sync,
)
from helpers import Run
from helpers.trees import make_tree


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Everything a sync must carry: kind, bytes or link target, permission bits, mtime."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            st_ = p.lstat()
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(p), st_.st_mtime_ns)
            elif stat.S_ISDIR(st_.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st_.st_mode), st_.st_mtime_ns)
            else:
                out[rel] = ("file", p.read_bytes(), stat.S_IMODE(st_.st_mode), st_.st_mtime_ns)
    return out


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    return make_tree(tmp_path / "src")


def touch(p: Path, data: bytes | None = None, mtime: int = 1_600_000_000_000_000_000) -> None:
    if data is not None:
        p.write_bytes(data)
    os.utime(p, ns=(mtime, mtime), follow_symlinks=False)


# -- planning (pure) ---------------------------------------------------------------------


def f(size: int, mtime: int | None, crc: int | None = None, mode: int = 0o100644) -> Entry:
    return Entry(Kind.FILE, size, mtime, mode, crc32c=crc)


def d(mtime: int = 1) -> Entry:
    return Entry(Kind.DIR, 0, mtime, 0o40755)


def ops(actions: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(a.op.value, a.path) for a in actions]


def test_plan_quick_check_and_order() -> None:
    src = {"": d(), "a": f(1, 5), "b": f(2, 5), "c": f(2, 5), "sub": d(), "sub/x": f(1, 1)}
    dst = {"": d(), "a": f(1, 5), "b": f(3, 5), "c": f(2, 6), "old": f(1, 1), "olddir": d(),
           "olddir/y": f(1, 1)}  # fmt: skip
    assert ops(plan_sync(src, dst, SyncOptions())) == [
        ("mkdir", "sub"), ("update", "b"), ("update", "c"), ("copy", "sub/x"),
        ("attrs", "sub"), ("attrs", ""),
    ]  # fmt: skip
    planned = ops(plan_sync(src, dst, SyncOptions(delete=True)))
    assert planned[:3] == [("delete", "olddir/y"), ("delete", "olddir"), ("delete", "old")]


def test_plan_checksum_update_and_kinds() -> None:
    src = {"a": f(4, 5, crc=1), "b": f(4, 9), "l": Entry(Kind.LINK, 1, 1, target=b"x")}
    dst = {"a": f(4, 5, crc=2), "b": f(4, 7), "l": f(1, 1)}
    assert ops(plan_sync(src, dst, SyncOptions())) == [
        ("delete", "l"), ("update", "b"), ("copy", "l"),
    ]  # fmt: skip
    assert ("update", "a") in ops(plan_sync(src, dst, SyncOptions(checksum=True)))
    newer = {"b": f(4, 99)}
    assert ops(plan_sync({"b": f(4, 9)}, newer, SyncOptions(update=True))) == []
    # mode only: metadata, no transfer
    assert ops(plan_sync({"a": f(1, 1, mode=0o100600)}, {"a": f(1, 1)}, SyncOptions())) == [
        ("attrs", "a")
    ]


def test_plan_delete_only_inside_sent_directories() -> None:
    src = {"top": d(), "top/a": f(1, 1)}
    dst = {"top": d(), "top/a": f(1, 1), "top/extra": f(1, 1)}
    assert ops(plan_sync(src, dst, SyncOptions(delete=True))) == [
        ("delete", "top/extra"), ("attrs", "top"),
    ]  # fmt: skip


def test_parse_location(tmp_path: Path, make_archive) -> None:  # type: ignore[no-untyped-def]
    ar = make_archive({"x": b"1"})
    loc = parse_location(f"{ar}:images/")
    assert (loc.archive, loc.path, loc.contents) == (ar, "images", True)
    assert parse_location(f"{ar}::images").path == "images"  # the reference's spelling
    root = parse_location(f"{ar}:")  # the archive itself, named after it, as in 0.3.1
    assert not root.contents and root.name == Path(ar).name.removesuffix(".barecat")
    assert parse_location(f"{ar}:/").contents and parse_location(f"{ar}::/").contents
    assert parse_location("plain/dir").archive is None
    assert not parse_location("plain/dir").contents
    new = str(tmp_path / "new.barecat")
    assert parse_location(f"{new}:a", destination=True).archive == new
    assert parse_location(f"{new}:a").archive is None  # a source must exist
    assert parse_location(f"{ar}\\:x").path == f"{ar}:x"  # escaped: local
    notarchive = tmp_path / "notes"
    notarchive.write_text("plain")
    assert parse_location(f"{notarchive}:x").archive is None


def test_parse_double_colon_escapes_and_remote_forms(tmp_path: Path) -> None:
    loc = parse_location("new/any-name::a/b/", destination=True)  # '::' needs no suffix
    assert (loc.place, loc.archive, loc.path, loc.contents) == (Place.ARCHIVE, "new/any-name",
                                                                "a/b", True)  # fmt: skip
    assert loc.creates_archive
    assert parse_location(r"./my\::odd.barecat::in\::ner").archive == "./my::odd.barecat"
    assert parse_location(r"./my\::odd.barecat::in\::ner").path == "in::ner"
    assert parse_location(r"./back\\slash::").archive == "./back\\slash"
    assert parse_location("./a.barecat::x::y").path == "x::y"  # the first '::' splits
    assert parse_location("./file:name.barecat::").archive == "./file:name.barecat"
    tar = parse_location("/d/data.tar.gz::imgs/")
    assert (tar.place, tar.archive, tar.path, tar.name) == (Place.TAR_ZIP, "/d/data.tar.gz",
                                                            "imgs", "imgs")  # fmt: skip
    assert parse_location("/d/data.tgz::").name == "data"
    assert parse_location("data.tar.gz").place is Place.LOCAL
    ssh = parse_location("me@host:/srv/a.barecat::train/")
    assert (ssh.place, ssh.user, ssh.host, ssh.archive, ssh.path) == (
        Place.SSH_ARCHIVE, "me", "host", "/srv/a.barecat", "train")  # fmt: skip
    assert parse_location("host:/srv/dir/").place is Place.SSH
    assert parse_location("host:relative").place is Place.LOCAL
    assert parse_location(r"host\:/srv").path == "host:/srv"
    server = parse_location("barecat://h:8080/name::in/")
    assert (server.place, server.host, server.archive, server.path) == (
        Place.SERVER, "h:8080", "name", "in")  # fmt: skip
    with pytest.raises(ValueError, match="barecat://"):
        parse_location("barecat://hostonly")
    assert server_address("h:8080") == ("h", 8080) and server_address("h") == ("h", 50003)
    assert server_address("[::1]:9") == ("[::1]", 9)


def test_plan_existing_ignore_existing_size_only_and_size_limits() -> None:
    src = {"": d(), "new": f(5, 1), "old": f(5, 9), "big": f(500, 1), "small": f(1, 1)}
    dst = {"": d(), "old": f(5, 1)}
    assert ops(plan_sync(src, dst, SyncOptions(existing=True)))[:1] == [("update", "old")]
    assert ("copy", "new") not in ops(plan_sync(src, dst, SyncOptions(existing=True)))
    planned = ops(plan_sync(src, dst, SyncOptions(ignore_existing=True)))
    assert ("copy", "new") in planned and ("update", "old") not in planned
    planned = ops(plan_sync(src, dst, SyncOptions(size_only=True)))
    assert ("update", "old") not in planned and ("attrs", "old") in planned  # mtime only
    planned = ops(plan_sync(src, dst, SyncOptions(max_size=100, min_size=2)))
    assert ("copy", "big") not in planned and ("copy", "small") not in planned
    assert ("copy", "new") in planned


# -- command line ------------------------------------------------------------------------


def test_local_to_archive_and_back(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "out.barecat")
    code, out, err = run("rsync", "-v", f"{tree}/", f"{ar}:data/")
    assert code == 0, err
    assert "a/x.txt" in out.splitlines() and "a/b/" in out.splitlines()
    with barecat.Barecat(ar) as bc:
        assert bc["data/a/x.txt"] == b"hello\n"
        assert stat.S_ISLNK(bc.stat("data/dangling").mode or 0)
        assert stat.S_IMODE(bc.stat("data/private").mode or 0) == 0o700
    assert run("rsync", "-v", f"{tree}/", f"{ar}:data/")[1] == ""  # idempotent
    back = tmp_path / "back"
    assert run("rsync", f"{ar}:data/", f"{back}/")[0] == 0
    assert snapshot(back) == snapshot(tree)
    assert run("rsync", "-v", f"{ar}:data/", f"{back}/")[1] == ""


def test_trailing_slash(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "t.barecat")
    run("rsync", str(tree), f"{ar}:")
    run("rsync", f"{tree}/", f"{ar}:contents")
    with barecat.Barecat(ar) as bc:
        assert bc.isfile("src/a/x.txt") and bc.isfile("contents/a/x.txt")
    out = tmp_path / "o"
    run("rsync", f"{ar}:src", str(out))
    run("rsync", f"{ar}:src/", str(out / "flat"))
    assert (out / "src/a/x.txt").exists() and (out / "flat/a/x.txt").exists()


def test_changes_are_detected(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "c.barecat")
    run("rsync", f"{tree}/", f"{ar}:")
    x = tree / "a/x.txt"
    old = x.stat().st_mtime_ns
    touch(x, b"HELLO\n", old)  # same size, same mtime: invisible to the quick check
    assert run("rsync", "-v", f"{tree}/", f"{ar}:")[1] == ""
    assert run("rsync", "-vc", f"{tree}/", f"{ar}:")[1].splitlines() == ["a/x.txt"]
    touch(x, b"longer now\n", old)
    assert "a/x.txt" in run("rsync", "-v", f"{tree}/", f"{ar}:")[1]
    touch(x, None, old + 1)
    assert "a/x.txt" in run("rsync", "-v", f"{tree}/", f"{ar}:")[1]
    with barecat.Barecat(ar) as bc:
        assert bc["a/x.txt"] == b"longer now\n" and bc.stat("a/x.txt").mtime_ns == old + 1


def test_update_skips_newer_on_dest(run: Run, tmp_path: Path, make_archive) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "s"
    src.mkdir()
    touch(src / "f", b"old", 1_000_000_000_000_000_000)
    out = tmp_path / "o"
    out.mkdir()
    touch(out / "f", b"newer", 2_000_000_000_000_000_000)
    ar = str(tmp_path / "u.barecat")
    run("rsync", f"{src}/", f"{ar}:")
    assert run("rsync", "-uv", f"{ar}:/", f"{out}/")[1] == ""
    assert (out / "f").read_bytes() == b"newer"
    run("rsync", f"{ar}:/", f"{out}/")
    assert (out / "f").read_bytes() == b"old"


def test_delete_both_directions(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "d.barecat")
    run("rsync", f"{tree}/", f"{ar}:")
    out = tmp_path / "out"
    run("rsync", f"{ar}:/", f"{out}/")
    (out / "extra.txt").write_text("x")
    (out / "extradir/deep").mkdir(parents=True)
    assert run("rsync", "-v", f"{ar}:/", f"{out}/")[0] == 0
    assert (out / "extra.txt").exists()  # no --delete: kept
    code, text, _ = run("rsync", "-v", "--delete", f"{ar}:/", f"{out}/")
    assert code == 0 and "deleting extra.txt" in text and "deleting extradir/" in text
    assert snapshot(out) == snapshot(tree)
    shutil.rmtree(tree / "a")
    assert run("rsync", "--delete", f"{tree}/", f"{ar}:")[0] == 0
    with barecat.Barecat(ar) as bc:
        assert not bc.exists("a") and bc.isfile(".hidden")


def test_dry_run_changes_nothing(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "n.barecat")
    code, out, _ = run("rsync", "-nv", f"{tree}/", f"{ar}:")
    assert code == 0 and "a/x.txt" in out and not os.path.exists(ar)
    run("rsync", f"{tree}/", f"{ar}:")
    (tree / ".hidden").unlink()
    before = Path(ar).read_bytes()
    code, out, _ = run("rsync", "-nv", "--delete", f"{tree}/", f"{ar}:")
    assert "deleting .hidden" in out and Path(ar).read_bytes() == before
    back = tmp_path / "b"
    run("rsync", "-n", f"{ar}:/", str(back))
    assert not back.exists()


def test_include_exclude(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "f.barecat")
    run("rsync", "--exclude", "*.bin", "--exclude", "private/", f"{tree}/", f"{ar}:")
    with barecat.Barecat(ar) as bc:
        assert not bc.exists("a/b/big.bin") and not bc.exists("private")
        assert bc.isfile("a/x.txt")
    # excluded paths at the destination are protected from --delete
    run("rsync", "--delete", "--exclude", "*.bin", f"{tree}/", f"{ar}:")
    ar2 = str(tmp_path / "g.barecat")
    run("rsync", "--include", "*.txt", f"{tree}/", f"{ar2}:")
    with barecat.Barecat(ar2) as bc:
        assert sorted(bc.files()) == ["a/x.txt", "name with spaces ü.txt"]


def test_archive_to_archive(run: Run, tree: Path, tmp_path: Path) -> None:
    a, b = str(tmp_path / "a.barecat"), str(tmp_path / "b.barecat")
    run("rsync", f"{tree}/", f"{a}:")
    assert run("rsync", f"{a}:/", f"{b}:copy/")[0] == 0
    assert run("rsync", "-v", f"{a}:/", f"{b}:copy/")[1] == ""
    with barecat.Barecat(a, readonly=False) as bc:
        bc.update_file("a/x.txt", data=b"changed")
    assert run("rsync", "-v", "--delete", f"{a}:/", f"{b}:copy/")[1].splitlines() == ["a/x.txt"]
    out = tmp_path / "o"
    run("rsync", f"{b}:copy/", f"{out}/")
    assert (out / "a/x.txt").read_bytes() == b"changed"
    assert (out / "a/link_to_file").is_symlink() and (out / "a/b/big.bin").stat().st_size


def test_local_to_local_is_refused(run: Run, tree: Path, tmp_path: Path) -> None:
    code, _, err = run("rsync", f"{tree}/", str(tmp_path / "x"))
    assert code == 1 and "rsync" in err


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_same_result_as_rsync(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "r.barecat")
    run("rsync", f"{tree}/", f"{ar}:")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for target in (ours, theirs):
        target.mkdir()
        (target / "stale").write_text("x")
    run("rsync", "--delete", f"{ar}:/", f"{ours}/")
    subprocess.run(["rsync", "-a", "--delete", f"{tree}/", f"{theirs}/"], check=True)
    assert snapshot(ours) == snapshot(theirs)


# -- property: after a sync, the destination equals the source ----------------------------

names = st.sampled_from(["a", "b", "c.txt", "d"])
trees = st.recursive(
    st.binary(max_size=20),
    lambda children: st.dictionaries(names, children, max_size=3),
    max_leaves=8,
)


def write_tree(root: Path, spec: dict, mtime: int) -> None:  # type: ignore[type-arg]
    for name, value in spec.items():
        p = root / name
        if isinstance(value, dict):
            p.mkdir()
            write_tree(p, value, mtime)
        else:
            p.write_bytes(value)
        os.utime(p, ns=(mtime, mtime))


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(first=st.dictionaries(names, trees, max_size=4),
       second=st.dictionaries(names, trees, max_size=4))  # fmt: skip
def test_property_sync_mirrors_source(tmp_path_factory, first, second) -> None:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("prop")
    ar = str(base / "p.barecat")
    for i, spec in enumerate((first, second)):
        src = base / f"src{i}"
        src.mkdir()
        write_tree(src, spec, 1_000_000_000_000_000_000 + i)
        os.utime(src, ns=(5, 5))
        sync([f"{src}/"], f"{ar}:", SyncOptions(delete=True))
        out = base / "out"
        sync([f"{ar}:/"], f"{out}/", SyncOptions(delete=True))
        assert snapshot(out) == snapshot(src)
        assert [a for a in sync([f"{src}/"], f"{ar}:", dry_run=True).actions] == []


# -- the forms of barecat 0.3.1: ARCHIVE::, tar and zip sources, remote sides --------------


def test_archive_root_without_slash_is_sent_as_a_directory(run: Run, tree: Path,
                                                          tmp_path: Path) -> None:  # fmt: skip
    ar = str(tmp_path / "photos.barecat")
    assert run("rsync", f"{tree}/", f"{ar}::")[0] == 0
    out = tmp_path / "out"
    assert run("rsync", f"{ar}::", f"{out}/")[0] == 0  # no slash: out/photos/
    assert (out / "photos/a/x.txt").read_bytes() == b"hello\n"
    assert run("rsync", f"{ar}::/", f"{out}/flat/")[0] == 0  # slash: the contents
    assert snapshot(out / "flat") == snapshot(tree)
    other = str(tmp_path / "other")  # '::' creates an archive of any name
    assert run("rsync", f"{ar}::a/", f"{other}::inner/")[0] == 0
    with barecat.Barecat(other) as bc:
        assert bc["inner/x.txt"] == b"hello\n"


def test_tar_and_zip_sources(run: Run, tree: Path, tmp_path: Path) -> None:
    import tarfile
    import zipfile

    tgz, zipped = tmp_path / "pack.tar.gz", tmp_path / "pack.zip"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(tree / "a", arcname="a")
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.write(tree / "a/x.txt", "a/x.txt")
    ar = str(tmp_path / "t.barecat")
    assert run("rsync", f"{tgz}::/", f"{ar}::")[0] == 0
    assert run("rsync", f"{tgz}::", f"{ar}::named/")[0] == 0  # named after the file
    assert run("rsync", f"{zipped}::a/", f"{ar}::fromzip/")[0] == 0
    with barecat.Barecat(ar) as bc:
        assert bc["a/x.txt"] == bc["named/pack/a/x.txt"] == bc["fromzip/x.txt"] == b"hello\n"
        assert bc["a/b/big.bin"] == (tree / "a/b/big.bin").read_bytes()
        seconds = (tree / "a/x.txt").stat().st_mtime_ns // 10**9
        assert (bc.stat("a/x.txt").mtime_ns or 0) // 10**9 == seconds
        assert stat.S_ISLNK(bc.stat("a/link_to_file").mode or 0)
    out = tmp_path / "out"
    assert run("rsync", f"{tgz}::a/b/", f"{out}/")[0] == 0
    assert (out / "big.bin").read_bytes() == (tree / "a/b/big.bin").read_bytes()
    code, _, err = run("rsync", f"{tree}/", str(tmp_path / "x.tar.gz::"))
    assert code == 1 and "only be sources" in err and not (tmp_path / "x.tar.gz").exists()
    code, _, err = run("rsync", str(tmp_path / "missing.tar::"), f"{ar}::")
    assert code == 1 and "missing.tar" in err


def test_ssh_and_server_sides_are_refused_clearly(run: Run, tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "r.barecat")
    for argv in ((f"{tree}/", "host:/srv/a.barecat::"), ("barecat://h:1/a::", f"{ar}::"),
                 (f"{tree}/", "me@host:/srv/dir/")):  # fmt: skip
        code, _, err = run("rsync", *argv)
        assert code == 1 and "cannot reach" in err, err
    assert not os.path.exists(ar)
    code, _, err = run("rsync", f"{tree}/", str(tmp_path / "plain"))
    assert code == 1 and "Use regular rsync" in err


def test_compatibility_module_runs_the_same_sync(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from barecat.maintenance.rsync import PathType, RsyncOptions, parse_path, rsync

    ar = str(tmp_path / "m.barecat")
    parsed = parse_path(f"{ar}::a/")
    assert (parsed.path_type, parsed.archive_path, parsed.inner_path) == (
        PathType.LOCAL_ARCHIVE, ar, "a")  # fmt: skip
    assert parsed.is_archive and not parsed.is_remote and parsed.archive_basename == "m"
    ssh = parse_path("u@h:/x/dir/")
    assert (ssh.path_type, ssh.filesystem_path, ssh.user) == (PathType.SSH, "/x/dir", "u")
    rsync([f"{tree}/"], f"{ar}::", RsyncOptions(dry_run=True))
    assert "a/x.txt" in capsys.readouterr().out and not os.path.exists(ar)
    rsync([f"{tree}/"], f"{ar}::", RsyncOptions(exclude=["*.bin"], verbose=True))
    assert "a/x.txt" in capsys.readouterr().out
    (tree / "a/x.txt").unlink()
    result = rsync([f"{tree}/"], f"{ar}::", RsyncOptions(delete=True, exclude=["*.bin"]))
    assert [a.display for a in result.actions if a.display] == ["deleting a/x.txt"]
    with barecat.Barecat(ar) as bc:
        assert not bc.exists("a/x.txt") and not bc.exists("a/b/big.bin") and bc.isfile(".hidden")
    with pytest.raises(ValueError, match="mtimes"):
        rsync([f"{tree}/"], f"{ar}::", RsyncOptions(times=False))
    with pytest.raises(NotImplementedError):
        rsync(["host:/srv/"], f"{ar}::")
    with pytest.raises(FileNotFoundError):
        rsync([f"{ar}::no/such/"], str(tmp_path / "o"))


def test_cli_size_and_existence_options(run: Run, tmp_path: Path) -> None:
    src = tmp_path / "s"
    src.mkdir()
    touch(src / "small", b"x")
    touch(src / "big", b"y" * 5000)
    ar = str(tmp_path / "o.barecat")
    assert run("rsync", "--max-size", "1K", f"{src}/", f"{ar}::")[0] == 0
    with barecat.Barecat(ar) as bc:
        assert sorted(bc.files()) == ["small"]
    touch(src / "small", b"z")  # same size and mtime as stored, different bytes
    touch(src / "new", b"n")
    assert run("rsync", "-v", "--existing", "-c", f"{src}/", f"{ar}::")[1].splitlines() == [
        "small"]  # fmt: skip
    assert run("rsync", "-v", "--ignore-existing", f"{src}/", f"{ar}::")[1].splitlines() == [
        "big", "new"]  # fmt: skip
    with barecat.Barecat(ar) as bc:
        assert bc["small"] == b"z" and bc["new"] == b"n"
