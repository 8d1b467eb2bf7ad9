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
and writes every sample to ``bench-results/core-<timestamp>.json``. Nothing here asserts
anything about speed.

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
import statistics
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PATTERNS = {"glob": "train/*/*.jpg", "rglob": "**/*.jpg"}
IMPLS = ("ours", "ref", "floor", "plain", "zip", "tar", "sqlite", "lmdb", "arrayrecord", "lance")
BARECATS = ("ours", "ref")
# stores whose close does real work
CLOSE_NOTED = (*BARECATS, "zip", "sqlite", "lmdb", "arrayrecord", "lance")

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


# -- summarizing -----------------------------------------------------------------------------

MB = {"amount": "bytes", "scale": 1e-6}
SAME_RATIO = {"ratio": False}  # same ratios as the row above: left out of the ratio tables


def _row(
    key: str, label: str, unit: str, path: tuple[str, ...] = (), **opts: Any
) -> dict[str, Any]:
    return {"key": key, "label": label, "unit": unit, "path": path, **opts}


# Each row: key, label, unit, where each store's measurement is in ``raw`` (``path``), and
# how to turn it into a figure: rates are amount / median(samples) * scale, times are
# median(samples) / amount * scale, with amount = ``items`` (or ``bytes``; 1 if not
# ``per_item``). ``value`` rows are computed from the footprints instead (lower is better).
ROWS: list[dict[str, Any]] = [
    _row("ingest_tree_files", "ingest from tree", "files/s", ("ingest_tree",), rate=True),
    _row(
        "ingest_tree_mb",
        "ingest from tree",
        "MB/s",
        ("ingest_tree",),
        rate=True,
        **MB,
        **SAME_RATIO,
    ),
    _row("ingest_memory_files", "ingest from memory", "files/s", ("ingest_memory",), rate=True),
    _row(
        "ingest_memory_mb",
        "ingest from memory",
        "MB/s",
        ("ingest_memory",),
        rate=True,
        **MB,
        **SAME_RATIO,
    ),
    _row(
        "ingest_tree_sync",
        "ingest from tree, until synced",
        "files/s",
        ("ingest_tree",),
        rate=True,
        samples="synced_samples",
    ),
    _row(
        "ingest_memory_sync",
        "ingest from memory, until synced",
        "files/s",
        ("ingest_memory",),
        rate=True,
        samples="synced_samples",
    ),
    _row("ingest_cli", "create from tree, command line", "files/s", ("ingest_cli",), rate=True),
    _row(
        "ingest_cli_sync",
        "create from tree, command line, until synced",
        "files/s",
        ("ingest_cli",),
        rate=True,
        samples="synced_samples",
    ),
    _row("read", "random read (usual)", "µs/file", ("read_random", "read"), scale=1e6),
    _row("read_epoch", "random read after an epoch", "µs/file", ("read_epoch",), scale=1e6),
    _row(
        "read_indexed",
        "random read, SQLite index only",
        "µs/file",
        ("read_random", "indexed"),
        scale=1e6,
    ),
    _row("read_raw", "random read, no checksum", "µs/file", ("read_random", "raw"), scale=1e6),
    _row("read_open", "random read, open().read()", "µs/file", ("read_random", "open"), scale=1e6),
    _row("batch", "batch read, one call per batch", "µs/file", ("read_random", "batch"), scale=1e6),
    _row(
        "batch_loop",
        "batch as a loop of reads",
        "µs/file",
        ("read_random", "batch_loop"),
        scale=1e6,
    ),
    _row("read_mp", "random read, 2 processes", "files/s", ("read_mp",), rate=True),
    _row("seq_mb", "sequential read, all files", "MB/s", ("read_seq",), rate=True, **MB),
    _row(
        "seq_files", "sequential read, all files", "files/s", ("read_seq",), rate=True, **SAME_RATIO
    ),
    _row("open", "open + first read", "ms", ("open",), scale=1e3),
    _row("listdir", "listdir (each class dir)", "µs/dir", ("list", "listdir"), scale=1e6),
    _row("walk", "walk (whole tree)", "ms", ("list", "walk"), scale=1e3, per_item=False),
    _row("glob", f"glob {PATTERNS['glob']}", "ms", ("list", "glob"), scale=1e3, per_item=False),
    _row(
        "rglob",
        f"glob {PATTERNS['rglob']} recursive",
        "ms",
        ("list", "rglob"),
        scale=1e3,
        per_item=False,
    ),
    _row("index_bytes", "index bytes per file", "B/file", value="index"),
    _row("lookup_bytes", "lookup table bytes per file", "B/file", value="lookup"),
    _row("disk_overhead", "disk bytes over payload", "B/file", value="overhead"),
]


def _lookup(raw: dict[str, Any], impl: str, path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = raw.get(impl, {})
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if not isinstance(node, dict) or "samples" not in node:
        return None  # missing, or reported unavailable
    return node


def figure(row: dict[str, Any], m: dict[str, Any]) -> float:
    med = statistics.median(m[row.get("samples", "samples")])
    amount = m.get(row.get("amount", "items"), 1) if row.get("per_item", True) else 1
    if row.get("rate"):
        return float(amount / med * row.get("scale", 1.0))
    return float(med / amount * row.get("scale", 1.0))


def footprint_figure(row: dict[str, Any], result: dict[str, Any], impl: str) -> float | None:
    fp = result["raw"][impl].get("footprint")
    n, payload = result["dataset"]["num_files"], result["dataset"]["total_bytes"]
    if not fp or n == 0:
        return None
    if row["value"] in ("index", "lookup"):
        amount = fp.get(f"{row['value']}_bytes")
        return None if amount is None else amount / n
    return float((fp["disk_bytes"] - payload) / n)


def better_ratio(row: dict[str, Any], a: float, b: float) -> float | None:
    """How many times better ``a`` is than ``b``: faster, or fewer bytes (>1: ``a`` wins)."""
    if row.get("rate"):
        return a / b if b > 0 else None
    return b / a if a > 0 else None


def summarize(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per table row: figures, ratios to the reference and the floor, checks."""
    rows = []
    for row in ROWS:
        figures: dict[str, float] = {}
        spread: dict[str, list[float]] = {}
        checks: dict[str, Any] = {}
        for impl in result["impls"]:
            if "value" in row:
                value = footprint_figure(row, result, impl)
                if value is not None:
                    figures[impl] = value
                continue
            m = _lookup(result["raw"], impl, row["path"])
            if m is None:
                continue
            figures[impl] = figure(row, m)
            key = row.get("samples", "samples")
            spread[impl] = [figure(row, {**m, key: [s]}) for s in m[key]]
            checks[impl] = m.get("result")
        ratios: dict[str, dict[str, float]] = {}
        for base in ("ref", "floor"):
            if base in figures:
                ratios[base] = {
                    impl: r
                    for impl, value in figures.items()
                    if (r := better_ratio(row, value, figures[base])) is not None
                }
        rows.append(
            {
                "key": row["key"],
                "label": row["label"],
                "unit": row["unit"],
                "higher_is_better": bool(row.get("rate")),
                "in_ratio_tables": bool(row.get("ratio", True)),
                "median": figures,
                "per_sample": spread,
                "ratio_to": ratios,
                "check": checks,
            }
        )
    return rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _fmt_ratio(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 0.1 or value <= 0:
        return f"{value:.2f}x"
    inverse = 1 / value  # small ratios as fractions: 1/2,400x rather than 0.000x
    return f"1/{inverse:,.0f}x" if inverse >= 10 else f"1/{inverse:.1f}x"


def _table(
    impls: list[str], rows: list[dict[str, Any]], cell: Any, title: str, unit: bool = True
) -> list[str]:
    w = max(10, *(len(impl) + 1 for impl in impls))
    header = f"{'measurement':<32} {'unit' if unit else '':<8}" + "".join(
        f"{impl:>{w}}" for impl in impls
    )
    lines = [title, header, "-" * len(header)]
    for r in rows:
        cells = "".join(f"{cell(r, impl):>{w}}" for impl in impls)
        lines.append(f"{r['label']:<32} {r['unit'] if unit else '':<8}{cells}")
    return lines


def render(result: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    ds, mach, rep = result["dataset"], result["machine"], result["repeats"]
    envs, impls = result["environments"], result["impls"]
    lines = [
        f"barecat core benchmark  {result['timestamp']}",
        f"machine: {mach['cpu_count']} CPUs ({mach['usable_cpus']} usable), {mach['cpu_model']}, "
        f"{mach['memory']}",
        f"platform: {mach['platform']}",
        f"python: ours {envs['ours']['python']} (sqlite {envs['ours']['sqlite']}, barecat "
        f"{envs['ours'].get('barecat_dist_version')}, lmdb {envs['ours'].get('lmdb')}, "
        f"array_record {envs['ours'].get('array_record')}, pylance {envs['ours'].get('pylance')})"
        + (
            f"; ref {envs['ref']['python']} (sqlite {envs['ref']['sqlite']}, barecat "
            f"{envs['ref'].get('barecat_dist_version')})"
            if "ref" in envs
            else "; ref not run"
        ),
        f"dataset: {ds['num_files']:,} files, {ds['total_bytes'] / 1e6:,.1f} MB, "
        f"{ds['class_dirs']} class dirs; random reads: {ds['read_paths']:,} shuffled paths; "
        f"batches: {ds['batches']} x {ds['batch_size']:,} random paths",
        f"ingest from memory: {ds['memory_ingest_files']:,} files evenly spread over the tree, "
        f"{ds['memory_ingest_bytes'] / 1e6:,.1f} MB, loaded before timing",
        f"rounds: ingest from tree {rep['ingest_tree']}, from memory {rep['ingest_memory']}, "
        f"reads and listings {rep['reads_and_listings']}, sequential {rep['sequential']}; "
        "stores interleaved; medians shown",
        f"load average (1/5/15 min): {mach['load_average_start']} at start, "
        f"{mach['load_average_end']} at end; phases (s): {result['phase_seconds']}",
        "",
    ]
    lines += _table(
        impls, rows, lambda r, i: _fmt(r["median"].get(i)), "Figures (medians over the rounds)"
    )
    for base, name in (("ref", "barecat 0.3.1"), ("floor", "the floor")):
        if base not in impls:
            continue
        shown = [  # one row per measure, and only where some store has a ratio
            r for r in rows if r["in_ratio_tables"] and len(r["ratio_to"].get(base, {})) > 1
        ]
        lines.append("")
        lines += _table(
            impls,
            shown,
            lambda r, i, base=base: _fmt_ratio(r["ratio_to"].get(base, {}).get(i)),
            f"Relative to {name}: how many times faster (or fewer bytes); >1 beats it",
            unit=False,
        )
    lines += [
        "",
        "ours/ref = this barecat / barecat 0.3.1; floor = concatenated bytes + dict + os.pread;",
        "plain = the tree (ingest: makedirs + copyfile or write per file); zip = zipfile STORED;",
        "tar = tarfile + {name: TarInfo} (usual read extractfile, no-checksum read pread);",
        "sqlite = blob table by path; lmdb = key path bytes; arrayrecord = one ArrayRecord",
        "file (group_size:1, uncompressed) and lance = a Lance dataset of one binary column,",
        "both found through a saved {path: index} dict (read([i]) / take([i]); batch:",
        "read(indices) / take(indices)). Usual read: ours/ref bc[path]",
        "(CRC32C; ours finds paths in the lookup table its writer saved beside the index),",
        "zip ZipFile.read (CRC-32); the others check nothing. After an epoch: the usual read",
        "by a reader that has already served one read per file. SQLite index only: ours",
        "bc[path] with lookup_table=False. No checksum: ours/ref index.lookup_file +",
        "sharder.read_from_address (SQLite). Batch, one call: ours get_many; sqlite",
        "IN (...); lmdb getmulti; arrayrecord read(indices); lance take(indices); floor,",
        "tar (pread) and zip read in storage order; plain a loop. Durability: ours fsyncs",
        "shards before index commits (and starts writeback early); lmdb commits (fsync)",
        "every 1,000 files; sqlite commits once at the end; ref, zip, tar, floor, plain,",
        'arrayrecord and lance write without fsync. "Until synced" adds the os.sync()',
        "that follows each ingest, so that all stores pay for getting their bytes on disk.",
    ]
    lines += notes(result, rows)
    return "\n".join(lines)


def notes(result: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Diagnostics under the tables, and warnings when a cross-check fails."""
    out = []
    raw, envs = result["raw"], result["environments"]
    for name, what in (("ingest_tree", "from the tree"), ("ingest_memory", "from memory")):
        parts = []
        for impl in result["impls"]:
            m = raw[impl].get(name)
            if m and impl in CLOSE_NOTED:
                close = statistics.median(m["close_samples"])
                total = statistics.median(m["samples"])
                parts.append(f"{impl} {close * 1e3:,.0f}/{total * 1e3:,.0f}")
        if parts:
            out.append(f"ingest {what}, ms closing/total: " + ", ".join(parts))
    read_row = next(r for r in ROWS if r["key"] == "read")
    for impl in BARECATS:
        m = raw.get(impl, {}).get("sql_floor_read")
        if m:
            where = "ours' interpreter" if impl == "ours" else "the ref's interpreter"
            out.append(
                f"hand-written SELECT + pread + CRC32C on the {impl} archive, in {where}: "
                f"{figure(read_row, m):.2f} µs/file"
            )
            if m.get("crc_mismatches"):
                out.append(
                    f"WARNING: {m['crc_mismatches']} CRC32C mismatches in the {impl} archive"
                )
    for impl in BARECATS:
        batch = raw.get(impl, {}).get("read_random", {}).get("batch", {})
        if "unavailable" in batch:
            out.append(f"{impl}: no get_many in this barecat, batch read n/a")
    for r in rows:
        values = {json.dumps(v) for v in r["check"].values()}
        if len(values) > 1:
            out.append(f"WARNING: {r['label']}: stores disagree on counts {r['check']}")
    ours_file = envs["ours"].get("barecat_file") or ""
    if not os.path.abspath(ours_file).startswith(os.path.join(REPO, "src") + os.sep):
        out.append(f"WARNING: 'ours' imported barecat from {ours_file}, not from {REPO}/src")
    if "ref" in envs and envs["ref"].get("barecat_dist_version") != "0.3.1":
        out.append(f"WARNING: the reference is barecat {envs['ref'].get('barecat_dist_version')}")
    if result["git"] != result["git_end"]:
        out.append(
            f"note: the checkout changed during the run (HEAD {result['git']['commit']} at the "
            f"start, {result['git_end']['commit']} at the end); ours ran the code of the start"
        )
    if result["git"].get("src_dirty"):
        out.append(f"note: src/ has uncommitted changes (HEAD {result['git']['commit']})")
    return ["", *out] if out else []


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
