"""kill -9 of every command that writes: create, add, merge, defrag, reshard, convert,
rsync and upgrade, each killed at a few states spread over its run (``killing.py``); and
of the servers that write, the moment after they acknowledged: a writable mount (idle, or
busy with a writer) once ``close(2)`` returned 0, and ``serve --writable`` once it
answered 201.

After each kill the archive opens (or, for a command that builds under a temporary name,
the target is absent), ``barecat repair`` then ``barecat verify`` pass, every file
committed (or acknowledged) before the kill is there byte for byte, and running the
command again (or ``--resume``) finishes with exactly the expected content.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import textwrap
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import crc32c
import httpx
import pytest

import barecat
from barecat.layout import existing_shard_numbers, index_path, shard_path
from barecat.ops.upgrade import BACKUP_SUFFIX, TEMP_SUFFIX
from helpers import BARECAT, BIN, DATA, wait_for
from helpers.fragments import assert_packed, fragmented
from helpers.killing import (
    Child,
    appeared,
    barecat_with,
    changed,
    check_after_kill,
    committed_files,
    finish,
    grown,
    hidden_leftovers,
    kill_at,
    kill_when,
    numbered_file,
    printed,
    reach,
)
from helpers.killing import start as start_child
from helpers.mounting import FUSE_PROBLEM, served
from helpers.old_archives import check_upgraded, implied_dirs, sha
from helpers.serving import server_process
from helpers.trees import make_numbered_tree

pytestmark = pytest.mark.slow

Files = dict[str, bytes]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Files]:
    """12,000 small files in 30 directories: three commits' worth for create -j 1."""
    root = tmp_path_factory.mktemp("tree") / "src"
    return str(root), make_numbered_tree(root, 30, 400)


def random_files(prefix: str, n: int, seed: int) -> Files:
    rng = random.Random(seed)
    return {f"{prefix}/d{i % 9}/{i:05d}": rng.randbytes(500 + i % 3000) for i in range(n)}


def build(path: str, files: Files) -> str:
    with barecat.Barecat(path, readonly=False) as bc:
        bc.add_many(files.items())
    return path


def staging(target: str, suffix: str = "") -> Callable[[Child], str]:
    """Where the killed child builds ``target`` (see ``building_archive``)."""
    folder, name = os.path.split(target)
    return lambda child: os.path.join(folder, f".{name}.partial-{child.pid}{suffix}")


# -- create and add: kills after commits, then --resume ----------------------------------


@pytest.mark.parametrize("commits", [1, 2])
def test_create(tree: tuple[str, Files], tmp_path: Path, commits: int) -> None:
    """``-v`` lists files once committed: kill after the first or second commit."""
    src, expected = tree
    ar = str(tmp_path / "ar")
    argv = [BARECAT, "create", "-q", "-v", "-j", "1", "-C", src, ar, "."]
    killed = kill_at(argv, printed(1 if commits == 1 else 4097))
    assert killed.cut_short
    kept = check_after_kill(ar, {p: expected[p] for p in killed.lines})
    assert kept is not None and 0 < len(kept) < len(expected)
    assert all(expected[p] == data for p, data in kept.items())
    finish([*argv[:2], "--resume", *argv[2:]], ar, expected)


def test_parallel_create_leaves_no_archive(tree: tuple[str, Files], tmp_path: Path) -> None:
    """``-j 2`` builds part-archives under a temporary name: a kill leaves none of it."""
    src, expected = tree
    ar = str(tmp_path / "ar")
    argv = [BARECAT, "create", "-q", "-j", "2", "-C", src, ar, "."]
    killed = kill_at(argv, grown(staging(ar, ".part1-shard-00000"), 100_000))
    assert killed.cut_short
    assert check_after_kill(ar, {}, absent_ok=True) is None
    finish(argv, ar, expected)
    assert hidden_leftovers(str(tmp_path)) == []


def test_add(tree: tuple[str, Files], tmp_path: Path) -> None:
    src, expected = tree
    ar = build(str(tmp_path / "ar"), before := random_files("before", 100, 1))
    argv = [BARECAT, "add", "-q", "-v", "-j", "1", "-C", src, ar, "."]
    killed = kill_at(argv, printed(1))
    assert killed.cut_short
    committed = {**before, **{p: expected[p] for p in killed.lines}}
    kept = check_after_kill(ar, committed)
    assert kept is not None and len(kept) < len(before) + len(expected)
    finish([*argv[:2], "--resume", *argv[2:]], ar, {**before, **expected})


# -- merge: a new output appears whole or not at all; -a adds whole inputs ---------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[Files]]:
    """Three archives to merge. An input's bytes are copied in one ``copy_file_range``, so
    an output's shard grows input by input: the states below always leave one to go."""
    folder = tmp_path_factory.mktemp("inputs")
    files = [random_files(f"in{k}", 1000, k) for k in range(3)]
    return [build(str(folder / f"in{k}.barecat"), f) for k, f in enumerate(files)], files


def merged(files: list[Files]) -> Files:
    return {p: d for f in files for p, d in f.items()}


def nbytes(files: Files) -> int:
    return sum(len(d) for d in files.values())


@pytest.mark.parametrize("stage", ["first input", "second input", "all bytes copied"])
def test_merge_to_a_new_output(
    inputs: tuple[list[str], list[Files]], tmp_path: Path, stage: str
) -> None:
    """The late kill (the first input committed, the next being copied) used to leave a
    valid partial output that passed verify; now a kill leaves no output at all."""
    paths, files = inputs
    out = str(tmp_path / "out.barecat")
    size = {
        "first input": 1,
        "second input": nbytes(files[0]) + 1,
        "all bytes copied": nbytes(merged(files)),
    }[stage]
    argv = [BARECAT, "merge", "-q", "-o", out, *paths]
    killed = kill_at(argv, grown(staging(out, "-shard-00000"), size))
    got = check_after_kill(out, {}, absent_ok=True)
    assert got is None if killed.cut_short else got == merged(files)
    if stage != "all bytes copied":
        assert killed.cut_short
    finish(argv, out, merged(files))
    assert hidden_leftovers(str(tmp_path)) == []  # the dead run's build was removed


def test_merge_replacing_an_output_keeps_the_old_one_until_done(
    inputs: tuple[list[str], list[Files]], tmp_path: Path
) -> None:
    """``-f``: the old output stays whole until the new one is complete."""
    paths, files = inputs
    old = random_files("old", 50, 7)
    out = build(str(tmp_path / "out.barecat"), old)
    argv = [BARECAT, "merge", "-q", "-f", "-o", out, *paths]
    killed = kill_at(argv, grown(staging(out, "-shard-00000"), nbytes(files[0]) + 1))
    assert killed.cut_short and check_after_kill(out, old) == old
    finish(argv, out, merged(files))


def test_legacy_merge_to_a_new_output(
    inputs: tuple[list[str], list[Files]], tmp_path: Path
) -> None:
    paths, files = inputs
    out = str(tmp_path / "out.barecat")
    argv = [str(BIN / "barecat-merge"), "--output", out, *paths]
    killed = kill_at(argv, grown(staging(out, "-shard-00000"), nbytes(files[0]) + 1))
    assert killed.cut_short and check_after_kill(out, {}, absent_ok=True) is None
    finish(argv, out, merged(files))


def test_merge_symlink_to_a_new_output(tmp_path: Path) -> None:
    """Twenty inputs linked one after the other (a commit each): killed at the first
    link, the view is not there; run again, it links them all."""
    inputs, expected = [], {}
    for k in range(20):
        files = random_files(f"in{k}", 3, k)
        inputs.append(build(str(tmp_path / f"in{k}.barecat"), files))
        expected.update(files)
    out = str(tmp_path / "view.barecat")
    argv = [BARECAT, "merge", "-q", "--symlink", "-o", out, *inputs]
    killed = kill_at(argv, appeared(staging(out, "-shard-00000")))
    assert killed.cut_short and check_after_kill(out, {}, absent_ok=True) is None
    finish(argv, out, expected)
    assert os.path.islink(shard_path(out, 0)) and hidden_leftovers(str(tmp_path)) == []


def test_subset_to_a_new_output(inputs: tuple[list[str], list[Files]], tmp_path: Path) -> None:
    """subset shares merge's output handling: built under a temporary name. (Leaving out
    a directory cuts the copy into many short runs, so the shard grows steadily.)"""
    paths, files = inputs
    out = str(tmp_path / "some.barecat")
    chosen = {p: d for p, d in files[0].items() if "/d3/" not in p}
    argv = [BARECAT, "subset", "-q", paths[0], "-o", out, "-x", "in0/d3/"]
    half = nbytes(chosen) // 2
    killed = kill_at(argv, grown(staging(out, "-shard-00000"), half))
    assert killed.cut_short and check_after_kill(out, {}, absent_ok=True) is None
    finish(argv, out, chosen)
    assert hidden_leftovers(str(tmp_path)) == []


@pytest.mark.parametrize("during", [0, 1, 2])
def test_merge_append(tmp_path: Path, during: int) -> None:
    """``merge -a`` into an existing output, killed once input ``during`` is copied (there
    is always one more to go): the output keeps what it had and holds each input
    completely or not at all, in order."""
    previous = random_files("prev", 300, 9)
    out = build(str(tmp_path / "out.barecat"), previous)
    wanted = [random_files(f"in{k}", 600, 10 + k) for k in range(4)]
    inputs = [build(str(tmp_path / f"in{k}.barecat"), f) for k, f in enumerate(wanted)]
    sizes = [sum(len(d) for d in f.values()) for f in [previous, *wanted]]
    argv = [BARECAT, "merge", "-q", "-a", "-o", out, *inputs]
    killed = kill_at(argv, grown(shard_path(out, 0), sum(sizes[: during + 1]) + 1))
    assert killed.cut_short
    got = check_after_kill(out, previous)
    assert got is not None
    present = []
    for files in wanted:
        have = {p: got[p] for p in files if p in got}
        assert have in ({}, files), "an input must be there completely or not at all"
        present.append(bool(have))
    assert present == sorted(present, reverse=True) and sum(present) >= during
    assert len(got) == len(previous) + sum(
        len(f) for f, p in zip(wanted, present, strict=True) if p
    )
    finish(argv, out, {**previous, **{p: d for f in wanted for p, d in f.items()}})


# -- defrag and reshard: many small rounds, killed as the cursor reaches a shard -----------


SMALL_ROUNDS = barecat_with("from barecat.ops import rounds\nrounds.ROUND_FILES = 100")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Files]:
    """3,000 files with holes from removals and replacements, in shards of 25,000 bytes."""
    path = str(tmp_path_factory.mktemp("fragmented") / "pristine.barecat")
    return path, fragmented(path, n=3000, limit=25_000, seed=11)


def work_copy(pristine: str, folder: Path) -> str:
    work = str(folder / "work.barecat")
    shutil.copy(pristine, work)
    for n in existing_shard_numbers(pristine):
        shutil.copy(shard_path(pristine, n), shard_path(work, n))
    return work


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["defrag", "-q"], 0.1),
        (["defrag", "-q"], 0.5),
        (["defrag", "-q"], 0.9),
        (["defrag", "-q", "--quick"], 0.0),
        (["reshard", "-q", "-s", "15000"], 0.3),
        (["reshard", "-q", "-s", "60000"], 0.5),
    ],
)
def test_defrag_and_reshard(
    pristine: tuple[str, Files], tmp_path: Path, argv: list[str], where: float
) -> None:
    """Each round copies, fsyncs, then commits; the kill comes once the packing cursor
    has reached the shard ``where`` of the way through the packed data."""
    source, expected = pristine
    work = work_copy(source, tmp_path)
    limit = int(argv[-1]) if argv[0] == "reshard" else 25_000
    packed_shards = -(-sum(len(d) for d in expected.values()) // limit)
    shard = shard_path(work, int(packed_shards * where))
    killed = kill_at([*SMALL_ROUNDS, *argv, work], changed(shard))
    assert killed.cut_short
    check_after_kill(work, expected)
    finish([BARECAT, *argv, work], work, expected)
    if argv[0] == "defrag" and "--quick" not in argv:
        assert_packed(work, limit)


# -- convert: built under a temporary name ------------------------------------------------


@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_convert_tar(tmp_path: Path, fraction: float) -> None:
    files = random_files("t", 3000, 5)
    tar_path = tmp_path / "in.tar"
    with tarfile.open(tar_path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    target = str(tmp_path / "k.barecat")
    argv = [BARECAT, "convert", "-q", str(tar_path), target]
    total = sum(len(d) for d in files.values())
    killed = kill_at(argv, grown(staging(target, "-shard-00000"), int(total * fraction)))
    assert killed.cut_short and check_after_kill(target, {}, absent_ok=True) is None
    assert hidden_leftovers(str(tmp_path)), "the killed build is hidden beside the target"
    finish(argv, target, files)
    assert hidden_leftovers(str(tmp_path)) == []  # the next conversion removed the dead one's


def test_convert_to_tar(pristine: tuple[str, Files], tmp_path: Path) -> None:
    source, expected = pristine
    target = str(tmp_path / "out.tar")
    argv = [BARECAT, "convert", "-q", source, target]
    killed = kill_at(argv, grown(staging(target), 1_000_000))
    assert killed.cut_short and not os.path.exists(target)
    done = subprocess.run(argv, capture_output=True)
    assert done.returncode == 0
    with tarfile.open(target) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    assert got == expected


# -- rsync into an archive ----------------------------------------------------------------


@pytest.mark.parametrize("copied", [1000, 8000])
def test_rsync(tree: tuple[str, Files], tmp_path: Path, copied: int) -> None:
    """Files land in batches committed by time and count: whatever is there after the
    kill has its source's bytes, and the next rsync copies the rest."""
    src, expected = tree
    before = random_files("keep", 100, 3)
    ar = build(str(tmp_path / "ar"), before)
    argv = [BARECAT, "rsync", "-v", f"{src}/", f"{ar}:dst/"]
    killed = kill_at(argv, printed(copied))
    assert killed.cut_short
    got = check_after_kill(ar, before)
    assert got is not None
    synced = {f"dst/{p}": d for p, d in expected.items()}
    assert all(synced[p] == d for p, d in got.items() if p.startswith("dst/"))
    finish(argv, ar, {**before, **synced})


# -- upgrade: the index is the old one or the complete new one ----------------------------


ShardRow = tuple[str, int, int, int, bytes]


def _write_shards(base: str, contents: Files, per_shard: int) -> list[ShardRow]:
    """Shard files for ``contents``; returns (path, shard, offset, size, data) rows."""
    rows = []
    items = list(contents.items())
    for shard, start in enumerate(range(0, len(items), per_shard)):
        offset = 0
        with open(f"{base}-shard-{shard:05d}", "wb") as f:
            for path, data in items[start : start + per_shard]:
                f.write(data)
                rows.append((path, shard, offset, len(data), data))
                offset += len(data)
    return rows


def build_big_unversioned(base: str, contents: dict[str, bytes]) -> None:
    """The 2023 layout by hand (as documented), with deliberately stale statistics."""
    rows = _write_shards(base, contents, 6000)
    conn = sqlite3.connect(base + "-sqlite-index")
    conn.execute(
        "CREATE TABLE files (path TEXT PRIMARY KEY, parent TEXT, shard INTEGER, "
        "offset INTEGER, size INTEGER, crc32 INTEGER NULL)"
    )
    conn.execute(
        "CREATE TABLE directories (path TEXT PRIMARY KEY, parent TEXT, has_subdirs BOOLEAN "
        "DEFAULT FALSE, has_files BOOLEAN DEFAULT FALSE, total_size INTEGER DEFAULT 0, "
        "total_file_count INTEGER DEFAULT 0)"
    )
    conn.executemany(
        "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)",
        [(p, p.rpartition("/")[0], s, o, n, zlib.crc32(d)) for p, s, o, n, d in rows],
    )
    conn.executemany(
        "INSERT INTO directories (path, parent) VALUES (?, ?)",
        [(d, d.rpartition("/")[0]) for d in sorted(implied_dirs(list(contents))) if d],
    )
    conn.commit()
    conn.close()


def build_big_v02(base: str, contents: dict[str, bytes]) -> None:
    """Schema 0.2 from a real 0.2.7 index, refilled with triggers off (statistics zero)."""
    index = base + "-sqlite-index"
    shutil.copy(DATA / "ref027-small-sqlite-index", index)
    rows = _write_shards(base, contents, 6000)
    conn = sqlite3.connect(index)
    conn.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
    conn.execute("DELETE FROM files")
    conn.execute("DELETE FROM dirs WHERE path != ''")
    conn.executemany(
        "INSERT INTO dirs (path, mode) VALUES (?, 16877)",
        [(d,) for d in sorted(implied_dirs(list(contents))) if d],
    )
    conn.executemany(
        "INSERT INTO files (path, shard, offset, size, crc32c, mtime_ns) VALUES (?, ?, ?, ?, ?, ?)",
        [(p, s, o, n, crc32c.crc32c(d), 7) for p, s, o, n, d in rows],
    )
    conn.execute("UPDATE config SET value_int = 1 WHERE key = 'use_triggers'")
    conn.commit()
    conn.close()


@pytest.fixture(scope="module")
def old_archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], Files]:
    """20,000 files in archives of the unversioned 2023 layout (CRC32C to compute from
    the shards) and of schema 0.2 (statistics to recompute)."""
    rng = random.Random(4)
    files = {f"d{i % 37}/f{i}.bin": rng.randbytes(rng.randrange(160)) for i in range(20_000)}
    masters = {}
    for layout, build_old in (("unversioned", build_big_unversioned), ("0.2", build_big_v02)):
        masters[layout] = tmp_path_factory.mktemp(layout.replace(".", ""))
        build_old(str(masters[layout] / "big"), files)
    return masters, files


@pytest.mark.parametrize(
    ("layout", "stage"),
    [
        ("unversioned", "building"),
        ("unversioned", "built"),
        ("unversioned", "swapping"),
        ("0.2", "building"),
    ],
)
def test_upgrade(
    old_archives: tuple[dict[str, Path], Files], tmp_path: Path, layout: str, stage: str
) -> None:
    """A new index is built beside the old one and swapped in with one rename: killed while
    it is built, when it is complete, or between the backup link and the swap, the index
    is the untouched old one or the complete new one; the next run finishes."""
    masters, files = old_archives
    for src in masters[layout].iterdir():
        shutil.copy(src, tmp_path / src.name)
    base = str(tmp_path / "big")
    index = index_path(base)
    old_sha = sha(index)
    state = {
        "building": grown(index + TEMP_SUFFIX, 200_000),
        "built": grown(index + TEMP_SUFFIX, os.path.getsize(index)),
        "swapping": appeared(index + BACKUP_SUFFIX + TEMP_SUFFIX),
    }[stage]
    argv = [BARECAT, "upgrade", "-q", "-j", "2", base]
    killed = kill_at(argv, state)
    if sha(index) == old_sha:  # untouched: still the old layout, which upgrade converts
        assert killed.cut_short
    else:
        with barecat.Barecat(base) as bc:
            assert bc.index.schema_version == (0, 3)
        check_after_kill(base, files)
    finish(argv, base, files)
    check_upgraded(base, files, implied_dirs(list(files)))


# -- servers that write: what they acknowledged survives a kill right after ---------------


MOUNT_WRITER = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[2])
    from helpers.killing import numbered_file
    mnt = sys.argv[1]
    for i in range(1_000_000):
        path, data = numbered_file(i)
        os.makedirs(os.path.join(mnt, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(mnt, path), "wb") as f:
            f.write(data)
        print(path, flush=True)  # close(2) returned 0
    """
)

needs_fuse = pytest.mark.skipif(bool(FUSE_PROBLEM), reason=FUSE_PROBLEM)

IDLE_WRITER = textwrap.dedent(
    """
    import sys, time, barecat
    sys.path.insert(0, sys.argv[2])
    from helpers.killing import numbered_file
    bc = barecat.Barecat(sys.argv[1], readonly=False)
    for i in range(100):
        path, data = numbered_file(i)
        bc[path] = data
    print("added", flush=True)
    time.sleep(3600)  # idle: nothing more calls the archive
    """
)


def test_an_idle_library_writer_is_committed_by_time(tmp_path: Path) -> None:
    """A writer adds 100 files and idles: its background committer commits them within
    commit_interval (1 s), with no call from the writer; killed once a reader sees them,
    it keeps all 100 (it kept none, however long it idled)."""
    archive = str(tmp_path / "idle.barecat")
    tests = os.path.dirname(os.path.dirname(__file__))
    child = start_child([sys.executable, "-c", IDLE_WRITER, archive, tests])
    reach(child, printed(1))
    killed = kill_when(child, committed_files(archive, 100))
    assert killed.cut_short
    check_after_kill(archive, dict(numbered_file(i) for i in range(100)))


@needs_fuse
def test_writable_mount_killed_right_after_close(tmp_path: Path) -> None:
    """Files written and closed (by Python, and by ``cp -r``), then the mount's server
    killed at once: every file whose close returned 0 is in the archive (close waits for
    the commit)."""
    before = random_files("old", 50, 4)
    archive = build(str(tmp_path / "m.barecat"), before)
    mnt = tmp_path / "mnt"
    closed = {}
    with served(archive, mnt, "--rw") as server:
        for i in range(40):
            path, data = numbered_file(i)
            (mnt / path).parent.mkdir(exist_ok=True)
            with open(mnt / path, "wb") as f:
                f.write(data)
            closed[path] = data
        first = numbered_file(0)[0]
        with open(mnt / first, "ab") as f:  # a rewrite through two descriptors: each close
            twin = os.dup(f.fileno())  # stores what was written until then
            f.write(b"+first")
        os.write(twin, b"+second")
        os.close(twin)
        closed[first] += b"+first+second"
        tree = make_numbered_tree(tmp_path / "tree", 3, 20)
        subprocess.run(["cp", "-r", str(tmp_path / "tree"), str(mnt / "copied")], check=True)
        closed.update({f"copied/{p}": data for p, data in tree.items()})
        server.kill()
        server.wait()
    check_after_kill(archive, {**before, **closed})


@needs_fuse
def test_writable_mount_killed_while_busy(tmp_path: Path) -> None:
    """A writer closes file after file through the mount; the server is killed once it
    has closed 150: every one of them is in the archive."""
    before = random_files("old", 50, 5)
    archive = build(str(tmp_path / "m.barecat"), before)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, "--rw") as server:
        tests = os.path.dirname(os.path.dirname(__file__))
        writer = start_child([sys.executable, "-c", MOUNT_WRITER, str(mnt), tests])
        reach(writer, printed(150))
        server.kill()
        server.wait()
        writer.proc.wait()  # (its next request fails: the server is gone)
        assert writer.reader is not None and writer.proc.stdout is not None
        writer.reader.join()
        writer.proc.stdout.close()
        closed = [line for line in writer.lines if line]
    assert len(closed) >= 150
    check_after_kill(archive, {**before, **dict(numbered_file(i) for i in range(len(closed)))})


@pytest.mark.parametrize("clients", [1, 4])
def test_serve_writable_killed_after_its_answers(tmp_path: Path, clients: int) -> None:
    """Clients upload files (writes that arrive together share a commit); the server is
    killed once 200 uploads were answered 201: every one of them is in the archive."""
    before = random_files("old", 50, 6)
    archive = build(str(tmp_path / "s.barecat"), before)
    answered: dict[str, bytes] = {}
    lock = threading.Lock()

    def upload(url: str, k: int) -> None:
        with barecat.connect(url + "/a/s") as remote:
            for i in range(k, 1_000_000, clients):
                path, data = numbered_file(i)
                try:
                    remote[path] = data
                except (barecat.BarecatError, OSError, httpx.HTTPError):
                    return  # the server is gone
                with lock:
                    answered[path] = data

    with server_process(archive, "--writable") as (server, url, _):
        threads = [threading.Thread(target=upload, args=(url, k)) for k in range(clients)]
        for t in threads:
            t.start()
        wait_for(lambda: len(answered) >= 200 or not any(t.is_alive() for t in threads), "201s")
        server.kill()
        server.wait()
        for t in threads:
            t.join()
    assert len(answered) >= 200
    check_after_kill(archive, {**before, **answered})
