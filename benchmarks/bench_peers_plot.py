"""Files/s of batched random reads against the batch size, for barecat and its peers: a plot.

    python benchmarks/bench_peers_plot.py [--files N] [--out docs/images/batch-size.png]

Builds a small ``train/<class>/<id>.jpg`` tree (``bench_dataset``, 5,000 files by default)
into each store of the core benchmark (``bench_stores``: this barecat, barecat 0.3.1 in its
own interpreter, the floor, LMDB, ArrayRecord, Lance; a store whose package is missing is
left out with the reason), then reads the same random paths in batches of 1 to 1,024, warm,
one thread, in rounds that interleave the stores (medians). Each batch is one call where the
store has one (``get_many``, ``getmulti``, ``read(indices)``, ``take(indices)``, storage-order
preads for the floor), else a loop of the usual read (barecat 0.3.1). Draws files/s against
the batch size with matplotlib (log-log) and writes the figures as JSON beside the image.
Asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import bench_core
import bench_dataset
import bench_plot
import bench_stores
import bench_workloads

SIZES = (1, 4, 16, 64, 256, 1024)
STORES = ("ours", "ref", "floor", "lmdb", "arrayrecord", "lance")


def batch_read(kind: str, location: str, batches: list[list[str]]) -> dict[str, Any]:
    """Median-ready samples of reading ``batches`` with the store's one-call batch read."""
    reader = bench_stores.open_reader(kind, location)
    try:
        assert reader.read_many is not None, f"{kind} has no batch read"
        out = bench_workloads.measure(bench_workloads._batches_pass(reader.read_many, batches), 3)
    finally:
        reader.close()
    out["items"] = sum(len(b) for b in batches)
    return out


def measure(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    """{store: {batch size: files/s}} and what was run."""
    spec = bench_dataset.TreeSpec(args.files, 20, args.seed)
    tree = bench_dataset.ensure_tree(os.path.join(workdir, "tree"), spec)
    runners = bench_core.store_runners(STORES, workdir)
    rng = random.Random(args.seed + 1)
    reads = min(args.reads, len(tree.relpaths))
    rates: dict[str, dict[int, list[float]]] = {s: {} for s in runners}
    try:
        for store, runner in runners.items():
            kind = "barecat" if store in bench_core.BARECATS else store
            location = os.path.join(workdir, "stores", store)
            runner.call(
                "ingest", kind=kind, location=location, tree=tree.root, relpaths=tree.relpaths,
                source="tree", payload_bytes=tree.total_bytes, repeats=1,
            )  # fmt: skip
        for r in range(args.rounds):
            bench_core.log(f"round {r + 1}/{args.rounds}")
            for size in (s for s in SIZES if s <= len(tree.relpaths)):
                batches = [rng.sample(tree.relpaths, size) for _ in range(max(1, reads // size))]
                for store, runner in runners.items():
                    kind = "barecat" if store in bench_core.BARECATS else store
                    location = os.path.join(workdir, "stores", store)
                    if not isinstance(
                        runner, bench_core.ReferenceWorker
                    ):  # straight to the store's batch call, nothing else
                        m = batch_read(kind, location, batches)
                    else:  # barecat 0.3.1: no batch call, its loop via the shared kernel
                        out = runner.call(
                            "read_random", kind=kind, location=location, paths=batches[0][:1],
                            batches=batches, repeats=3,
                        )  # fmt: skip
                        m = out["batch"] if "samples" in out["batch"] else out["batch_loop"]
                    rate = m["items"] / statistics.median(m["samples"])
                    rates[store].setdefault(size, []).append(rate)
    finally:
        bench_core.close_runners(runners)
    return {
        "files": spec.num_files,
        "total_bytes": tree.total_bytes,
        "reads_per_point": reads,
        "rounds": args.rounds,
        "machine": {**bench_core.machine_info(), "load_average": bench_core.load_average()},
        "files_per_s": {
            s: {str(k): statistics.median(v) for k, v in by.items()} for s, by in rates.items()
        },
    }


LABELS = {
    "ours": "barecat (get_many)",
    "ref": "barecat 0.3.1 (loop of bc[path])",
    "floor": "floor (dict + pread)",
    "lmdb": "LMDB (getmulti)",
    "arrayrecord": "ArrayRecord (read(indices))",
    "lance": "Lance (take(indices))",
}


def plot(result: dict[str, Any], out: str) -> None:
    """Files/s against batch size, log-log, one line per store, saved to ``out``."""
    lines = {
        LABELS.get(store, store): {int(k): v for k, v in by.items()}
        for store, by in result["files_per_s"].items()
    }
    bench_plot.line_plot(
        lines, out, xlabel="batch size (files per call)", ylabel="files/s (warm, one thread)",
        title=f"Batched random reads, {result['files']:,} files of 1-64 KiB",
        xscale={"value": "log", "base": 2},
        ticks=sorted({x for points in lines.values() for x in points}),
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=5000, help="files in the tree")
    p.add_argument("--reads", type=int, default=2048, help="files read per point and pass")
    p.add_argument("--rounds", type=int, default=3, help="rounds over all stores (medians)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", default=os.path.join(bench_core.REPO, "docs", "images", "batch-size.png")
    )
    args = p.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="barecat-batch-plot-")
    try:
        result = measure(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    plot(result, args.out)
    bench_plot.save(result, args.out)
    json.dump(result["files_per_s"], sys.stdout, indent=1)
    print(f"\nplot: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
