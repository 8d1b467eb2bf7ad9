"""Ray Data, Dask, Hugging Face datasets and barecat: reading an archive (and writing one,
with Ray), against the engines' own ways.

On one ImageNet-like tree (``bench_dataset``: 1-64 KiB files of random bytes, default
10,000; ``--large`` for the issue's 100,000), with a local Ray cluster of ``--cpus``
CPUs (default 2):

1. read: ``read_barecat`` of the tree's archive against ``ray.data.read_binary_files``
   of the tree itself: the time to make the dataset (``read_barecat`` plans from the
   index then; ``read_binary_files`` lists the tree), the time to the first batch of
   1,024 rows (from making the dataset: that time included), and rows/s and MB/s of a
   full pass (``iter_batches``, every byte touched); Ray's own start-up is outside every
   timed region, the same for both: ``ray.init`` and one small pass of each reader (100
   files: worker processes started, modules imported) come first;
2. write: ``write_barecat`` of the tree read by ``read_binary_files``, and of the same
   rows already in Ray's object store (the write alone), against ``barecat create`` of
   the same tree (the command line, one process), until the archive is complete, and
   against writing the rows in memory as files: one file a row (what a ``write_binary``
   would do; Ray has none, and ``write_images`` would decode and re-encode) and
   ``write_webdataset`` (members of tar shards);
3. Dask (a ``distributed.LocalCluster`` of ``--cpus`` worker processes of one thread):
   ``read_barecat`` of the archive against a ``dask.bag`` of the tree's paths (listed by
   ``os.walk``, 1,000 to a partition) that opens and reads each file: time to the first
   partition done and a full pass (every partition's bytes counted on the workers).

Hugging Face ``datasets`` (``--engines hf``), with ``--cpus`` processes or workers:

4. streamed: ``barecat.integrations.hf.iterable_dataset`` of the archive against
   ``load_dataset("imagefolder", streaming=True)`` of the tree, iterated here and through
   a DataLoader of ``--cpus`` workers: time to the first row (from creating the dataset)
   and a full pass;
5. materialised: ``to_dataset(num_proc=C)`` of the archive against
   ``load_dataset("imagefolder", num_proc=C)`` of the tree, each into a fresh cache,
   then a full pass over the result. ``imagefolder`` keeps each file's path and reads
   the file when the row is used, so its passes open and read every file, as ``Image()``
   decoding would; the archive's rows hold the bytes.

Both read the page cache (the tree was just written). Medians of ``--repeats``
interleaved rounds; figures only, no assertions.

    python benchmarks/bench_engines.py [--files N | --large] [--repeats R] [--cpus C]
                                       [--engines ray,dask,hf] [--reads-only]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import barecat  # noqa: E402
from bench_dataset import Tree, TreeSpec, ensure_tree  # noqa: E402


def timed_pass(make: Callable[[], Any]) -> tuple[float, float, float, int, int]:
    """Make a dataset and read it whole: (made s, first batch s, total s, rows, bytes)."""
    start = time.perf_counter()
    ds = make()
    made = time.perf_counter() - start
    first = None
    rows = size = 0
    for batch in ds.iter_batches(batch_size=1024, batch_format="pyarrow"):
        if first is None:
            first = time.perf_counter() - start
        rows += batch.num_rows
        size += sum(len(b) for b in batch.column("bytes").to_pylist())
    total = time.perf_counter() - start
    return made, first or total, total, rows, size


def machine() -> str:
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {model}"


def bench_hf(tree: Tree, archive_path: Path, repeats: int, cpus: int) -> None:
    """Hugging Face datasets: the archive's datasets against ``imagefolder`` on the tree."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local files only, no hub look-ups
    import datasets
    import torch.utils.data

    from barecat.integrations.hf import iterable_dataset, to_dataset

    datasets.disable_progress_bars()
    archive = str(archive_path)
    work = archive_path.parent
    files = len(tree.relpaths)

    def archive_bytes(row: dict[str, Any]) -> int:
        return len(row["bytes"])

    def tree_bytes(row: dict[str, Any]) -> int:  # imagefolder's rows hold the file's path
        image = row["image"]
        if image["bytes"] is not None:
            return len(image["bytes"])
        with open(image["path"], "rb") as f:
            return len(f.read())

    def folder(**options: Any) -> Any:
        ds = datasets.load_dataset("imagefolder", data_dir=tree.root, split="train", **options)
        return ds.cast_column("image", datasets.Image(decode=False))

    def loader(ds: Any) -> Any:
        return torch.utils.data.DataLoader(ds, num_workers=cpus, batch_size=None)

    def streamed(make: Callable[[], Any], size: Callable[[dict[str, Any]], int]) -> Any:
        start = time.perf_counter()
        first = None
        rows = total = 0
        for row in make():
            first = first or time.perf_counter() - start
            rows += 1
            total += size(row)
        assert (rows, total) == (files, tree.total_bytes), (rows, total)
        return first, time.perf_counter() - start

    def materialised(make: Callable[[str], Any], size: Callable[[dict[str, Any]], int]) -> Any:
        cache = tempfile.mkdtemp(prefix="hf-cache-", dir=work)
        try:
            start = time.perf_counter()
            ds = make(cache)
            built = time.perf_counter() - start
            total = sum(size(row) for row in ds)
            assert (len(ds), total) == (files, tree.total_bytes), (len(ds), total)
            return built, time.perf_counter() - start
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    streams: dict[str, tuple[Callable[[], Any], Callable[[dict[str, Any]], int]]] = {
        "`iterable_dataset`": (lambda: iterable_dataset(archive), archive_bytes),
        f"`iterable_dataset`, DataLoader of {cpus} workers": (
            lambda: loader(iterable_dataset(archive)),
            archive_bytes,
        ),
        '`load_dataset("imagefolder", streaming=True)`': (
            lambda: folder(streaming=True),
            tree_bytes,
        ),
        f'`load_dataset("imagefolder", streaming=True)`, DataLoader of {cpus} workers': (
            lambda: loader(folder(streaming=True)),
            tree_bytes,
        ),
    }
    built: dict[str, tuple[Callable[[str], Any], Callable[[dict[str, Any]], int]]] = {
        f"`to_dataset(num_proc={cpus})`": (
            lambda cache: to_dataset(archive, num_proc=cpus, dataset_cache_dir=cache),
            archive_bytes,
        ),
        f'`load_dataset("imagefolder", num_proc={cpus})`': (
            lambda cache: folder(num_proc=cpus, cache_dir=cache),
            tree_bytes,
        ),
    }
    results: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeats):
        for name, (make, size) in streams.items():
            results.setdefault(name, []).append(streamed(make, size))
        for name, (make_in, size) in built.items():
            results.setdefault(name, []).append(materialised(make_in, size))

    mb = tree.total_bytes / 1e6
    print(f"\n{datetime.date.today()}, {machine()}, datasets {datasets.__version__},")
    print(f"{files:,} files ({mb:,.0f} MB), medians of {repeats} rounds\n")
    print("| streamed | first row | full pass | rows/s | MB/s |")
    print("|---|---|---|---|---|")
    for name in streams:
        first = statistics.median(r[0] for r in results[name])
        total = statistics.median(r[1] for r in results[name])
        print(f"| {name} | {first:.2f} s | {total:.2f} s | {files / total:,.0f} | "
              f"{mb / total:,.0f} |")  # fmt: skip
    print("\n| materialised | build | build + full pass | rows/s | MB/s |")
    print("|---|---|---|---|---|")
    for name in built:
        made = statistics.median(r[0] for r in results[name])
        total = statistics.median(r[1] for r in results[name])
        print(f"| {name} | {made:.2f} s | {total:.2f} s | {files / total:,.0f} | "
              f"{mb / total:,.0f} |")  # fmt: skip
    print(flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--large", action="store_true", help="100,000 files (the issue's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--workdir", help="keep the tree here (reused when it matches)")
    parser.add_argument("--engines", default="ray,dask,hf", help="which: ray, dask, hf")
    parser.add_argument("--reads-only", action="store_true", help="Ray: no write measured")
    args = parser.parse_args()
    files = 100_000 if args.large else args.files
    engines = set(args.engines.split(","))

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-engines-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = ensure_tree(str(work / "tree"), TreeSpec(num_files=files))
    print(f"tree: {files:,} files, {tree.total_bytes / 1e6:,.0f} MB", flush=True)
    archive = work / "tree.barecat"
    try:
        create_archive(archive, tree.root)
        if "ray" in engines:
            bench_ray(args, work, tree, files)
        if "dask" in engines:
            bench_dask(args, archive, tree, files)
        if "hf" in engines:
            bench_hf(tree, archive, args.repeats, args.cpus)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def create_archive(archive: Path, root: str) -> None:
    """``barecat create`` of the tree (the command line), replacing any archive there."""
    barecat.remove(str(archive)) if barecat.exists(str(archive)) else None
    command = [sys.executable, "-m", "barecat", "create", str(archive), "-C", root, "."]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def bench_ray(args: argparse.Namespace, work: Path, tree: Any, files: int) -> None:
    """Ray Data: read_barecat against read_binary_files; write_barecat against create."""
    import ray

    from barecat.integrations.ray import read_barecat, write_barecat

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        results: dict[str, list[Any]] = {}
        archive = work / "tree.barecat"
        ray_out = work / "ray.barecat"

        def create() -> None:
            create_archive(archive, tree.root)

        def write() -> None:
            barecat.remove(str(ray_out)) if barecat.exists(str(ray_out)) else None
            root = tree.root + "/"

            def relative(batch: dict[str, Any]) -> dict[str, Any]:
                batch["path"] = [p[len(root) :] for p in batch["path"]]
                return batch

            ds = ray.data.read_binary_files(tree.root, include_paths=True)
            write_barecat(ds.map_batches(relative), ray_out)

        def write_materialized() -> None:
            barecat.remove(str(ray_out)) if barecat.exists(str(ray_out)) else None
            write_barecat(in_memory, ray_out)

        few = ray.data.read_binary_files(tree.root, include_paths=True).limit(100)
        for warm_up in (read_barecat(str(archive)).limit(100), few):  # Ray's start-up
            warm_up.take_all()
        root = tree.root + "/"
        in_memory = ray.data.from_items([])  # (the rows in the object store, when measured)
        if not args.reads_only:
            in_memory = (
                ray.data.read_binary_files(tree.root, include_paths=True)
                .map_batches(
                    lambda b: {"path": [p[len(root) :] for p in b["path"]], "bytes": b["bytes"]}
                )
                .materialize()
            )
        files_out = work / "ray-files"
        webdataset_out = work / "ray-webdataset"

        def write_files() -> None:  # what a write_binary would do: a file a row
            shutil.rmtree(files_out, ignore_errors=True)
            in_memory.map_batches(_FileWriter(str(files_out)), batch_format="pyarrow").materialize()

        def write_webdataset() -> None:  # rows as members of tar shards
            shutil.rmtree(webdataset_out, ignore_errors=True)
            in_memory.map_batches(_as_samples, batch_format="pyarrow").write_webdataset(
                str(webdataset_out),
                encoder=None,  # the bytes as they are
            )

        writes = (
            ("create", create),
            ("write_barecat", write),
            ("write_barecat_materialized", write_materialized),
            ("write_files", write_files),
            ("write_webdataset", write_webdataset),
        )
        for _ in range(args.repeats):
            for name, work_fn in () if args.reads_only else writes:
                start = time.perf_counter()
                work_fn()
                results.setdefault(name, []).append(time.perf_counter() - start)
            if not args.reads_only:
                with barecat.Barecat(str(ray_out)) as bc:
                    assert bc.num_files == files
            for name, make in (
                ("read_barecat", lambda: read_barecat(str(archive))),
                ("read_binary_files", lambda: ray.data.read_binary_files(
                    tree.root, include_paths=True)),
            ):  # fmt: skip
                made, first, total, rows, size = timed_pass(make)
                assert rows == files and size == tree.total_bytes, (name, rows, size)
                results.setdefault(name, []).append((made, first, total))
    finally:
        ray.shutdown()

    mb = tree.total_bytes / 1e6
    print(f"\n{datetime.date.today()}, {machine()}, Ray {ray.__version__}, {args.cpus} CPUs,")
    print(f"{files:,} files ({mb:,.0f} MB), medians of {args.repeats} rounds\n")
    print("| read | dataset made | first batch | full pass | rows/s | MB/s |")
    print("|---|---|---|---|---|---|")
    for name in ("read_barecat", "read_binary_files"):
        made, first, total = (statistics.median(r[i] for r in results[name]) for i in range(3))
        print(f"| `{name}` | {made:.2f} s | {first:.2f} s | {total:.2f} s | "
              f"{files / total:,.0f} | {mb / total:,.0f} |")  # fmt: skip
    if args.reads_only:
        return
    print("\n| write | time | files/s | MB/s |")
    print("|---|---|---|---|")
    for name, label in (("write_barecat", "`write_barecat` of `read_binary_files`"),
                        ("write_barecat_materialized", "`write_barecat` of rows in memory"),
                        ("write_files", "a file a row, of rows in memory (`map_batches`)"),
                        ("write_webdataset", "`write_webdataset` of rows in memory (tar shards)"),
                        ("create", "`barecat create` (one process)")):  # fmt: skip
        t = statistics.median(results[name])
        print(f"| {label} | {t:.2f} s | {files / t:,.0f} | {mb / t:,.0f} |")


class _FileWriter:
    """Writes each row's bytes to ``root/path`` (Ray has no ``write_binary``): the peer
    "as files" of ``write_barecat``; returns each batch's row count."""

    def __init__(self, root: str) -> None:
        self.root = root

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        made: set[str] = set()
        for path, data in zip(
            batch.column("path").to_pylist(), batch.column("bytes").to_pylist(), strict=True
        ):
            target = os.path.join(self.root, path)
            folder = os.path.dirname(target)
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            with open(target, "wb") as f:
                f.write(data)
        return pa.table({"written": [batch.num_rows]})


def _as_samples(batch: Any) -> Any:
    """Rows as WebDataset samples: ``__key__`` (the path without ``.jpg``) and ``jpg``."""
    import pyarrow as pa

    keys = [p.rsplit(".", 1)[0] for p in batch.column("path").to_pylist()]
    return pa.table({"__key__": keys, "jpg": batch.column("bytes")})


def _count_frame(frame: Any) -> tuple[int, int]:
    """A partition's rows and bytes (every value a Python ``bytes``, as a user gets it)."""
    return len(frame), sum(len(b) for b in frame["bytes"])


def _read_files(paths: list[str]) -> tuple[int, int]:
    """A partition of paths read whole, file by file: rows and bytes."""
    size = 0
    for path in paths:
        with open(path, "rb") as f:
            size += len(f.read())
    return len(paths), size


def bench_dask(args: argparse.Namespace, archive: Path, tree: Any, files: int) -> None:
    """Dask: read_barecat against a bag of the tree's paths, each file opened and read."""
    import dask
    import distributed

    from barecat.integrations.dask import read_barecat

    def timed(make: Callable[[], list[Any]]) -> tuple[float, float, int, int]:
        start = time.perf_counter()
        futures = client.compute(make())
        first = None
        rows = size = 0
        for future in distributed.as_completed(futures):
            r, s = future.result()
            first = first or time.perf_counter() - start
            rows, size = rows + r, size + s
        return first or 0.0, time.perf_counter() - start, rows, size

    def barecat_pass() -> list[Any]:
        count = dask.delayed(_count_frame)
        return [count(part) for part in read_barecat(str(archive)).to_delayed()]

    def bag_pass() -> list[Any]:
        paths = [os.path.join(d, n) for d, _, names in os.walk(tree.root) for n in names]
        per = 1000
        return [dask.delayed(_read_files)(paths[i : i + per]) for i in range(0, len(paths), per)]

    results: dict[str, list[tuple[float, float]]] = {}
    with distributed.LocalCluster(
        n_workers=args.cpus, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
        timed(barecat_pass), timed(bag_pass)  # warm-up: the workers import what they need
        for _ in range(args.repeats):
            for name, make in (("read_barecat", barecat_pass), ("files", bag_pass)):
                first, total, rows, size = timed(make)
                assert rows == files and size == tree.total_bytes, (name, rows, size)
                results.setdefault(name, []).append((first, total))
    mb = tree.total_bytes / 1e6
    print(f"\n{datetime.date.today()}, {machine()}, Dask {dask.__version__}, "
          f"{args.cpus} worker processes,")  # fmt: skip
    print(f"{files:,} files ({mb:,.0f} MB), medians of {args.repeats} rounds\n")
    print("| Dask read | first partition | full pass | rows/s | MB/s |")
    print("|---|---|---|---|---|")
    for name, label in (("read_barecat", "`read_barecat`"),
                        ("files", "the tree's files, 1,000 paths a task")):  # fmt: skip
        first = statistics.median(r[0] for r in results[name])
        total = statistics.median(r[1] for r in results[name])
        print(f"| {label} | {first:.2f} s | {total:.2f} s | {files / total:,.0f} | "
              f"{mb / total:,.0f} |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
