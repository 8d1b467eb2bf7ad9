"""``python -m barecat.demo``: build an archive from a generated image-like tree and read it back.

A self-contained tour for a new machine: makes ``train/<class>/<id>.jpg``-style files with
random bytes, stores them, reads every one back with CRC verification, and prints a summary.
It leaves nothing behind: its directory in the temp directory is removed at the end, also
after Ctrl-C (``--keep`` keeps it and prints how to remove it). Uses only the public API.
Printing is its job, as a program rather than a library module.

``python -m barecat.demo --photos DIR`` (or :func:`make_photos`) writes instead the small
tree the documentation's examples start from: ``DIR/train/cat/001.jpg`` ...
``DIR/labels.csv``.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence

from barecat.archive import Barecat


def make_tree(root: str, num_files: int, seed: int = 0) -> int:
    """Write ``num_files`` files of 1-64 KiB under ``root``; returns total bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(num_files):
        split = "train" if i % 10 else "val"
        directory = os.path.join(root, split, f"n{i % 20:08d}")
        os.makedirs(directory, exist_ok=True)
        size = rng.randint(1024, 64 * 1024)
        with open(os.path.join(directory, f"{i:06d}.jpg"), "wb") as f:
            f.write(rng.randbytes(size))
        total += size
    return total


PHOTOS = {
    "train/cat/001.jpg": b"\xff\xd8\xff\xe0 cat one" * 100,
    "train/cat/002.jpg": b"\xff\xd8\xff\xe0 cat two" * 200,
    "train/dog/001.jpg": b"\xff\xd8\xff\xe0 dog one" * 300,
    "val/cat/003.jpg": b"\xff\xd8\xff\xe0 cat three" * 50,
    "labels.csv": b"path,label\ntrain/cat/001.jpg,cat\ntrain/dog/001.jpg,dog\n",
}
"""The documentation's sample tree: each file's path under its root, and its bytes."""


def make_photos(root: str | os.PathLike[str] = "photos") -> list[str]:
    """Write the documentation's sample tree (:data:`PHOTOS`) under ``root``.

    Files already there with these names are overwritten; nothing else is touched.

    Args:
        root: the directory to write into, made if missing.

    Returns:
        The paths written, in the order of :data:`PHOTOS`.
    """
    written = []
    for name, data in PHOTOS.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=2000, help="number of files to generate")
    parser.add_argument(
        "--workdir",
        help="where to put the tree and archive, kept there (default: a new directory in "
        "the temp directory, removed at the end, Ctrl-C included)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the tree and archive to explore; where they are and the command that "
        "removes them are printed",
    )
    parser.add_argument(
        "--photos",
        metavar="DIR",
        help="only write the small sample tree the documentation's examples use into DIR "
        "(DIR/train/cat/001.jpg ... DIR/labels.csv), and exit",
    )
    args = parser.parse_args(argv)
    if args.photos:
        print(f"wrote {len(make_photos(args.photos))} files under {args.photos}")
        return 0
    if args.workdir:
        workdir = args.workdir
        os.makedirs(workdir, exist_ok=True)
    else:
        workdir = tempfile.mkdtemp(prefix="barecat-demo-")
    tree = os.path.join(workdir, "tree")
    archive = os.path.join(workdir, "sample.barecat")
    try:
        return run(tree, archive, args.files)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if args.workdir:  # the user's directory: only what the demo made in it goes
            remove = f"rm -rf {shlex.quote(tree)} {shlex.quote(archive)}-*"
            print(f"kept           {tree}, {archive} (remove: {remove})")
        elif args.keep:
            print(f"kept           {workdir} (remove: rm -rf {shlex.quote(workdir)})")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            print(f"removed        {workdir}")


def run(tree: str, archive: str, num_files: int) -> int:
    """Generate ``tree``, build ``archive`` from it, read every file back and print the
    summary. Returns the exit code: 1 if a file read back differs."""
    shutil.rmtree(tree, ignore_errors=True)  # a tree of an earlier run may hold other files
    total = make_tree(tree, num_files)
    t0 = time.perf_counter()
    with Barecat(archive, readonly=False, overwrite=True) as bc:
        for dirpath, _, filenames in os.walk(tree):
            for name in filenames:
                full = os.path.join(dirpath, name)
                bc.add_by_path(full, os.path.relpath(full, tree))
    t_write = time.perf_counter() - t0

    t0 = time.perf_counter()
    mismatches = 0
    with Barecat(archive) as bc:
        paths = list(bc)
        random.Random(1).shuffle(paths)
        for p in paths:
            with open(os.path.join(tree, p), "rb") as f:
                mismatches += bc[p] != f.read()
        t_read = time.perf_counter() - t0
        classes = bc.listdir("train")
        jpgs = len(bc.glob("**/*.jpg", recursive=True))
        stats = bc.lookup_dir("train")
        print(f"archive        {archive}")
        print(f"files          {len(bc)} ({total / 1e6:.1f} MB), {bc.num_dirs} directories")
        print(f"write          {len(paths) / t_write:,.0f} files/s")
        print(f"verified read  {len(paths) / t_read:,.0f} files/s (random order, CRC32C checked)")
        print(
            f"train/         {len(classes)} classes, {stats.num_files_tree} files, "
            f"{stats.size_tree:,} bytes"
        )
        print(f"glob **/*.jpg  {jpgs} matches")
        print(f"mismatches     {mismatches}")
    return 1 if mismatches or jpgs != len(paths) else 0


if __name__ == "__main__":
    raise SystemExit(main())
