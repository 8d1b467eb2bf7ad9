"""Core benchmark: ingest, warm random reads and listings, against barecat 0.3.1 and plain files.

    ./run bench [--quick] [--files N] [--workdir DIR] [--keep]

Generates a deterministic ``train/<class>/<id>.jpg`` tree (``bench_dataset``), then measures

1. ingest, files/s: this barecat (in-process) and the reference barecat 0.3.1 (its own
   interpreter, ``BARECAT_REFERENCE_PYTHON``) building an archive from the tree with
   ``add_by_path`` and with ``add(data=...)``; ``shutil.copytree`` of the tree as a yardstick;
2. warm random reads, µs/file, one thread, a shuffled list of paths: ``bc[path]`` for both,
   ``open().read()`` on the tree, and a hand-written floor (one SQLite SELECT, ``os.pread``
   and a CRC32C check per file) on the same archive;
3. listings: ``listdir`` of every class directory, a full ``walk`` and
   ``glob('train/*/*.jpg')``, against ``os.listdir``/``os.walk``/``glob.glob`` on the tree.

The timing code (``bench_workloads``) is the same for both implementations; for the
reference it runs in a long-lived worker process under the reference's interpreter that
answers JSON requests, so interpreter start-up is never timed. Repetitions run in rounds
that interleave all implementations (rotating the order), so background load and drift
hit them alike; each figure is the median over the rounds, taken with the page cache
warm. Prints a table with speed ratios, and writes every sample to
``bench-results/core-<timestamp>.json``. Nothing here asserts anything about speed.

Disk: besides the tree, up to (2 x 2 + ingest rounds) times its size during ingest (two
archives per barecat, one copy per round; about 6 GB by default). The copies and the
``add(data=)`` archives go after the ingest phase; the tree and the other archives stay
only with ``--workdir`` or ``--keep``.
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
import bench_workloads

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GLOB_PATTERN = "train/*/*.jpg"
IMPLS = ("ours", "ref", "floor", "plain")

_T0 = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


# -- where kernels run -----------------------------------------------------------------------


class InProcess:
    """Runs kernels in this interpreter: this project's barecat, the floor, plain files."""

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
        if key in ("samples", "close_samples"):
            into.setdefault(key, []).extend(value)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif key not in into:
            into[key] = value


def interleaved(rounds: int, jobs: list[Job], raw: dict[str, dict[str, Any]], what: str) -> None:
    """Run every job once per round, rotating the order, so drift hits all alike."""
    for r in range(rounds):
        log(f"{what}: round {r + 1}/{rounds}")
        k = r % len(jobs)
        for impl, name, runner, kernel, args in jobs[k:] + jobs[:k]:
            out = runner.call(kernel, repeats=1, **args)
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


def run(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    spec = bench_dataset.TreeSpec(args.files, args.classes, args.seed)
    log(f"tree: {spec.num_files} files, {spec.num_classes} classes, seed {spec.seed}")
    tree = bench_dataset.ensure_tree(os.path.join(workdir, "tree"), spec)
    log(f"tree ready: {tree.total_bytes / 1e6:.1f} MB in {len(tree.class_dirs)} class dirs")
    n_read = min(args.read_paths, len(tree.relpaths))
    read_paths = random.Random(spec.seed + 1).sample(tree.relpaths, n_read)

    ours = InProcess()
    runners: dict[str, Any] = {"ours": ours}
    ref_python = None if args.no_ref else find_reference_python(args.ref_python)
    if ref_python is not None:
        log(f"starting the reference worker: {ref_python}")
        runners["ref"] = ReferenceWorker(ref_python, workdir)
    elif not args.no_ref:
        log("reference interpreter not found (set BARECAT_REFERENCE_PYTHON); skipping it")
    barecats = list(runners)  # "ours" and, if present, "ref"
    archives = {i: os.path.join(workdir, "archives", i, "data.barecat") for i in barecats}
    scratch = {
        i: os.path.join(workdir, "archives", f"{i}-scratch", "data.barecat") for i in barecats
    }
    raw: dict[str, dict[str, Any]] = {impl: {} for impl in IMPLS}
    need = tree.total_bytes * (1.1 * (2 * len(barecats) + args.ingest_repeats))
    free = shutil.disk_usage(workdir).free
    if free < need:
        log(f"WARNING: {free / 1e9:.1f} GB free in {workdir}, the run may need {need / 1e9:.1f}")
    try:
        log("warming the page cache with the tree")
        bench_workloads.warm_page_cache([tree.root])

        # 1. ingest; the add_by_path archives are the ones read afterwards
        jobs: list[Job] = []
        for variant in ("add_by_path", "add_data"):
            for impl in barecats:
                target = archives[impl] if variant == "add_by_path" else scratch[impl]
                ingest_args = {
                    "tree": tree.root,
                    "relpaths": tree.relpaths,
                    "archive": target,
                    "variant": variant,
                }
                jobs.append(
                    (impl, f"ingest_{variant}", runners[impl], "ingest_barecat", ingest_args)
                )
        copies = os.path.join(workdir, "copytree")
        shutil.rmtree(copies, ignore_errors=True)  # left over from an interrupted run
        copy_args = {"tree": tree.root, "dest_parent": copies}
        jobs.append(("plain", "ingest_copytree", ours, "ingest_copytree", copy_args))
        interleaved(args.ingest_repeats, jobs, raw, "ingest")
        for path in [copies, *(os.path.dirname(p) for p in scratch.values())]:
            shutil.rmtree(path, ignore_errors=True)

        # 2. + 3. reads and listings, page cache warm
        log("warming the page cache with the tree and the archives")
        warmed = bench_workloads.warm_page_cache(
            [tree.root, *(os.path.dirname(a) for a in archives.values())]
        )
        read_args = {"paths": read_paths}
        list_args = {"class_dirs": tree.class_dirs, "pattern": GLOB_PATTERN}
        jobs = []
        for impl in barecats:
            a = {"archive": archives[impl]}
            jobs.append((impl, "read", runners[impl], "read_barecat", {**a, **read_args}))
            floor_impl, floor_name = ("floor", "read") if impl == "ours" else (impl, "floor_read")
            jobs.append((floor_impl, floor_name, runners[impl], "read_floor", {**a, **read_args}))
        jobs.append(("plain", "read", ours, "read_plain", {"tree": tree.root, **read_args}))
        interleaved(args.repeats, jobs, raw, f"random reads of {n_read} paths")
        jobs = [
            (impl, "list", runners[impl], "list_barecat", {"archive": archives[impl], **list_args})
            for impl in barecats
        ]
        jobs.append(("plain", "list", ours, "list_plain", {"tree": tree.root, **list_args}))
        interleaved(args.repeats, jobs, raw, "listings")
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
            "read_paths": n_read,
            "glob_pattern": GLOB_PATTERN,
        },
        "repeats": {"ingest": args.ingest_repeats, "other": args.repeats},
        "page_cache_warmed_bytes": warmed,
        "environments": {impl: runner.environment for impl, runner in runners.items()},
        "raw": raw,
    }


# -- summarizing -----------------------------------------------------------------------------

# (key, label, unit, where to find each implementation's measurement, per-item scale)
# A figure is median(samples) / items * scale for times, or items / median(samples) for rates.
ROWS: list[dict[str, Any]] = [
    {
        "key": "ingest_add_by_path",
        "label": "ingest add_by_path",
        "unit": "files/s",
        "rate": True,
        "src": {
            "ours": ("ingest_add_by_path",),
            "ref": ("ingest_add_by_path",),
            "plain": ("ingest_copytree",),
        },
    },
    {
        "key": "ingest_add_data",
        "label": "ingest read+add(data=)",
        "unit": "files/s",
        "rate": True,
        "src": {
            "ours": ("ingest_add_data",),
            "ref": ("ingest_add_data",),
            "plain": ("ingest_copytree",),
        },
    },
    {
        "key": "read",
        "label": "warm random read",
        "unit": "µs/file",
        "scale": 1e6,
        "src": {"ours": ("read",), "ref": ("read",), "floor": ("read",), "plain": ("read",)},
    },
    {
        "key": "listdir",
        "label": "listdir (each class dir)",
        "unit": "µs/dir",
        "scale": 1e6,
        "src": {impl: ("list", "listdir") for impl in ("ours", "ref", "plain")},
    },
    {
        "key": "walk",
        "label": "walk (whole tree)",
        "unit": "ms",
        "scale": 1e3,
        "per_item": False,
        "src": {impl: ("list", "walk") for impl in ("ours", "ref", "plain")},
    },
    {
        "key": "glob",
        "label": f"glob {GLOB_PATTERN}",
        "unit": "ms",
        "scale": 1e3,
        "per_item": False,
        "src": {impl: ("list", "glob") for impl in ("ours", "ref", "plain")},
    },
]


def _lookup(raw: dict[str, Any], impl: str, path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = raw.get(impl, {})
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def figure(row: dict[str, Any], m: dict[str, Any]) -> float:
    med = statistics.median(m["samples"])
    items = m.get("items", 1) if row.get("per_item", True) else 1
    if row.get("rate"):
        return float(items / med)
    return float(med / items * row.get("scale", 1.0))


def summarize(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per table row: figures, speed ratios, and cross-check counts."""
    rows = []
    for row in ROWS:
        figures: dict[str, float] = {}
        spread: dict[str, list[float]] = {}
        checks: dict[str, Any] = {}
        for impl, path in row["src"].items():
            m = _lookup(result["raw"], impl, path)
            if m is None:
                continue
            figures[impl] = figure(row, m)
            spread[impl] = [figure(row, {**m, "samples": [s]}) for s in m["samples"]]
            checks[impl] = m.get("result")
        # speed of ours relative to each other column: >1 means ours is faster
        ratios = {}
        for other in ("ref", "floor", "plain"):
            if "ours" in figures and other in figures and figures["ours"] > 0:
                a, b = figures["ours"], figures[other]
                ratios[other] = a / b if row.get("rate") else b / a
        rows.append(
            {
                "key": row["key"],
                "label": row["label"],
                "unit": row["unit"],
                "higher_is_better": bool(row.get("rate")),
                "median": figures,
                "per_sample": spread,
                "speed_ratio_ours_over": ratios,
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
    return "-" if value is None else f"{value:.2f}x"


def render(result: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    ds, mach = result["dataset"], result["machine"]
    envs = result["environments"]
    lines = [
        f"barecat core benchmark  {result['timestamp']}",
        f"machine: {mach['cpu_count']} CPUs ({mach['usable_cpus']} usable), {mach['cpu_model']}, "
        f"{mach['memory']}",
        f"platform: {mach['platform']}",
        f"python: ours {envs['ours']['python']} (sqlite {envs['ours']['sqlite']}, barecat "
        f"{envs['ours'].get('barecat_dist_version')})"
        + (
            f"; ref {envs['ref']['python']} (sqlite {envs['ref']['sqlite']}, barecat "
            f"{envs['ref'].get('barecat_dist_version')})"
            if "ref" in envs
            else "; ref not run"
        ),
        f"dataset: {ds['num_files']:,} files, {ds['total_bytes'] / 1e6:,.1f} MB, "
        f"{ds['class_dirs']} class dirs; {ds['read_paths']:,} shuffled paths for reads",
        f"rounds: ingest {result['repeats']['ingest']}, reads and listings "
        f"{result['repeats']['other']}; implementations interleaved; medians shown",
        f"load average (1/5/15 min): {mach['load_average_start']} at start, "
        f"{mach['load_average_end']} at end",
        "",
    ]
    header = (
        f"{'measurement':<26} {'unit':<8} {'ours':>9} {'ref':>9} {'floor':>9} {'plain':>9}"
        f"   {'vs ref':>7} {'vs floor':>8} {'vs plain':>8}"
    )
    lines += [header, "-" * len(header)]
    for r in rows:
        med, rat = r["median"], r["speed_ratio_ours_over"]
        cells = " ".join(f"{_fmt(med.get(impl)):>9}" for impl in IMPLS)
        lines.append(
            f"{r['label']:<26} {r['unit']:<8} {cells}   {_fmt_ratio(rat.get('ref')):>7} "
            f"{_fmt_ratio(rat.get('floor')):>8} {_fmt_ratio(rat.get('plain')):>8}"
        )
    lines += [
        "",
        "vs X = speed of ours / speed of X (>1: ours faster). floor = SELECT + os.pread +",
        "CRC32C by hand on our archive; plain = copytree / open().read() / os.listdir, os.walk,",
        "glob.glob on the tree.",
    ]
    lines += notes(result, rows)
    return "\n".join(lines)


def notes(result: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Diagnostics under the table, and warnings when a cross-check fails."""
    out = []
    raw, envs = result["raw"], result["environments"]
    for impl in ("ours", "ref"):
        m = raw[impl].get("ingest_add_by_path")
        if m:
            close = statistics.median(m["close_samples"])
            total = statistics.median(m["samples"])
            out.append(
                f"{impl} ingest add_by_path: close() takes {close * 1e3:,.0f} ms of "
                f"{total * 1e3:,.0f} ms; archive {m['archive_bytes'] / 1e6:,.1f} MB"
            )
    ours_bytes = raw["ours"].get("ingest_add_by_path", {}).get("stored_bytes")
    ref_bytes = raw["ref"].get("ingest_add_by_path", {}).get("stored_bytes")
    if ref_bytes is not None and ours_bytes != ref_bytes:
        out.append(f"WARNING: stored bytes differ: ours {ours_bytes}, ref {ref_bytes}")
    ref_floor = raw["ref"].get("floor_read")
    if ref_floor and "read" in raw["floor"]:
        read_row = next(r for r in ROWS if r["key"] == "read")
        a = figure(read_row, raw["floor"]["read"])
        b = figure(read_row, ref_floor)
        out.append(
            f"floor in the ref interpreter on the ref archive: {b:.2f} µs/file "
            f"(ours' interpreter: {a:.2f}) - interpreter parity check"
        )
    mism = raw["floor"].get("read", {}).get("crc_mismatches")
    if mism:
        out.append(f"WARNING: floor saw {mism} CRC32C mismatches")
    for r in rows:
        values = {json.dumps(v) for v in r["check"].values()}
        if len(values) > 1:
            out.append(f"WARNING: {r['label']}: implementations disagree on counts {r['check']}")
    ours_file = envs["ours"].get("barecat_file") or ""
    if not os.path.abspath(ours_file).startswith(os.path.join(REPO, "src") + os.sep):
        out.append(f"WARNING: 'ours' imported barecat from {ours_file}, not from {REPO}/src")
    if "ref" in envs and envs["ref"].get("barecat_dist_version") != "0.3.1":
        out.append(f"WARNING: the reference is barecat {envs['ref'].get('barecat_dist_version')}")
    if result["git"].get("src_dirty"):
        out.append(f"note: src/ has uncommitted changes (HEAD {result['git']['commit']})")
    return ["", *out] if out else []


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Ingest, random-read and listing benchmark: this barecat vs barecat 0.3.1 "
        "vs plain files."
    )
    p.add_argument("--quick", action="store_true", help="3,000 files instead of 20,000")
    p.add_argument("--files", type=int, help="number of files (overrides --quick)")
    p.add_argument("--classes", type=int, default=100, help="number of class directories")
    p.add_argument("--seed", type=int, default=0, help="dataset seed")
    p.add_argument("--read-paths", type=int, default=5000, help="shuffled paths per read pass")
    p.add_argument("--repeats", type=int, default=7, help="rounds of reads and listings")
    p.add_argument("--ingest-repeats", type=int, default=5, help="rounds of each ingest")
    p.add_argument("--workdir", help="keep the tree and archives here (reused by later runs)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--ref-python", help="the reference's interpreter (default: env/.venv-ref)")
    p.add_argument("--no-ref", action="store_true", help="skip the reference implementation")
    p.add_argument("--results-dir", default=os.path.join(REPO, "bench-results"))
    args = p.parse_args(argv)
    if args.files is None:
        args.files = 3000 if args.quick else 20000
    if args.repeats < 3 or args.ingest_repeats < 3:
        p.error("--repeats and --ingest-repeats must be at least 3 (medians of 3 or more)")
    if args.files < 1:
        p.error("--files must be positive")
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
        "git": git_info(),
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
