"""FUSE mounts: reading and walking through ``barecat mount`` next to a plain directory.

1. ``cat`` of every file of a tree of ``--files`` small files (1-16 KiB, default 10,000)
   through a read-only mount, against the same files in a plain directory (both trees
   warm in the page cache; the mount fresh for each round, so the kernel's own cache of
   the mounted files starts empty and every byte goes through the FUSE server), with and
   without read-ahead across files, and against the binding's floor: a Python FUSE
   filesystem over the same binding, options and listings that serves the same names and
   sizes from a dict and does nothing else (one request per file).
2. A data loader's reads: the same files in one directory, read in a shuffled order by
   a Python reader (``os.open``, ``os.read``, ``os.close``), from a plain directory and
   through a fresh mount, with and without read-ahead (which such a reader must not pay
   for), and with ``--plain-listings`` (a LOOKUP before each read).
3. ``find MOUNT | wc -l`` over an archive of ``--walk-files`` tiny files (default
   1,000,000), a fresh mount each round, with listings that carry attributes in every
   part (the default) and in the first part only (``--plain-listings``).

Whole commands, medians of ``--repeats`` rounds; figures only, no assertions.

    python benchmarks/bench_mount.py [--files N] [--walk-files N] [--repeats R]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import barecat  # noqa: E402
from barecat.mount import check_fuse, is_mounted  # noqa: E402

BARECAT = str(Path(sys.executable).parent / "barecat")


NULL_FS = r"""
import errno, os, stat, sys, mfusepy
from barecat.mount.listing import ListingFUSE, packed_stat
sizes = {"/" + line.split()[0]: int(line.split()[1]) for line in open(sys.argv[2])}
dirs = {"/"} | {p.rsplit("/", 1)[0] or "/" for p in sizes}
children = {}
for p in [*sizes, *dirs]:
    if p != "/":
        children.setdefault(p.rsplit("/", 1)[0] or "/", []).append(p.rsplit("/", 1)[1])
class Null(mfusepy.Operations):
    use_ns = True
    def getattr(self, path, fh=None):
        if path in dirs: return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path in sizes:
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": sizes[path]}
        raise mfusepy.FuseOSError(errno.ENOENT)
    def readdir(self, path, fh):
        return [".", "..", *sorted(children.get(path, ()))]
    def packed_attributes(self, path):  # as barecat's: a packed struct stat
        a = self.getattr(path)
        return packed_stat(a["st_mode"], a["st_nlink"], 0, 0, a.get("st_size", 0), 0, 0)
    def listing(self, path, offset):  # as barecat's: names with packed attributes
        names = self.readdir(path, 0)
        full = [path if n in (".", "..") else path.rstrip("/") + "/" + n for n in names]
        return [(os.fsencode(n), self.packed_attributes(f)) for n, f in zip(names, full)]
    def open(self, path, flags): raise mfusepy.FuseOSError(errno.ENOSYS)  # as barecat's
    def read(self, path, size, offset, fh): return bytes(min(size, max(0, sizes[path] - offset)))
try:
    ListingFUSE(Null(), sys.argv[1], foreground=True, ro=True, kernel_cache=True,
                 attr_timeout=3600, entry_timeout=3600, nothreads=True)
except RuntimeError:
    pass
"""


@contextlib.contextmanager
def mounted(archive: str, mountpoint: str, *options: str) -> Iterator[None]:
    subprocess.run([BARECAT, "mount", *options, archive, mountpoint], check=True)
    try:
        yield
    finally:
        unmount(mountpoint)


@contextlib.contextmanager
def null_mounted(sizes_file: str, mountpoint: str) -> Iterator[None]:
    server = subprocess.Popen(
        [sys.executable, "-c", NULL_FS, mountpoint, sizes_file], stderr=subprocess.DEVNULL
    )
    while not is_mounted(mountpoint):
        time.sleep(0.02)
    try:
        yield
    finally:
        unmount(mountpoint)
        server.wait()


SHUFFLED_READER = r"""
import os, random, sys, time
folder = sys.argv[1]
start = time.perf_counter()
names = sorted(os.listdir(folder))
random.Random(0).shuffle(names)
for name in names:
    fd = os.open(os.path.join(folder, name), os.O_RDONLY)
    while os.read(fd, 1 << 16):
        pass
    os.close(fd)
print(time.perf_counter() - start)
"""
"""Lists a folder and reads its files in a shuffled order; prints the seconds it took
(its own start-up left out)."""


def unmount(mountpoint: str) -> None:
    subprocess.run([BARECAT, "mount", "--unmount", mountpoint], check=True)
    while is_mounted(mountpoint):
        time.sleep(0.01)


def reported(*argv: str) -> float:
    """The seconds a command prints it took."""
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    return float(done.stdout)


def timed(command: str) -> float:
    start = time.perf_counter()
    subprocess.run(["sh", "-c", command], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def make_tree(root: Path, count: int) -> list[tuple[str, bytes]]:
    rng = random.Random(0)
    files = []
    for i in range(count):
        rel = f"d{i % 100:02d}/{i:06d}.bin"
        data = rng.randbytes(rng.randint(1024, 16384))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files.append((rel, data))
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--walk-files", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    check_fuse()
    with tempfile.TemporaryDirectory(prefix="bench-mount-", dir=REPO) as work:
        base = Path(work)
        tree, mnt = base / "tree", base / "mnt"
        mnt.mkdir()
        files = make_tree(tree, args.files)
        archive = str(base / "small.barecat")
        with barecat.Barecat(archive, readonly=False) as bc:
            bc.add_many(files)
        sizes_file = base / "sizes.txt"
        sizes_file.write_text("".join(f"{rel} {len(data)}\n" for rel, data in files))
        cat = "find {} -type f -print0 | xargs -0 cat > /dev/null"
        timed(cat.format(tree))  # warm both
        plain, through, unahead, threaded, null = [], [], [], [], []
        for _ in range(args.repeats):
            plain.append(timed(cat.format(tree)))
            with mounted(archive, str(mnt)):
                through.append(timed(cat.format(mnt)))
            with mounted(archive, str(mnt), "--no-read-ahead"):
                unahead.append(timed(cat.format(mnt)))
            with mounted(archive, str(mnt), "--threads"):
                threaded.append(timed(cat.format(mnt)))
            with null_mounted(str(sizes_file), str(mnt)):
                null.append(timed(cat.format(mnt)))
        p, m, u, t, n = (statistics.median(x) for x in (plain, through, unahead, threaded, null))
        mb = sum(len(d) for _, d in files) / 1e6
        print(
            f"cat of {args.files:,} files ({mb:.0f} MB): plain directory {p * 1e3:.0f} ms; "
            f"through the mount {m * 1e3:.0f} ms ({m / p:.2f}x the directory); "
            f"--no-read-ahead {u * 1e3:.0f} ms ({u / p:.2f}x); --threads {t * 1e3:.0f} ms "
            f"({t / p:.2f}x); a FUSE filesystem doing nothing, same binding and options, "
            f"{n * 1e3:.0f} ms ({n / p:.2f}x; the mount is {m / n:.2f}x that floor)"
        )
        shutil.rmtree(tree)

        flat = base / "flat"
        flat.mkdir()
        flat_archive = str(base / "flat.barecat")
        with barecat.Barecat(flat_archive, readonly=False) as bc:
            for i, (_, data) in enumerate(files):
                (flat / f"{i:06d}.bin").write_bytes(data)
                bc[f"all/{i:06d}.bin"] = data
        reader = (sys.executable, "-c", SHUFFLED_READER)
        reported(*reader, str(flat))  # warm
        plain, through, unahead, named = [], [], [], []
        for _ in range(args.repeats):
            plain.append(reported(*reader, str(flat)))
            with mounted(flat_archive, str(mnt)):
                through.append(reported(*reader, str(mnt / "all")))
            with mounted(flat_archive, str(mnt), "--no-read-ahead"):
                unahead.append(reported(*reader, str(mnt / "all")))
            with mounted(flat_archive, str(mnt), "--plain-listings"):
                named.append(reported(*reader, str(mnt / "all")))
        p, m, u, n = (statistics.median(x) for x in (plain, through, unahead, named))
        print(
            f"shuffled reads of {args.files:,} files in one directory (a Python reader): "
            f"plain directory {p * 1e3:.0f} ms; through the mount {m * 1e3:.0f} ms "
            f"({m / p:.2f}x); --no-read-ahead {u * 1e3:.0f} ms ({u / p:.2f}x); "
            f"--plain-listings {n * 1e3:.0f} ms ({n / p:.2f}x)"
        )
        shutil.rmtree(flat)

        big = str(base / "many.barecat")
        start = time.perf_counter()
        with barecat.Barecat(big, readonly=False) as bc:
            bc.add_many(
                (f"{i // 100_000:02d}/{i // 1000 % 100:02d}/{i:07d}", b"x")
                for i in range(args.walk_files)
            )
        built = time.perf_counter() - start
        walks, plain_walks = [], []
        for _ in range(args.repeats):
            with mounted(big, str(mnt)):
                walks.append(timed(f"find {mnt} | wc -l"))
            with mounted(big, str(mnt), "--plain-listings"):
                plain_walks.append(timed(f"find {mnt} | wc -l"))
        w, pw = statistics.median(walks), statistics.median(plain_walks)
        print(
            f"find | wc -l over {args.walk_files:,} files: {w:.2f} s through a fresh mount "
            f"({args.walk_files / w:,.0f} entries/s); --plain-listings {pw:.2f} s "
            f"({args.walk_files / pw:,.0f} entries/s); archive built in {built:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
