"""Reading an archive from elsewhere: over HTTP (``barecat serve``) and into PyTorch.

On one archive of ``--files`` files (4-32 KiB, default 20,000), in random order:

1. local ``bc[path]`` (the yardstick);
2. ``HttpBarecat[path]`` against ``barecat serve`` on 127.0.0.1: files/s, requests
   and bytes on the wire per file (headers included, counted by the client);
3. ``HttpBarecat.get_many`` in batches of ``--batch`` (one request each);
4. a PyTorch DataLoader over ``BarecatDataset`` with 0 and 2 workers (files/s);
5. the archive on an S3-protocol server (moto, 127.0.0.1; the first ``--s3-files``
   files): ``bc[path]`` with no block cache, ``get_many`` with and without coalescing,
   a cold and a warm epoch through the block cache, and the same files as one S3 object
   each read by s3fs (the usual way to keep a dataset on S3): files/s, requests and
   bytes received per file.

Medians of ``--repeats``; figures only, no assertions.

    python benchmarks/bench_remote.py [--files N] [--batch B] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
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
    parser.add_argument("--s3-files", type=int, default=2000)
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
        bench_s3(archive, paths[: args.s3_files], args.batch, Path(work))
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


def bench_s3(archive: str, paths: list[str], batch: int, work: Path) -> None:
    """Section 5 (see the module doc): one pass each, on a fresh cache where it matters."""
    try:
        import s3fs
    except ModuleNotFoundError:
        print("s3fs/moto are not installed: no S3 figures")
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        options = {"key": "k", "secret": "s", "endpoint_url": f"http://127.0.0.1:{port}",
                   "client_kwargs": {"region_name": "eu-west-1"}}  # fmt: skip
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("bench")
        # 16 MB shards: moto copies a whole object for each ranged GET (65 ms at 64 MB,
        # 12 ms at 16 MB, 10 ms at 1 MB), which S3 does not.
        s3_archive = str(work / "s3" / "data.barecat")
        with barecat.Barecat(archive) as bc:
            contents = {p: bc[p] for p in paths}
        with barecat.Barecat(s3_archive, readonly=False, shard_size_limit="16M") as out:
            out.add_many(sorted(contents.items()))
        for entry in os.listdir(work / "s3"):
            if not entry.endswith("-lookup"):
                fs.put_file(str(work / "s3" / entry), f"bench/{entry}")
        fs.pipe({f"bench/objects/{p}": data for p, data in contents.items()})
        n = len(paths)
        batches = [paths[i : i + batch] for i in range(0, n, batch)]
        stored = sorted(paths)  # the order they were added in
        neighbours = [stored[i : i + batch] for i in range(0, n, batch)]
        random.Random(1).shuffle(neighbours)
        rows: list[tuple[str, float, int, int | None]] = []

        def measure(label: str, cache: str, work_fn: object, **opts: object) -> None:
            with barecat.Barecat("s3://bench/data.barecat", storage_options=options,
                                 cache_dir=str(work / cache), **opts) as bc:  # fmt: skip
                stats = bc.sharder.store.stats
                start = (stats.requests, stats.bytes_fetched)
                seconds = timed(lambda: work_fn(bc))  # type: ignore[operator]
                rows.append((label, seconds, stats.requests - start[0],
                             stats.bytes_fetched - start[1]))  # fmt: skip

        def no_coalescing(bc: barecat.Barecat) -> None:
            bc.sharder.max_gap = 0  # type: ignore[attr-defined]
            for b in batches:
                bc.get_many(b, max_gap=0)

        measure("bc[path], no block cache", "a", lambda bc: [bc[p] for p in paths],
                block_cache=False)  # fmt: skip
        measure(f"get_many of {batch}, not coalesced", "b", no_coalescing, block_cache=False)
        measure(f"get_many of {batch}, coalesced", "c",
                lambda bc: [bc.get_many(b) for b in batches], block_cache=False)  # fmt: skip
        measure(f"get_many of {batch} neighbours", "c2",
                lambda bc: [bc.get_many(b) for b in neighbours], block_cache=False)  # fmt: skip
        measure("bc[path], cold block cache", "d", lambda bc: [bc[p] for p in paths])
        measure("bc[path], warm block cache", "d", lambda bc: [bc[p] for p in paths])
        objects = s3fs.S3FileSystem(**options, skip_instance_cache=True)
        seconds = timed(lambda: [objects.cat_file(f"bench/objects/{p}") for p in paths])
        rows.append(("one object per file, cat_file", seconds, n, None))
        seconds = timed(lambda: [objects.cat([f"bench/objects/{p}" for p in b]) for b in batches])
        rows.append((f"one object per file, cat of {batch}", seconds, n, None))
        total = sum(fs.size(f"bench/objects/{p}") for p in paths)
        print(f"S3 (moto on 127.0.0.1), {n:,} of the files, random order, one pass each:")
        for label, seconds, requests, received in rows:
            received = total if received is None else received
            print(f"  {label:36s} {n / seconds:9,.0f} files/s  {requests / n:6.3f} requests "
                  f"and {received / n:9,.0f} bytes per file")  # fmt: skip
    finally:
        moto.terminate()
        moto.wait()


if __name__ == "__main__":
    raise SystemExit(main())
