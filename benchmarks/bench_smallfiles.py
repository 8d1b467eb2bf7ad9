"""Small-file trees: ``barecat create``/``extract`` against ``tar cf``/``tar xf`` (issue 25).

Copies two real small-file trees once, to a RAM disk (``/dev/shm``) and to disk:

- ``stdlib``: the Python standard library of the interpreter running this (about 50,700
  files, 8,700 directories);
- ``usr-share``: ``/usr/share`` (links kept), bounded to ``--share-files`` files in path
  order when it is bigger;
- ``tiny``: ``--tiny-files`` generated records of 64 B-1 KiB (200,000 by default, a
  thousand to a directory), for the rate of ``create`` on tiny files (files a minute).

Then times whole commands, as users run them, in interleaved rounds (every command once
per round, the order rotated each round), page cache warm:

- ``tar cf`` of the tree, and ``tar cf`` followed by ``sync`` of the tar file: ``barecat
  create`` fsyncs its shards and index before it returns (its durability rule), ``tar``
  does not, so the synced tar is the like-for-like figure and the plain one the user's;
- ``barecat create -q`` (the default: two reader threads), and again on the pure-Python
  kernels (``BARECAT_PUREPYTHON=1``: ``create (pure Python)``, likewise ``extract``);
- ``tar xf`` of the tar and ``barecat extract -q`` of the archive into a fresh directory
  (neither syncs); both restore owners when run as root, as they do by default, and
  both make links that point outside the target (``--allow-outside-links``, which tar
  does unasked).

Reports medians of wall time and of CPU time (user + system of the command and its
children, from ``wait4``: robust to the load other processes put on the machine), each as
a ratio to tar's, and the load average before and after. A floor beside them: a Python
process that only plans the tree and indexes it (``floor: index rows``: the walk, a stat
per file and the archive's index written by the package's own bulk writer, no bytes),
the part of ``create`` tar has no counterpart for; a Python process that makes only the
system calls storing the files needs (``floor: file reads``: the same plan, then per file
open, fstat, read, close, its CRC32C and one write to a single shard, no index), the
byte side of ``create``; ``floor: walk``, start-up and plan alone, which both include;
and the two added up less one walk (``floors, one walk``); and beside ``extract``, a Python
process that makes only the system calls an extraction must (``floor: file system
calls``: the rows read, each directory made; per file its bytes read a run at a time
and CRC-checked, then open, write, utime, close; links; the directories' modes and
times), what any extraction written in Python costs at least (``extract`` writes its plain
files with the compiled kernel, below it), and a process that only opens the archive and
reads what ``extract`` reads of its index (``floor: rows read``: every directory's record
and every file's row, in storage order), what tar, whose headers lie in the bytes it
reads anyway, has no counterpart for; and the same with the CRC32C of as many bytes as
the shards hold (``floor: rows + CRC32C``, over a buffer in memory), all that ``extract``
does beyond tar, and tar's CPU with it (``tar xf + that floor``), the least ``extract``
can cost. Figures only, no assertions;
JSON goes to ``bench-results/``. On disk, run it with no mass deletion on that file
system in the minutes before (see ``fresh_dir``): extractions would pay for it.

    python benchmarks/bench_smallfiles.py [--rounds R] [--where ram,disk]
        [--trees stdlib,usr-share,tiny] [--share-files N] [--tiny-files N] [--ram DIR] [--disk DIR]
        [--before OTHER_CHECKOUT/src]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OURS_BIN = Path(sys.executable).parent / "barecat"

SYNCED_TAR = 'tar cf "$1" -C "$2" . && sync "$1"'
"""``tar cf`` and then ``sync`` of the tar file alone (coreutils ``sync FILE``: its fsync)."""
Command = tuple[list[str], Callable[[], None] | None, dict[str, str] | None]
"""A command line, what to do before each run of it (not timed), and its environment."""


def stdlib_source() -> str:
    return sysconfig.get_paths()["stdlib"]


def copy_tree(source: str, dest: str, limit: int | None) -> tuple[int, int]:
    """Copy ``source`` to ``dest`` (links kept as links, metadata kept), at most ``limit``
    files in sorted walk order; returns (files, bytes). Unreadable entries are left out."""
    files = nbytes = 0
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames.sort()
        rel = os.path.relpath(dirpath, source)
        target = os.path.normpath(os.path.join(dest, rel))
        os.makedirs(target, exist_ok=True)
        shutil.copystat(dirpath, target)
        for name in sorted(filenames):
            if limit is not None and files >= limit:
                return files, nbytes
            src, dst = os.path.join(dirpath, name), os.path.join(target, name)
            try:
                if os.path.islink(src):
                    os.symlink(os.readlink(src), dst)
                else:
                    shutil.copy2(src, dst)
                    nbytes += os.path.getsize(dst)
            except OSError:
                continue
            files += 1
    return files, nbytes


GENERATED = "generated"
"""The source of a tree that is made here (``tiny``), not copied."""


def generate_tiny(dest: str, files: int) -> tuple[int, int]:
    """``files`` records of 64 B-1 KiB of random bytes, a thousand to a directory."""
    rng, nbytes = random.Random(0), 0
    for i in range(files):
        folder = os.path.join(dest, f"d{i // 1000:04d}")
        if i % 1000 == 0:
            os.makedirs(folder, exist_ok=True)
        data = rng.randbytes(rng.randint(64, 1024))
        with open(os.path.join(folder, f"r{i:07d}.bin"), "wb") as f:
            f.write(data)
        nbytes += len(data)
    return files, nbytes


def ensure_tree(base: str, name: str, source: str, limit: int | None) -> dict[str, object]:
    """The copy of ``source`` at ``base/name`` (made once; a marker says it is complete);
    for :data:`GENERATED`, ``limit`` records made by :func:`generate_tiny`."""
    root = os.path.join(base, name)
    marker = os.path.join(base, f".{name}.complete")
    if os.path.exists(marker):
        with open(marker) as f:
            info: dict[str, object] = json.load(f)
        return info
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(base, exist_ok=True)
    if source == GENERATED:
        files, nbytes = generate_tiny(root, limit or 0)
    else:
        files, nbytes = copy_tree(source, root, limit)
    dirs = sum(len(d) for _, d, _ in os.walk(root)) + 1
    info = {"root": root, "source": source, "files": files, "bytes": nbytes, "dirs": dirs}
    with open(marker, "w") as f:
        json.dump(info, f)
    return info


def run_once(command: list[str], env: dict[str, str] | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of user + system) of one run of ``command``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise RuntimeError(f"{command} failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def interleaved(commands: dict[str, Command], rounds: int) -> dict[str, dict[str, float]]:
    """Every command once per round, the order rotated each round; medians."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    names = list(commands)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            command, prepare, env = commands[name]
            if prepare is not None:
                prepare()
            os.sync()
            samples[name].append(run_once(command, env))
    return {
        name: {
            "wall": statistics.median(w for w, _ in runs),
            "cpu": statistics.median(c for _, c in runs),
            "walls": [round(w, 3) for w, _ in runs],
        }
        for name, runs in samples.items()
    }


def remove_archive(path: str) -> None:
    directory, name = os.path.split(path)
    for entry in os.listdir(directory or "."):
        if entry == name or entry.startswith(name + "-"):
            os.remove(os.path.join(directory, entry))


SET_ASIDE: list[str] = []
"""Extraction outputs on disk, removed only when every figure is taken (see ``fresh_dir``)."""


def fresh_dir(path: str, set_aside: bool) -> Callable[[], None]:
    """An empty ``path`` for the next run. With ``set_aside`` (on disk) the last run's
    output is renamed away, not deleted: ext4 does not hand out an inode freed in the last
    minutes, and its allocator pays for every such inode it steps over
    (``recently_deleted``), so creating 50,000 files just after deleting 50,000 costs
    the creating command (tar or barecat alike) ten times its usual system time."""

    def make() -> None:
        if set_aside and os.path.exists(path):
            SET_ASIDE.append(f"{path}.done-{len(SET_ASIDE)}")
            os.rename(path, SET_ASIDE[-1])
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)

    return make


def index_floor(tree_root: str, workdir: str) -> list[str]:
    """A process that walks the tree, stats every file and writes an archive's index of
    it through the package's own bulk writer (``add_dirs``, ``add_placed`` in batches,
    committed and closed: fsyncs, lookup table), the bytes left out: what ``create``
    costs beyond what tar does, a floor no byte copying can go under."""
    archive = os.path.join(workdir, "floor.barecat")
    script = """
import os, sys
import barecat
from barecat.transfer import plan_sources
root, archive = sys.argv[1], sys.argv[2]
plan = plan_sources(["."], base_directory=root)
with barecat.Barecat(archive, readonly=False, overwrite=True) as bc:
    bc.add_dirs(plan.dirs)
    offset, batch = 0, []
    for source in plan.files:
        st = os.lstat(source.disk_path)
        info = barecat.BarecatFileInfo(source.store_path, size=st.st_size, shard=0,
                                       offset=offset, crc32c=0)
        info.fill_from_statresult(st)
        offset += st.st_size
        batch.append(info)
        if len(batch) == 2048:
            bc.add_placed(batch)
            batch = []
    bc.add_placed(batch)
"""
    return [sys.executable, "-c", script, tree_root, archive]


def walk_floor(tree_root: str) -> list[str]:
    """A process that starts, imports barecat and plans the tree as ``create`` does, and
    nothing else: what both other floors of ``create`` include, and ``create`` pays once."""
    script = """
import sys
from barecat.transfer import plan_sources
plan_sources(["."], base_directory=sys.argv[1])
"""
    return [sys.executable, "-c", script, tree_root]


def reads_floor(tree_root: str, workdir: str) -> list[str]:
    """A process that plans the tree as ``create`` does, then per file makes only the
    system calls storing it needs (open, fstat, one read into a reused buffer, close; a
    link's readlink), its CRC32C and one write to a single shard file, fsynced at the
    end; no index: the byte side of ``create`` in Python, on one thread (the least CPU)."""
    shard = os.path.join(workdir, "floor.shard")
    script = """
import os, sys
from barecat.checksum import crc32c
from barecat.transfer import plan_sources
root, out = sys.argv[1], sys.argv[2]
plan = plan_sources(["."], base_directory=root)
shard = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
buffer, crcs = memoryview(bytearray(1 << 24)), []
for source in plan.files:
    if source.as_link:
        data = os.fsencode(os.readlink(source.disk_path))
    else:
        fd = os.open(source.disk_path, os.O_RDONLY | os.O_CLOEXEC)
        size = os.fstat(fd).st_size
        if size <= len(buffer):
            data = buffer[: os.readv(fd, [buffer[:size]])]
        else:
            data = os.read(fd, size)
        os.close(fd)
    crcs.append(crc32c(data))
    os.write(shard, data)
os.fsync(shard)
os.close(shard)
"""
    return [sys.executable, "-c", script, tree_root, shard]


def extract_floor(archive: str, out: str) -> list[str]:
    """A process that extracts ``archive`` into the empty ``out`` with nothing but the
    system calls that extraction needs (see the module doc): no checks of names or of
    what is in the way, no failures handled, no owners (the trees here are root's, as is
    the process that extracts them), so nothing written in Python can cost less."""
    script = """
import os, stat, sys
import barecat
from barecat.checksum import crc32c
from barecat.entries import Order
from barecat.layout import shard_path
archive, out = sys.argv[1], sys.argv[2] + "/"
with barecat.Barecat(archive) as bc:
    dirs = [d for d in bc.iter_dirinfos(Order.PATH) if d.path]
    files = list(bc.iter_fileinfos(Order.ADDRESS))
for d in dirs:
    os.mkdir(out + d.path, 0o700)
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
shards, buffer, run, links = {}, memoryview(bytearray(1 << 20)), (None, 0, 0), []
for f in files:
    if stat.S_ISLNK(f.mode):
        links.append(f)
        continue
    if f.shard not in shards:
        shards[f.shard] = os.open(shard_path(archive, f.shard), os.O_RDONLY)
    shard, start, end = run
    if f.size > len(buffer):
        data = os.pread(shards[f.shard], f.size, f.offset)
    else:
        if shard != f.shard or not start <= f.offset <= f.offset + f.size <= end:
            got = os.preadv(shards[f.shard], [buffer], f.offset)
            run = shard, start, end = f.shard, f.offset, f.offset + got
        data = buffer[f.offset - start : f.offset - start + f.size]
    assert crc32c(data) == f.crc32c, f.path
    fd = os.open(out + f.path, flags, f.mode & 0o777)
    os.write(fd, data)
    os.utime(fd, ns=(f.mtime_ns, f.mtime_ns))
    os.close(fd)
for f in links:
    shard = os.open(shard_path(archive, f.shard), os.O_RDONLY)
    os.symlink(os.pread(shard, f.size, f.offset), out + f.path)
    os.close(shard)
    os.utime(out + f.path, ns=(f.mtime_ns, f.mtime_ns), follow_symlinks=False)
for d in reversed(dirs):
    os.chmod(out + d.path, d.mode & 0o7777)
    os.utime(out + d.path, ns=(d.mtime_ns, d.mtime_ns))
"""
    return [sys.executable, "-c", script, archive, out]


def rows_floor(archive: str) -> list[str]:
    """A process that opens ``archive`` and reads what extraction reads of its index (every
    directory's record, every file's row, in storage order, as extraction reads them: by
    the compiled core's SQLite, or through sqlite3) and nothing else: the part of
    ``extract`` tar has no counterpart for (tar's member headers lie in the bytes it
    reads)."""
    script = """
import sys
import barecat
from barecat.entries import Order
from barecat.transfer.kernel_extraction import kernel_rows
with barecat.Barecat(sys.argv[1]) as bc:
    dirs = list(bc.iter_dirinfos(Order.PATH))
    rows = kernel_rows(bc)
"""
    return [sys.executable, "-c", script, archive]


def checked_rows_floor(archive: str) -> list[str]:
    """:func:`rows_floor`, then the CRC32C of as many bytes as the archive's shards hold,
    over a buffer already in memory (no read: tar reads its bytes too): what ``extract``
    must do that tar does not (start a Python, read the rows, check every byte), so
    ``tar xf`` and this floor together are the least ``extract`` can cost."""
    script = """
import os, sys
import barecat
from barecat.entries import Order
from barecat.kernels import crc32c
from barecat.layout import shard_files
from barecat.transfer.kernel_extraction import kernel_rows
with barecat.Barecat(sys.argv[1]) as bc:
    dirs = list(bc.iter_dirinfos(Order.PATH))
    rows = kernel_rows(bc)
left = sum(os.path.getsize(shard) for shard in shard_files(sys.argv[1]))
view = memoryview(bytearray(1 << 20))
while left > 0:
    crc32c(view[: min(left, len(view))])
    left -= len(view)
"""
    return [sys.executable, "-c", script, archive]


def bench_place(
    place: str,
    base: str,
    trees: dict[str, tuple[str, int | None]],
    rounds: int,
    before: str | None,
) -> dict[str, object]:
    """Every figure of one place (RAM disk or disk); ``before``: the ``src`` directory of
    another version of barecat, timed alike in the same rounds."""
    old_env = None if before is None else {**os.environ, "PYTHONPATH": before}
    results: dict[str, object] = {}
    for name, (source, limit) in trees.items():
        info = ensure_tree(base, name, source, limit)
        root = str(info["root"])
        work = os.path.join(base, f"work-{name}")
        os.makedirs(work, exist_ok=True)
        tar, archive = os.path.join(work, "t.tar"), os.path.join(work, "t.barecat")
        out_tar, out_bc = os.path.join(work, "x-tar"), os.path.join(work, "x-barecat")
        out_floor = os.path.join(work, "x-floor")
        barecat = str(OURS_BIN)
        create = [barecat, "create", "-q", archive, "-C", root, "."]
        commands: dict[str, Command] = {
            "tar cf": (["tar", "cf", tar, "-C", root, "."], None, None),
            "tar cf + sync": (["sh", "-c", SYNCED_TAR, "-", tar, root], None, None),
            "barecat create": (create, functools.partial(remove_archive, archive), None),
            "floor: index rows": (index_floor(root, work), None, None),
            "floor: file reads": (reads_floor(root, work), None, None),
            "floor: walk": (walk_floor(root), None, None),
        }
        pure_env = {**os.environ, "BARECAT_PUREPYTHON": "1"}
        commands["create (pure Python)"] = (create, functools.partial(remove_archive, archive),
                                            pure_env)  # fmt: skip
        if old_env is not None:
            commands["create (before)"] = (
                create,
                functools.partial(remove_archive, archive),
                old_env,
            )
        load_before = os.getloadavg()
        created = interleaved(commands, rounds)
        remove_archive(archive)
        subprocess.run(create, check=True)
        subprocess.run(["tar", "cf", tar, "-C", root, "."], check=True)
        # (tar makes links pointing outside, such as /usr/share's absolute ones: so must we)
        extract = [barecat, "extract", "-q", "--allow-outside-links", archive, "-C", out_bc]
        aside = place == "disk"
        commands = {
            "tar xf": (["tar", "xf", tar, "-C", out_tar], fresh_dir(out_tar, aside), None),
            "barecat extract": (extract, fresh_dir(out_bc, aside), None),
            "floor: rows read": (rows_floor(archive), None, None),
            "floor: rows + CRC32C": (checked_rows_floor(archive), None, None),
            "floor: file syscalls": (
                extract_floor(archive, out_floor),
                fresh_dir(out_floor, aside),
                None,
            ),
        }
        commands["extract (pure Python)"] = (extract, fresh_dir(out_bc, aside), pure_env)
        if old_env is not None:
            commands["extract (before)"] = (extract, fresh_dir(out_bc, aside), old_env)
        extracted = interleaved(commands, rounds)
        load_after = os.getloadavg()
        for out in (out_tar, out_bc, out_floor):
            fresh_dir(out, aside)()
            os.rmdir(out)
        results[name] = {
            "tree": info,
            "create": created,
            "extract": extracted,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
        }
        print(render(place, name, results[name]), flush=True)  # type: ignore[arg-type]
    return results


def _ratio(a: dict[str, float], b: dict[str, float], key: str) -> str:
    return f"{a[key] / b[key]:.2f}x" if b[key] else "-"


def render(place: str, name: str, r: dict[str, dict[str, dict[str, float]]]) -> str:
    tree = r["tree"]
    lines = [
        f"\n{place} / {name}: {tree['files']:,} files, {tree['dirs']:,} dirs, "  # type: ignore[index]
        f"{int(tree['bytes']) / 1e6:,.0f} MB; load {r['load_before']} -> {r['load_after']}",  # type: ignore[index]
        f"  {'command':<20} {'wall s':>8} {'cpu s':>8} {'wall/tar':>9} {'cpu/tar':>8}",
    ]
    for phase, baseline in (("create", "tar cf"), ("extract", "tar xf")):
        rows = r[phase]
        base = rows[baseline]
        for cmd, m in rows.items():
            lines.append(
                f"  {cmd:<20} {m['wall']:>8.2f} {m['cpu']:>8.2f} "
                f"{_ratio(m, base, 'wall'):>9} {_ratio(m, base, 'cpu'):>8}"
            )
        if phase == "create":
            synced = rows["tar cf + sync"]
            ours = rows["barecat create"]
            lines.append(
                f"  {'create / synced tar':<20} {'':>8} {'':>8} "
                f"{_ratio(ours, synced, 'wall'):>9} {_ratio(ours, synced, 'cpu'):>8}"
            )
            both = {
                k: rows["floor: index rows"][k]
                + rows["floor: file reads"][k]
                - rows["floor: walk"][k]
                for k in ("wall", "cpu")
            }
            lines.append(
                f"  {'floors, one walk':<20} {both['wall']:>8.2f} {both['cpu']:>8.2f} "
                f"{_ratio(both, base, 'wall'):>9} {_ratio(both, base, 'cpu'):>8}"
            )
            per_minute = int(tree["files"]) / ours["wall"] * 60  # type: ignore[index]
            lines.append(f"  {'create, files a minute':<20} {per_minute:>17,.0f} (wall)")
        else:
            least = {k: base[k] + rows["floor: rows + CRC32C"][k] for k in ("wall", "cpu")}
            lines.append(
                f"  {'tar xf + that floor':<20} {least['wall']:>8.2f} {least['cpu']:>8.2f} "
                f"{_ratio(least, base, 'wall'):>9} {_ratio(least, base, 'cpu'):>8}"
            )
    return "\n".join(lines)


def machine_info() -> dict[str, object]:
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tar": subprocess.run(
            ["tar", "--version"], capture_output=True, text=True
        ).stdout.splitlines()[0],
        "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--where", default="ram,disk", help="ram, disk or both (comma-separated)")
    p.add_argument("--trees", default="stdlib,usr-share,tiny")
    p.add_argument("--share-files", type=int, default=60_000, help="bound on /usr/share's files")
    p.add_argument("--tiny-files", type=int, default=200_000, help="records of the tiny tree")
    p.add_argument("--ram", default="/dev/shm/barecat-bench-smallfiles")
    p.add_argument("--disk", default="/var/tmp/barecat-bench-smallfiles")
    p.add_argument(
        "--before", metavar="SRC", help="also time the barecat in SRC (a checkout's src/) alike"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    available = {
        "stdlib": (stdlib_source(), None),
        "usr-share": ("/usr/share", args.share_files),
        "tiny": (GENERATED, args.tiny_files),
    }
    trees = {t: available[t] for t in args.trees.split(",")}
    places = {"ram": args.ram, "disk": args.disk}
    result: dict[str, object] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "rounds": args.rounds,
    }
    print(f"{result['date']}  {result['machine']}", flush=True)
    if args.before:  # compiled once, as ``./run`` compiles ours: no run spends its start
        # compiling (wherever PYTHONDONTWRITEBYTECODE is set, each run would)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", args.before],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    for place in args.where.split(","):
        result[place] = bench_place(place, places[place], trees, args.rounds, args.before)
    for path in SET_ASIDE:
        shutil.rmtree(path, ignore_errors=True)
    out = REPO / "bench-results"
    out.mkdir(exist_ok=True)
    path = out / f"smallfiles-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
