"""The demo that ``./run demo`` runs: it must build, read back and summarize, run after run."""

from __future__ import annotations

import os

import pytest

from barecat import Barecat, demo


def test_demo_builds_reads_back_and_reruns_in_place(
    tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = os.fspath(tmp_path)
    assert demo.main(["--files", "60", "--workdir", workdir]) == 0
    assert demo.main(["--files", "25", "--workdir", workdir]) == 0  # fewer: nothing left over
    out = capsys.readouterr().out
    assert "mismatches     0" in out and "glob **/*.jpg  25 matches" in out
    with Barecat(os.path.join(workdir, "sample.barecat")) as bc:
        assert len(bc) == 25 and bc.verify_integrity()
