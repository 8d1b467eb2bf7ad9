"""Extraction goes on past bad entries, as tar does, and leaves nothing half-written.

Each entry that fails (damaged bytes, a name the file system refuses, something in the
way, a write that fails) is reported as ``PATH: reason``, the rest is extracted,
directory metadata is restored at the end whatever failed, and the exit code is 1. A file
is never left behind partial or empty. Damage is reported naming the file on every read
path. Links pointing outside the target are summed up in one line naming the option that
allows them. All on real archives, real directories and real processes.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
from barecat.transfer import extract_to_directory
from helpers import Run
from helpers.damaging import damage

MTIME = 1_500_000_000_123_456_789
BIG = 3 << 20  # above extraction's whole-file read: checked first, then streamed


def files_below(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[str, dict[str, bytes]]:
    """An archive with modes and mtimes, one small and one big file damaged; returns it
    and the files that are intact."""
    ar = str(tmp_path / "damaged.barecat")
    files = {f"d/f{i}": b"%d" % i * 100 for i in range(10)}
    files["d/sub/big_ok"] = os.urandom(BIG)
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("d", mode=0o40750, mtime_ns=MTIME))
        bc.add(barecat.BarecatDirInfo("d/sub", mode=0o40705, mtime_ns=MTIME + 1))
        for i in range(5):
            bc.add(f"d/f{i}", data=files[f"d/f{i}"], mode=0o100640, mtime_ns=MTIME)
        bc.add("d/sub/bad_small", data=b"small" * 10, mode=0o100644)
        bc.add("d/sub/bad_big", data=os.urandom(BIG), mode=0o100644)
        for i in range(5, 10):
            bc.add(f"d/f{i}", data=files[f"d/f{i}"], mode=0o100640, mtime_ns=MTIME)
        bc.add("d/sub/big_ok", data=files["d/sub/big_ok"], mode=0o100600)
    damage(ar, "d/sub/bad_small")
    damage(ar, "d/sub/bad_big", at=BIG - 1)
    return ar, files


def test_extract_goes_on_past_damaged_files(run: Run, tmp_path: Path, damaged) -> None:  # type: ignore[no-untyped-def]
    ar, files = damaged
    out = tmp_path / "out"
    (out / "d/sub").mkdir(parents=True)
    (out / "d/sub/bad_small").write_bytes(b"an older copy")  # kept: nothing verified replaces it
    code, _, err = run("extract", "-q", ar, "-C", str(out))
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 2
    for line, path in zip(lines, ["d/sub/bad_small", "d/sub/bad_big"], strict=True):
        assert line.startswith(f"barecat extract: {path}: CRC32C mismatch in shard ")
    for path, data in files.items():
        assert (out / path).read_bytes() == data
    assert not os.path.lexists(out / "d/sub/bad_big")  # no partial or empty file
    assert (out / "d/sub/bad_small").read_bytes() == b"an older copy"
    assert mode_of(out / "d") == 0o750 and mode_of(out / "d/sub") == 0o705
    assert os.stat(out / "d").st_mtime_ns == MTIME
    assert os.stat(out / "d/sub").st_mtime_ns == MTIME + 1
    assert mode_of(out / "d/f9") == 0o640 and os.stat(out / "d/f9").st_mtime_ns == MTIME


def test_api_reports_each_failure_and_extract_raises_the_first(tmp_path: Path, damaged) -> None:  # type: ignore[no-untyped-def]
    ar, files = damaged
    with barecat.Barecat(ar) as bc:
        result = extract_to_directory(bc, str(tmp_path / "api"))
    assert [path for path, _ in result.failures] == ["d/sub/bad_small", "d/sub/bad_big"]
    assert result.files == len(files)
    with pytest.raises(barecat.BarecatIntegrityError, match=r"^d/sub/bad_small: CRC32C"):
        barecat.extract(ar, str(tmp_path / "legacy_api"))
    assert (tmp_path / "legacy_api/d/f9").read_bytes() == files["d/f9"]  # the rest is out


def test_damage_names_the_file_on_every_read_path(run: Run, damaged) -> None:  # type: ignore[no-untyped-def]
    ar, _ = damaged
    with barecat.Barecat(ar) as bc:
        reads = [
            lambda: bc["d/sub/bad_small"],
            lambda: bc.read("d/sub/bad_small"),
            lambda: bc.read("d/sub/bad_big"),
            lambda: bc.get_many(["d/f0", "d/sub/bad_small", "d/f9"]),
            lambda: bc.readinto("d/sub/bad_small", bytearray(50)),
        ]
        for read in reads:
            with pytest.raises(barecat.BarecatIntegrityError, match=r"^d/sub/bad_\w+: CRC32C"):
                read()
    code, _, err = run("cat", ar, "d/sub/bad_big")
    assert code == 1 and err.startswith("barecat cat: d/sub/bad_big: CRC32C mismatch")


def test_shell_get_of_a_damaged_file_leaves_no_file(run: Run, tmp_path: Path, damaged) -> None:  # type: ignore[no-untyped-def]
    ar, _ = damaged
    local = tmp_path / "local"
    code, _, err = run("shell", ar, "-c", f"lcd {tmp_path}; get d/sub/bad_small {local}")
    assert code == 1 and "d/sub/bad_small: CRC32C mismatch" in err
    assert not os.path.lexists(local)


def test_rsync_out_of_an_archive_goes_on_past_damaged_files(
    run: Run, tmp_path: Path, damaged
) -> None:  # type: ignore[no-untyped-def]
    ar, files = damaged
    out = tmp_path / "synced"
    code, _, err = run("rsync", f"{ar}:d", str(out))
    assert code == 1
    assert sorted(line.split(": ")[1] for line in err.splitlines()) == [
        "d/sub/bad_big",
        "d/sub/bad_small",
    ]
    assert "CRC32C mismatch" in err
    assert files_below(out) == files
    assert mode_of(out / "d") == 0o750


def test_extract_goes_on_past_names_the_file_system_refuses(run: Run, tmp_path: Path) -> None:
    long_dir, long_file = "d/" + "L" * 256, "d/" + "M" * 300  # over NAME_MAX (255 bytes)
    ar = str(tmp_path / "names.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("d", mode=0o40751, mtime_ns=MTIME))
        bc[f"{long_dir}/inner"] = b"1"
        bc[long_file] = b"2"
        bc["x/y"] = b"3"  # on disk, 'x' is a file in the way
        bc["d/fine"] = b"4"
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_bytes(b"mine")
    code, _, err = run("extract", "-q", ar, "-C", str(out))
    assert code == 1
    assert err.splitlines() == [
        f"barecat extract: {long_dir}: File name too long",
        "barecat extract: x: a file is in the way",
        f"barecat extract: {long_dir}/inner: directory {long_dir}: File name too long",
        f"barecat extract: {long_file}: File name too long",
        "barecat extract: x/y: directory x: a file is in the way",
    ]
    assert (out / "d/fine").read_bytes() == b"4" and (out / "x").read_bytes() == b"mine"
    assert mode_of(out / "d") == 0o751 and os.stat(out / "d").st_mtime_ns == MTIME


def test_a_file_whose_write_fails_is_removed(tmp_path: Path) -> None:
    """A real process whose file-size limit stops a write halfway (EFBIG, as a full disk
    would stop it): the partial file goes, the other files are written."""
    ar = str(tmp_path / "sizes.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc["a/small"] = b"s" * 1000
        bc["a/huge"] = os.urandom(BIG)
        bc["a/z_after"] = b"after"
    out = tmp_path / "out"
    script = (
        "import resource, signal, sys\n"
        "from barecat.cli.main import main\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))\n"
        "sys.exit(main(['extract', '-q', sys.argv[1], '-C', sys.argv[2]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, ar, str(out)], capture_output=True)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == ["barecat extract: a/huge: File too large"]
    assert sorted(os.listdir(out / "a")) == ["small", "z_after"]
    assert (out / "a/z_after").read_bytes() == b"after"


def test_parents_of_a_chosen_subtree_get_their_stored_metadata(tmp_path: Path) -> None:
    ar = str(tmp_path / "tree.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("a", mode=0o40755, mtime_ns=MTIME))
        bc.add(barecat.BarecatDirInfo("a/b", mode=0o40751, mtime_ns=MTIME + 1))
        bc["a/b/c/file"] = b"x"
        bc["a/other"] = b"y"
    out = tmp_path / "out"
    with barecat.Barecat(ar) as bc:
        assert extract_to_directory(bc, str(out), ["a/b/c"]).failures == []
    assert mode_of(out / "a") == 0o755 and mode_of(out / "a/b") == 0o751
    assert os.stat(out / "a/b").st_mtime_ns == MTIME + 1
    assert not (out / "a/other").exists()


def test_entries_without_a_stored_mode_get_the_umask_default(tmp_path: Path) -> None:
    """The reference's archives store no modes: extracted, they look as tar makes them."""
    ar = str(tmp_path / "plain.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc["d/e/f"] = b"data"  # no mode: files and implicit directories alike
    umask = os.umask(0o027)
    try:
        barecat.extract(ar, str(tmp_path / "out"))
    finally:
        os.umask(umask)
    assert mode_of(tmp_path / "out/d/e/f") == 0o640
    assert mode_of(tmp_path / "out/d") == 0o750 and mode_of(tmp_path / "out/d/e") == 0o750


def links_archive(path: str, outside: int) -> None:
    with barecat.Barecat(path, readonly=False) as bc:
        bc["d/f"] = b"data"
        bc.add("inside", data=b"d/f", mode=stat.S_IFLNK | 0o777)
        for i in range(outside):
            bc.add(f"abs{i}", data=b"/etc/passwd", mode=stat.S_IFLNK | 0o777)


def test_links_pointing_outside_are_summed_up_in_one_line(run: Run, tmp_path: Path) -> None:
    ar = str(tmp_path / "links.barecat")
    links_archive(ar, 332)
    out = tmp_path / "out"
    code, _, err = run("extract", "-q", ar, "-C", str(out))
    assert code == 1
    assert err.splitlines() == [
        f"barecat extract: 332 symbolic links pointing outside {out} not created "
        "(use --allow-outside-links to create them; -v lists them)"
    ]
    assert (out / "inside").read_bytes() == b"data" and not os.path.lexists(out / "abs0")
    with barecat.Barecat(ar) as bc:
        result = extract_to_directory(bc, str(tmp_path / "api"))
    assert result.failures == [] and len(result.outside_links) == 332
    assert result.outside_links[0] == ("abs0", "/etc/passwd")


def test_legacy_scripts_report_the_same_way(tmp_path: Path, damaged) -> None:  # type: ignore[no-untyped-def]
    ar, files = damaged
    links_archive(ar, 1)  # the same archive, with one link pointing outside

    def script(name: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
        code = f"import sys; from barecat.cli.legacy import {name}; sys.exit({name}())"
        return subprocess.run(
            [sys.executable, "-c", code, *argv], capture_output=True, cwd=tmp_path
        )

    done = script("extract", "--file", ar, "--target-directory", "out")
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and "deprecated" in lines[0]
    assert lines[1].startswith("barecat: d/sub/bad_small: CRC32C mismatch")
    assert lines[2].startswith("barecat: d/sub/bad_big: CRC32C mismatch")
    assert lines[3:] == [
        f"barecat: 1 symbolic link pointing outside {tmp_path / 'out'} not created "
        "(use 'barecat extract --allow-outside-links' to create them)"
    ]
    assert (tmp_path / "out/d/f9").read_bytes() == files["d/f9"]
    done = script("extract_single", "--barecat-file", ar, "--path", "d/sub/bad_big")
    assert done.returncode == 1 and done.stdout == b""
    assert (
        done.stderr.decode().splitlines()[1].startswith("barecat: d/sub/bad_big: CRC32C mismatch")
    )


def test_a_shard_cut_short_inside_a_run_of_small_files(tmp_path: Path) -> None:
    """Small files back to back are read a run at a time: a shard cut short in the middle
    of a run still gives every whole file, and names each one whose bytes are missing."""
    ar = str(tmp_path / "cut.barecat")
    files = {f"f{i:02d}": os.urandom(1000 + i) for i in range(20)}
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add_many(files.items())
        cut = bc.lookup_file("f10").offset + 10  # type: ignore[operator]
        shard = bc.sharder.get_shard_path(0)
    os.truncate(shard, cut)
    out = tmp_path / "out"
    with barecat.Barecat(ar) as bc:
        result = extract_to_directory(bc, str(out))
    assert files_below(out) == {p: d for p, d in files.items() if p < "f10"}
    assert [path for path, _ in result.failures] == [f"f{i:02d}" for i in range(10, 20)]
    assert all(isinstance(e, barecat.BarecatIntegrityError) for _, e in result.failures)
