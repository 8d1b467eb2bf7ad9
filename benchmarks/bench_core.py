"""Core benchmark: barecat against barecat 0.3.1 and six other ways to keep many small files.

    ./run bench [--quick] [--files N] [--workdir DIR] [--keep]

Generates a deterministic ``train/<class>/<id>.jpg`` tree (``bench_dataset``; 200,000 files
of 1-64 KiB by default, 20,000 with ``--quick``) and stores it ten ways, all measured on
the same data in the same run (``bench_stores`` has the code for each):

- ``ours``: this barecat, in-process; ``ref``: barecat 0.3.1 in its own interpreter
  (``BARECAT_REFERENCE_PYTHON``), through a long-lived worker that runs the same kernels;
- ``floor``: the physical floor, one file with every file's bytes concatenated, offsets in a
  Python dict, ``os.pread`` only; ``plain``: the tree itself (ingest: a copy of it);
- ``zip`` (``zipfile``, ZIP_STORED, one ``ZipFile`` open, members read by name), ``tar``
  (``tarfile``, uncompressed, a ``{name: TarInfo}`` dict; ``extractfile``, or ``pread`` at
  ``offset_data`` for the checksum-free row), ``sqlite`` (``files(path TEXT PRIMARY KEY, data
  BLOB)``, read by path) and ``lmdb`` (key = path bytes);
- the index-addressed peers (``bench_peers``): ``arrayrecord`` (one ArrayRecord file) and
  ``lance`` (a Lance dataset), each found through a saved ``{path: index}`` dict; a peer
  whose package is missing is skipped with the reason.

Measures, each where it makes sense for the store (``bench_workloads`` has the kernels):

1. ingest files/s and MB/s, from the directory tree and from bytes already in memory (the
   latter on an evenly spread subset of ``--mem-files`` files, loaded before timing); and
   the command-line tools archiving the whole tree as users run them (``barecat create``
   of each barecat, ``tar cf``, ``cp -r``), whole processes;
2. warm random reads by path, µs/file, one thread, a shuffled list of paths: the usual read
   (ours and ref: ``bc[path]``, CRC-checked), without any checksum (ours and ref: index lookup
   + ``sharder.read_from_address``), via ``bc.open(path, 'rb').read()``, and the usual read
   by a reader that has already served one read per file ("after an epoch": the steady
   state of readers that adapt, e.g. build an in-memory index after enough lookups);
3. batches of 1,000 random paths: ``bc.get_many`` (where the barecat has it) and each store's
   batch read, against a loop of ``bc[path]`` (the usual read);
4. random reads from 2 processes, each with its own reader: aggregate files/s;
5. a sequential read of every file in storage order (ours and ref: ``Order.ADDRESS``);
6. open + first read, ms; listdir / walk / ``glob('train/*/*.jpg')`` / ``glob('**/*.jpg',
   recursive=True)`` for the barecats and the tree; index and disk bytes per file.

Repetitions run in rounds that interleave all stores (rotating the order), so background
load and drift hit them alike; each figure is the median over the rounds, with the page
cache warm (an untimed warm-up pass precedes each timed one). Ingest from the tree writes the
whole data set once per store and round, so at the default size it runs one round
(``--ingest-repeats``). Prints the figures and their ratios to barecat 0.3.1 and to the floor,
and writes every sample to ``bench-results/core-<timestamp>.json`` (``bench_core_report``
makes the tables). Nothing here asserts anything about speed.

Disk: the tree plus nine stores of about its size, plus one copy of the tree per ingest
round (removed after that phase); about 60 GB at the default size, 6 GB with ``--quick``.
Everything goes unless ``--workdir`` or ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import bench_dataset
import bench_peers
import bench_stores
import bench_workloads
from bench_core_report import BARECATS, HERE, PATTERNS, REPO, render, summarize

IMPLS = ("ours", "ref", "floor", "plain", "zip", "tar", "sqlite", "lmdb", "arrayrecord", "lance")

_T0 = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


# -- where kernels run -----------------------------------------------------------------------


class InProcess:
    """Runs kernels in this interpreter: this project's barecat and every non-barecat store."""

    def __init__(self) -> None:
        self.environment = bench_workloads.environment()

    def call(self, kernel: str, **args: Any) -> Any:
        return bench_workloads.KERNELS[kernel](**args)

    def close(self) -> None:
        pass


class ReferenceWorker:
    """A long-lived ``bench_workloads.py --serve`` under the reference's interpreter.

    Started once, so its start-up and imports are never timed, and kept alive so that its
    repetitions can be interleaved with ours.
    """

    def __init__(self, python: str, cwd: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.proc = subprocess.Popen(
            [python, os.path.join(HERE, "bench_workloads.py"), "--serve"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.environment = self._receive()

    def _receive(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the reference worker exited (code {self.proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise SystemExit(f"the reference worker failed:\n{answer['error']}")
        return answer["result"]

    def call(self, kernel: str, **args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"kernel": kernel, "args": args}) + "\n")
        self.proc.stdin.flush()
        return self._receive()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def find_reference_python(explicit: str | None) -> str | None:
    for candidate in (
        explicit,
        os.environ.get("BARECAT_REFERENCE_PYTHON"),
        os.path.join(REPO, ".venv-ref", "bin", "python"),
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


Job = tuple[str, str, Any, str, dict[str, Any]]  # impl, task name, runner, kernel, args


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    """Append one round's samples to the accumulated measurement (nested for listings)."""
    for key, value in new.items():
        if key in ("samples", "close_samples", "synced_samples", "warmup_samples"):
            into.setdefault(key, []).extend(value)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif key not in into:
            into[key] = value


JOB_SECONDS: dict[str, float] = {}  # wall time spent per job, for planning run times


def interleaved(rounds: int, jobs: list[Job], raw: dict[str, dict[str, Any]], what: str) -> None:
    """Run every job once per round, rotating the order, so drift hits all alike."""
    for r in range(rounds):
        log(f"{what}: round {r + 1}/{rounds}")
        k = r % len(jobs)
        for impl, name, runner, kernel, args in jobs[k:] + jobs[:k]:
            t0 = time.perf_counter()
            out = runner.call(kernel, repeats=1, **args)
            key = f"{impl}/{name}"
            JOB_SECONDS[key] = round(JOB_SECONDS.get(key, 0.0) + time.perf_counter() - t0, 2)
            if name in raw[impl]:
                _merge(raw[impl][name], out)
            else:
                raw[impl][name] = out


# -- machine information ---------------------------------------------------------------------


def _first_line_with(path: str, key: str) -> str | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_info() -> dict[str, Any]:
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(affinity) if affinity is not None else None,
        "cpu_model": _first_line_with("/proc/cpuinfo", "model name") or platform.processor(),
        "memory": _first_line_with("/proc/meminfo", "MemTotal"),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", REPO, *args], capture_output=True, text=True, check=False
            )
        except OSError:
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    status = git("status", "--porcelain", "--", "src")
    return {"commit": git("rev-parse", "HEAD"), "src_dirty": bool(status)}


# -- the benchmark ---------------------------------------------------------------------------


def spread_sample(items: list[str], n: int) -> list[str]:
    """``n`` items evenly spread over ``items`` (all of them if ``n`` is not smaller)."""
    if n >= len(items):
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def lmdb_available() -> bool:
    try:
        import lmdb  # noqa: F401
    except ImportError:
        return False
    return True


def store_runners(stores: Sequence[str], workdir: str) -> dict[str, Any]:
    """{store: where its kernels run} for those of ``stores`` that can run here: ``ref``
    in a :class:`ReferenceWorker` (started in ``workdir``), the others :class:`InProcess`;
    each store left out is logged with the reason. The caller closes the runners."""
    ours = InProcess()
    runners: dict[str, Any] = {}
    for store in stores:
        why = None
        if store == "ref":
            python = find_reference_python(None)
            if python is None:
                why = "no reference interpreter (BARECAT_REFERENCE_PYTHON)"
            else:
                runners[store] = ReferenceWorker(python, workdir)
                continue
        elif store == "lmdb" and not lmdb_available():
            why = "lmdb is not installed"
        elif store in bench_peers.KINDS:
            why = bench_peers.unavailable(store)
        if why is None:
            runners[store] = ours
        else:
            log(f"skipping {store}: {why}")
    return runners


def close_runners(runners: dict[str, Any]) -> None:
    """Close each of ``store_runners``' runners once."""
    for runner in {id(r): r for r in runners.values()}.values():
        runner.close()


def run(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    spec = bench_dataset.TreeSpec(args.files, args.classes, args.seed)
    phases: dict[str, float] = {}
    t_phase = time.perf_counter()

    def phase_done(name: str) -> None:
        nonlocal t_phase
        now = time.perf_counter()
        phases[name] = round(now - t_phase, 1)
        t_phase = now

    log(f"tree: {spec.num_files} files, {spec.num_classes} classes, seed {spec.seed}")
    tree = bench_dataset.ensure_tree(os.path.join(workdir, "tree"), spec)
    log(f"tree ready: {tree.total_bytes / 1e6:.1f} MB in {len(tree.class_dirs)} class dirs")
    rng = random.Random(spec.seed + 1)
    read_paths = rng.sample(tree.relpaths, min(args.read_paths, len(tree.relpaths)))
    batch_size = min(args.batch_size, len(tree.relpaths))
    batches = [rng.sample(tree.relpaths, batch_size) for _ in range(args.batches)]
    mem_paths = spread_sample(tree.relpaths, args.mem_files)
    mem_bytes = sum(tree.sizes[p] for p in mem_paths)

    ours = InProcess()  # imports this barecat: the code measured is the code of this moment
    git_start = git_info()
    runners: dict[str, Any] = {"ours": ours}
    ref_python = None if args.no_ref else find_reference_python(args.ref_python)
    if ref_python is not None:
        log(f"starting the reference worker: {ref_python}")
        runners["ref"] = ReferenceWorker(ref_python, workdir)
    elif not args.no_ref:
        log("reference interpreter not found (set BARECAT_REFERENCE_PYTHON); skipping it")
    impls = [i for i in IMPLS if i != "ref" or "ref" in runners]
    if not lmdb_available():
        log("lmdb is not installed (pip install -e '.[bench]'; ./run bench does); skipping it")
        impls.remove("lmdb")
    for peer in bench_peers.KINDS:
        if (why := bench_peers.unavailable(peer)) is not None:
            log(f"skipping {peer}: {why}")
            impls.remove(peer)
    kinds = {i: "barecat" if i in BARECATS else i for i in impls}
    runner_of = {i: runners.get(i, ours) for i in impls}
    stores = {i: tree.root if i == "plain" else os.path.join(workdir, "stores", i) for i in impls}
    raw: dict[str, dict[str, Any]] = {impl: {} for impl in impls}
    phase_done("tree")

    need = tree.total_bytes * (1.15 * (len(impls) - 1) + args.ingest_repeats) + mem_bytes * (
        1.15 * len(impls) + args.mem_repeats
    )
    free = shutil.disk_usage(workdir).free
    if free < need:
        log(f"WARNING: {free / 1e9:.1f} GB free in {workdir}, the run may need {need / 1e9:.1f}")

    def ingest_job(impl: str, name: str, location: str, relpaths: list[str], source: str) -> Job:
        payload = tree.total_bytes if relpaths is tree.relpaths else mem_bytes
        kernel_args = {
            "kind": kinds[impl],
            "location": location,
            "tree": tree.root,
            "relpaths": relpaths,
            "source": source,
            "payload_bytes": payload,
        }
        return (impl, name, runner_of[impl], "ingest", kernel_args)

    try:
        log("warming the page cache with the tree")
        warmed = bench_workloads.warm_page_cache([tree.root])

        # 1. ingest from the tree; the stores it leaves are the ones read afterwards
        copies = os.path.join(workdir, "plain-copies")
        shutil.rmtree(copies, ignore_errors=True)  # left over from an interrupted run
        jobs = [
            ingest_job(
                i, "ingest_tree", copies if i == "plain" else stores[i], tree.relpaths, "tree"
            )
            for i in impls
        ]
        interleaved(args.ingest_repeats, jobs, raw, "ingest from the tree")
        shutil.rmtree(copies, ignore_errors=True)
        phase_done("ingest_tree")

        # 2. ingest from bytes in memory, a spread subset, into scratch stores
        scratch = os.path.join(workdir, "scratch")
        shutil.rmtree(scratch, ignore_errors=True)
        jobs = [
            ingest_job(i, "ingest_memory", os.path.join(scratch, i), mem_paths, "memory")
            for i in impls
        ]
        what = f"ingest from memory ({len(mem_paths):,} files)"
        interleaved(args.mem_repeats, jobs, raw, what)
        for runner in runners.values():
            runner.call("forget_memory")
        shutil.rmtree(scratch, ignore_errors=True)
        phase_done("ingest_memory")

        # 2b. the command-line tools on the whole tree: barecat create, tar cf, cp -r
        cli_impls = [i for i in impls if i in (*BARECATS, "tar", "plain")]
        jobs = [
            (i, "ingest_cli", runner_of[i], "ingest_command", {
                "kind": kinds[i], "location": os.path.join(workdir, "cli", i),
                "tree": tree.root, "items": len(tree.relpaths), "payload_bytes": tree.total_bytes,
            })
            for i in cli_impls
        ]  # fmt: skip
        interleaved(args.ingest_repeats, jobs, raw, "command-line ingest of the tree")
        phase_done("ingest_cli")

        # 3. what each store costs on disk (not timed)
        for i in impls:
            raw[i]["footprint"] = ours.call("footprint", kind=kinds[i], location=stores[i])

        # 4. warm random reads: one thread, batches, two processes, open + first read
        jobs = []
        for i in impls:
            store = {"kind": kinds[i], "location": stores[i]}
            reads = {**store, "paths": read_paths, "batches": batches}
            mp = {**store, "paths": read_paths, "procs": args.procs, "passes": args.mp_passes}
            jobs.append((i, "read_random", runner_of[i], "read_random", reads))
            jobs.append((i, "read_mp", runner_of[i], "read_multiprocess", mp))
            jobs.append((i, "open", runner_of[i], "open_time", {**store, "path": read_paths[0]}))
        for i in (*BARECATS, "floor"):
            if i in impls:
                epoch = {"kind": kinds[i], "location": stores[i], "paths": read_paths}
                epoch["epoch_reads"] = len(tree.relpaths)
                jobs.append((i, "read_epoch", runner_of[i], "read_after_epoch", epoch))
        for i in BARECATS:
            if i in impls:
                archive = os.path.join(stores[i], bench_stores.BARECAT_NAME)
                floor_args = {"archive": archive, "paths": read_paths}
                jobs.append((i, "sql_floor_read", runner_of[i], "read_sql_floor", floor_args))
        interleaved(args.repeats, jobs, raw, f"random reads of {len(read_paths):,} paths")
        phase_done("random_reads")

        # 5. listings: the barecats and the tree
        list_args = {"class_dirs": tree.class_dirs, "patterns": PATTERNS}
        jobs = [
            (
                i,
                "list",
                runner_of[i],
                "listings",
                {"kind": kinds[i], "location": stores[i], **list_args},
            )
            for i in impls
            if i in BARECATS or i == "plain"
        ]
        interleaved(args.repeats, jobs, raw, "listings")
        phase_done("listings")

        # 6. every file in storage order (the page cache may not hold all stores at once:
        #    each call first reads its store in bulk, then makes an untimed pass)
        jobs = [
            (
                i,
                "read_seq",
                runner_of[i],
                "read_sequential",
                {"kind": kinds[i], "location": stores[i]},
            )
            for i in impls
        ]
        interleaved(args.seq_repeats, jobs, raw, "sequential reads")
        phase_done("sequential_reads")
    finally:
        for runner in runners.values():
            runner.close()

    return {
        "dataset": {
            "num_files": spec.num_files,
            "num_classes": spec.num_classes,
            "class_dirs": len(tree.class_dirs),
            "seed": spec.seed,
            "total_bytes": tree.total_bytes,
            "read_paths": len(read_paths),
            "batch_size": batch_size,
            "batches": len(batches),
            "memory_ingest_files": len(mem_paths),
            "memory_ingest_bytes": mem_bytes,
            "patterns": PATTERNS,
        },
        "impls": impls,
        "git": git_start,
        "repeats": {
            "ingest_tree": args.ingest_repeats,
            "ingest_memory": args.mem_repeats,
            "reads_and_listings": args.repeats,
            "sequential": args.seq_repeats,
            "processes": args.procs,
            "process_passes": args.mp_passes,
        },
        "phase_seconds": phases,
        "job_seconds": dict(JOB_SECONDS),
        "page_cache_warmed_bytes": warmed,
        "environments": {impl: runner.environment for impl, runner in runners.items()},
        "raw": raw,
    }


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Ingest, read and listing benchmark: this barecat vs barecat 0.3.1, plain "
        "files, zip, tar, SQLite, LMDB, ArrayRecord, Lance and a pread floor."
    )
    p.add_argument("--quick", action="store_true", help="20,000 files instead of 200,000")
    p.add_argument("--files", type=int, help="number of files (overrides --quick)")
    p.add_argument("--classes", type=int, default=100, help="number of class directories")
    p.add_argument("--seed", type=int, default=0, help="dataset seed")
    p.add_argument("--read-paths", type=int, default=5000, help="shuffled paths per read pass")
    p.add_argument("--batch-size", type=int, default=1000, help="paths per batch read")
    p.add_argument("--batches", type=int, default=5, help="batches per batch-read pass")
    p.add_argument("--procs", type=int, default=2, help="processes for the parallel read")
    p.add_argument("--mp-passes", type=int, default=2, help="passes over the paths per process")
    p.add_argument("--repeats", type=int, default=5, help="rounds of reads and listings")
    p.add_argument(
        "--ingest-repeats",
        type=int,
        help="rounds of ingest from the tree (default: 3, or 1 above 50,000 files)",
    )
    p.add_argument("--mem-files", type=int, default=10000, help="files for ingest from memory")
    p.add_argument("--mem-repeats", type=int, default=3, help="rounds of ingest from memory")
    p.add_argument("--seq-repeats", type=int, default=3, help="rounds of sequential reads")
    p.add_argument("--workdir", help="keep the tree and stores here (the tree is reused)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--ref-python", help="the reference's interpreter (default: env/.venv-ref)")
    p.add_argument("--no-ref", action="store_true", help="skip the reference implementation")
    p.add_argument("--results-dir", default=os.path.join(REPO, "bench-results"))
    args = p.parse_args(argv)
    if args.files is None:
        args.files = 20000 if args.quick else 200000
    if args.ingest_repeats is None:
        args.ingest_repeats = 3 if args.files <= 50000 else 1
    if min(args.repeats, args.mem_repeats, args.seq_repeats) < 3:
        p.error("--repeats, --mem-repeats and --seq-repeats must be at least 3 (medians)")
    if args.ingest_repeats < 1:
        p.error("--ingest-repeats must be positive")
    if min(args.files, args.read_paths, args.batch_size, args.batches, args.mem_files) < 1:
        p.error("--files, --read-paths, --batch-size, --batches and --mem-files must be positive")
    if args.procs < 1 or args.mp_passes < 1:
        p.error("--procs and --mp-passes must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    load_start = load_average()
    if args.workdir:
        workdir = os.path.abspath(args.workdir)
        os.makedirs(workdir, exist_ok=True)
    else:
        workdir = tempfile.mkdtemp(prefix="barecat-bench-")
    try:
        result = run(args, workdir)
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "benchmark": "core",
        "timestamp": stamp,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "machine": {
            **machine_info(),
            "load_average_start": load_start,
            "load_average_end": load_average(),
        },
        "git_end": git_info(),
        "workdir": workdir if (args.workdir or args.keep) else None,
        "elapsed_s": time.perf_counter() - _T0,
        **result,
    }
    rows = summarize(result)
    result["summary"] = rows
    print(render(result, rows))
    os.makedirs(args.results_dir, exist_ok=True)
    out_path = os.path.join(args.results_dir, f"core-{stamp}.json")
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nresults: {out_path}  (total {result['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
