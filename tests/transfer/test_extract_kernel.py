"""Extraction's fast path (``transfer/kernel_extraction.py``): a whole plain archive's
plain files written by the kernel (compiled, or its Python twin when the suite runs with
``BARECAT_PUREPYTHON=1``) leave exactly the tree the careful path leaves (asked for with
``on_file``, which takes it), with the same counts and failures: links, hard links (also
where they would straddle the kernel's batches), holes, hidden names, odd metadata,
things in the way. A hostile index whose file has no directory row cannot get a write
through a link in the target.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat import kernels
from barecat.entries import Order
from barecat.transfer import extract_to_directory, ingest, kernel_extraction, plan_tree

MTIME = 1_650_000_000_987_654_321


def tree(root: Path) -> dict[str, Any]:
    """Each name below ``root``: kind and mode, mtime (not a directory's), bytes or link
    target, and which names share its inode."""
    found: dict[str, Any] = {}
    inodes: dict[int, list[str]] = {}
    for at, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(at, name)
            rel = os.path.relpath(path, root)
            st_ = os.lstat(path)
            if stat.S_ISREG(st_.st_mode):
                inodes.setdefault(st_.st_ino, []).append(rel)
                content: Any = Path(path).read_bytes()
            else:
                content = os.readlink(path) if stat.S_ISLNK(st_.st_mode) else None
            found[rel] = [st_.st_mode, st_.st_mtime_ns, content, st_.st_blocks if content else 0]
    for names in inodes.values():
        for name in names:
            found[name].append(sorted(names))
    return found


def mixed_source(root: Path) -> None:
    """Plain files in nested directories, empty ones, a hidden name, odd modes, a big
    file with a hole, hard links, symbolic links, unicode."""
    (root / "d" / "e").mkdir(parents=True)
    (root / "empty-dir").mkdir()
    for k in range(50):
        (root / "d" / f"f{k:03}").write_bytes(bytes([k]) * (k * 97 % 3000))
    (root / "d" / "e" / "ü-名前").write_bytes(b"unicode")
    (root / ".hidden").write_bytes(b"dot")
    (root / "d" / "setuid").write_bytes(b"s")
    os.chmod(root / "d" / "setuid", 0o4755)
    (root / "d" / "private").write_bytes(b"p")
    os.chmod(root / "d" / "private", 0o600)
    with open(root / "sparse", "wb") as f:
        f.write(b"head")
        f.seek(300_000)
        f.write(b"tail")
    (root / "h1").write_bytes(b"linked")
    os.link(root / "h1", root / "d" / "h2")
    os.symlink("d/f001", root / "link")
    os.symlink("../../outside", root / "d" / "escape")
    for path in root.rglob("*"):
        os.utime(path, ns=(MTIME, MTIME), follow_symlinks=False)


def make_archive(tmp_path: Path) -> str:
    source = tmp_path / "src"
    mixed_source(source)
    archive = str(tmp_path / "a.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        ingest(bc, plan_tree(str(source)))
    return archive


def extract_both(archive: str, tmp_path: Path, **kw: Any) -> tuple[Any, Any]:
    """(careful, fast): each extraction's tree and result figures."""
    done = []
    for name, on_file in (("careful", lambda f: None), ("fast", None)):
        out = tmp_path / name
        with barecat.Barecat(archive) as bc:
            result = extract_to_directory(bc, str(out), on_file=on_file, **kw)
        failures = sorted((path, type(e).__name__) for path, e in result.failures)
        done.append((tree(out), (result.files, result.bytes, result.links, failures)))
    return done[0], done[1]


def test_the_fast_path_leaves_the_careful_paths_tree(tmp_path: Path) -> None:
    careful, fast = extract_both(make_archive(tmp_path), tmp_path)
    assert fast == careful
    assert fast[0]["d/h2"][-1] == ["d/h2", "h1"]  # (one inode: the hard link came back)
    assert fast[0]["sparse"][3] * 512 < 300_000  # (the hole came back)


def test_hard_links_at_the_edge_of_a_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches that would end between the two names of the file stored once: the batch
    goes on past them, so the kernel sees both together."""
    archive = make_archive(tmp_path)
    with barecat.Barecat(archive) as bc:
        paths = [row[0] for row in bc.index.listing.file_rows(Order.ADDRESS)]
    first = min(paths.index("h1"), paths.index("d/h2"))
    monkeypatch.setattr(kernel_extraction, "_KERNEL_BATCH", first + 1)
    careful, fast = extract_both(archive, tmp_path)
    assert fast == careful


def test_what_is_in_the_way_is_met_as_on_the_careful_path(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    for name in ("careful", "fast"):
        (tmp_path / name / "d").mkdir(parents=True)
        (tmp_path / name / "d" / "f002").write_bytes(b"old")  # (replaced, as tar does)
        os.symlink("/nonexistent", tmp_path / name / "d" / "f003")  # (replaced, not followed)
        (tmp_path / name / "d" / "f004").mkdir()  # (a directory in the way: a failure)
        (tmp_path / name / "d" / "f004" / "x").write_bytes(b"x")
        for left in ("d/f004/x", "d/f004"):
            os.utime(tmp_path / name / left, ns=(MTIME, MTIME))
    careful, fast = extract_both(archive, tmp_path)
    assert fast == careful
    assert fast[1][3] == [("d/f004", "IsADirectoryError")]
    assert fast[0]["d/f002"][2] == bytes([2]) * 194


def test_a_file_without_its_directory_row_is_not_written_through_a_link(tmp_path: Path) -> None:
    """A hostile index: ``sub``'s row deleted, and ``sub`` a link to outside in the
    target. The kernel does not write where no directory was made safe; the careful path
    replaces the link with a directory, as for any directory in the way."""
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "f").write_bytes(b"inside")
    archive = str(tmp_path / "a.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        ingest(bc, plan_tree(str(source)))
    with sqlite3.connect(archive) as conn:
        conn.execute("DELETE FROM dirs WHERE path = 'sub'")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    os.symlink(outside, target / "sub")
    with barecat.Barecat(archive) as bc:
        result = extract_to_directory(bc, str(target))
    assert list(outside.iterdir()) == []
    assert not (target / "sub").is_symlink()
    assert (target / "sub" / "f").read_bytes() == b"inside"
    assert result.failures == []


@pytest.mark.parametrize("path", ["fast", "careful"])
def test_progress_is_told_of_every_file_and_byte(tmp_path: Path, path: str) -> None:
    """What ``on_files`` is told adds up to the result's counts, on either path (a file
    stored once is written once: its bytes are told once)."""
    told = [0, 0]

    def on_files(files: int, nbytes: int) -> None:
        told[0] += files
        told[1] += nbytes

    with barecat.Barecat(make_archive(tmp_path)) as bc:
        kw: dict[str, Any] = {"on_files": on_files}
        if path == "careful":  # (the kernel is not used where paths are chosen)
            kw["paths"] = [""]
        result = extract_to_directory(bc, str(tmp_path / "out"), **kw)
    assert told == [result.files + result.links, result.bytes]
    assert told[0] == 58  # (the link leading out: not made)


def test_damaged_bytes_are_a_failure_naming_the_file(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    with barecat.Barecat(archive) as bc:
        f = bc.lookup_file("d/f010")
        shard, offset = bc.sharder.get_shard_path(f.shard), f.offset
    with open(shard, "r+b") as s:
        s.seek(offset + 3)
        s.write(b"\xff")
    careful, fast = extract_both(archive, tmp_path)
    assert fast == careful
    assert fast[1][3] == [("d/f010", "BarecatIntegrityError")]
    assert "d/f010" not in fast[0]


def test_the_core_reads_the_rows_where_it_can(tmp_path: Path) -> None:
    """A plain archive's rows are read by the core's SQLite (no Python row made), on the
    compiled kernels; through sqlite3 on the pure-Python ones. The same rows either way."""
    with barecat.Barecat(make_archive(tmp_path)) as bc:
        rows = kernel_extraction.kernel_rows(bc)
        assert rows is not None
        core = kernels.IMPLEMENTATION == "compiled"
        assert type(rows).__name__ == ("IndexRows" if core else "ListedRows")
        listed = bc.index.listing.file_rows(Order.ADDRESS)
    assert len(rows) == len(listed) == 59
    assert rows.odd() == kernel_extraction.ListedRows(listed).odd()
    assert [row[0] for row in rows.odd()] == [".hidden"]  # (the careful path normalizes it)


def test_a_writers_files_not_yet_committed_are_extracted(tmp_path: Path) -> None:
    """Rows only the writer's connection sees (its transaction open) are read through it."""
    with barecat.Barecat(str(tmp_path / "w.barecat"), readonly=False) as bc:
        bc["d/x"] = b"x"
        bc["y"] = b"yy"
        rows = kernel_extraction.kernel_rows(bc)
        assert isinstance(rows, kernel_extraction.ListedRows) and len(rows) == 2
        result = extract_to_directory(bc, str(tmp_path / "out"))
    assert (result.files, result.failures) == (2, [])
    assert (tmp_path / "out" / "d" / "x").read_bytes() == b"x"


def test_the_index_file_is_the_one_opened_whatever_the_directory_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another reader is pointed at the file the archive's connection opened (its
    absolute name, taken at open), not at the name as given, relative to where the
    process is now."""
    archive = Path(make_archive(tmp_path))
    monkeypatch.chdir(tmp_path)
    with barecat.Barecat(archive.name) as bc:
        other = tmp_path / "other"
        other.mkdir()
        (other / archive.name).write_bytes(b"not this one")
        monkeypatch.chdir(other)
        source = bc.index.listing.file_rows_source(Order.ADDRESS)
    assert source is not None
    assert os.path.realpath(source[0]) == os.path.realpath(archive)
    assert source[1].startswith("SELECT path, shard, offset, size, crc32c")


UNREACHABLE_SQLITE = """
import importlib.util, sys
import _sqlite3

so, archive, out, where = sys.argv[1:]
_sqlite3.__file__ = so if where == "a library without SQLite" else "/nowhere/_sqlite3.so"
spec = importlib.util.spec_from_file_location("barecat.kernels._compiled", so)
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)
sys.modules["barecat.kernels._compiled"] = core
import barecat
from barecat.entries import Order
from barecat.transfer import extract_to_directory, kernel_extraction

with barecat.Barecat(archive) as bc:
    print(core.read_rows(*bc.index.listing.file_rows_source(Order.ADDRESS)))
    print(type(kernel_extraction.kernel_rows(bc)).__name__)
    result = extract_to_directory(bc, out)
print(result.files, result.links, len(result.failures))
"""


@pytest.mark.parametrize("where", ["no library", "a library without SQLite"])
def test_where_the_core_cannot_reach_sqlite_the_rows_come_through_sqlite3(
    tmp_path: Path, where: str
) -> None:
    """The SQLite library of Python's sqlite3 is not to be found by the core (its module
    names a file that is not loaded, or a library without SQLite's functions): the core
    answers None and extraction reads the rows through sqlite3, leaving the same tree."""
    if kernels.IMPLEMENTATION != "compiled":
        pytest.skip("the compiled core is not the one running (BARECAT_PUREPYTHON=1)")
    from barecat.kernels import _compiled  # type: ignore[attr-defined]

    archive = make_archive(tmp_path)
    careful, fast = tmp_path / "careful", tmp_path / "fast"
    with barecat.Barecat(archive) as bc:
        want = extract_to_directory(bc, str(careful), on_file=lambda f: None)
    done = subprocess.run(
        [sys.executable, "-c", UNREACHABLE_SQLITE, _compiled.__file__, archive, str(fast), where],
        capture_output=True,
        text=True,
        check=True,
    )
    counts = f"{want.files} {want.links} {len(want.failures)}"
    assert done.stdout.splitlines() == ["None", "ListedRows", counts]
    assert tree(fast) == tree(careful)
