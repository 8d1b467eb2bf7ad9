"""Nothing slower than barecat 0.3.1: start-up, globs, listings and queries, from one run.

    ./run bench-regress [--files N] [--dirs D] [--rounds R] [--workdir DIR] [--only NAME,...]

Builds one archive of N files (20,000 by default) in a tree of D directories (200:
``train/c###/######.jpg``, six random digits, so ``1*.jpg`` picks about a tenth of
them), then measures each call of the public API that barecat 0.3.1 also has, ours against
0.3.1's (``BARECAT_REFERENCE_PYTHON``, or ``.venv-ref``), on that same archive:

- ``import barecat``: a fresh ``python -c "import barecat"`` minus a fresh ``python -c
  pass`` (wall and CPU of the child, from ``wait4``); the same for a script that opens
  the archive and reads one file; and ours' ``-X importtime`` breakdown of ``import
  barecat; barecat.Barecat`` (the modules that cost most themselves) below the table;
- the globs (``glob``, ``iglob``, ``globfiles``; recursive and not), ``listdir``,
  ``walk``, ``scandir``, ``files``/``dirs``, ``exists``/``isfile``/``isdir``/``in``
  (µs a call, over 1,000 paths), ``bc[path]``/``bc.read``/``index.lookup_file`` (the
  same), ``index.iter_all_fileinfos``/``iter_all_paths``,
  ``num_files``/``num_dirs``/``total_size``/``len``, and opening the archive.

Each round starts a fresh worker process per implementation (rotating which goes
first), which times every call as the best of several repetitions after one untimed
warm-up; the figure is the median over the rounds of those bests, in wall time and in CPU
time (``process_time``: the share other load on 2 shared cores changes least). Prints
each call, ours, 0.3.1's and the ratio ours/0.3.1 (<= 1.0: not slower), and writes JSON
to ``bench-results/regress-<timestamp>.json``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench_batch import reference_python, save_result

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROBES = 1_000  # paths each exists/isfile/isdir/in call is timed over


def make_archive(path: str, files: int, dirs: int) -> None:
    """``train/c###/######.jpg``: ``files`` files spread evenly over ``dirs`` directories."""
    import barecat

    rng = random.Random(0)
    per_dir = -(-files // dirs)
    with barecat.Barecat(path, readonly=False, overwrite=True) as bc:
        for i in range(files):
            name = f"{rng.randrange(10**6):06d}_{i}.jpg"
            bc[f"train/c{i // per_dir:03d}/{name}"] = b"x" * rng.randint(16, 64)


def calls(bc: Any) -> dict[str, tuple[Callable[[], object], int]]:
    """Each measured call, and how many operations one run of it is (the figure is per
    operation)."""
    file_paths = sorted(bc.files())
    dir_paths = sorted(p for p in bc.dirs() if p)
    rng = random.Random(1)
    some_files = rng.sample(file_paths, min(PROBES, len(file_paths)))
    some_dirs = [rng.choice(dir_paths) for _ in range(PROBES)]
    missing = [p + ".missing" for p in some_files]
    one_dir = dir_paths[len(dir_paths) // 2]

    def each(method: Callable[[str], object], paths: list[str]) -> Callable[[], object]:
        return lambda: [method(p) for p in paths]

    def count(iterable_of: Callable[[], Any]) -> Callable[[], object]:
        return lambda: sum(1 for _ in iterable_of())

    return {
        "glob **/1*.jpg recursive": (lambda: bc.glob("**/1*.jpg", recursive=True), 1),
        "glob **/*.jpg recursive": (lambda: bc.glob("**/*.jpg", recursive=True), 1),
        "glob train/**/1*.jpg recursive": (
            lambda: bc.glob("train/**/1*.jpg", recursive=True),
            1,
        ),
        "glob ** recursive": (lambda: bc.glob("**", recursive=True), 1),
        "glob train/** recursive": (lambda: bc.glob("train/**", recursive=True), 1),
        "glob train/*/1*.jpg": (lambda: bc.glob("train/*/1*.jpg"), 1),
        "glob train/*/*.jpg": (lambda: bc.glob("train/*/*.jpg"), 1),
        "glob train/*": (lambda: bc.glob("train/*"), 1),
        f"glob {one_dir}/1*.jpg": (lambda: bc.glob(f"{one_dir}/1*.jpg"), 1),
        "iglob **/1*.jpg recursive": (
            count(lambda: bc.iglob("**/1*.jpg", recursive=True)),
            1,
        ),
        "globfiles **/1*.jpg recursive": (
            lambda: bc.globfiles("**/1*.jpg", recursive=True),
            1,
        ),
        "listdir train (dirs)": (lambda: bc.listdir("train"), 1),
        "listdir of a dir (files)": (lambda: bc.listdir(one_dir), 1),
        "scandir of a dir": (count(lambda: bc.scandir(one_dir)), 1),
        "walk whole tree": (count(lambda: bc.walk("")), 1),
        "files() all": (count(bc.files), 1),
        "dirs() all": (count(bc.dirs), 1),
        "exists (file)": (each(bc.exists, some_files), len(some_files)),
        "exists (dir)": (each(bc.exists, some_dirs), len(some_dirs)),
        "exists (missing)": (each(bc.exists, missing), len(missing)),
        "isfile (file)": (each(bc.isfile, some_files), len(some_files)),
        "isdir (dir)": (each(bc.isdir, some_dirs), len(some_dirs)),
        "path in bc (file)": (each(bc.__contains__, some_files), len(some_files)),
        "bc[path]": (each(bc.__getitem__, some_files), len(some_files)),
        "bc.read(path)": (each(bc.read, some_files), len(some_files)),
        "index.lookup_file": (each(bc.index.lookup_file, some_files), len(some_files)),
        "index.iter_all_fileinfos": (count(bc.index.iter_all_fileinfos), 1),
        "index.iter_all_paths": (count(bc.index.iter_all_paths), 1),
        "num_files": (lambda: [bc.num_files for _ in range(PROBES)], PROBES),
        "num_dirs": (lambda: [bc.num_dirs for _ in range(PROBES)], PROBES),
        "total_size": (lambda: [bc.total_size for _ in range(PROBES)], PROBES),
        "len(bc)": (lambda: [len(bc) for _ in range(PROBES)], PROBES),
    }


def _best(fn: Callable[[], object], budget: float) -> tuple[float, float]:
    """(best wall, best CPU) seconds of ``fn`` over repetitions filling about ``budget``
    seconds (at least 3, at most 200), after one untimed run."""
    fn()
    wall = cpu = float("inf")
    started = time.perf_counter()
    repeats = 0
    while repeats < 3 or (repeats < 200 and time.perf_counter() - started < budget):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        c1, w1 = time.process_time(), time.perf_counter()
        wall, cpu = min(wall, w1 - w0), min(cpu, c1 - c0)
        repeats += 1
    return wall, cpu


def worker(archive: str, only: list[str], budget: float) -> dict[str, list[float]]:
    """{call: [wall, cpu] seconds per operation}, best of repetitions, in this process."""
    import barecat

    out: dict[str, list[float]] = {}

    def opening() -> None:
        barecat.Barecat(archive).close()

    def opening_index() -> None:
        barecat.Index(archive).close()  # (the index file is the archive's path)

    for name, fn in (("open + close", opening), ("Index(path) open + close", opening_index)):
        if _wanted(name, only):
            wall, cpu = _best(fn, budget)
            out[name] = [wall, cpu]
    with barecat.Barecat(archive) as bc:
        for name, (fn, ops) in calls(bc).items():
            if _wanted(name, only):
                wall, cpu = _best(fn, budget)
                out[name] = [wall / ops, cpu / ops]
    return out


def _wanted(name: str, only: list[str]) -> bool:
    return not only or any(o in name for o in only)


def _env(ours: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if ours:
        env["PYTHONPATH"] = os.path.join(REPO, "src")
    return env


def child_cpu(python: str, argv: list[str], ours: bool) -> tuple[float, float]:
    """(wall, CPU seconds) of ``python argv`` run to its end, CPU from ``wait4``."""
    start = time.perf_counter()
    proc = subprocess.Popen([python, *argv], env=_env(ours), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{python} {argv} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def start_up_costs(python: str, archive: str, ours: bool) -> dict[str, list[float]]:
    """[wall, CPU] of each start-up in :data:`START_UPS`, in a fresh interpreter, less an
    empty one's (``-c pass``): the best of 5 of each, taken in turns."""
    programs = {"": "pass", **{k: v.format(archive=archive) for k, v in START_UPS.items()}}
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in programs}
    for _ in range(5):
        for key, program in programs.items():
            runs[key].append(child_cpu(python, ["-c", program], ours))
    empty_wall = min(w for w, _ in runs[""])
    empty_cpu = min(c for _, c in runs[""])
    return {
        key: [min(w for w, _ in runs[key]) - empty_wall, min(c for _, c in runs[key]) - empty_cpu]
        for key in START_UPS
    }


START_UPS = {
    "import barecat": "import barecat",
    "import barecat + open + bc[path]": (
        "import barecat\nwith barecat.Barecat({archive!r}) as bc: bc[next(iter(bc.files()))]"
    ),
}
"""Programs timed whole, each in a fresh interpreter: ``import barecat`` alone (0.3.1
imports everything it has, ours what is used), and what a script does to read a file."""


def import_breakdown(python: str, top: int = 8) -> list[tuple[str, float]]:
    """Ours' ``-X importtime`` of ``import barecat`` and the first use of ``Barecat``
    (what the lazy exports then load): the modules that cost most themselves, µs."""
    proc = subprocess.run(
        [python, "-X", "importtime", "-c", "import barecat; barecat.Barecat"],
        env=_env(True),
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), float(self_us)))
    return sorted(rows, key=lambda r: -r[1])[:top]


def measure_worker(python: str, archive: str, args: argparse.Namespace, ours: bool) -> Any:
    argv = [os.path.abspath(__file__), "--worker", archive, "--budget", str(args.budget)]
    if args.only:
        argv += ["--only", args.only]
    proc = subprocess.run([python, *argv], env=_env(ours), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"the worker under {python} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def _unit(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.2f} µs"
    return f"{seconds * 1e3:8.2f} ms"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=20_000)
    p.add_argument("--dirs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.3, help="seconds of repetitions per call")
    p.add_argument("--only", default="", help="comma-separated substrings of call names")
    p.add_argument("--workdir", help="keep the archive here (reused when it exists)")
    p.add_argument("--worker", metavar="ARCHIVE", help=argparse.SUPPRESS)
    args = p.parse_args()
    only = [o for o in args.only.split(",") if o]
    if args.worker:
        print(json.dumps(worker(args.worker, only, args.budget)))
        return
    ref = reference_python()
    if ref is None:
        raise SystemExit("barecat 0.3.1's interpreter not found (set BARECAT_REFERENCE_PYTHON)")
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="bench-regress-")
        )
        compare(args, only, {"ours": sys.executable, "ref": ref}, workdir)


def compare(args: argparse.Namespace, only: list[str], impls: dict[str, str], workdir: str) -> None:
    """The rounds, the table printed and the JSON written (see the module doc)."""
    archive = os.path.join(workdir, f"regress-{args.files}-{args.dirs}.barecat")
    if not os.path.exists(archive):
        sys.path.insert(0, os.path.join(REPO, "src"))
        make_archive(archive, args.files, args.dirs)
    samples: dict[str, dict[str, list[list[float]]]] = {i: {} for i in impls}
    order = list(impls)
    for r in range(args.rounds):
        for impl in order if r % 2 == 0 else order[::-1]:
            python = impls[impl]
            if _wanted("import barecat", only):
                for name, figures in start_up_costs(python, archive, impl == "ours").items():
                    samples[impl].setdefault(name, []).append(figures)
            for name, figures in measure_worker(python, archive, args, impl == "ours").items():
                samples[impl].setdefault(name, []).append(figures)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    medians = {
        impl: {
            name: [statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs)]
            for name, runs in by_call.items()
        }
        for impl, by_call in samples.items()
    }
    load = os.getloadavg()
    print(
        f"{args.files} files in {args.dirs} dirs; median over {args.rounds} rounds of each "
        f"process's best; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"{'call':34s} {'ours wall':>11s} {'0.3.1 wall':>11s} {'ratio':>6s}   "
        f"{'ours CPU':>11s} {'0.3.1 CPU':>11s} {'ratio':>6s}"
    )
    for name, (ow, oc) in medians["ours"].items():
        rw, rc = medians["ref"].get(name, [float("nan")] * 2)
        print(
            f"{name:34s} {_unit(ow)} {_unit(rw)} {ow / rw:5.2f}x   "
            f"{_unit(oc)} {_unit(rc)} {oc / rc:5.2f}x"
        )
    breakdown: list[tuple[str, float]] = []
    if _wanted("import barecat", only):
        breakdown = import_breakdown(sys.executable)
        print("ours' import + first use of Barecat, the dearest modules (-X importtime, µs):")
        for name, us in breakdown:
            print(f"  {us:8.0f}  {name}")
    result: dict[str, Any] = {
        "python": platform.python_version(),
        "files": args.files,
        "dirs": args.dirs,
        "rounds": args.rounds,
        "seconds_wall_cpu": medians,
        "samples": samples,
        "import_breakdown_us": breakdown,
    }
    save_result("regress", result)


if __name__ == "__main__":
    main()
