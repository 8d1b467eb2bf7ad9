"""A PyTorch DataLoader's full passes: files/s with 0 and 2 workers, and where the time goes.

    ./run bench-loader [--files N] [--batch B] [--repeats R] [--workers W] [--workdir DIR]

Stores N files of 1-64 KiB (random bytes, 20,000 by default: 662 MB) in one archive,
reads it once so that it is warm, then iterates ``DataLoader(BarecatDataset(archive),
batch_size=B)`` over every file in storage order, each way in a fresh process (no way
inherits another's heap), two interleaved rounds:

- ``items``: the default items, ``(path, bytes)``, batched by the default collate (each
  worker pickles its batch's bytes through a pipe to the main process, which unpickles them);
- ``file_batches``: ``BarecatDataset(..., file_batches=True)`` with
  ``collate_fn=collate_file_batch`` (a batch is one uint8 tensor, read in the worker into
  shared memory; only its file descriptor and the paths are pickled);

each with 0 and W (default 2) persistent workers. Per way: files/s of a pass (best and
median of R after a warm-up pass), its ratio to ``items`` with 0 workers, the main
process's CPU and minor page faults per file, and the workers' CPU per file (from
``/proc``). Then the stages of a batch timed in one process (CPU per file): the reads,
the pickling a worker does, the unpickling the main process does. Prints the load
average before and after (the machine may be shared); asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FORMS = ("items", "file_batches")


def make_archive(path: str, files: int) -> None:
    sys.path.insert(0, HERE)
    from bench_batch import make_archive as make

    make(path, files)


def warm(path: str) -> None:
    for name in sorted(os.listdir(os.path.dirname(path))):
        if name.startswith(os.path.basename(path)):
            with open(os.path.join(os.path.dirname(path), name), "rb") as f:
                while f.read(1 << 24):
                    pass


def workers_cpu(pids: list[int]) -> float:
    """Seconds of CPU (user + system) the processes ``pids`` have used."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def worker(archive: str, form: str, workers: int, batch: int, repeats: int) -> dict[str, Any]:
    """One way's figures (in this process)."""
    import resource

    from torch.utils.data import DataLoader

    from barecat.integrations.torch import BarecatDataset, collate_file_batch

    shared = form == "file_batches"
    dataset = BarecatDataset(archive, file_batches=shared)
    loader = DataLoader(
        dataset,
        batch_size=batch,
        num_workers=workers,
        persistent_workers=workers > 0,
        **({"collate_fn": collate_file_batch} if shared else {}),
    )

    def one_pass() -> int:
        n = 0
        for b in loader:
            n += len(b) if shared else len(b[0])
        return n

    n = one_pass()  # warm-up (and the workers started)
    pids = [w.pid for w in getattr(loader._iterator, "_workers", [])]
    rates, cpu, faults, wcpu = [], 0.0, 0, workers_cpu(pids)
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        one_pass()
        rates.append(n / (time.perf_counter() - start))
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu += after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        faults += after.ru_minflt - before.ru_minflt
    files = n * repeats
    return {
        "best": max(rates),
        "median": statistics.median(rates),
        "main_us": 1e6 * cpu / files,
        "workers_us": 1e6 * (workers_cpu(pids) - wcpu) / files if pids else 0.0,
        "main_faults": faults / files,
    }


def stages(archive: str, batch: int) -> dict[str, float]:
    """CPU µs per file of a batch's stages, timed in this process over every file."""
    from multiprocessing.reduction import ForkingPickler

    import torch.utils.data._utils.collate as collate

    import barecat
    from barecat.entries import Order
    from barecat.integrations.torch_batches import BufferPool

    with barecat.Barecat(archive) as bc:
        paths = [f.path for f in bc.iter_fileinfos(Order.ADDRESS)]
        batches = [paths[i : i + batch] for i in range(0, len(paths), batch)]
        out: dict[str, float] = {}

        def timed(label: str, step: Any) -> None:
            def one_pass() -> float:
                start = time.process_time()
                for b in batches:
                    step(b)
                return time.process_time() - start

            out[label] = 1e6 * min(one_pass() for _ in range(3)) / len(paths)

        pickled = {}

        def read_and_pickle(b: list[str]) -> None:
            items = list(zip(b, bc.get_many(b), strict=True))
            pickled[b[0]] = bytes(ForkingPickler.dumps(collate.default_collate(items)))

        timed("items: get_many of the batch", bc.get_many)
        timed("items: get_many + collate + pickle (a worker)", read_and_pickle)
        timed("items: unpickle (the main process)", lambda b: pickle.loads(pickled[b[0]]))
        out["items: receive from a pipe + unpickle (the main process)"] = received(
            list(pickled.values()), len(paths)
        )
        pickled.clear()
        pool = BufferPool()

        def into_pool(b: list[str]) -> None:
            array = pool.read(bc, b)[0].numpy()
            array[0] = 0  # (released at once: the next batch reuses the buffer)

        timed("file_batches: readinto_many into a pooled buffer", into_pool)
    return out


def received(blobs: list[bytes], files: int) -> float:
    """CPU µs per file the receiving end of a pipe spends on ``blobs`` (sent by a forked
    process, as a DataLoader worker sends its batches) and on unpickling them."""
    import multiprocessing

    reader, writer = multiprocessing.get_context("fork").Pipe(duplex=False)

    def send() -> None:
        for blob in blobs:
            writer.send_bytes(blob)

    sender = multiprocessing.get_context("fork").Process(target=send)
    start = time.process_time()
    sender.start()
    for _ in blobs:
        pickle.loads(reader.recv_bytes())
    spent = time.process_time() - start
    sender.join()
    return 1e6 * spent / files


def child(argv: list[str]) -> int:
    kind, archive, *rest = argv
    if kind == "way":
        form, workers, batch, repeats = rest
        print(json.dumps(worker(archive, form, int(workers), int(batch), int(repeats))))
    else:
        print(json.dumps(stages(archive, int(rest[0]))))
    return 0


def run_child(*args: Any) -> Any:
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    out = subprocess.run(
        [sys.executable, __file__, "--child", *map(str, args)],
        env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workdir", help="keep the archive here (made if missing)")
    args = parser.parse_args()
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    place = tempfile.TemporaryDirectory(prefix="bench-loader-", dir=args.workdir)
    keep = os.path.join(args.workdir or "", f"loader-{args.files}.barecat")
    with place as work:
        archive = keep if args.workdir else os.path.join(work, "loader.barecat")
        if not os.path.exists(archive):
            make_archive(archive, args.files)
        warm(archive)
        load_before = os.getloadavg()
        print(f"{dt.date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; {args.files:,} files of 1-64 KiB, batch "
              f"{args.batch}; load average {load_before[0]:.2f} {load_before[1]:.2f}")  # fmt: skip
        ways = [(form, w) for form in FORMS for w in (0, args.workers)]
        found: dict[tuple[str, int], list[dict[str, Any]]] = {way: [] for way in ways}
        for _ in range(args.rounds):
            for form, w in ways:
                found[form, w].append(run_child("way", archive, form, w, args.batch, args.repeats))
        best = {way: max(runs, key=lambda r: r["best"]) for way, runs in found.items()}
        base = best["items", 0]["best"]
        print("\n| form | workers | files/s (best) | median | ratio to items, 0 workers "
              "| main CPU µs/file | workers' CPU µs/file | main minor faults/file |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for (form, w), r in best.items():
            print(f"| {form} | {w} | {r['best']:,.0f} | {r['median']:,.0f} | "
                  f"{r['best'] / base:.2f}x | {r['main_us']:.1f} | {r['workers_us']:.1f} | "
                  f"{r['main_faults']:.2f} |")  # fmt: skip
        print("\n| stage of a batch (one process) | CPU µs/file |\n|---|---|")
        for label, us in run_child("stages", archive, args.batch).items():
            print(f"| {label} | {us:.1f} |")
        load_after = os.getloadavg()
        print(f"\nload average after: {load_after[0]:.2f} {load_after[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
