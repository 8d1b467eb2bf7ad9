"""Real trees through FUSE: barecat beside ratarmount and squashfuse (``bench_mount.py``'s
part 4, ``--only trees``).

Each tree (``--trees``, default the Python standard library of the interpreter running
this and ``/usr/share``) is packed three ways: ``barecat create``, ``tar -cf`` (mounted
by ratarmount) and an uncompressed squashfs image (``mksquashfs -noI -noD -noF -noX``,
mounted by ``squashfuse_ll``, squashfuse's faster low-level server). Then, in one run,
the walks and reads below are timed on the tree itself (warm in the page cache) and
through a fresh mount each round of: barecat (default listings), barecat
``--plain-listings``, ratarmount and squashfuse_ll. The ways alternate within each round
(their order rotated from round to round), so a busy machine slows them alike; figures
are medians (and minimums) of ``--repeats`` rounds, as ratios: to the tree on disk and
between the mounts.

- ``find | wc -l``: names and types of every entry;
- ``ls -lR``: every entry's attributes (and every link's target);
- ``cat`` of ``--cat-files`` small files (the first files of at most 64 KiB in path
  order, read by ``xargs cat`` from the mount's root: the lookups of their paths, and
  their bytes).

ratarmount is found by ``$BARECAT_BENCH_RATARMOUNT`` (``./run bench-mount`` installs it
into ``.venv-ratarmount`` and sets it), else on ``PATH``; squashfuse_ll and mksquashfs on
``PATH`` (``./run bench-mount`` installs them with ``apt-get``). A peer that is missing is
left out with a line saying why.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import stat
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from barecat.mount import is_mounted

BARECAT = str(Path(sys.executable).parent / "barecat")
SMALL = 64 << 10
"""The largest file counted as small for the ``cat`` walk."""
UNMOUNT_TRIES = 50
MOUNT_WAIT = 120.0
"""Seconds a peer's server may take to appear at its mount point."""

COMMANDS = {
    "find | wc -l": "find {root} | wc -l",
    "ls -lR": "ls -lR {root} > /dev/null",
    "cat": "cd {root} && xargs -0 cat < {files} > /dev/null",
}
"""The walks and reads timed on each tree and through each mount."""

UNCOMPRESSED = ("-noI", "-noD", "-noF", "-noX")
"""mksquashfs: no compression of inodes, directories, fragments or extended attributes
(barecat and tar store bytes as they are)."""

Mounting = Callable[[], contextlib.AbstractContextManager[None]]


def default_trees() -> list[str]:
    """The standard library of this interpreter, and ``/usr/share``."""
    return [sysconfig.get_paths()["stdlib"], "/usr/share"]


def _unmount(mountpoint: str, lazy: bool = False) -> None:
    """Unmount, trying again for a while if the mount is busy (said once), lazily at
    last."""
    for attempt in range(UNMOUNT_TRIES):
        argv = ["fusermount3", "-u", *(["-z"] if lazy or attempt == UNMOUNT_TRIES - 1 else [])]
        done = subprocess.run([*argv, mountpoint], capture_output=True, text=True)
        if done.returncode == 0:
            break
        if attempt == 0:
            print(f"  (unmount: {done.stderr.strip()}; trying again)")
        time.sleep(0.1)
    while is_mounted(mountpoint):
        time.sleep(0.01)


@contextlib.contextmanager
def _served(argv: list[str], mountpoint: str) -> Iterator[None]:
    """A FUSE server started by ``argv`` (which goes to the background itself), mounted
    at ``mountpoint`` until the block ends."""
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + MOUNT_WAIT
    while not is_mounted(mountpoint):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{argv[0]} did not mount {mountpoint}")
        time.sleep(0.02)
    try:
        yield
    finally:
        _unmount(mountpoint)


def _ratarmount() -> str | None:
    found = os.environ.get("BARECAT_BENCH_RATARMOUNT") or shutil.which("ratarmount")
    return found if found and os.access(found, os.X_OK) else None


def _timed(command: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(["sh", "-c", command], stdout=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 and not command.startswith("ls"):  # (ls: 1 for an unreadable file)
        raise RuntimeError(f"{command!r} exited with {done.returncode}")
    return elapsed, done.stdout.strip()


def _small_files(tree: Path, count: int) -> list[str]:
    """The first ``count`` regular files of at most ``SMALL`` bytes, in path order."""
    found = []
    for folder, dirs, names in os.walk(tree):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                regular = stat.S_ISREG(st.st_mode) and st.st_size <= SMALL
                if regular and os.access(path, os.R_OK):
                    found.append(os.path.relpath(path, tree))
        if len(found) >= count:
            break
    return found[:count]


def _pack(tree: Path, work: Path) -> dict[str, Mounting]:
    """Pack the tree each way whose tools are here; the ways to mount it, by name."""
    mnt = str(work / "mnt")
    archive, tar, image = work / "tree.barecat", work / "tree.tar", work / "tree.sqfs"
    built = {}
    start = time.perf_counter()
    subprocess.run(
        [BARECAT, "create", "-q", str(archive), "-C", str(tree), "."],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    built["barecat"] = time.perf_counter() - start
    ways: dict[str, Mounting] = {
        "barecat": lambda: _served([BARECAT, "mount", str(archive), mnt], mnt),
        "barecat --plain-listings": lambda: _served(
            [BARECAT, "mount", "--plain-listings", str(archive), mnt], mnt
        ),
    }
    ratarmount = _ratarmount()
    if ratarmount is None:
        print("  ratarmount left out: not on PATH and $BARECAT_BENCH_RATARMOUNT not set")
    else:
        start = time.perf_counter()
        subprocess.run(["tar", "-cf", str(tar), "-C", str(tree), "."], stderr=subprocess.DEVNULL)
        with _served([ratarmount, str(tar), mnt], mnt):  # (writes its index beside the tar)
            pass
        built["tar + ratarmount's index"] = time.perf_counter() - start
        ways["ratarmount"] = lambda: _served([ratarmount, str(tar), mnt], mnt)
    squashfuse, mksquashfs = shutil.which("squashfuse_ll"), shutil.which("mksquashfs")
    if squashfuse is None or mksquashfs is None:
        print("  squashfuse left out: squashfuse_ll or mksquashfs is not on PATH")
    else:
        start = time.perf_counter()
        subprocess.run(
            [
                mksquashfs,
                str(tree),
                str(image),
                "-noappend",
                "-quiet",
                "-no-progress",
                *UNCOMPRESSED,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        built["squashfs"] = time.perf_counter() - start
        ways["squashfuse_ll"] = lambda: _served([squashfuse, str(image), mnt], mnt)
    print("  packed in " + ", ".join(f"{way} {s:.1f} s" for way, s in built.items()))
    return ways


def _tree_way() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def tree(tree_path: Path, work: Path, args: argparse.Namespace) -> None:
    """Pack one tree, time ``COMMANDS`` on it and through each mount, print the figures."""
    (work / "mnt").mkdir(parents=True)
    entries = sum(1 + len(names) for _, _, names in os.walk(tree_path))
    print(f"{tree_path} ({entries:,} entries):")
    ways = {"directory": _tree_way, **_pack(tree_path, work)}
    small = _small_files(tree_path, args.cat_files)
    files = work / "small-files"
    files.write_bytes(b"".join(os.fsencode(name) + b"\0" for name in small))
    roots = {way: str(work / "mnt") for way in ways} | {"directory": str(tree_path)}
    times: dict[tuple[str, str], list[float]] = {}
    counts: dict[str, str] = {}
    for command in COMMANDS.values():  # the tree warm in the page cache
        _timed(command.format(root=tree_path, files=files))
    order = list(ways)
    for round_ in range(args.repeats):
        shift = round_ % len(order)
        for name, command in COMMANDS.items():
            for way in order[shift:] + order[:shift]:
                with ways[way]():
                    seconds, out = _timed(command.format(root=roots[way], files=files))
                times.setdefault((name, way), []).append(seconds)
                if name.startswith("find"):
                    counts.setdefault(way, out)
    print(
        f"  find counted: {', '.join(f'{way} {int(n):,}' for way, n in counts.items())}; "
        f"cat reads {len(small):,} files of {SMALL >> 10} KiB or less "
        f"({sum(os.lstat(tree_path / name).st_size for name in small) / 1e6:.0f} MB)"
    )
    _report(times, list(ways), args.repeats)


def _report(times: dict[tuple[str, str], list[float]], ways: list[str], repeats: int) -> None:
    """A table: each way's median (and minimum) per command, and its ratio to the
    directory's median; then barecat's medians over each peer's."""
    print(f"  medians (min) of {repeats} rounds, a fresh mount each; x: the directory's\n")
    print("  | command | " + " | ".join(ways) + " |")
    print("  " + "|---" * (len(ways) + 1) + "|")
    median = {key: statistics.median(values) for key, values in times.items()}
    for name in COMMANDS:
        base = median[name, "directory"]
        cells = [
            f"{median[name, way]:.2f} s (min {min(times[name, way]):.2f})"
            + ("" if way == "directory" else f" {median[name, way] / base:.1f}x")
            for way in ways
        ]
        print(f"  | `{name}` | " + " | ".join(cells) + " |")
    mine = [way for way in ways if way.startswith("barecat")]
    peers = [way for way in ways if way not in mine and way != "directory"]
    for name in COMMANDS:
        pairs = [
            f"{a} / {b} {median[name, a] / median[name, b]:.2f}"
            for a, b in itertools.product(mine, peers)
        ]
        if pairs:
            print(f"  {name}: " + "; ".join(pairs))
    print()


def trees(args: argparse.Namespace, base: Path) -> None:
    """Part 4: every tree of ``args.trees``."""
    for i, tree_path in enumerate(args.trees or default_trees()):
        work = base / f"real-tree-{i}"
        work.mkdir()
        try:
            tree(Path(tree_path), work, args)
        finally:
            if is_mounted(str(work / "mnt")):
                _unmount(str(work / "mnt"), lazy=True)
            shutil.rmtree(work)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This part's options."""
    parser.add_argument(
        "--trees", nargs="*", help="Trees for --only trees (default: the stdlib, /usr/share)"
    )
    parser.add_argument("--cat-files", type=int, default=5_000)
