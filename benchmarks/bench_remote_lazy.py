"""Reading a published archive of millions of files from object storage at once.

For each N of ``--files`` (default 1,000,000 and 10,000,000) an archive of N tiny files
(16-200 bytes; ``train/cDDDDD/img_IIIIIIII.jpg``, 1,000 files a directory) is built with
``Barecat.add_many`` under ``--work`` (kept and reused: a finished build leaves a stamp),
published in place with ``barecat publish`` (on every run: of a published archive it only
checks it, 14 s at 1M files) and put on moto's S3 server (started by
``benchmarks/moto_ranged.py``, which reads only the asked bytes of a ranged GET, as S3
does). Every request of a reader goes through ``benchmarks/slow_proxy.py``, which holds
each HTTP request ``--delay`` seconds (default 0.020) and records it. Then, for
``remote_mode="download"`` (the whole index fetched first, as ratarmount and docs.rs do)
and ``"lazy"`` (only the pages and sidecar parts a read needs), each with a new cache
directory:

1. open + the first random file: HTTP requests, bytes received (headers included), and
   seconds to its first byte; also the store's own count (``bc.sharder.store.stats``);
2. ``--further`` (100) more random files, one at a time: requests per file (mean, max),
   seconds per file;
3. ``get_many`` of ``--batch`` (256) random files: requests, round trips (waves of
   requests sent together: see ``slow_proxy.waves``), seconds;
4. ``listdir`` of one directory and a ``glob`` selecting one other directory, on the same
   open archive, in directories the reads above did not touch: requests, bytes.

The reader's storage options are s3fs's defaults unless ``--max-connections`` says
otherwise: botocore keeps at most 10 connections, so at most 10 requests are in flight
at once and a batch of 256 ranged reads takes at least 26 round trips. Every open uses
the S3 client fsspec keeps for these options (made by a warm-up that opens a small
archive once in each mode), as a process's second open would; what a new client costs
before its first request (botocore's setup) is measured apart (``--cold-client``: a new
one for every open).

The peers' other way: every file as an S3 object, listed with ListObjectsV2 (1,000 keys a
page, one page after another): ``--list-keys`` (100,000) empty objects are listed through
the proxy and the time per page is extrapolated to N keys (stated as such).

Figures only, no assertions (a read returning other bytes than stored is reported).
Until ``barecat publish`` and ``remote_mode=`` exist, the lazy rows say so and are left
out.

    python benchmarks/bench_remote_lazy.py [--files 1000000,10000000] [--work DIR]
        [--delay 0.020] [--json PATH] [--modes download,lazy] [--max-connections 256]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

import barecat  # noqa: E402
from helpers.s3 import S3Server, upload  # noqa: E402
from slow_proxy import Request, SlowProxy, waves  # noqa: E402

PER_DIR = 1000
WARM_UP_FILES = 1000
_BLOB = random.Random(0).randbytes(2048)


def path_of(i: int) -> str:
    return f"train/c{i // PER_DIR:05d}/img_{i:08d}.jpg"


def data_of(i: int) -> bytes:
    start = (i * 31) % 1024
    return _BLOB[start : start + 16 + (i * 7919) % 185]


def build(archive: str, n: int) -> float:
    """Make the archive of ``n`` files; returns the seconds it took."""
    start = time.perf_counter()
    with barecat.Barecat(archive, readonly=False, overwrite=True) as bc:
        bc.add_many((path_of(i), data_of(i)) for i in range(n))
    return time.perf_counter() - start


def publish(archive: str) -> tuple[float | None, str]:
    """``barecat publish ARCHIVE``: (seconds, what it printed) or (None, why it was not
    published)."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(Path(barecat.__file__).parent.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "barecat.cli", "publish", archive],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no message"]
        return None, f"barecat publish failed (exit {done.returncode}): {lines[-1]}"
    return time.perf_counter() - start, done.stdout.strip()


def prepared(work: Path, n: int) -> dict[str, Any]:
    """The archive of ``n`` files under ``work``, built unless a stamp says an earlier run
    did, and published (``barecat publish`` of a published archive checks it and leaves
    it, or rebuilds a stale sidecar); returns what its stamp holds."""
    folder = work / f"n{n}"
    stamp = folder / "stamp.json"
    info: dict[str, Any] = json.loads(stamp.read_text()) if stamp.exists() else {}
    archive = str(folder / "data.barecat")
    info["reused"] = "build_s" in info
    info["archive"] = archive  # (the work directory may have moved since)
    if "build_s" not in info:
        folder.mkdir(parents=True, exist_ok=True)
        print(f"building {n:,} files in {archive}", flush=True)
        info = {"archive": archive, "build_s": build(archive, n), "reused": False}
        stamp.write_text(json.dumps(info))
    print(f"publishing {archive} (or checking it is)", flush=True)
    seconds, said = publish(archive)
    info.pop("unpublished", None)
    if seconds is None:
        info.update(publish_s=None, unpublished=said)
    elif info.get("publish_s") and "already published" in said:
        info["publish_check_s"] = seconds
    else:
        info.update(publish_s=seconds, publish_said=said)
    stamp.write_text(json.dumps(info))
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.name.startswith("data.")}
    info["index_bytes"] = sizes.get("data.barecat", 0)
    info["sidecar_bytes"] = sizes.get("data.barecat-sidecar")
    info["shard_bytes"] = sum(v for k, v in sizes.items() if "-shard-" in k)
    return info


class Tally:
    """The requests through the proxy, and the store's count, over one step."""

    def __init__(self, proxy: SlowProxy, bc: barecat.Barecat | None = None) -> None:
        self.proxy = proxy
        self.bc = bc
        self.mark = proxy.mark()
        self.store = _store_counts(bc)
        self.start = time.perf_counter()

    def done(self, bc: barecat.Barecat | None = None) -> dict[str, Any]:
        seconds = time.perf_counter() - self.start
        requests: list[Request] = self.proxy.requests_since(self.mark)
        after = _store_counts(bc or self.bc)
        return {
            "seconds": seconds,
            "requests": len(requests),
            "bytes": sum(r.received for r in requests),
            "waves": waves(requests),
            "store_requests": after[0] - self.store[0],
            "store_bytes": after[1] - self.store[1],
            "lines": [r.line.split(" ")[0] + " " + _object_of(r.line) for r in requests],
        }


def _store_counts(bc: barecat.Barecat | None) -> tuple[int, int]:
    store = getattr(getattr(bc, "sharder", None), "store", None)
    stats = getattr(store, "stats", None)
    if stats is None:
        return (0, 0)
    return (stats.requests, stats.bytes_fetched)


def _object_of(line: str) -> str:
    target = line.split(" ")[1] if " " in line else line
    return target.split("?")[0].rsplit("/", 1)[-1] or target


def open_archive(url: str, mode: str, options: dict[str, Any], cache: str) -> barecat.Barecat:
    """``Barecat(url, remote_mode=mode)``; for "download", today's reader where there is
    no ``remote_mode`` yet (it downloads). TypeError: no such keyword (lazy)."""
    kwargs: dict[str, Any] = {"storage_options": options, "cache_dir": cache}
    try:
        return barecat.Barecat(url, remote_mode=mode, **kwargs)  # type: ignore[call-arg]
    except TypeError as e:
        if "remote_mode" not in str(e) or mode != "download":
            raise
    return barecat.Barecat(url, **kwargs)


def measure_mode(
    url: str, mode: str, n: int, options: dict[str, Any], proxy: SlowProxy, args: Any
) -> dict[str, Any]:
    """Steps 1-4 of the module doc for one reader mode."""
    rng = random.Random(n)
    cache = tempfile.mkdtemp(prefix=f"cache-{mode}-", dir=args.work)
    first = rng.randrange(n)
    tally = Tally(proxy)
    bc = open_archive(url, mode, options, cache)
    opened = time.perf_counter() - tally.start
    wrong = 0 if bc[path_of(first)] == data_of(first) else 1
    result: dict[str, Any] = {"open_s": opened, "first": tally.done(bc)}
    try:
        picks = rng.sample(range(n), args.further)
        per_file = []
        for i in picks:
            tally = Tally(proxy, bc)
            wrong += bc[path_of(i)] != data_of(i)
            per_file.append(tally.done())
        result["further"] = _per_file(per_file)
        batch = rng.sample(range(n), args.batch)
        tally = Tally(proxy, bc)
        got = bc.get_many([path_of(i) for i in batch])
        result["get_many"] = tally.done()
        wrong += sum(g != data_of(i) for g, i in zip(got, batch, strict=True))
        touched = {i // PER_DIR for i in [first, *picks, *batch]}
        dirs = list(range(-(-n // PER_DIR)))
        rng.shuffle(dirs)
        fresh = sorted(dirs, key=lambda d: d in touched) * 2  # untouched first, where any
        tally = Tally(proxy, bc)
        listed = bc.listdir(f"train/c{fresh[0]:05d}")
        result["listdir"] = {**tally.done(), "entries": len(listed)}
        tally = Tally(proxy, bc)
        globbed = bc.glob(f"train/c{fresh[1]:05d}/*")
        result["glob"] = {**tally.done(), "entries": len(globbed)}
    finally:
        bc.close()
        shutil.rmtree(cache, ignore_errors=True)
    result["wrong_bytes"] = wrong
    return result


def _per_file(tallies: list[dict[str, Any]]) -> dict[str, Any]:
    requests = [t["requests"] for t in tallies]
    seconds = [t["seconds"] for t in tallies]
    return {
        "files": len(tallies),
        "requests_mean": statistics.mean(requests),
        "requests_max": max(requests),
        "store_requests_mean": statistics.mean(t["store_requests"] for t in tallies),
        "bytes_mean": statistics.mean(t["bytes"] for t in tallies),
        "seconds_mean": statistics.mean(seconds),
        "seconds_median": statistics.median(seconds),
        "seconds_max": max(seconds),
    }


def measure_listing(
    server: S3Server, proxy: SlowProxy, options: dict[str, Any], args: Any
) -> dict[str, Any]:
    """ListObjectsV2 of ``--list-keys`` empty objects through the proxy, page after page."""
    import s3fs

    keys = args.list_keys
    direct = direct_client(server)
    direct.mkdir("listing")
    names = [f"listing/train/c{i // PER_DIR:05d}/img_{i:08d}.jpg" for i in range(keys)]
    start = time.perf_counter()
    for at in range(0, keys, 10_000):
        direct.pipe({name: b"" for name in names[at : at + 10_000]})
    put_s = time.perf_counter() - start
    slow = s3fs.S3FileSystem(**{**options, "skip_instance_cache": True})
    tally = Tally(proxy)
    found = slow.find("listing/")
    done = tally.done()
    pages = max(1, done["requests"])
    return {
        "keys": keys,
        "found": len(found),
        "put_s": put_s,
        "seconds": done["seconds"],
        "requests": done["requests"],
        "seconds_per_page": done["seconds"] / pages,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="1000000,10000000", help="sizes N, comma-separated")
    parser.add_argument(
        "--work",
        default=os.path.join(tempfile.gettempdir(), "bench-remote-lazy"),
        help="where built archives are kept and reused (default: %(default)s)",
    )
    parser.add_argument("--delay", type=float, default=0.020, help="seconds added per request")
    parser.add_argument(
        "--bandwidth-mbit",
        type=float,
        default=0.0,
        help="the link the answers share, in Mbit/s (0: no limit, loopback's speed)",
    )
    parser.add_argument("--modes", default="download,lazy,hydrate", help="reader modes, in order")
    parser.add_argument("--further", type=int, default=100, help="random files read one by one")
    parser.add_argument("--batch", type=int, default=256, help="files of the get_many")
    parser.add_argument(
        "--list-keys", type=int, default=5000, help="S3 objects listed for the peers' way (0: none)"
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=0,
        help="the reader's S3 connection pool (botocore's max_pool_connections; 0: its "
        "default, 10, which caps the requests in flight at once)",
    )
    parser.add_argument(
        "--cold-client",
        action="store_true",
        help="a new S3 client for every open (default: fsspec's cached one, made by the "
        "warm-up; the cost of a new one is measured apart)",
    )
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sizes = [int(s) for s in args.files.split(",")]
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "delay_s": args.delay,
        "bandwidth_mbit": args.bandwidth_mbit,
        "sizes": [],
    }
    for n in sizes:
        report["sizes"].append(on_new_store(args, report, partial(measure_size, n)))
        print_size(report["sizes"][-1], args.delay, args.bandwidth_mbit)
    if args.list_keys:
        report["listing"] = on_new_store(args, report, measure_listing)
        print_listing(report["listing"], sizes, args.delay)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


T = TypeVar("T")


def on_new_store(
    args: Any, report: dict[str, Any], work: Callable[[S3Server, SlowProxy, Any, Any], T]
) -> T:
    """``work(server, proxy, reader_options, args)`` on a moto server of its own (moto
    keeps what it was sent in memory: a new one for each size) behind a new proxy."""
    server = S3Server([sys.executable, str(REPO / "benchmarks" / "moto_ranged.py")])
    server.start()
    try:
        link = args.bandwidth_mbit * 1e6 / 8
        with SlowProxy("127.0.0.1", server.port, delay=args.delay, bandwidth=link) as proxy:
            options = {**server.options(), "endpoint_url": proxy.endpoint}
            options["skip_instance_cache"] = args.cold_client
            if args.max_connections:
                pool = {"max_pool_connections": args.max_connections}
                options["config_kwargs"] = {**options["config_kwargs"], **pool}
            report["reader_options"] = {
                k: v for k, v in options.items() if k not in ("key", "secret", "endpoint_url")
            }
            return work(server, proxy, options, args)
    finally:
        server.stop()


def direct_client(server: S3Server) -> Any:
    """An S3 client talking to the server itself, not through the proxy, patient with
    moto's slow answers to big uploads (it joins a multipart upload's parts in memory)."""
    import s3fs

    options = server.options()
    config = {**options["config_kwargs"], "read_timeout": 900}
    return s3fs.S3FileSystem(**{**options, "config_kwargs": config}, skip_instance_cache=True)


def staged(n: int, server: S3Server, args: Any) -> tuple[dict[str, Any], str]:
    """The archive of ``n`` files built, published and put on the store (straight to the
    server, not through the proxy): what :func:`prepared` says, and its URL."""

    info = prepared(Path(args.work), n)
    bucket = f"n{n}"
    direct = direct_client(server)
    direct.mkdir(bucket)
    start = time.perf_counter()
    upload(direct, info["archive"], f"{bucket}/data.barecat")
    info["upload_s"] = time.perf_counter() - start
    return info, f"s3://{bucket}/data.barecat"


def unstaged(url: str, server: S3Server) -> None:

    direct = direct_client(server)
    direct.rm(url.split("/")[2], recursive=True)


def why_not(mode: str, info: dict[str, Any], error: TypeError | None = None) -> str | None:
    """Why ``mode`` cannot be measured (no ``barecat publish``, no ``remote_mode``)."""
    if error is not None:
        if "remote_mode" not in str(error):
            raise error
        return f"Barecat has no remote_mode yet ({error})"
    if mode != "download" and info.get("publish_s") is None:
        return str(info["unpublished"])
    return None


def warm_up(server: S3Server, proxy: SlowProxy, options: dict[str, Any], args: Any) -> None:
    """Open a small archive once in each mode, so that what a process does once (imports,
    first clients) is not counted in the first mode measured."""
    info, url = staged(WARM_UP_FILES, server, args)
    for mode in args.modes.split(","):
        if why_not(mode, info) is None:
            cache = tempfile.mkdtemp(prefix="warm-up-", dir=args.work)
            try:
                with open_archive(url, mode, options, cache) as bc:
                    bc[path_of(0)]
            except TypeError as e:
                why_not(mode, info, e)
            except Exception:  # (the measurement says how the mode fails)
                pass
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    unstaged(url, server)


def measure_floor(url: str, options: dict[str, Any], proxy: SlowProxy) -> dict[str, Any]:
    """One request (HEAD of the index) with a client that made one before, and the first
    request of a new client (what making an S3 client costs a process)."""
    import s3fs

    tally = Tally(proxy)
    client = s3fs.S3FileSystem(**{**options, "skip_instance_cache": True})
    client.info(url)
    floor = {"new_client": tally.done()}
    tally = Tally(proxy)
    client.info(url)
    floor["client"] = tally.done()
    return floor


def measure_size(
    n: int, server: S3Server, proxy: SlowProxy, options: dict[str, Any], args: Any
) -> dict[str, Any]:
    """Build or reuse, publish, upload and measure each mode for one size."""
    warm_up(server, proxy, options, args)
    info, url = staged(n, server, args)
    info["floor"] = measure_floor(url, options, proxy)
    info["modes"] = {}
    for mode in args.modes.split(","):
        why = why_not(mode, info)
        try:
            if why is None:
                info["modes"][mode] = measure_mode(url, mode, n, options, proxy, args)
        except TypeError as e:
            why = why_not(mode, info, e)
        except Exception as e:  # a failing mode is a figure too: said, and the rest is run
            traceback.print_exc()
            why = f"failed: {type(e).__name__}: {e}"
        if why is not None:
            info["modes"][mode] = {"unavailable": why}
    unstaged(url, server)
    return info


def _rows(info: dict[str, Any]) -> Iterator[str]:
    for mode, r in info["modes"].items():
        if "unavailable" in r:
            yield f"  {mode:9s} not measured: {r['unavailable']}"
            continue
        f, more, many = r["first"], r["further"], r["get_many"]
        yield (
            f"  {mode:9s} {f['requests']:6d} {f['bytes'] / 1e6:10.3f} {f['seconds']:9.3f}"
            f" {more['requests_mean']:6.2f} {more['requests_max']:4d}"
            f" {more['seconds_mean'] * 1e3:7.1f} {many['requests']:6d} {many['waves']:5d}"
            f" {many['seconds']:7.3f} {r['listdir']['requests']:5d}"
            f" {r['listdir']['bytes'] / 1e3:8.1f} {r['glob']['requests']:5d}"
            f" {r['glob']['bytes'] / 1e3:8.1f}"
            + (f"  WRONG BYTES: {r['wrong_bytes']}" if r["wrong_bytes"] else "")
        )


def print_size(info: dict[str, Any], delay: float, bandwidth_mbit: float = 0.0) -> None:
    n = info["archive"]
    print(
        f"\n{os.path.basename(os.path.dirname(n))}: index {info['index_bytes'] / 1e6:,.1f} MB,"
        f" shards {info['shard_bytes'] / 1e6:,.1f} MB, sidecar "
        + (f"{info['sidecar_bytes'] / 1e6:,.2f} MB" if info["sidecar_bytes"] else "none")
        + f"; build {info['build_s']:.1f} s, publish "
        + ("-" if info.get("publish_s") is None else f"{info['publish_s']:.1f} s")
        + (f" (checked {info['publish_check_s']:.1f} s)" if info.get("publish_check_s") else "")
        + f", upload {info['upload_s']:.1f} s; {delay * 1e3:.0f} ms per request"
        + (f", a {bandwidth_mbit:,.0f} Mbit/s link" if bandwidth_mbit else "")
    )
    print(
        "            open + first file          further file       get_many"
        "             listdir         glob"
    )
    print(
        "  mode        reqs         MB   seconds   reqs  max      ms   reqs waves"
        " seconds  reqs       kB  reqs       kB"
    )
    for row in _rows(info):
        print(row)
    floor = info["floor"]
    print(
        f"  one request (HEAD): {floor['client']['seconds']:.3f} s; the first of a new S3"
        f" client: {floor['new_client']['seconds']:.3f} s"
    )
    modes = info["modes"]
    if "first" in modes.get("download", {}) and "first" in modes.get("lazy", {}):
        ratio = modes["download"]["first"]["seconds"] / modes["lazy"]["first"]["seconds"]
        print(f"  first byte: lazy {ratio:,.1f}x sooner than download")


def print_listing(listing: dict[str, Any], sizes: list[int], delay: float) -> None:
    per_page = listing["seconds_per_page"]
    print(
        f"\nS3 LIST of {listing['keys']:,} keys through the proxy: {listing['requests']} "
        f"pages, {listing['seconds']:.2f} s, {per_page * 1e3:.1f} ms a page"
    )
    for n in sizes:
        print(
            f"  extrapolated to {n:,} keys ({-(-n // 1000):,} pages, one after another): "
            f"{n / 1000 * per_page:,.0f} s (the delay alone: {n / 1000 * delay:,.0f} s)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
