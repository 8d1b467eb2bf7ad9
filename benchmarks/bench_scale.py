"""Scale and memory: per-file cost and peak RSS as an archive grows to millions of files.

For each size N (default 200,000 and 1,000,000; ``--full`` adds 5,000,000), a child process
builds an archive of N tiny files (64-1,024 bytes, 1,000 per directory) with
``Barecat.add_many`` and reports ingest files/s and its peak RSS; another child opens it
read-only and measures warm random ``bc[path]`` (CRC-verified) with lookups through the
lookup table the writer saved (memory-mapped at open) and through SQLite, the same reads
as bare ``os.pread`` calls at known addresses (the machine's part of the cost), the time a
reader without a saved table needs to build one, and its peak RSS. Each phase runs in a
fresh process so RSS figures are that phase's own.
Prints a table and writes JSON to bench-results/. No assertions: figures only.

    python benchmarks/bench_scale.py [--sizes 200000,1000000] [--full] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

READS = 20_000


def _path(i: int) -> str:
    return f"d{i // 1000:05d}/f{i:08d}.bin"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(archive: str, n: int) -> dict[str, float]:
    import barecat

    rng = random.Random(n)
    blob = rng.randbytes(2048)

    def items():  # type: ignore[no-untyped-def]
        for i in range(n):
            start = (i * 7919) % 1024
            yield _path(i), blob[start : start + 64 + (i * 31) % 961]

    t = time.perf_counter()
    with barecat.Barecat(archive, readonly=False, overwrite=True) as bc:
        bc.add_many(items())
    seconds = time.perf_counter() - t
    return {"ingest_files_per_s": n / seconds, "ingest_rss_mb": _rss_mb()}


def read(archive: str, n: int) -> dict[str, float]:
    import barecat

    rng = random.Random(1)
    paths = [_path(rng.randrange(n)) for _ in range(READS)]
    result: dict[str, float] = {}

    def timed_reads(fn: Callable[[str], Any]) -> float:
        for p in paths[:2000]:
            fn(p)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for p in paths:
                fn(p)
            best = min(best, time.perf_counter() - t)
        return best / len(paths) * 1e6

    # the lookup table the writer saved beside the index, memory-mapped at open
    t = time.perf_counter()
    with barecat.Barecat(archive) as bc:
        result["open_table_s"] = time.perf_counter() - t
        result["table_loaded"] = float(bc.index.lookup_table_size == n)
        result["read_table_us"] = timed_reads(bc.__getitem__)
    with barecat.Barecat(archive, lookup_table=False) as bc:
        result["read_sqlite_us"] = timed_reads(bc.__getitem__)
        t = time.perf_counter()
        bc.index.build_lookup_table(save=False)  # what a reader without a saved table pays
        result["build_table_s"] = time.perf_counter() - t
        # the machine's part: the same reads as bare preads at known addresses
        where = {p: bc.index.lookup_address(p) for p in paths}
        fds = {s: bc.sharder.descriptor(s) for s, *_ in where.values()}
        result["read_pread_us"] = timed_reads(
            lambda p: os.pread(fds[where[p][0]], where[p][2], where[p][1])
        )
    result["read_rss_mb"] = _rss_mb()
    result["index_bytes_per_file"] = os.path.getsize(archive) / n
    return result


def _child(phase: str, archive: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", phase, archive, str(n)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200000,1000000")
    parser.add_argument("--full", action="store_true", help="add a 5,000,000-file archive")
    parser.add_argument("--workdir")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        phase, archive, n = args.child
        print(json.dumps((build if phase == "build" else read)(archive, int(n))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")] + ([5_000_000] if args.full else [])
    workdir = args.workdir or tempfile.mkdtemp(prefix="barecat-scale-")
    rows = []
    for n in sizes:
        archive = os.path.join(workdir, f"scale-{n}.barecat")
        row = {"files": n, **_child("build", archive, n), **_child("read", archive, n)}
        rows.append(row)
        print(
            f"{n:>10,} files: ingest {row['ingest_files_per_s']:>9,.0f} files/s "
            f"(peak {row['ingest_rss_mb']:.0f} MB) | read: table {row['read_table_us']:.1f} µs "
            f"(open {row['open_table_s'] * 1e3:.1f} ms), sqlite {row['read_sqlite_us']:.1f} µs, "
            f"bare pread {row['read_pread_us']:.1f} µs; table build {row['build_table_s']:.1f} s "
            f"(peak {row['read_rss_mb']:.0f} MB) | index {row['index_bytes_per_file']:.0f} B/file",
            flush=True,
        )
        for f in os.listdir(workdir):
            if f.startswith(f"scale-{n}.barecat"):
                os.remove(os.path.join(workdir, f))
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    os.makedirs("bench-results", exist_ok=True)
    out = os.path.join("bench-results", f"scale-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(out, "w") as f:
        json.dump({"machine": info, "rows": rows}, f, indent=2)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
