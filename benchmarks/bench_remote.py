"""Reading an archive from elsewhere: over HTTP (``barecat serve``) and into PyTorch.

On one archive of ``--files`` files (4-32 KiB, default 20,000), in random order:

1. local ``bc[path]`` (the yardstick);
2. ``RemoteBarecat[path]`` against ``barecat serve`` on 127.0.0.1: files/s, requests
   and bytes on the wire per file (headers included, counted by the client);
3. ``RemoteBarecat.get_many`` in batches of ``--batch`` (one request each);
4. a PyTorch DataLoader over ``BarecatDataset`` with 0 and 2 workers (files/s).

Medians of ``--repeats``; figures only, no assertions.

    python benchmarks/bench_remote.py [--files N] [--batch B] [--repeats R]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import barecat  # noqa: E402


def timed(work: object) -> float:
    start = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(prefix="bench-remote-", dir=REPO) as work:
        archive = str(Path(work) / "data.barecat")
        with barecat.Barecat(archive, readonly=False) as bc:
            bc.add_many(
                (f"d{i % 100:02d}/{i:06d}.bin", rng.randbytes(rng.randint(4096, 32768)))
                for i in range(args.files)
            )
        paths = [f"d{i % 100:02d}/{i:06d}.bin" for i in range(args.files)]
        rng.shuffle(paths)
        n = len(paths)
        with barecat.Barecat(archive) as bc:
            local = statistics.median(
                timed(lambda: [bc[p] for p in paths]) for _ in range(args.repeats)
            )
        server = subprocess.Popen(
            [sys.executable, "-m", "barecat.cli", "serve", archive],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        url = server.stdout.readline().split()[1]
        try:
            import httpx

            sent = {"requests": 0, "bytes": 0}

            def count(response: httpx.Response) -> None:
                response.read()
                sent["requests"] += 1
                head = sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
                sent["bytes"] += len(response.content) + head

            with barecat.connect(url) as remote:
                remote._http.event_hooks["response"] = [count]
                single = statistics.median(
                    timed(lambda: [remote[p] for p in paths]) for _ in range(args.repeats)
                )
                per_file = (
                    sent["requests"] / (n * args.repeats),
                    sent["bytes"] / (n * args.repeats),
                )
                batches = [paths[i : i + args.batch] for i in range(0, n, args.batch)]
                sent.update(requests=0, bytes=0)
                batched = statistics.median(
                    timed(lambda: [remote.get_many(b) for b in batches])
                    for _ in range(args.repeats)
                )
                per_batch_file = (
                    sent["requests"] / (n * args.repeats),
                    sent["bytes"] / (n * args.repeats),
                )
        finally:
            server.terminate()
            server.wait()
            server.stdout.close()
        print(f"{n:,} files of 4-32 KiB, random order, medians of {args.repeats}")
        print(f"local bc[path]:                {n / local:9,.0f} files/s")
        print(f"HTTP, one request per file:    {n / single:9,.0f} files/s "
              f"({per_file[0]:.2f} requests, {per_file[1]:,.0f} bytes per file)")  # fmt: skip
        print(
            f"HTTP, get_many of {args.batch}:        {n / batched:9,.0f} files/s "
            f"({per_batch_file[0]:.3f} requests, {per_batch_file[1]:,.0f} bytes per file)"
        )
        try:
            from torch.utils.data import DataLoader

            from barecat.integrations.torch import BarecatDataset
        except ModuleNotFoundError:
            print("torch is not installed: no DataLoader figures")
            return 0
        dataset = BarecatDataset(archive)
        for workers in (0, 2):
            loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers,
                                collate_fn=lambda b: b, persistent_workers=workers > 0)  # fmt: skip
            next(iter(loader))  # workers started
            seconds = statistics.median(
                timed(lambda loader=loader: sum(len(b) for b in loader))
                for _ in range(args.repeats)
            )
            print(f"DataLoader, {workers} workers:         {n / seconds:9,.0f} files/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
