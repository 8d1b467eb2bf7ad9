"""Measurement kernels of the core benchmark, identical for every implementation measured.

Used in-process for this project's barecat, and run as a script by the reference's own
interpreter for barecat 0.3.1::

    REF_PYTHON bench_workloads.py --serve    # JSON requests in, one JSON answer line out

so the same code times both, and interpreter startup and imports are never inside a timing.
``import barecat`` happens inside the kernels that need it and resolves to whichever barecat
the running interpreter has. Besides barecat the module needs only the standard library and
``crc32c`` (installed in both environments), so the reference's venv can run it as is.

Every kernel returns plain JSON data: a list of per-pass wall times in seconds (``samples``),
how many items one pass handles, and counts that the caller cross-checks between
implementations. Nothing here asserts anything about speed.
"""

from __future__ import annotations

import gc
import glob
import json
import os
import platform
import shutil
import sqlite3
import sys
import time
import traceback
import urllib.parse
from collections.abc import Callable
from typing import Any

MIN_SAMPLE_SECONDS = 0.05  # short operations are looped until one sample takes this long
MAX_INNER_LOOPS = 1000


# -- timing helpers ------------------------------------------------------------------------


def measure(fn: Callable[[], int], repeats: int) -> dict[str, Any]:
    """Time ``fn`` (one untimed warm-up call first) ``repeats`` times.

    Calls that take less than ``MIN_SAMPLE_SECONDS`` are repeated inside each sample and
    the sample is the mean per call. Returns samples (seconds per call), the inner loop
    count and ``fn``'s return value (a count used for cross-checking).
    """
    t0 = time.perf_counter()
    result = fn()
    once = time.perf_counter() - t0
    inner = 1
    if once < MIN_SAMPLE_SECONDS:
        inner = min(MAX_INNER_LOOPS, max(1, int(MIN_SAMPLE_SECONDS / max(once, 1e-7)) + 1))
    samples = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return {"samples": samples, "inner_loops": inner, "result": result}


def sync_disks() -> None:
    """Flush earlier runs' dirty pages so they do not slow down the next timed write."""
    if hasattr(os, "sync"):
        os.sync()


def warm_page_cache(paths: list[str]) -> int:
    """Read ``paths`` (files, or directories read recursively) once; returns bytes read."""
    total = 0
    buf = bytearray(1 << 20)
    for top in paths:
        if os.path.isdir(top):
            files = [os.path.join(d, n) for d, _, names in os.walk(top) for n in names]
        else:
            files = [top]
        for path in files:
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    total += n
    return total


def archive_files(archive: str) -> list[str]:
    """The index and shard files of the archive at ``archive`` (either naming)."""
    directory = os.path.dirname(os.path.abspath(archive))
    base = os.path.basename(archive)
    return sorted(
        os.path.join(directory, n)
        for n in os.listdir(directory)
        if n == base or n.startswith(base + "-shard-") or n == base + "-sqlite-index"
    )


# -- ingest --------------------------------------------------------------------------------


def ingest_barecat(
    tree: str,
    relpaths: list[str],
    archive: str,
    repeats: int,
    variant: str = "add_by_path",
    barecat_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build ``archive`` from the tree ``repeats`` times, each from scratch.

    ``variant`` is ``add_by_path`` (the library reads the file) or ``add_data`` (read the
    bytes here, then ``add(path, data=...)``). A sample covers opening the archive, adding
    every file and closing it (the final commit); ``close_samples`` is the closing part.
    The archive's directory is deleted and recreated before each repetition, so give it a
    directory of its own; the archive of the last repetition stays on disk.
    """
    import barecat

    kwargs = barecat_kwargs or {}
    fullpaths = [(os.path.join(tree, rel), rel) for rel in relpaths]
    archive_dir = os.path.dirname(os.path.abspath(archive))
    samples, close_samples = [], []
    for _ in range(repeats):
        if os.path.exists(archive_dir):
            shutil.rmtree(archive_dir)
        os.makedirs(archive_dir)
        sync_disks()
        gc.collect()
        t0 = time.perf_counter()
        bc = barecat.Barecat(archive, readonly=False, **kwargs)
        try:
            if variant == "add_by_path":
                add_by_path = bc.add_by_path
                for full, rel in fullpaths:
                    add_by_path(full, rel)
            elif variant == "add_data":
                add = bc.add
                for full, rel in fullpaths:
                    with open(full, "rb") as f:
                        data = f.read()
                    add(rel, data=data)
            else:
                raise ValueError(f"unknown ingest variant {variant!r}")
        finally:
            t1 = time.perf_counter()
            bc.close()
            t2 = time.perf_counter()
        samples.append(t2 - t0)
        close_samples.append(t2 - t1)
    with barecat.Barecat(archive) as bc:
        stored_files, stored_bytes = len(bc), bc.total_size
    return {
        "samples": samples,
        "close_samples": close_samples,
        "items": len(relpaths),
        "result": stored_files,
        "stored_bytes": stored_bytes,
        "archive_bytes": sum(os.path.getsize(f) for f in archive_files(archive)),
    }


def ingest_copytree(tree: str, dest_parent: str, repeats: int) -> dict[str, Any]:
    """``shutil.copytree`` of the tree, the plain-files yardstick for ingest.

    Each repetition copies into a fresh ``dest_parent/copy-N`` and nothing is deleted here:
    on ext4, creating tens of thousands of files right after deleting as many runs several
    times slower, and more so each round, which would measure the previous round's
    deletion rather than the copy. The caller removes ``dest_parent`` after the phase.
    """
    os.makedirs(dest_parent, exist_ok=True)
    samples, dest = [], ""
    for _ in range(repeats):
        n = len(os.listdir(dest_parent))
        dest = os.path.join(dest_parent, f"copy-{n}")
        sync_disks()
        gc.collect()
        t0 = time.perf_counter()
        shutil.copytree(tree, dest)
        samples.append(time.perf_counter() - t0)
    nfiles = sum(len(names) for _, _, names in os.walk(dest))
    return {"samples": samples, "items": nfiles, "result": nfiles}


# -- random reads --------------------------------------------------------------------------


def read_barecat(archive: str, paths: list[str], repeats: int) -> dict[str, Any]:
    """``bc[path]`` for every path, in the given (shuffled) order, one open archive."""
    import barecat

    with barecat.Barecat(archive) as bc:

        def one_pass() -> int:
            total = 0
            for p in paths:
                total += len(bc[p])
            return total

        out = measure(one_pass, repeats)
    out["items"] = len(paths)
    return out


def read_floor(archive: str, paths: list[str], repeats: int) -> dict[str, Any]:
    """The least a reader must do: one SELECT, one ``os.pread``, one CRC32C per file."""
    import crc32c

    index = archive
    if not os.path.isfile(index) and os.path.isfile(archive + "-sqlite-index"):
        index = archive + "-sqlite-index"
    uri = f"file:{urllib.parse.quote(os.path.abspath(index))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    directory = os.path.dirname(os.path.abspath(archive))
    prefix = os.path.basename(archive) + "-shard-"
    fds = {
        int(name[len(prefix) :]): os.open(os.path.join(directory, name), os.O_RDONLY)
        for name in os.listdir(directory)
        if name.startswith(prefix)
    }
    sql = "SELECT shard, offset, size, crc32c FROM files WHERE path = ?"
    execute, pread, crc = conn.execute, os.pread, crc32c.crc32c
    mismatches = 0

    def one_pass() -> int:
        nonlocal mismatches
        total = 0
        for p in paths:
            shard, offset, size, expected = execute(sql, (p,)).fetchone()
            data = pread(fds[shard], size, offset)
            if crc(data) != expected:
                mismatches += 1
            total += len(data)
        return total

    try:
        out = measure(one_pass, repeats)
    finally:
        conn.close()
        for fd in fds.values():
            os.close(fd)
    out["items"] = len(paths)
    out["crc_mismatches"] = mismatches
    return out


def read_plain(tree: str, paths: list[str], repeats: int) -> dict[str, Any]:
    """``open(path, 'rb').read()`` of every file of the extracted tree."""
    fullpaths = [os.path.join(tree, p) for p in paths]

    def one_pass() -> int:
        total = 0
        for p in fullpaths:
            with open(p, "rb") as f:
                total += len(f.read())
        return total

    out = measure(one_pass, repeats)
    out["items"] = len(paths)
    return out


# -- listings ------------------------------------------------------------------------------


def _walk_count(walker: Any) -> int:
    n = 0
    for _dirpath, dirnames, filenames in walker:
        n += 1 + len(dirnames) + len(filenames)
    return n


def list_barecat(archive: str, class_dirs: list[str], pattern: str, repeats: int) -> dict[str, Any]:
    """listdir of every class directory, a full walk, and one glob, on an open archive."""
    import barecat

    with barecat.Barecat(archive) as bc:

        def listdirs() -> int:
            return sum(len(bc.listdir(d)) for d in class_dirs)

        out = {
            "listdir": measure(listdirs, repeats),
            "walk": measure(lambda: _walk_count(bc.walk("")), repeats),
            "glob": measure(lambda: len(bc.glob(pattern)), repeats),
        }
    out["listdir"]["items"] = len(class_dirs)
    return out


def list_plain(tree: str, class_dirs: list[str], pattern: str, repeats: int) -> dict[str, Any]:
    """os.listdir, os.walk and glob.glob on the extracted tree."""
    fulldirs = [os.path.join(tree, d) for d in class_dirs]

    def listdirs() -> int:
        return sum(len(os.listdir(d)) for d in fulldirs)

    out = {
        "listdir": measure(listdirs, repeats),
        "walk": measure(lambda: _walk_count(os.walk(tree)), repeats),
        "glob": measure(lambda: len(glob.glob(pattern, root_dir=tree)), repeats),
    }
    out["listdir"]["items"] = len(class_dirs)
    return out


# -- environment and the script entry point ------------------------------------------------


def environment() -> dict[str, Any]:
    """Interpreter, SQLite and barecat versions of the running process."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "sqlite": sqlite3.sqlite_version,
    }
    try:
        import barecat

        info["barecat_version"] = getattr(barecat, "__version__", None)
        info["barecat_file"] = barecat.__file__
    except ImportError:
        info["barecat_version"] = None
    try:
        from importlib.metadata import version

        info["barecat_dist_version"] = version("barecat")
    except Exception:
        info["barecat_dist_version"] = None
    return info


KERNELS: dict[str, Callable[..., Any]] = {
    "ingest_barecat": ingest_barecat,
    "ingest_copytree": ingest_copytree,
    "read_barecat": read_barecat,
    "read_floor": read_floor,
    "read_plain": read_plain,
    "list_barecat": list_barecat,
    "list_plain": list_plain,
    "warm_page_cache": warm_page_cache,
    "environment": environment,
}


def serve() -> int:
    """Answer ``{"kernel": ..., "args": {...}}`` lines on stdin with one JSON line each.

    The first line written is this interpreter's :func:`environment`. Anything a kernel or
    library prints goes to stderr, so stdout carries only the answers.
    """
    answers = sys.stdout
    sys.stdout = sys.stderr
    answers.write(json.dumps({"result": environment()}) + "\n")
    answers.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = {"result": KERNELS[request["kernel"]](**request["args"])}
        except Exception:
            answer = {"error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--serve"]:
        print("usage: bench_workloads.py --serve  (JSON requests on stdin)", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(serve())
