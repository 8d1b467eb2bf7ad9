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
3. Walks of a tree of ``--walk-files`` tiny files (default 200,000, in 200 directories
   of 1,000): ``find | wc -l`` and ``find -type f | wc -l`` (names and types only),
   ``du -s`` and ``ls -lR`` (which stat every entry), on the tree on disk (warm) against
   a fresh mount of the same files as an archive each round: with attributes in every
   listing (the default), with ``--plain-listings``, and through the do-nothing
   filesystem (the binding's floor, both ways).

4. Real trees (``bench_mount_trees``): the Python standard library and ``/usr/share``
   (``--trees``), ``find``, ``ls -lR`` and ``cat`` of ``--cat-files`` small files, on the
   tree and through barecat (default and ``--plain-listings``), ratarmount (a tar) and
   squashfuse_ll (a squashfs image), alternated in each round.

Whole commands, medians of ``--repeats`` rounds; figures only, no assertions.

    python benchmarks/bench_mount.py [--files N] [--walk-files N] [--repeats R]
        [--only reads|walks|trees] [--trees DIR ...] [--cat-files N]
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
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import barecat  # noqa: E402
from barecat.mount import check_fuse, is_mounted  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_mount_trees  # noqa: E402

BARECAT = str(Path(sys.executable).parent / "barecat")


NULL_FS = r"""
import errno, os, stat, sys, mfusepy
from barecat.mount.listing import ListingFUSE, listing_block_size, packed_stat
sizes = {"/" + line.split()[0]: int(line.split()[1]) for line in open(sys.argv[2])}
dirs = {"/"} | {p.rsplit("/", 1)[0] or "/" for p in sizes}
dirs |= {d.rsplit("/", 1)[0] or "/" for d in dirs}
children = {}
for p in [*sizes, *dirs]:
    if p != "/":
        children.setdefault(p.rsplit("/", 1)[0] or "/", []).append(p.rsplit("/", 1)[1])
class Null(mfusepy.Operations):
    use_ns = True
    def getattr(self, path, fh=None):
        if path in dirs:
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2,
                    "st_blksize": listing_block_size(len(children.get(path, ())))}
        if path in sizes:
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": sizes[path]}
        raise mfusepy.FuseOSError(errno.ENOENT)
    def readdir(self, path, fh):
        return [".", "..", *sorted(children.get(path, ()))]
    def packed_attributes(self, path):  # as barecat's: a packed struct stat
        a = self.getattr(path)
        return packed_stat(a["st_mode"], a["st_nlink"], 0, 0, a.get("st_size", 0), 0, 0,
                           a.get("st_blksize", 0))
    def listing(self, path, offset, plus=True):  # as barecat's: names with packed attributes
        names = self.readdir(path, 0)
        full = [path if n in (".", "..") else path.rstrip("/") + "/" + n for n in names]
        return [(os.fsencode(n), self.packed_attributes(f)) for n, f in zip(names, full)]
    def open(self, path, flags): raise mfusepy.FuseOSError(errno.ENOSYS)  # as barecat's
    def read(self, path, size, offset, fh): return bytes(min(size, max(0, sizes[path] - offset)))
try:
    ListingFUSE(Null(), sys.argv[1], foreground=True, ro=True, kernel_cache=True,
                attr_timeout=3600, entry_timeout=3600, nothreads=True,
                plain_listings=sys.argv[3:] == ["plain"])
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
def null_mounted(sizes_file: str, mountpoint: str, *options: str) -> Iterator[None]:
    server = subprocess.Popen(
        [sys.executable, "-c", NULL_FS, mountpoint, sizes_file, *options],
        stderr=subprocess.DEVNULL,
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
    parser.add_argument("--walk-files", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("reads", "walks", "trees"))
    bench_mount_trees.add_arguments(parser)
    args = parser.parse_args()
    check_fuse()
    with tempfile.TemporaryDirectory(prefix="bench-mount-", dir=REPO) as work:
        base = Path(work)
        mnt = base / "mnt"
        mnt.mkdir()
        if args.only in (None, "reads"):
            reads(args, base, mnt)
        if args.only in (None, "walks"):
            walks(args, base, mnt)
        if args.only in (None, "trees"):
            bench_mount_trees.trees(args, base)
    return 0


WALKS = {
    "find | wc -l": "find {} | wc -l",
    "find -type f | wc -l": "find {} -type f | wc -l",
    "du -s": "du -s {}",
    "ls -lR": "ls -lR {} > /dev/null",
}
"""The walks timed on the tree and through the mount: names only (find), and every
entry's attributes (du, ls -l)."""


def walks(args: argparse.Namespace, base: Path, mnt: Path) -> None:
    """Part 3: the walks of ``WALKS`` over the same tree on disk and as an archive."""
    tree = base / "walk-tree"
    names = [f"{i // 100_000:02d}/{i // 1000 % 100:02d}/{i:07d}" for i in range(args.walk_files)]
    for folder in sorted({name.rpartition("/")[0] for name in names}):
        (tree / folder).mkdir(parents=True)
    for name in names:
        (tree / name).write_bytes(b"x")
    big = str(base / "many.barecat")
    start = time.perf_counter()
    with barecat.Barecat(big, readonly=False) as bc:
        bc.add_many((name, b"x") for name in names)
    built = time.perf_counter() - start
    sizes_file = base / "walk-sizes.txt"
    sizes_file.write_text("".join(f"{name} 1\n" for name in names))
    ways: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
        "mount": lambda: mounted(big, str(mnt)),
        "--plain-listings": lambda: mounted(big, str(mnt), "--plain-listings"),
        "floor": lambda: null_mounted(str(sizes_file), str(mnt)),
        "floor, plain": lambda: null_mounted(str(sizes_file), str(mnt), "plain"),
    }
    print(
        f"walks of {args.walk_files:,} files in {args.walk_files // 1000:,} directories "
        f"(archive built in {built:.1f} s), medians of {args.repeats}, a fresh mount each "
        f"round; x: times the tree on disk"
    )
    for walk, command in WALKS.items():
        timed(command.format(tree))  # warm
        times: dict[str, list[float]] = {"tree": [], **{way: [] for way in ways}}
        for _ in range(args.repeats):
            times["tree"].append(timed(command.format(tree)))
            for way, mounting in ways.items():
                with mounting():
                    times[way].append(timed(command.format(mnt)))
        t = {way: statistics.median(values) for way, values in times.items()}
        print(
            f"  {walk}: tree {t['tree'] * 1e3:.0f} ms; "
            + "; ".join(f"{way} {t[way]:.2f} s ({t[way] / t['tree']:.1f}x)" for way in ways)
        )
    shutil.rmtree(tree)


def reads(args: argparse.Namespace, base: Path, mnt: Path) -> None:
    """Parts 1 and 2: ``cat`` of every file, and a data loader's shuffled reads."""
    tree = base / "tree"
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


if __name__ == "__main__":
    raise SystemExit(main())
