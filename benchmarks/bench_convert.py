"""Conversion throughput: tar -> barecat next to ``tar xf`` of the same file, and back.

Builds the benchmark tree (``bench_dataset``; 20,000 files of 1-64 KiB by default), packs
it with GNU tar (plain and gzip), then times whole commands, each followed by ``sync``,
medians of ``--repeats`` runs, page cache warm:

- ``tar -> barecat``: ``barecat convert in.tar out.barecat`` (this barecat and 0.3.1)
  against ``tar xf in.tar`` into a fresh directory (the same bytes landing on disk);
- the same from ``in.tar.gz`` against ``tar xzf``;
- ``barecat -> tar``: ``barecat convert out.barecat out.tar`` against ``tar cf`` of the tree;
- ``wrap``: ``barecat convert --wrap in.tar`` (reads every member once for its CRC32C,
  copies nothing) against ``cat in.tar > /dev/null``.

Figures only, no assertions; JSON goes to ``bench-results/``.

    python benchmarks/bench_convert.py [--files N] [--repeats R] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

import bench_dataset
from bench_maintenance import OURS_BIN, REPO, reference_bin, remove_archive, timed


def _fresh_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def run(work: str, files: int, repeats: int) -> dict[str, dict[str, object]]:
    tree = bench_dataset.ensure_tree(os.path.join(work, "tree"), bench_dataset.TreeSpec(files))
    parent, name = os.path.split(tree.root)
    plain, gz = os.path.join(work, "in.tar"), os.path.join(work, "in.tar.gz")
    if not os.path.exists(gz):
        subprocess.run(["tar", "cf", plain, "-C", parent, name], check=True)
        subprocess.run(["tar", "czf", gz, "-C", parent, name], check=True)
    barecats = [(who, b) for who, b in (("ours", OURS_BIN), ("ref", reference_bin())) if b]
    out_dir, archive = os.path.join(work, "out"), os.path.join(work, "out.barecat")
    out_tar, wrapped = os.path.join(work, "out.tar"), os.path.join(work, "wrapped.barecat")

    def compare(
        baseline: tuple[str, list[str], Callable[[], None] | None],
        args: list[str],
        prepare: Callable[[], None] | None,
    ) -> dict[str, object]:
        """A baseline command, then each barecat's ``convert ARGS``, timed alike."""
        rows: dict[str, object] = {"bytes": tree.total_bytes, "files": len(tree.relpaths)}
        label, command, baseline_prepare = baseline
        rows[label] = timed(command, baseline_prepare, repeats)
        for who, binary in barecats:
            rows[who] = timed([str(binary), "convert", *args], prepare, repeats)
        return rows

    results: dict[str, dict[str, object]] = {}
    for label, source, flags in (("tar -> barecat", plain, "xf"), ("tar.gz -> barecat", gz, "xzf")):
        untar = ["tar", flags, source, "-C", out_dir]
        results[label] = compare(
            (f"tar {flags}", untar, lambda: _fresh_dir(out_dir)),
            ["-f", source, archive],
            lambda: remove_archive(archive),
        )
    subprocess.run([str(OURS_BIN), "convert", "-f", plain, archive], check=True)
    results["barecat -> tar"] = compare(
        ("tar cf", ["tar", "cf", out_tar, "-C", parent, name], None), ["-f", archive, out_tar], None
    )
    results["wrap tar"] = compare(
        ("cat tar", ["sh", "-c", f"cat {plain} > /dev/null"], None),
        ["--wrap", plain, wrapped],
        lambda: remove_archive(wrapped),
    )
    return results


def summarize(results: dict[str, dict[str, object]]) -> None:
    for name, rows in results.items():
        payload, files = rows["bytes"], rows["files"]
        assert isinstance(payload, int) and isinstance(files, int)
        baseline_name = next(k for k in rows if k not in ("bytes", "files", "ours", "ref"))
        baseline = statistics.median(rows[baseline_name])  # type: ignore[arg-type]
        print(f"\n{name}: {files:,} files, {payload / 1e6:,.0f} MB")
        for key, samples in rows.items():
            if key in ("bytes", "files"):
                continue
            assert isinstance(samples, list)
            med = statistics.median(samples)
            print(f"  {key:<10} {files / med:9,.0f} files/s {payload / med / 1e6:7,.0f} MB/s "
                  f"{med:7.2f} s  {baseline / med:5.2f}x the speed of {baseline_name}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", help="keep the tree and tars here (reused)")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="barecat-bench-convert-")
    os.makedirs(work, exist_ok=True)
    try:
        results = run(work, args.files, args.repeats)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    summarize(results)
    out_dir = REPO / "bench-results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"convert-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"files": args.files, "results": results}, indent=1))
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
