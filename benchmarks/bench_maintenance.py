"""Maintenance throughput: verify, defrag and merge in MB/s, next to ``cp`` of the same bytes.

Builds the benchmark tree (``bench_dataset``; 20,000 files of 1-64 KiB by default) into an
archive with ``barecat create`` (or, with ``--tiny N``, N files of 64-1,024 bytes with
``add_many``: the millions-of-tiny-files preset), then times whole commands as users run
them, each after ``sync`` and with the page cache warm, medians of ``--repeats`` runs:

- ``verify``: ``barecat verify`` (every CRC32C) of this barecat (``-j 1`` and ``-j 2``)
  and of barecat 0.3.1, against ``cat`` of the shards to /dev/null (reading the bytes);
- ``defrag``: after removing every third file, ``barecat defrag`` against ``cp`` of the
  bytes that remain (what a repack has to move), until synced;
- ``merge``: two halves of the tree merged into a new archive, against ``cp`` of both
  halves' shards, until synced.

barecat 0.3.1 runs the same commands where it has them (its interpreter from
``BARECAT_REFERENCE_PYTHON`` or ``.venv-ref``). A command this barecat does not have yet
is reported as missing. Figures only, no assertions; JSON goes to ``bench-results/``.

    python benchmarks/bench_maintenance.py [--files N | --tiny N] [--repeats R] [--workdir DIR]
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
from collections.abc import Callable
from pathlib import Path

import barecat
import bench_dataset

REPO = Path(__file__).resolve().parent.parent
OURS_BIN = Path(sys.executable).parent / "barecat"


def reference_bin() -> Path | None:
    configured = os.environ.get("BARECAT_REFERENCE_PYTHON")
    python = Path(configured) if configured else REPO / ".venv-ref" / "bin" / "python"
    candidate = python.parent / "barecat"
    return candidate if candidate.exists() else None


def timed(command: list[str], prepare: Callable[[], None] | None, repeats: int) -> list[float]:
    """Wall seconds of ``command`` followed by ``sync``, ``repeats`` times."""
    samples = []
    for _ in range(repeats):
        if prepare is not None:
            prepare()
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.sync()
        samples.append(time.perf_counter() - t0)
    return samples


def has_command(binary: Path, name: str) -> bool:
    probe = subprocess.run([str(binary), name, "--help"], capture_output=True)
    return probe.returncode == 0


def shard_files(archive: str) -> list[str]:
    parent = os.path.dirname(archive) or "."
    base = os.path.basename(archive)
    return sorted(
        os.path.join(parent, f) for f in os.listdir(parent) if f.startswith(base + "-shard-")
    )


def copy_archive(src: str, dst: str) -> None:
    for f in [src, *shard_files(src)]:
        shutil.copyfile(f, dst + f[len(src) :])


def remove_archive(path: str) -> None:
    for f in [path, *shard_files(path)]:
        if os.path.exists(f):
            os.remove(f)


def build(binary: Path, tree: bench_dataset.Tree, archive: str) -> None:
    remove_archive(archive)
    parent, name = os.path.split(tree.root)
    subprocess.run([str(binary), "create", "-C", parent, archive, name], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip


def bench_verify(work: str, archive: str, ref: Path | None, repeats: int) -> dict[str, object]:
    payload = sum(os.path.getsize(f) for f in shard_files(archive))
    rows: dict[str, object] = {"bytes": payload}
    cat = ["sh", "-c", f"cat {' '.join(shard_files(archive))} > /dev/null"]
    rows["cat shards"] = timed(cat, None, repeats)
    rows["ours -j 1"] = timed([str(OURS_BIN), "verify", "-q", "-j", "1", archive], None, repeats)
    rows["ours -j 2"] = timed([str(OURS_BIN), "verify", "-q", "-j", "2", archive], None, repeats)
    if ref is not None:
        ref_copy = os.path.join(work, "ref-verify")
        copy_archive(archive, ref_copy)
        rows["ref"] = timed([str(ref), "verify", ref_copy], None, repeats)
    return rows


def bench_defrag(work: str, archive: str, ref: Path | None, repeats: int) -> dict[str, object]:
    holey = os.path.join(work, "holey")
    copy_archive(archive, holey)
    with barecat.Barecat(holey, readonly=False) as bc:
        paths = sorted(bc.index.iter_all_filepaths())
        for p in paths[::3]:
            del bc[p]
        kept = bc.total_size
    rows: dict[str, object] = {"bytes": kept}
    target = os.path.join(work, "defrag")

    def fresh() -> None:
        remove_archive(target)
        copy_archive(holey, target)

    # cp of the bytes a repack must move: one file holding exactly the surviving bytes
    blob = os.path.join(work, "kept.bin")
    with barecat.Barecat(holey) as bc, open(blob, "wb") as out:
        for f in bc.index.iter_all_fileinfos():
            out.write(bc.read(f))
    rows["cp kept bytes"] = timed(["cp", blob, os.path.join(work, "kept.copy")], None, repeats)
    for who, binary in (("ours", OURS_BIN), ("ref", ref)):
        if binary is None or not has_command(binary, "defrag"):
            rows[who] = "missing"
            continue
        rows[who] = timed([str(binary), "defrag", target], fresh, repeats)
    return rows


def tree_halves(work: str, tree: bench_dataset.Tree) -> list[str]:
    """Two archives, each with every other class directory of the tree."""
    halves = []
    for i, part in enumerate((tree.class_dirs[::2], tree.class_dirs[1::2])):
        half = os.path.join(work, f"half{i}")
        remove_archive(half)
        subprocess.run(
            [str(OURS_BIN), "create", "-q", "-C", tree.root, half, *part],
            check=True,
        )
        halves.append(half)
    return halves


def build_tiny(archive: str, n: int, first: int = 0) -> None:
    """``n`` tiny files (64-1,024 bytes, 1,000 per directory) via ``add_many``: the
    millions-of-small-files case, without a tree of millions of files on disk."""
    remove_archive(archive)
    rng = random.Random(first)
    blob = rng.randbytes(1024)
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many(
            (f"d{i // 1000:05d}/{i:08d}.bin", blob[: rng.randint(64, 1024)])
            for i in range(first, first + n)
        )


def bench_merge(work: str, halves: list[str], ref: Path | None, repeats: int) -> dict[str, object]:
    shards = [f for h in halves for f in shard_files(h)]
    rows: dict[str, object] = {"bytes": sum(os.path.getsize(f) for f in shards)}
    copies = os.path.join(work, "cp-target")
    os.makedirs(copies, exist_ok=True)
    rows["cp shards"] = timed(["cp", *shards, copies], None, repeats)
    out = os.path.join(work, "merged")
    for who, binary in (("ours", OURS_BIN), ("ref", ref)):
        if binary is None or not has_command(binary, "merge"):
            rows[who] = "missing"
            continue
        rows[who] = timed([str(binary), "merge", "-f", "-o", out, *halves],
                          lambda: remove_archive(out), repeats)  # fmt: skip
    return rows


def summarize(name: str, rows: dict[str, object]) -> None:
    payload = rows["bytes"]
    assert isinstance(payload, int)
    baseline_name = next(k for k in rows if k.startswith(("cat", "cp")))
    baseline = statistics.median(rows[baseline_name])  # type: ignore[arg-type]
    print(f"\n{name}: {payload / 1e6:,.0f} MB")
    for key, samples in rows.items():
        if key == "bytes":
            continue
        if not isinstance(samples, list):
            print(f"  {key:<16} {samples}")
            continue
        med = statistics.median(samples)
        ratio = baseline / med
        print(f"  {key:<16} {payload / med / 1e6:8,.0f} MB/s  {med:7.2f} s  "
              f"{ratio:5.2f}x the speed of {baseline_name}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument(
        "--tiny",
        type=int,
        metavar="N",
        help="Instead of the tree: N tiny files (64-1,024 B) put in with add_many, "
        "e.g. --tiny 2000000",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", help="Keep everything here (default: a temporary dir)")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="barecat-maint-")
    os.makedirs(work, exist_ok=True)
    try:
        archive = os.path.join(work, "main.barecat")
        if args.tiny:
            build_tiny(archive, args.tiny)
            halves = [os.path.join(work, "half0"), os.path.join(work, "half1")]
            build_tiny(halves[0], args.tiny // 2)
            build_tiny(halves[1], args.tiny - args.tiny // 2, first=args.tiny // 2)
        else:
            spec = bench_dataset.TreeSpec(args.files)
            tree = bench_dataset.ensure_tree(os.path.join(work, "tree"), spec)
            build(OURS_BIN, tree, archive)
            halves = tree_halves(work, tree)
        ref = reference_bin()
        results = {
            "verify": bench_verify(work, archive, ref, args.repeats),
            "defrag": bench_defrag(work, archive, ref, args.repeats),
            "merge": bench_merge(work, halves, ref, args.repeats),
        }
        count = f"{args.tiny:,} tiny files" if args.tiny else f"{args.files:,} files"
        print(f"machine: {os.cpu_count()} CPUs, {platform.platform()}; {count}")
        for name, rows in results.items():
            summarize(name, rows)
        os.makedirs(REPO / "bench-results", exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = REPO / "bench-results" / f"maintenance-{stamp}.json"
        summary = {"files": args.tiny or args.files, "tiny": bool(args.tiny), "results": results}
        out.write_text(json.dumps(summary, indent=1))
        print(f"\nresults: {out}")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
