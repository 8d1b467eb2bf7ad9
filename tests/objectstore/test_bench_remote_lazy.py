"""``benchmarks/bench_remote_lazy.py`` end to end at a tiny size, so it never rots: it
builds, publishes (where ``barecat publish`` exists), uploads to moto, reads through the
delaying proxy in each mode and writes its figures, every read returning the stored
bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_lazy_remote_benchmark_runs_at_2000_files(tmp_path: Path) -> None:
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    figures = tmp_path / "figures.json"
    command = [sys.executable, str(REPO / "benchmarks" / "bench_remote_lazy.py")]
    options = ["--files", "2000", "--work", str(tmp_path / "work"), "--list-keys", "1500"]
    done = subprocess.run(
        [*command, *options, "--further", "5", "--batch", "16", "--json", str(figures)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(figures.read_text())
    (size,) = report["sizes"]
    assert size["index_bytes"] > 0 and size["shard_bytes"] > 0
    download = size["modes"]["download"]
    assert download["wrong_bytes"] == 0
    assert download["first"]["requests"] >= 2  # the index, then the file's shard
    assert download["further"]["files"] == 5
    assert download["listdir"]["entries"] == 1000 and download["glob"]["entries"] == 1000
    lazy = size["modes"]["lazy"]
    if "unavailable" in lazy:
        assert f"lazy      not measured: {lazy['unavailable']}" in done.stdout
    else:
        assert lazy["wrong_bytes"] == 0 and lazy["first"]["requests"] >= 2
    assert report["listing"]["found"] == 1500 and report["listing"]["requests"] == 2
    assert "S3 LIST of 1,500 keys through the proxy: 2 pages" in done.stdout
