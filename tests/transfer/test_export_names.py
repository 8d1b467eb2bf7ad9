"""Index paths that are not canonical never go out verbatim to tar or zip.

barecat 0.3.1 stores '../x' as given, and any tool writing the SQLite index can store
'/abs', './x' or 'a/../b'. ``convert ARCHIVE out.tar|out.zip`` normalizes such names and
leaves out those that climb above the root, reporting each (exit code 1 when something
was left out), so that Python's ``tarfile``/``zipfile`` extracting the output writes
nothing outside its target, even with tar's filters off.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import barecat
from barecat.transfer import barecat2archive
from helpers import Run
from helpers.reference import made_by_reference


def hostile_index(tmp_path: Path) -> str:
    """An archive by the real barecat 0.3.1 with '../' paths, plus rows put into its
    SQLite index directly with other forms no canonical path has."""
    ar = str(tmp_path / "hostile.barecat")
    made_by_reference(ar, {"fine/file": b"fine", "../escaped": b"gotcha", "a/../../up2": b"up2"})
    with sqlite3.connect(ar) as conn:  # more odd forms, pointing at the bytes of 'fine'
        conn.execute("PRAGMA recursive_triggers = ON")
        for path in ["/abs/x", "./dot/y", "b/../c", "/../../etc/evil"]:
            conn.execute(
                "INSERT INTO files (path, shard, offset, size) VALUES (?, 0, 0, 4)", (path,)
            )
    return ar


# The index's triggers made a directory row for every parent, odd ones included.
SKIPPED = [".", "..", "../escaped", "../up2", "/..", "/../..", "/../../etc", "/../../etc/evil"]
SKIPPED += ["b/.."]
RENAMED = [("./dot", "dot"), ("./dot/y", "dot/y"), ("/abs", "abs"), ("/abs/x", "abs/x")]
RENAMED += [("b/../c", "c")]


def files_below(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("suffix", ["tar", "tar.gz", "zip"])
def test_convert_normalizes_or_skips_names_and_extracts_inside(
    run: Run, tmp_path: Path, suffix: str
) -> None:
    ar = hostile_index(tmp_path)
    output = tmp_path / f"out.{suffix}"
    code, _, err = run("convert", "-q", ar, str(output))
    assert code == 1
    lines = err.splitlines()
    renamed = [f"barecat convert: {a}: written as {b!r}, its canonical form" for a, b in RENAMED]
    assert sorted(line for line in lines if "written as" in line) == sorted(renamed)
    skipped = [line for line in lines if "skipped" in line]
    assert sorted(line.split(":")[1].strip().removeprefix("skipped ") for line in skipped) == (
        sorted(SKIPPED)
    )
    assert len(lines) == len(renamed) + len(skipped)
    jail = tmp_path / "jail"
    target = jail / "deep" / "target"
    target.mkdir(parents=True)
    if suffix == "zip":
        with zipfile.ZipFile(output) as zf:
            names = zf.namelist()
            zf.extractall(target)
    else:
        with tarfile.open(output) as tf:
            names = tf.getnames()
            tf.extractall(target, filter="fully_trusted")  # no filter: names as they are
    assert not any(n.startswith("/") or ".." in n.split("/") for n in names)
    assert files_below(jail) == {
        f"deep/target/{p}": b"fine" for p in ["abs/x", "c", "dot/y", "fine/file"]
    }


def test_stdout_and_legacy_script_report_the_same(run: Run, tmp_path: Path) -> None:
    ar = hostile_index(tmp_path)
    code, _, err = run("convert", "-q", "--stdout", ar, "tar")
    assert code == 1 and "skipped ../escaped" in err and "/abs/x: written as" in err
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from barecat.cli.convert import legacy_barecat2archive as f; "
            "sys.exit(f())",
            ar,
            str(tmp_path / "legacy.zip"),
        ],
        capture_output=True,
    )
    assert done.returncode == 1 and b"skipped ../escaped" in done.stderr
    with zipfile.ZipFile(tmp_path / "legacy.zip") as zf:
        assert "escaped" not in " ".join(zf.namelist())


def test_api_result_lists_renamed_and_skipped(tmp_path: Path) -> None:
    ar = hostile_index(tmp_path)
    result = barecat2archive(ar, str(tmp_path / "api.tar"), root_dir="top")
    assert sorted(result.renamed) == sorted(RENAMED)
    assert sorted(path for path, _ in result.skipped) == sorted(SKIPPED)
    reasons = dict(result.skipped)
    assert reasons["../escaped"] == "Path escapes the archive root: '../escaped'"
    assert reasons["."] == reasons["b/.."] == "names the archive's root, which is there"
    with tarfile.open(tmp_path / "api.tar") as tf:
        assert all(n == "top" or n.startswith("top/") for n in tf.getnames())
    assert result.files == 4
    plain = str(tmp_path / "plain.barecat")
    with barecat.Barecat(plain, readonly=False) as bc:
        bc["a/b"] = b"1"
    clean = barecat2archive(plain, str(tmp_path / "plain.zip"))
    assert (clean.files, clean.renamed, clean.skipped) == (1, [], [])  # nothing to remark
