"""Measurement kernels of the core benchmark, identical for every implementation measured.

Used in-process for this project's barecat and for the other stores, and run as a script by
the reference's own interpreter for barecat 0.3.1::

    REF_PYTHON bench_workloads.py --serve    # JSON requests in, one JSON answer line out

so the same code times all of them, and interpreter startup and imports are never inside a
timing. Each kernel takes a store ``kind`` and its ``location`` and goes through the
writers and readers of ``bench_stores``; ``import barecat`` happens there and resolves to
whichever barecat the running interpreter has. Besides barecat (and ``lmdb`` for that kind)
the module needs only the standard library and ``crc32c`` (installed in both
environments), so the reference's venv can run it as is.

Every kernel returns plain JSON data: a list of per-pass wall times in seconds (``samples``),
how many items (and bytes) one pass handles, and counts that the caller cross-checks between
implementations. Nothing here asserts anything about speed.
"""

from __future__ import annotations

import gc
import glob
import json
import multiprocessing
import os
import platform
import queue
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
import urllib.parse
from collections.abc import Callable
from typing import Any

import bench_stores

MIN_SAMPLE_SECONDS = 0.05  # short operations are looped until one sample takes this long
MAX_INNER_LOOPS = 1000
SLOW_OPEN_SECONDS = 1.0  # an open this slow counts as a sample itself (a tar's member scan)


# -- timing helpers ------------------------------------------------------------------------


def _inner_loops(once: float) -> int:
    if once >= MIN_SAMPLE_SECONDS:
        return 1
    return min(MAX_INNER_LOOPS, max(1, int(MIN_SAMPLE_SECONDS / max(once, 1e-7)) + 1))


def measure(fn: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Time ``fn`` (one untimed warm-up call first) ``repeats`` times.

    Calls that take less than ``MIN_SAMPLE_SECONDS`` are repeated inside each sample and
    the sample is the mean per call. Returns samples (seconds per call), the inner loop
    count and ``fn``'s return value (counts used for cross-checking).
    """
    t0 = time.perf_counter()
    result = fn()
    warmup = time.perf_counter() - t0
    inner = _inner_loops(warmup)
    samples = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return {"samples": samples, "warmup_samples": [warmup], "inner_loops": inner, "result": result}


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


# -- ingest --------------------------------------------------------------------------------

_MEMORY: dict[str, list[tuple[str, bytes]]] = {}  # the in-memory source, loaded once


def _in_memory(tree: str, relpaths: list[str]) -> list[tuple[str, bytes]]:
    key = f"{tree}\0{len(relpaths)}\0{relpaths[0] if relpaths else ''}\0{relpaths[-1:]}"
    if key not in _MEMORY:
        _MEMORY.clear()
        items = []
        for rel in relpaths:
            with open(os.path.join(tree, rel), "rb") as f:
                items.append((rel, f.read()))
        _MEMORY[key] = items
    return _MEMORY[key]


def forget_memory() -> None:
    """Drop the in-memory ingest source."""
    _MEMORY.clear()
    gc.collect()


def ingest(
    kind: str,
    location: str,
    tree: str,
    relpaths: list[str],
    source: str,
    payload_bytes: int,
    repeats: int,
) -> dict[str, Any]:
    """Build a store of ``kind`` from ``relpaths`` of ``tree``, ``repeats`` times from scratch.

    ``source`` is ``tree`` (the writer gets each file's path on disk: ``add_by_path``,
    ``ZipFile.write``, ``TarFile.add``, ``copyfile``, or open + read + add for the others)
    or ``memory`` (every file's bytes are read into memory first, untimed, and handed over
    with ``add(path, data=)``, ``writestr``, ``addfile``, INSERT, ``put``, ``write``). A
    sample covers creating the store, adding every file and closing it (final commit,
    central directory, ...); ``close_samples`` is the closing part, and ``synced_samples``
    the whole until a following ``os.sync()`` returns: everything on disk, so stores that
    fsync as they go (this barecat) and stores that leave dirty pages compare alike.

    ``location`` is deleted and recreated before each repetition, and the store of the last
    one stays there; except for ``plain``, whose repetitions go to fresh ``location/copy-N``
    directories that are left for the caller to delete: on ext4, creating tens of thousands
    of files right after deleting as many runs several times slower.
    """
    if source not in ("tree", "memory"):
        raise ValueError(f"unknown ingest source {source!r}")
    fullpaths = [(os.path.join(tree, rel), rel) for rel in relpaths]
    items = _in_memory(tree, relpaths) if source == "memory" else []
    samples, close_samples, synced_samples = [], [], []
    target = location
    for _ in range(repeats):
        if kind == "plain":
            os.makedirs(location, exist_ok=True)
            target = os.path.join(location, f"copy-{len(os.listdir(location))}")
        elif os.path.exists(location):
            shutil.rmtree(location)
        os.makedirs(target)
        sync_disks()
        gc.collect()
        t0 = time.perf_counter()
        writer = bench_stores.open_writer(kind, target, payload_bytes)
        try:
            if source == "tree":
                add_path = writer.add_path
                for full, rel in fullpaths:
                    add_path(full, rel)
            else:
                add_bytes = writer.add_bytes
                for rel, data in items:
                    add_bytes(rel, data)
        finally:
            t1 = time.perf_counter()
            writer.close()
            t2 = time.perf_counter()
        sync_disks()
        synced_samples.append(time.perf_counter() - t0)
        samples.append(t2 - t0)
        close_samples.append(t2 - t1)
    stored = bench_stores.contents(kind, target)
    return {
        "samples": samples,
        "close_samples": close_samples,
        "synced_samples": synced_samples,
        "items": len(relpaths),
        "bytes": payload_bytes,
        "result": [stored["files"], stored["bytes"]],
    }


def _create_command(kind: str, tree: str, target: str) -> list[str] | None:
    """The command line that archives ``tree`` into ``target`` for ``kind``, if it has one.

    ``barecat`` is the ``barecat`` script beside this interpreter: this project's in our
    runner, barecat 0.3.1's in the reference's.
    """
    parent, name = os.path.split(os.path.abspath(tree))
    if kind == "barecat":
        script = os.path.join(os.path.dirname(sys.executable), "barecat")
        return [script, "create", "-C", parent, os.path.join(target, "data.barecat"), name]
    if kind == "tar":
        return ["tar", "cf", os.path.join(target, "data.tar"), "-C", parent, name]
    if kind == "plain":
        return ["cp", "-r", os.path.abspath(tree), os.path.join(target, "copy")]
    return None


def ingest_command(
    kind: str, location: str, tree: str, items: int, payload_bytes: int, repeats: int
) -> dict[str, Any]:
    """Time the command-line tool of ``kind`` archiving the whole tree, as a user runs it.

    Each sample is the whole process (start-up included) into a fresh directory;
    ``synced_samples`` also wait for a following ``os.sync()``, as in :func:`ingest`.
    """
    samples, synced_samples = [], []
    for _ in range(repeats):
        shutil.rmtree(location, ignore_errors=True)
        os.makedirs(location)
        command = _create_command(kind, tree, location)
        if command is None:
            return _unavailable(f"no command-line tool for {kind}")
        sync_disks()
        t0 = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t0)
        sync_disks()
        synced_samples.append(time.perf_counter() - t0)
    shutil.rmtree(location, ignore_errors=True)
    return {
        "samples": samples,
        "synced_samples": synced_samples,
        "items": items,
        "bytes": payload_bytes,
        "command": " ".join(command[:2]),
    }


# -- reads ---------------------------------------------------------------------------------


def _unavailable(why: str) -> dict[str, Any]:
    return {"unavailable": why}


def _paths_pass(read: Callable[[str], bytes], paths: list[str]) -> Callable[[], int]:
    def one_pass() -> int:
        total = 0
        for p in paths:
            total += len(read(p))
        return total

    return one_pass


def _batches_pass(
    read_many: Callable[[list[str]], list[bytes]], batches: list[list[str]]
) -> Callable[[], int]:
    def one_pass() -> int:
        total = 0
        for batch in batches:
            for data in read_many(batch):
                total += len(data)
        return total

    return one_pass


def read_random(
    kind: str, location: str, paths: list[str], batches: list[list[str]], repeats: int
) -> dict[str, Any]:
    """Warm random reads by path, one thread, the paths in the given order.

    ``read``: the store's usual read (for barecat ``bc[path]``, CRC-checked); ``raw``: no
    checksum (barecat: index lookup + ``sharder.read_from_address``); ``indexed``: the
    usual read by a reader kept to the SQLite index (ours with ``lookup_table=False``, as
    before any lookup table exists); ``open``: through a
    file object (``bc.open(path, 'rb').read()``); ``batch``: each batch as one request
    (``bc.get_many``, ``IN (...)``, ``getmulti``, storage-order preads); ``batch_loop``:
    each batch as a loop of the usual read. Missing ways are reported as unavailable.
    Each way gets a freshly opened reader, so that what one way leaves behind (say, an
    index cache built after so many lookups) does not depend on the order of the ways.
    """
    out: dict[str, Any] = {}
    for name in ("read", "indexed", "raw", "open", "batch", "batch_loop"):
        reader = bench_stores.open_reader(kind, location)
        try:
            fn = _random_way(reader, name, paths, batches)
            if fn is None:
                out[name] = _unavailable(f"{kind} has no {name} read")
            else:
                n = sum(len(b) for b in batches) if name.startswith("batch") else len(paths)
                out[name] = {**measure(fn, repeats), "items": n}
        finally:
            reader.close()
    return out


def read_pass(kind: str, location: str, paths: list[str], batch: int) -> dict[str, Any]:
    """One timed pass over ``paths`` by a freshly opened reader (opened untimed), no
    warm-up: for storage where a second pass would not cost what the first did.

    ``batch`` 0: a loop of the store's usual read; else batches of that many paths, each
    one call to the store's batch read. Returns the wall time (``seconds``), ``items`` and
    ``bytes`` read, or ``unavailable`` where the store has no batch read.
    """
    reader = bench_stores.open_reader(kind, location)
    try:
        read_many = reader.read_many
        if batch and read_many is None:
            return _unavailable(f"{kind} has no batch read")
        if batch and read_many is not None:
            batches = [paths[i : i + batch] for i in range(0, len(paths), batch)]
            fn = _batches_pass(read_many, batches)
        else:
            fn = _paths_pass(reader.read, paths)
        gc.collect()
        t0 = time.perf_counter()
        total = fn()
        seconds = time.perf_counter() - t0
    finally:
        reader.close()
    return {"seconds": seconds, "items": len(paths), "bytes": total}


def _random_way(
    reader: bench_stores.Reader, name: str, paths: list[str], batches: list[list[str]]
) -> Callable[[], int] | None:
    """One pass of the named way of reading (see ``read_random``), or None if missing."""
    if name == "batch_loop":
        read = reader.read
        return _batches_pass(lambda batch: [read(p) for p in batch], batches)
    if name == "batch":
        return None if reader.read_many is None else _batches_pass(reader.read_many, batches)
    way = {
        "read": reader.read,
        "indexed": reader.read_indexed,
        "raw": reader.read_raw,
        "open": reader.read_open,
    }[name]
    return None if way is None else _paths_pass(way, paths)


def read_after_epoch(
    kind: str, location: str, paths: list[str], epoch_reads: int, repeats: int
) -> dict[str, Any]:
    """The usual read of ``paths`` by a long-lived reader: timed after ``epoch_reads``
    untimed reads (the paths, over and over), about one epoch of a training loop.

    Shows the steady state of readers that adapt, e.g. build an in-memory index once they
    have served enough lookups.
    """
    reader = bench_stores.open_reader(kind, location)
    try:
        read, done = reader.read, 0
        while done < epoch_reads:
            chunk = paths[: epoch_reads - done]
            for p in chunk:
                read(p)
            done += len(chunk)
        out = measure(_paths_pass(read, paths), repeats)
    finally:
        reader.close()
    out["items"], out["epoch_reads"] = len(paths), epoch_reads
    return out


def _mp_child(
    kind: str, location: str, paths: list[str], passes: int, start: Any, results: Any
) -> None:
    try:
        reader = bench_stores.open_reader(kind, location)
        try:
            read = reader.read
            for p in paths:  # warm-up, untimed
                read(p)
            start.wait()
            t0 = time.perf_counter()
            total = 0
            for _ in range(passes):
                for p in paths:
                    total += len(read(p))
            t1 = time.perf_counter()
        finally:
            reader.close()
        results.put(("ok", t0, t1, total))
    except BaseException:
        start.abort()
        results.put(("error", traceback.format_exc()))


def read_multiprocess(
    kind: str, location: str, paths: list[str], repeats: int, procs: int = 2, passes: int = 2
) -> dict[str, Any]:
    """``procs`` forked processes, each opening its own reader, read ``paths`` ``passes`` times.

    Each process starts at a different place in the list. After an untimed warm-up pass the
    processes wait at a barrier; a sample is from the first start to the last finish
    (``perf_counter`` is the system-wide monotonic clock), and ``items`` is the total number
    of reads, so items / sample is the aggregate rate.
    """
    ctx = multiprocessing.get_context("fork")
    samples, result = [], None
    for _ in range(repeats):
        start, results = ctx.Barrier(procs, timeout=600), ctx.Queue()
        workers = []
        for k in range(procs):
            shift = k * len(paths) // procs
            mine = paths[shift:] + paths[:shift]
            args = (kind, location, mine, passes, start, results)
            workers.append(ctx.Process(target=_mp_child, args=args, daemon=True))
        for w in workers:
            w.start()
        answers = []
        try:
            while len(answers) < procs:
                try:
                    answers.append(results.get(timeout=5))
                except queue.Empty:
                    if any(w.exitcode not in (None, 0) for w in workers):
                        raise RuntimeError(f"a {kind} reader process died") from None
        finally:
            for w in workers:
                w.join(timeout=60)
                if w.is_alive():
                    w.terminate()
                    w.join()
        errors = [a[1] for a in answers if a[0] == "error"]
        if errors:
            raise RuntimeError(f"a {kind} reader process failed:\n{errors[0]}")
        samples.append(max(a[2] for a in answers) - min(a[1] for a in answers))
        result = sum(a[3] for a in answers)
    return {
        "samples": samples,
        "items": procs * passes * len(paths),
        "procs": procs,
        "result": result,
    }


def open_time(kind: str, location: str, path: str, repeats: int) -> dict[str, Any]:
    """Open the store and read one file (closing is not timed), after one untimed try.

    Warm: the untimed try (and the other read kernels) bring the pages it needs into the
    page cache. A tar's member scan is included (``fresh``).
    """

    def once() -> tuple[float, int]:
        t0 = time.perf_counter()
        reader = bench_stores.open_reader(kind, location, fresh=True)
        try:
            n = len(reader.read(path))
            t1 = time.perf_counter()
        finally:
            reader.close()
        return t1 - t0, n

    first, result = once()
    inner = _inner_loops(first)
    samples = []
    if first >= SLOW_OPEN_SECONDS:  # the try was warm enough; spare a repetition
        samples.append(first)
    while len(samples) < repeats:
        gc.collect()
        samples.append(sum(once()[0] for _ in range(inner)) / inner)
    return {"samples": samples, "inner_loops": inner, "result": result}


def read_sequential(kind: str, location: str, repeats: int) -> dict[str, Any]:
    """Every file once, in the order the store keeps them (barecat: ``Order.ADDRESS`` infos
    read with ``bc.read(info)``, CRC-checked), with the page cache warm.

    At the default size the stores together are larger than the page cache, so each call
    first reads all of the store's files in 1 MiB chunks and then makes one untimed pass
    (two touches: the pages count as recently used), then the timed ones.
    """
    warmed = warm_page_cache([location])
    reader = bench_stores.open_reader(kind, location)

    def one_pass() -> list[int]:
        n = total = 0
        for data in reader.storage_order():
            n += 1
            total += len(data)
        return [n, total]

    try:
        out = measure(one_pass, repeats)
    finally:
        reader.close()
    out["items"], out["bytes"] = out["result"]
    out["warmed_bytes"] = warmed
    return out


def read_sql_floor(archive: str, paths: list[str], repeats: int) -> dict[str, Any]:
    """A hand-written barecat reader: one SELECT, one ``os.pread``, one CRC32C per file."""
    import crc32c

    uri = f"file:{urllib.parse.quote(os.path.abspath(archive))}?mode=ro"
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


# -- listings ------------------------------------------------------------------------------


def _walk_count(walker: Any) -> int:
    n = 0
    for _dirpath, dirnames, filenames in walker:
        n += 1 + len(dirnames) + len(filenames)
    return n


def listings(
    kind: str, location: str, class_dirs: list[str], patterns: dict[str, str], repeats: int
) -> dict[str, Any]:
    """listdir of every class directory, a full walk, and ``glob`` (non-recursive) and
    ``rglob`` (``recursive=True``) of the given patterns; barecat or plain files only."""
    bc: Any = None
    if kind == "barecat":
        import barecat

        bc = barecat.Barecat(os.path.join(location, bench_stores.BARECAT_NAME))
        listdir, glob_ = bc.listdir, bc.glob

        def walk() -> Any:
            return bc.walk("")

    elif kind == "plain":
        dirs_prefix = os.path.join(location, "")

        def listdir(d: str) -> list[str]:
            return os.listdir(dirs_prefix + d)

        def walk() -> Any:
            return os.walk(location)

        def glob_(pattern: str, recursive: bool = False) -> list[str]:
            return glob.glob(pattern, root_dir=location, recursive=recursive)

    else:
        raise ValueError(f"no listings for {kind!r}")
    try:
        out = {
            "listdir": measure(lambda: sum(len(listdir(d)) for d in class_dirs), repeats),
            "walk": measure(lambda: _walk_count(walk()), repeats),
            "glob": measure(lambda: len(glob_(patterns["glob"])), repeats),
            "rglob": measure(lambda: len(glob_(patterns["rglob"], recursive=True)), repeats),
        }
    finally:
        if bc is not None:
            bc.close()
    out["listdir"]["items"] = len(class_dirs)
    return out


def footprint(kind: str, location: str) -> dict[str, Any]:
    return bench_stores.footprint(kind, location)


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
        info["barecat_has_get_many"] = hasattr(barecat.Barecat, "get_many")
    except ImportError:
        info["barecat_version"] = None
    try:
        from importlib.metadata import version

        info["barecat_dist_version"] = version("barecat")
    except Exception:
        info["barecat_dist_version"] = None
    try:
        import lmdb

        info["lmdb"] = lmdb.__version__
    except ImportError:
        info["lmdb"] = None
    for dist in ("array_record", "pylance"):
        try:
            from importlib.metadata import version

            info[dist] = version(dist)
        except Exception:
            info[dist] = None
    return info


KERNELS: dict[str, Callable[..., Any]] = {
    "ingest": ingest,
    "ingest_command": ingest_command,
    "forget_memory": forget_memory,
    "read_random": read_random,
    "read_after_epoch": read_after_epoch,
    "read_pass": read_pass,
    "read_multiprocess": read_multiprocess,
    "open_time": open_time,
    "read_sequential": read_sequential,
    "read_sql_floor": read_sql_floor,
    "listings": listings,
    "footprint": footprint,
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
