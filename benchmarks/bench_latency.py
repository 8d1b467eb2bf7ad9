"""Batched reads on slow storage: a loop of ``bc[path]`` against ``get_many`` of 256 (one
read at a time, and on the read pool's threads) and a DataLoader's ``__getitems__``.

1. Through a network filesystem's stand-in: a read-only passthrough FUSE filesystem
   (mfusepy, multithreaded, ``direct_io`` so that every read reaches it, none is kept in
   the kernel's page cache) that serves the folder holding the archive and sleeps
   ``--delay-ms`` (default 1) in every read. Only the shards are read through it: the
   index and lookup table are copied to a local folder beside links to the mounted
   shards, so what is timed is the file reads a batch makes concurrent.
2. On the local disk with a cold page cache: the shard dropped from the cache
   (``posix_fadvise(DONTNEED)``, no root needed) before each way.

Each way reads ``--sample`` files (default 2048) picked at random from ``--files``
(default 10,000) of 1-32 KiB, in a fresh process-local archive handle; files/s of one
run, and each way's ratio to the loop. Figures only, no assertions; prints why and exits
0 where FUSE cannot run here.

    python benchmarks/bench_latency.py [--files N] [--sample N] [--delay-ms MS]
        [--concurrency N] [--only fuse|cold]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import barecat  # noqa: E402
from barecat.exceptions import BarecatError  # noqa: E402
from barecat.mount import check_fuse, is_mounted  # noqa: E402
from barecat.shards.concurrent import DEFAULT_READ_CONCURRENCY  # noqa: E402

BATCH = 256

DELAYED_FS = r"""
import errno, os, sys, time, mfusepy
source, delay = sys.argv[2], float(sys.argv[3]) / 1000
cached = set(filter(None, sys.argv[5].split(",")))
class Delayed(mfusepy.Operations):
    use_ns = True
    def getattr(self, path, fh=None):
        try:
            st = os.lstat(source + path)
        except FileNotFoundError:
            raise mfusepy.FuseOSError(errno.ENOENT)
        return {"st_mode": st.st_mode, "st_nlink": st.st_nlink, "st_size": st.st_size,
                "st_mtime": st.st_mtime_ns, "st_atime": st.st_atime_ns, "st_ctime": st.st_ctime_ns}
    def readdir(self, path, fh):
        return [".", "..", *os.listdir(source + path)]
    def open(self, path, fi):
        fi.fh = os.open(source + path, os.O_RDONLY)
        fi.direct_io = os.path.basename(path) not in cached
        return 0
    def read(self, path, size, offset, fi):
        if offset < os.fstat(fi.fh).st_size:  # (the client knows where the file ends)
            time.sleep(delay)  # the network's round trip
        return os.pread(fi.fh, size, offset)
    def release(self, path, fi):
        os.close(fi.fh)
        return 0
mfusepy.FUSE(Delayed(), sys.argv[1], foreground=True, ro=True, raw_fi=True,
             max_threads=int(sys.argv[4]))
"""
"""A read-only passthrough of ``source`` that sleeps in every read (multithreaded).

Every file is opened ``direct_io`` (each read reaches the server, none is kept in the
kernel's page cache) but those whose names are listed as cached: a file that is
memory-mapped (LMDB's) needs the page cache, which the caller evicts (:func:`evict`).
A read at or past the end of the file is answered without the sleep, as a network
filesystem's client knows the size from the attributes it holds.
"""


def make_archive(path: str, count: int) -> list[str]:
    rng = random.Random(0)
    with barecat.Barecat(path, readonly=False, overwrite=True) as bc:
        for i in range(count):
            bc[f"train/c{i % 100:02d}/{i:07d}.jpg"] = rng.randbytes(rng.randint(1024, 32768))
    with barecat.Barecat(path) as bc:
        return sorted(bc)


@contextlib.contextmanager
def delayed_mount(
    source: Path, mountpoint: Path, delay_ms: float, threads: int, cached: Sequence[str] = ()
) -> Iterator[None]:
    """``source`` served at ``mountpoint`` by :data:`DELAYED_FS` until the block ends.

    Args:
        source: the folder served.
        mountpoint: an empty folder to mount it on.
        delay_ms: the sleep in every read, in milliseconds.
        threads: the server's threads (concurrent reads it serves).
        cached: names of files opened through the page cache (memory-mapped ones).

    Raises:
        BarecatError: if the server exits before the filesystem is mounted.
    """
    argv = [str(mountpoint), str(source), str(delay_ms), str(threads), ",".join(cached)]
    server = subprocess.Popen([sys.executable, "-c", DELAYED_FS, *argv])
    while not is_mounted(str(mountpoint)):
        if server.poll() is not None:
            raise BarecatError(f"the delayed FUSE filesystem did not start ({server.returncode})")
        time.sleep(0.02)
    try:
        yield
    finally:
        if subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False).returncode:
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def link_data(source: Path, mounted: Path, local: Path, is_data: Callable[[Path], bool]) -> None:
    """``local``: a copy of the folder ``source`` (mounted at ``mounted``) in which each
    file that ``is_data`` (given its path relative to ``source``) is a link to the mounted
    one, and every other file is copied."""
    local.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.rglob("*")):
        rel = entry.relative_to(source)
        if entry.is_dir():
            (local / rel).mkdir(parents=True, exist_ok=True)
            continue
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        if is_data(rel):
            (local / rel).symlink_to(mounted / rel)
        else:
            shutil.copy(entry, local / rel)


def through_mount(archive: str, mounted: Path, local: Path) -> str:
    """The archive opened from ``local``: its folder's files copied there, but its shards,
    which are links to the mounted ones."""
    link_data(Path(archive).parent, mounted, local, lambda rel: "-shard-" in rel.name)
    return str(local / Path(archive).name)


def evict(path: Path) -> None:
    """Drop the file's clean pages from the page cache (no root needed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_cache(archive: str) -> None:
    """Evict the archive's shards from the page cache."""
    for entry in Path(archive).parent.glob(Path(archive).name + "-shard-*"):
        evict(entry)


def loop(bc: barecat.Barecat, paths: list[str]) -> None:
    for p in paths:
        bc[p]


def batches(bc: barecat.Barecat, paths: list[str]) -> None:
    for i in range(0, len(paths), BATCH):
        bc.get_many(paths[i : i + BATCH])


def data_loader(archive: str, paths: list[str]) -> None:
    from torch.utils.data import DataLoader  # (imported before the clock starts: see measure)

    from barecat.integrations.torch import BarecatDataset

    dataset = BarecatDataset(archive, paths)
    for _ in DataLoader(dataset, batch_size=BATCH, collate_fn=list):
        pass
    dataset._archive().close()  # (its handle would keep the mount busy)


Way = Callable[[list[str]], None]


def ways(archive: str, concurrency: int, with_torch: bool) -> dict[str, Way]:
    def opened(workers: int, read: Callable[[barecat.Barecat, list[str]], None]) -> Way:
        def run(paths: list[str]) -> None:
            with barecat.Barecat(archive, read_concurrency=workers) as bc:
                read(bc, paths)

        return run

    found = {
        "loop of bc[path]": opened(1, loop),
        f"get_many of {BATCH}, read_concurrency=1": opened(1, batches),
        f"get_many of {BATCH}, read_concurrency={concurrency}": opened(concurrency, batches),
    }
    if with_torch:
        found[f"DataLoader(batch_size={BATCH}) of BarecatDataset"] = lambda paths: data_loader(
            archive, paths
        )
    return found


def measure(
    title: str, archive: str, names: list[str], args: argparse.Namespace, before: Callable[[], None]
) -> None:
    try:
        import torch.utils.data  # noqa: F401

        import barecat.integrations.torch  # noqa: F401

        with_torch = True
    except ModuleNotFoundError:
        with_torch = False
        print("(torch is not installed: no DataLoader row)")
    rng = random.Random(1)
    print(f"\n{title}\n| way | files/s | ratio to the loop |\n|---|---|---|")
    base = 0.0
    for label, run in ways(archive, args.concurrency, with_torch).items():
        paths = rng.sample(names, args.sample)
        before()
        start = time.perf_counter()
        run(paths)
        rate = args.sample / (time.perf_counter() - start)
        base = base or rate
        print(f"| {label} | {rate:,.0f} | {rate / base:.2f}x |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=2048)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=DEFAULT_READ_CONCURRENCY)
    parser.add_argument("--fuse-threads", type=int, default=32)
    parser.add_argument("--only", choices=("fuse", "cold"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-latency-", dir=REPO) as work:
        base = Path(work)
        (base / "data").mkdir()
        archive = str(base / "data" / "ds.barecat")
        names = make_archive(archive, args.files)
        print(f"{args.files} files of 1-32 KiB; {args.sample} read each way; load "
              f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")  # fmt: skip
        if args.only in (None, "fuse"):
            try:
                check_fuse()
            except BarecatError as e:
                print(f"skipped the FUSE part: {e}")
            else:
                mnt = base / "mnt"
                mnt.mkdir()
                with delayed_mount(base / "data", mnt, args.delay_ms, args.fuse_threads):
                    local = through_mount(archive, mnt, base / "local")
                    title = f"Through FUSE, {args.delay_ms:g} ms a read (index local)"
                    measure(title, local, names, args, lambda: None)
        if args.only in (None, "cold"):
            measure("Local disk, cold page cache", archive, names, args,
                    lambda: drop_cache(archive))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
