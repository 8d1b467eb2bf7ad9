"""The demo that ``./run demo`` runs: it must build, read back and summarize, run after run,
and leave nothing in the temp directory unless asked to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from barecat import Barecat, demo
from helpers.killing import children_take_ctrl_c


def test_demo_builds_reads_back_and_reruns_in_place(
    tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = os.fspath(tmp_path)
    assert demo.main(["--files", "60", "--workdir", workdir]) == 0
    assert demo.main(["--files", "25", "--workdir", workdir]) == 0  # fewer: nothing left over
    out = capsys.readouterr().out
    assert "mismatches     0" in out and "glob **/*.jpg  25 matches" in out
    tree, archive = os.path.join(workdir, "tree"), os.path.join(workdir, "sample.barecat")
    assert out.endswith(f"kept           {tree}, {archive} (remove: rm -rf {tree} {archive}-*)\n")
    with Barecat(archive) as bc:
        assert len(bc) == 25 and bc.verify_integrity()


def _demo(tmp: Path, *args: str) -> subprocess.Popen[str]:
    """``python -m barecat.demo`` (what ``./run demo`` runs) with ``tmp`` as TMPDIR."""
    return subprocess.Popen(
        [sys.executable, "-m", "barecat.demo", *args],
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        text=True,
    )


def test_demo_leaves_the_temp_directory_as_it_found_it(tmp_path: Path) -> None:
    done = _demo(tmp_path, "--files", "30")
    out, _ = done.communicate(timeout=120)
    assert done.returncode == 0 and "mismatches     0" in out
    assert os.listdir(tmp_path) == []
    assert out.splitlines()[-1].startswith(f"removed        {tmp_path}/barecat-demo-")

    kept = _demo(tmp_path, "--files", "30", "--keep")
    out, _ = kept.communicate(timeout=120)
    [workdir] = os.listdir(tmp_path)
    assert out.splitlines()[-1] == (
        f"kept           {tmp_path / workdir} (remove: rm -rf {tmp_path / workdir})"
    )
    subprocess.run(["sh", "-c", out.rsplit("(remove: ", 1)[1].rstrip(")\n")], check=True)
    assert os.listdir(tmp_path) == []


def test_ctrl_c_during_the_demo_removes_its_directory(tmp_path: Path) -> None:
    with children_take_ctrl_c():
        running = _demo(tmp_path, "--files", "100000")
    made = None
    while made is None and running.poll() is None:  # wait until it has written files
        made = next(tmp_path.glob("barecat-demo-*/tree/*/*/*.jpg"), None)
    running.send_signal(signal.SIGINT)
    running.communicate(timeout=120)
    assert made is not None and running.returncode == 130
    assert os.listdir(tmp_path) == []


def test_the_documentation_sample_tree_is_written_where_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "photos"
    (root / "train").mkdir(parents=True)
    (root / "train" / "mine.txt").write_bytes(b"kept")
    assert demo.main(["--photos", str(root)]) == 0
    assert capsys.readouterr().out == f"wrote {len(demo.PHOTOS)} files under {root}\n"
    for name, data in demo.PHOTOS.items():
        assert (root / name).read_bytes() == data
    assert (root / "train" / "mine.txt").read_bytes() == b"kept"  # nothing else touched
