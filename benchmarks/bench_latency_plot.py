"""Files/s of random reads against storage latency, for barecat, 0.3.1 and the peers: a plot.

    python benchmarks/bench_latency_plot.py [--delays 0,0.2,0.5,1,2] [--files N]
        [--reads N] [--loop-seconds S] [--rounds N] [--quick] [--out docs/images/latency.png]

Builds a small ``train/<class>/<id>.jpg`` tree (``bench_dataset``, 2,000 files of 1-64 KiB
by default) and stores it five ways (``bench_stores``): this barecat, barecat 0.3.1 (in its
own interpreter, ``BARECAT_REFERENCE_PYTHON``), LMDB, ArrayRecord and Lance; the tree itself
is the sixth, plain files. All of them sit in one folder served by ``bench_latency``'s
delaying FUSE passthrough, remounted at each ``--delays`` value (ms slept in every read),
and each store is opened from a local folder in which only its data files are links into
the mount, its index copied beside them:

- barecat (both): the shards through FUSE; the SQLite index and lookup table local;
- LMDB: its one file, ``data.mdb`` (B-tree pages and values alike), through FUSE; LMDB
  memory-maps it, which FUSE refuses for ``direct_io`` files, so that one file is served
  through the page cache (readahead included), evicted before every pass;
- ArrayRecord: its one file through FUSE; the saved ``{path: index}`` dict local;
- Lance: the dataset's data files through FUSE; its manifest and the ``{path: row}`` dict
  local;
- plain files: the whole tree through FUSE (only reads sleep: lookups and opens do not).

Ways, one timed pass each (a fresh reader, opened untimed): a loop of each store's read of
one file (``bc[path]``, ``get``, ``read([i])``, ``take([i])``, open + read) and, where the
store has a batch call, batches of 256 (``get_many``, ``getmulti``, ``read(indices)``,
``take(indices)``; barecat 0.3.1 has none). Batches read ``--reads`` random files (2,048);
a loop reads as many as fit in about ``--loop-seconds`` at that delay (at most ``--reads``,
at least 64). Rounds interleave the ways (medians). Draws files/s against the delay and
writes the figures as JSON beside the image. Asserts nothing about speed; exits 0 with the
reason where FUSE cannot run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_core
import bench_dataset
import bench_latency
import bench_peers
import bench_plot
from barecat.exceptions import BarecatError
from barecat.mount import check_fuse

BATCH = 256
STORES = ("ours", "ref", "lmdb", "arrayrecord", "lance", "plain")
WAYS: tuple[tuple[str, int, str], ...] = (  # store, batch (0: a loop), label
    ("ours", 0, "barecat: loop of bc[path]"),
    ("ours", BATCH, f"barecat: get_many of {BATCH}"),
    ("ref", 0, "barecat 0.3.1: loop of bc[path]"),
    ("lmdb", 0, "LMDB: loop of get"),
    ("lmdb", BATCH, f"LMDB: getmulti of {BATCH}"),
    ("arrayrecord", 0, "ArrayRecord: loop of read([i])"),
    ("arrayrecord", BATCH, f"ArrayRecord: read(indices) of {BATCH}"),
    ("lance", 0, "Lance: loop of take([i])"),
    ("lance", BATCH, f"Lance: take(indices) of {BATCH}"),
    ("plain", 0, "plain files: open + read"),
)
CACHED = ("data.mdb",)  # memory-mapped: served through the page cache (see the docstring)
DATA_FILES: dict[str, Callable[[Path], bool]] = {  # which files of a store go through FUSE
    "ours": lambda rel: "-shard-" in rel.name,
    "ref": lambda rel: "-shard-" in rel.name,
    "lmdb": lambda rel: rel.name == "data.mdb",
    "arrayrecord": lambda rel: rel.name == bench_peers.AR_NAME,
    "lance": lambda rel: rel.parts[:2] == (bench_peers.LANCE_NAME, "data"),
}
COLOURS = {"ours": "C0", "ref": "C1", "lmdb": "C2", "arrayrecord": "C3", "lance": "C4",
           "plain": "C5"}  # fmt: skip


def kind(store: str) -> str:
    """``bench_stores``' kind of ``store``."""
    return "barecat" if store in bench_core.BARECATS else store


def loop_reads(args: argparse.Namespace, delay_ms: float) -> int:
    """How many files a loop reads at ``delay_ms``: about ``--loop-seconds`` of reads."""
    per_read = delay_ms / 1000 + 0.0004  # the sleep and about what FUSE adds to it
    return max(min(64, args.reads), min(args.reads, int(args.loop_seconds / per_read)))


def measure(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    """{label: {delay: files/s}} and what was run."""
    base = Path(workdir)
    data, mnt, local = base / "data", base / "mnt", base / "local"
    mnt.mkdir()
    spec = bench_dataset.TreeSpec(args.files, 20, args.seed)
    tree = bench_dataset.ensure_tree(str(data / "plain"), spec)
    runners = bench_core.store_runners(STORES, workdir)
    rates: dict[str, dict[float, list[float]]] = {}
    rng = random.Random(args.seed + 1)
    try:
        locations = {"plain": str(mnt / "plain")}
        for store, runner in runners.items():
            if store == "plain":
                continue
            runner.call(
                "ingest", kind=kind(store), location=str(data / store),
                tree=tree.root, relpaths=tree.relpaths, source="tree",
                payload_bytes=tree.total_bytes, repeats=1,
            )  # fmt: skip
            bench_latency.link_data(data / store, mnt / store, local / store, DATA_FILES[store])
            locations[store] = str(local / store)
        ways = [w for w in WAYS if w[0] in runners]
        for delay in args.delays:
            with bench_latency.delayed_mount(data, mnt, delay, args.fuse_threads, CACHED):
                for r in range(args.rounds):
                    bench_core.log(f"{delay:g} ms a read, round {r + 1}/{args.rounds}")
                    shift = r % len(ways)
                    for store, batch, label in ways[shift:] + ways[:shift]:
                        n = args.reads if batch else loop_reads(args, delay)
                        paths = rng.sample(tree.relpaths, min(n, len(tree.relpaths)))
                        for name in CACHED:
                            if (mnt / store / name).exists():
                                bench_latency.evict(mnt / store / name)
                        out = runners[store].call(
                            "read_pass", kind=kind(store), location=locations[store],
                            paths=paths, batch=batch,
                        )  # fmt: skip
                        rate = out["items"] / out["seconds"]
                        rates.setdefault(label, {}).setdefault(delay, []).append(rate)
    finally:
        bench_core.close_runners(runners)
    return {
        "files": spec.num_files,
        "total_bytes": tree.total_bytes,
        "batch_reads": args.reads,
        "loop_reads": {f"{d:g}": loop_reads(args, d) for d in args.delays},
        "rounds": args.rounds,
        "fuse_threads": args.fuse_threads,
        "machine": {**bench_core.machine_info(), "load_average": bench_core.load_average()},
        "date": datetime.date.today().isoformat(),
        "files_per_s": {
            label: {f"{d:g}": statistics.median(v) for d, v in by.items()}
            for label, by in rates.items()
        },
    }


def plot(result: dict[str, Any], out: str) -> None:
    """Files/s against the delay (symmetric log x: 0 is on it), one line per way."""
    lines = {
        label: {float(d): v for d, v in by.items()} for label, by in result["files_per_s"].items()
    }
    store_of = {label: store for store, _, label in WAYS}
    batched = {label for _, batch, label in WAYS if batch}
    styles = {
        label: {"color": COLOURS[store_of[label]], "linestyle": "-" if label in batched else "--"}
        for label in lines
        if label in store_of
    }
    bench_plot.line_plot(
        lines, out, xlabel="delay in every read through FUSE (ms)",
        ylabel="files/s (random reads, one calling thread)",
        title=f"Random reads through a FUSE filesystem sleeping in every read\n"
        f"{result['files']:,} files of 1-64 KiB; solid: batches of {BATCH}, dashed: one at a time",
        xscale={"value": "symlog", "linthresh": 0.2},
        ticks=sorted({x for points in lines.values() for x in points}), styles=styles,
        size=(8, 6),
    )  # fmt: skip


def waits(by_delay: dict[str, float]) -> float | None:
    """How many of the delays a file waits through one after the other: the slope of
    seconds a file against the delay (least squares over the delays measured). About 1
    for a loop making one read a file, 2 for two, near 0 where a batch's reads overlap.
    None with fewer than two delays."""
    if len(by_delay) < 2:
        return None
    delays = [float(d) / 1000 for d in by_delay]
    per_file = [1 / rate for rate in by_delay.values()]
    return statistics.linear_regression(delays, per_file).slope


def table(result: dict[str, Any]) -> str:
    """The figures as a Markdown table: a column per delay, and :func:`waits`."""
    by_way = result["files_per_s"]
    delays = sorted({d for by in by_way.values() for d in by}, key=float)
    rows = [
        "| way | " + " | ".join(f"{d} ms" for d in delays) + " | waits a file |",
        "|---|" + "---|" * (len(delays) + 1),
    ]
    for label, by in by_way.items():
        slope = waits(by)
        figures = " | ".join(f"{by[d]:,.0f}" for d in delays)
        rows.append(f"| {label} | {figures} | {'-' if slope is None else f'{slope:.2f}'} |")
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--delays", default="0,0.2,0.5,1,2", help="ms slept in every read, a list")
    p.add_argument("--files", type=int, default=2000, help="files in the tree")
    p.add_argument("--reads", type=int, default=2048, help="files a batched way reads a pass")
    p.add_argument("--loop-seconds", type=float, default=1.0, help="a loop's time per pass")
    p.add_argument("--rounds", type=int, default=3, help="rounds over all ways (medians)")
    p.add_argument("--fuse-threads", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a smoke run: 200 files, 2 delays, no plot")
    p.add_argument("--out", help="the image (default docs/images/latency.png; --quick: none)")
    args = p.parse_args(argv)
    if args.quick:
        args.files, args.reads, args.loop_seconds, args.rounds = 200, 256, 0.1, 1
        args.delays = "0,1"
    args.delays = [float(d) for d in args.delays.split(",")]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_fuse()
    except BarecatError as e:
        print(f"skipped: FUSE cannot run here ({e})")
        return 0
    workdir = tempfile.mkdtemp(prefix="barecat-latency-plot-")
    try:
        result = measure(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(result))
    out = args.out or (
        None if args.quick else os.path.join(bench_core.REPO, "docs", "images", "latency.png")
    )
    if out is not None:
        plot(result, out)
        print(f"plot: {out}, figures: {bench_plot.save(result, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
