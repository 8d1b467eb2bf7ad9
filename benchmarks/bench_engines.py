"""Ray Data and barecat: reading an archive and writing one, against Ray's own ways.

On one ImageNet-like tree (``bench_dataset``: 1-64 KiB files of random bytes, default
10,000; ``--large`` for the issue's 100,000), with a local Ray cluster of ``--cpus``
CPUs (default 2):

1. read: ``read_barecat`` of the tree's archive against ``ray.data.read_binary_files``
   of the tree itself: the time to make the dataset (``read_barecat`` plans from the
   index then; ``read_binary_files`` lists the tree), the time to the first batch of
   1,024 rows (from making the dataset: that time included), and rows/s and MB/s of a
   full pass (``iter_batches``, every byte touched);
2. write: ``write_barecat`` of the tree read by ``read_binary_files``, and of the same
   rows already in Ray's object store (the write alone), against ``barecat create`` of
   the same tree (the command line, one process), until the archive is complete.

Both read the page cache (the tree was just written). Ray's own start-up is outside
every timed region, the same for both: ``ray.init`` and one small pass of each reader
(over 100 files: worker processes started, modules imported) come before any timing.
Medians of ``--repeats`` interleaved rounds; figures only, no assertions.

    python benchmarks/bench_engines.py [--files N | --large] [--repeats R] [--cpus C]
                                       [--reads-only]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import barecat  # noqa: E402
from bench_dataset import TreeSpec, ensure_tree  # noqa: E402


def timed_pass(make: Callable[[], Any]) -> tuple[float, float, float, int, int]:
    """Make a dataset and read it whole: (made s, first batch s, total s, rows, bytes)."""
    start = time.perf_counter()
    ds = make()
    made = time.perf_counter() - start
    first = None
    rows = size = 0
    for batch in ds.iter_batches(batch_size=1024, batch_format="pyarrow"):
        if first is None:
            first = time.perf_counter() - start
        rows += batch.num_rows
        size += sum(len(b) for b in batch.column("bytes").to_pylist())
    total = time.perf_counter() - start
    return made, first or total, total, rows, size


def machine() -> str:
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {model}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--large", action="store_true", help="100,000 files (the issue's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--workdir", help="keep the tree here (reused when it matches)")
    parser.add_argument("--reads-only", action="store_true", help="no write measured")
    args = parser.parse_args()
    files = 100_000 if args.large else args.files

    import ray

    from barecat.integrations.ray import read_barecat, write_barecat

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-engines-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = ensure_tree(str(work / "tree"), TreeSpec(num_files=files))
    print(f"tree: {files:,} files, {tree.total_bytes / 1e6:,.0f} MB", flush=True)
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        results: dict[str, list[Any]] = {}
        archive = work / "tree.barecat"
        ray_out = work / "ray.barecat"

        def create() -> None:
            barecat.remove(str(archive)) if barecat.exists(str(archive)) else None
            command = [sys.executable, "-m", "barecat", "create", str(archive), "-C",
                       tree.root, "."]  # fmt: skip
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)

        def write() -> None:
            barecat.remove(str(ray_out)) if barecat.exists(str(ray_out)) else None
            root = tree.root + "/"

            def relative(batch: dict[str, Any]) -> dict[str, Any]:
                batch["path"] = [p[len(root) :] for p in batch["path"]]
                return batch

            ds = ray.data.read_binary_files(tree.root, include_paths=True)
            write_barecat(ds.map_batches(relative), ray_out)

        def write_materialized() -> None:
            barecat.remove(str(ray_out)) if barecat.exists(str(ray_out)) else None
            write_barecat(in_memory, ray_out)

        create()
        few = ray.data.read_binary_files(tree.root, include_paths=True).limit(100)
        for warm_up in (read_barecat(str(archive)).limit(100), few):  # Ray's start-up
            warm_up.take_all()
        root = tree.root + "/"
        in_memory = ray.data.from_items([])  # (the rows in the object store, when measured)
        if not args.reads_only:
            in_memory = (
                ray.data.read_binary_files(tree.root, include_paths=True)
                .map_batches(
                    lambda b: {"path": [p[len(root) :] for p in b["path"]], "bytes": b["bytes"]}
                )
                .materialize()
            )
        writes = (
            ("create", create),
            ("write_barecat", write),
            ("write_barecat_materialized", write_materialized),
        )
        for _ in range(args.repeats):
            for name, work_fn in () if args.reads_only else writes:
                start = time.perf_counter()
                work_fn()
                results.setdefault(name, []).append(time.perf_counter() - start)
            if not args.reads_only:
                with barecat.Barecat(str(ray_out)) as bc:
                    assert bc.num_files == files
            for name, make in (
                ("read_barecat", lambda: read_barecat(str(archive))),
                ("read_binary_files", lambda: ray.data.read_binary_files(
                    tree.root, include_paths=True)),
            ):  # fmt: skip
                made, first, total, rows, size = timed_pass(make)
                assert rows == files and size == tree.total_bytes, (name, rows, size)
                results.setdefault(name, []).append((made, first, total))
    finally:
        ray.shutdown()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    mb = tree.total_bytes / 1e6
    print(f"\n{datetime.date.today()}, {machine()}, Ray {ray.__version__}, {args.cpus} CPUs,")
    print(f"{files:,} files ({mb:,.0f} MB), medians of {args.repeats} rounds\n")
    print("| read | dataset made | first batch | full pass | rows/s | MB/s |")
    print("|---|---|---|---|---|---|")
    for name in ("read_barecat", "read_binary_files"):
        made, first, total = (statistics.median(r[i] for r in results[name]) for i in range(3))
        print(f"| `{name}` | {made:.2f} s | {first:.2f} s | {total:.2f} s | "
              f"{files / total:,.0f} | {mb / total:,.0f} |")  # fmt: skip
    if args.reads_only:
        return 0
    print("\n| write | time | files/s | MB/s |")
    print("|---|---|---|---|")
    for name, label in (("write_barecat", "`write_barecat` of `read_binary_files`"),
                        ("write_barecat_materialized", "`write_barecat` of rows in memory"),
                        ("create", "`barecat create` (one process)")):  # fmt: skip
        t = statistics.median(results[name])
        print(f"| {label} | {t:.2f} s | {files / t:,.0f} | {mb / t:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
