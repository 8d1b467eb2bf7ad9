"""Batched reads against a loop of single reads, in CPU time, with ratios from one run.

    ./run bench-batch [--files N] [--batch B] [--repeats R] [--workdir DIR]

Stores N files of 1-64 KiB (random bytes, 20,000 by default) in one archive, then reads
every file once per pass in a shuffled order, warm (an untimed pass first), each way in a
fresh worker process so that no way inherits another's heap:

- ``getitem``: a loop of ``bc[path]``; ``read``: a loop of ``bc.read(path)``;
  ``readinto``: a loop of ``bc.readinto(path, buffer)`` into one reused buffer;
- ``getitem list``: a loop of ``bc[path]`` over B paths at a time, the results kept in a
  list until the B are read, as a batch keeps them (what a loop that makes batches pays);
- ``get_many``: ``bc.get_many`` of B paths at a time (bytes, one object a file);
  ``readinto_many``: ``bc.readinto_many`` of B paths into one reused buffer;
- ``get_many (heap kept)``: ``get_many`` in a process that has freed one large block
  first, as any process that freed a big NumPy array or tensor has: glibc then keeps freed
  memory instead of handing it back to the kernel after each batch (see docs/benchmarks.md);
- ``floor: pread + CRC``: the least a verified copy can cost: each file's address looked
  up in a dict made beforehand, one ``os.preadv`` into a reused buffer and its CRC32C,
  nothing else; ``floor: mapped + CRC``: the same through a memory map of the shard
  (no copy; the CRC32C over a memoryview of the mapped bytes), the lever below the copy;
- ``ref getitem`` / ``ref read``: barecat 0.3.1's loops (``BARECAT_REFERENCE_PYTHON``, or
  ``.venv-ref``), which has no batch read.

CPU time (``time.process_time``: user + system, what other load on the machine changes
least), per file, best of R passes; the result's bytes are dropped as they come, as a
loader hands them on. Prints each way and its ratio to ``getitem``; asserts nothing.

    ./run bench-batch --harnesses [--workdir DIR] [--rounds R]

instead puts ``[bc[p] for p in batch]`` beside ``bc.get_many(batch)`` (random batches of
B over every file, a fresh shuffle each pass) in the two orders where ``get_many`` once
measured slower than the loop (issue 37), for two mixes: N files of 1-64 KiB and 5N
records of 64 B-1 KiB. ``interleaved``: a first pass over every file, then R rounds of
loop, get_many; ``alternating``: no first pass, 3 rounds of loop, get_many. Each harness
and mix runs in a fresh process; CPU µs a file, the least of the rounds, and the ratio
``get_many / loop``, and how many read threads the batches made (0: every batch stayed on
the calling thread). A ``--workdir`` on a tmpfs (``/dev/shm``) measures the filesystem
that cannot tell a cached read (see ``shards/concurrent.py``).

    ./run bench-batch --kernels [--workdir DIR] [--repeats R]

puts the two kernel paths side by side (``barecat.kernels``: compiled, and the pure-Python
reference under ``BARECAT_PUREPYTHON=1``) on the same two mixes, warm, each way in a
fresh process, twice in alternation: a loop of ``bc[path]`` (CRC-verified) against LMDB's
``txn.get`` of the same files (no checksum), and ``get_many`` of B against the floor, a
compiled pread + CRC32C loop over addresses taken from a dict beforehand (the compiled
``read_each`` of each batch's addresses: no lookup, no Python a file).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OURS = (
    "getitem",
    "read",
    "readinto",
    "getitem list",
    "get_many",
    "readinto_many",
    "get_many (heap kept)",
    "floor: pread + CRC",
    "floor: mapped + CRC",
)
REFERENCE = ("getitem", "read")


def make_archive(path: str, files: int, low: int = 1024, high: int = 65536) -> None:
    import barecat

    rng = random.Random(0)
    classes = [f"n{rng.randrange(10**8):08d}" for _ in range(100)]
    with barecat.Barecat(path, readonly=False, overwrite=True) as bc:
        for i in range(files):
            name = classes[rng.randrange(len(classes))]
            bc[f"train/{name}/{name}_{i:07d}.jpg"] = rng.randbytes(rng.randint(low, high))


HARNESSES = ("interleaved", "alternating")
MIXES = (("1-64 KiB files", 1, 1024, 65536), ("64 B-1 KiB records", 5, 64, 1024))
"""(label, files as a multiple of ``--files``, least and most bytes a file)."""


def harness_worker(archive: str, harness: str, batch: int, rounds: int) -> dict[str, float]:
    """CPU µs a file of the loop and of ``get_many``, the least of the rounds, in the
    order ``harness`` says (see the module doc), and the read threads made."""
    import barecat

    with barecat.Barecat(archive) as bc:
        paths = sorted(bc.index.iter_all_filepaths())
        rng = random.Random(1)

        def timed(read: Callable[[list[str]], list[bytes]]) -> float:
            shuffled = paths[:]
            rng.shuffle(shuffled)
            batches = [shuffled[i : i + batch] for i in range(0, len(shuffled), batch)]
            start = time.process_time()
            for b in batches:
                got = read(b)
            del got
            return (time.process_time() - start) / len(paths) * 1e6

        if harness == "interleaved":
            for p in paths:
                bc[p]
        else:
            rounds = 3
        loop, many = float("inf"), float("inf")
        for _ in range(rounds):
            loop = min(loop, timed(lambda b: [bc[p] for p in b]))
            many = min(many, timed(bc.get_many))
        threads = [t for t in threading.enumerate() if t.name.startswith("barecat-read")]
    return {"loop": loop, "get_many": many, "read_threads": len(threads)}


def harnesses(args: argparse.Namespace, workdir: str) -> None:
    """Both harnesses on both mixes (see the module doc): print and save the figures."""
    figures: dict[str, dict[str, dict[str, float]]] = {}
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "src")}
    sys.path.insert(0, os.path.join(REPO, "src"))
    for label, times, low, high in MIXES:
        files = args.files * times
        archive = os.path.join(workdir, f"orders-{files}-{low}-{high}.barecat")
        if not os.path.exists(archive):
            make_archive(archive, files, low, high)
        for harness in HARNESSES:
            command = [sys.executable, os.path.abspath(__file__), "--harness-worker"]
            command += [archive, harness, "--batch", str(args.batch)]
            command += ["--rounds", str(args.rounds)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            figures.setdefault(label, {})[harness] = json.loads(out.stdout)
    print(f"loop of bc[path] against get_many of {args.batch}, CPU µs a file (least of rounds)")
    for label, by_harness in figures.items():
        for harness, got in by_harness.items():
            ratio = got["get_many"] / got["loop"]
            print(
                f"  {label:20s} {harness:12s} loop {got['loop']:6.2f}"
                f"  get_many {got['get_many']:6.2f}  {ratio:5.2f}x"
                f"  read threads {got['read_threads']:.0f}"
            )
    save_result("batch-orders", {"files": args.files, "batch": args.batch, "figures": figures})


KERNEL_WAYS = ("bc[path]", "get_many", "floor: compiled pread + CRC", "lmdb txn.get")
KERNEL_PATHS = (("compiled", "0"), ("python", "1"))
"""(label, BARECAT_PUREPYTHON): the two paths of ``--kernels``."""


def make_lmdb(archive: str, where: str) -> None:
    """An LMDB database at ``where`` holding every file of ``archive`` by path."""
    import lmdb

    import barecat

    with (
        barecat.Barecat(archive) as bc,
        lmdb.open(where, map_size=1 << 34) as env,
        env.begin(write=True) as txn,
    ):
        for path in bc.index.iter_all_filepaths():
            txn.put(path.encode(), bc[path])


def kernels_worker(archive: str, way: str, batch: int, repeats: int) -> float:
    """µs of CPU a file for a ``--kernels`` way, best of ``repeats`` passes."""
    import barecat

    with barecat.Barecat(archive, lookup_table=True) as bc:
        paths = sorted(bc.index.iter_all_filepaths())
        random.Random(1).shuffle(paths)
        batches = [paths[i : i + batch] for i in range(0, len(paths), batch)]
        if way == "bc[path]":

            def one_pass() -> None:
                for p in paths:
                    len(bc[p])
        elif way == "get_many":

            def one_pass() -> None:
                for b in batches:
                    for data in bc.get_many(b):
                        len(data)
        elif way.startswith("floor"):
            from barecat.kernels import _compiled  # type: ignore[attr-defined]

            where = {paths[pos]: address for pos, address in bc.index.locate_many(paths)}
            fds = {i: os.open(bc.sharder.get_shard_path(i), os.O_RDONLY)
                   for i in range(bc.sharder.num_shards)}  # fmt: skip

            def one_pass() -> None:
                for b in batches:
                    for data in _compiled.read_each(fds, [where[p] for p in b]):
                        len(data)
        else:
            import lmdb

            env = lmdb.open(archive + "-lmdb", readonly=True, lock=False)
            txn = env.begin()

            def one_pass() -> None:
                get = txn.get
                for p in paths:
                    len(get(p.encode()))

        return best_pass(one_pass, repeats) / len(paths) * 1e6


def kernels(args: argparse.Namespace, workdir: str) -> None:
    """Both kernel paths on both mixes (see the module doc): print and save the figures."""
    sys.path.insert(0, os.path.join(REPO, "src"))
    figures: dict[str, dict[str, float]] = {}
    for label, times, low, high in MIXES:
        files = args.files * times
        archive = os.path.join(workdir, f"orders-{files}-{low}-{high}.barecat")
        if not os.path.exists(archive):
            make_archive(archive, files, low, high)
        if not os.path.exists(archive + "-lmdb"):
            make_lmdb(archive, archive + "-lmdb")
        got = figures.setdefault(label, {})
        for _ in range(2):  # every way once, then again: the best of each
            for kernel, pure in KERNEL_PATHS:
                for way in KERNEL_WAYS:
                    if kernel == "python" and way in KERNEL_WAYS[2:]:
                        continue  # (the floor and LMDB are the same on both paths)
                    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "src"),
                           "BARECAT_PUREPYTHON": pure}  # fmt: skip
                    command = [sys.executable, os.path.abspath(__file__), "--kernels-worker"]
                    command += [archive, way, "--batch", str(args.batch)]
                    command += ["--repeats", str(args.repeats)]
                    out = subprocess.run(command, env=env, check=True, capture_output=True,
                                         text=True)  # fmt: skip
                    key = way if way in KERNEL_WAYS[2:] else f"{way} ({kernel})"
                    got[key] = min(got.get(key, float("inf")), float(out.stdout))
    print(f"the kernels, compiled and pure Python; batches of {args.batch}; CPU µs a file")
    for label, got in figures.items():
        lmdb_us, floor_us = got["lmdb txn.get"], got["floor: compiled pread + CRC"]
        print(f"  {label}")
        for key, us in got.items():
            against = ""
            if key.startswith("bc[path]"):
                against = f"   {us / lmdb_us:5.2f}x LMDB txn.get"
            elif key.startswith("get_many"):
                against = f"   {us / floor_us:5.2f}x the floor"
            print(f"    {key:30s} {us:7.2f}{against}")
    save_result("kernels", {"files": args.files, "batch": args.batch, "figures": figures})


def worker(archive: str, way: str, batch: int, repeats: int) -> float:
    """µs of CPU a file for ``way``, best of ``repeats`` passes (in this process)."""
    if way.endswith("(heap kept)"):
        block = bytearray(16 << 20)  # freed at once: glibc's trim threshold grows to 32 MiB
        del block
        way = way.removesuffix(" (heap kept)")
    import barecat

    with barecat.Barecat(archive) as bc:
        paths = sorted(bc.index.iter_all_filepaths())
        random.Random(1).shuffle(paths)
        batches = [paths[i : i + batch] for i in range(0, len(paths), batch)]
        buffer = memoryview(bytearray(batch << 16))
        if way.startswith("floor"):
            return floor(bc, paths, way, repeats)

        def one_pass() -> None:
            if way == "getitem":
                for p in paths:
                    len(bc[p])
            elif way == "read":
                for p in paths:
                    len(bc.read(p))
            elif way == "readinto":
                for p in paths:
                    bc.readinto(p, buffer)
            elif way == "getitem list":
                for b in batches:
                    for data in [bc[p] for p in b]:
                        len(data)
            elif way == "get_many":
                for b in batches:
                    for data in bc.get_many(b):
                        len(data)
            elif way == "readinto_many":
                for b in batches:
                    bc.readinto_many(b, buffer)

        return best_pass(one_pass, repeats) / len(paths) * 1e6


def best_pass(one_pass: Callable[[], None], repeats: int) -> float:
    """CPU seconds of the quickest of ``repeats`` passes, after an untimed one."""
    one_pass()
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        one_pass()
        best = min(best, time.process_time() - start)
    return best


def floor(bc: Any, paths: list[str], way: str, repeats: int) -> float:
    """µs of CPU a file for a floor way (see the module doc), best of ``repeats``."""
    import mmap

    import crc32c

    where = {paths[pos]: address for pos, address in bc.index.locate_many(paths)}
    fds = {
        i: os.open(bc.sharder.get_shard_path(i), os.O_RDONLY) for i in range(bc.sharder.num_shards)
    }
    maps = {i: memoryview(mmap.mmap(fd, 0, prot=mmap.PROT_READ)) for i, fd in fds.items()}
    buffer = memoryview(bytearray(1 << 16))
    checksum, preadv = crc32c.crc32c, os.preadv

    def one_pass() -> None:
        for p in paths:
            shard, offset, size, crc = where[p]
            if way == "floor: pread + CRC":
                view = buffer[:size]
                preadv(fds[shard], [view], offset)
            else:
                view = maps[shard][offset : offset + size]
            if checksum(view) != crc:
                raise AssertionError(p)

    best = best_pass(one_pass, repeats)
    for view in maps.values():
        view.release()
    return best / len(paths) * 1e6


def measure(python: str, archive: str, way: str, args: argparse.Namespace, ours: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if ours:
        env["PYTHONPATH"] = os.path.join(REPO, "src")
    command = [python, os.path.abspath(__file__), "--worker", archive, way]
    command += ["--batch", str(args.batch), "--repeats", str(args.repeats)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return float(out)


def save_result(kind: str, result: dict[str, Any]) -> None:
    """Write ``result``, after the date, the machine and its load, to
    ``bench-results/<kind>-<timestamp>.json``."""
    now = dt.datetime.now()
    result = {
        "date": now.isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "load": os.getloadavg(),
        **result,
    }
    os.makedirs(os.path.join(REPO, "bench-results"), exist_ok=True)
    stamp = now.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(REPO, "bench-results", f"{kind}-{stamp}.json"), "w") as f:
        json.dump(result, f, indent=1)


def reference_python() -> str | None:
    for candidate in (
        os.environ.get("BARECAT_REFERENCE_PYTHON"),
        os.path.join(REPO, ".venv-ref", "bin", "python"),
    ):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workdir", help="keep the archive here (reused when it exists)")
    p.add_argument("--harnesses", action="store_true", help="loop and get_many, two orders")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (--harnesses)")
    p.add_argument("--worker", nargs=2, metavar=("ARCHIVE", "WAY"), help=argparse.SUPPRESS)
    p.add_argument("--harness-worker", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--kernels", action="store_true", help="compiled and pure-Python kernels")
    p.add_argument("--kernels-worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.kernels_worker:
        print(kernels_worker(*args.kernels_worker, args.batch, args.repeats))
        return
    if args.worker:
        print(worker(args.worker[0], args.worker[1], args.batch, args.repeats))
        return
    if args.harness_worker:
        archive, harness = args.harness_worker
        print(json.dumps(harness_worker(archive, harness, args.batch, args.rounds)))
        return
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench-batch-")
    archive = os.path.join(workdir, f"batch-{args.files}.barecat")
    try:
        if args.harnesses:
            harnesses(args, workdir)
            return
        if args.kernels:
            kernels(args, workdir)
            return
        if not os.path.exists(archive):
            sys.path.insert(0, os.path.join(REPO, "src"))
            make_archive(archive, args.files)
        runs: list[tuple[str, str, bool]] = [(way, sys.executable, True) for way in OURS]
        ref = reference_python()
        runs += [(f"ref {way}", ref, False) for way in REFERENCE if ref]
        figures: dict[str, float] = {}
        for _ in range(2):  # every way once, then every way again: the best of each
            for label, python, ours in runs:  # keeps drift from favouring one
                us = measure(python, archive, label.removeprefix("ref "), args, ours)
                figures[label] = min(figures.get(label, us), us)
        loop = figures["getitem"]
        print(f"{args.files} files of 1-64 KiB, batches of {args.batch}; CPU µs a file")
        for label, us in figures.items():
            print(f"  {label:22s} {us:7.2f}   {us / loop:5.2f}x bc[path]")
        result: dict[str, Any] = {
            "files": args.files,
            "batch": args.batch,
            "us_per_file": figures,
        }
        save_result("batch", result)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
