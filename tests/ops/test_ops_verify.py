"""verify and repair on damaged archives: exactly the affected paths, no tracebacks.

Damage is done to real files the way it happens (a flipped byte, a shard cut short or
lost, a garbage or truncated index, stray bytes after a crash, wrong statistics), then the
command-line tools are run in-process and their reports checked path by path.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

import barecat
from barecat.ops import verify_archive
from helpers import Run

FILES = {f"dir{i % 3}/file-{i:02}-ü.bin": bytes([i]) * (1000 + 37 * i) for i in range(30)}


@pytest.fixture
def sharded(tmp_path: Path) -> str:
    """30 files over several 8 KiB shards."""
    path = str(tmp_path / "a.barecat")
    with barecat.Barecat(path, readonly=False, shard_size_limit=8192) as bc:
        for p, data in FILES.items():
            bc[p] = data
    return path


def _infos(path: str) -> dict[str, barecat.BarecatFileInfo]:
    with barecat.Barecat(path) as bc:
        return {f.path: f for f in bc.index.iter_all_fileinfos()}


def _bad_paths(out: str) -> set[str]:
    return {line.split(": ")[0] for line in out.splitlines() if line.split(": ")[0] in FILES}


def test_clean_archive_verifies_with_any_thread_count(run: Run, sharded: str) -> None:
    for jobs in ("1", "4"):
        code, out, err = run("verify", "-j", jobs, sharded)
        assert (code, err) == (0, "") and out.startswith(f"Verified {len(FILES)} files")


def test_flipped_byte_names_exactly_that_file(run: Run, sharded: str) -> None:
    victim = _infos(sharded)["dir1/file-07-ü.bin"]
    with open(f"{sharded}-shard-{victim.shard:05d}", "r+b") as f:
        f.seek((victim.offset or 0) + 100)
        f.write(b"\xff")
    for jobs in ("1", "3"):
        code, out, _ = run("verify", "-j", jobs, sharded)
        assert code == 1 and _bad_paths(out) == {victim.path} and "CRC32C mismatch" in out
    with barecat.Barecat(sharded) as bc:
        assert bc["dir0/file-03-ü.bin"] == FILES["dir0/file-03-ü.bin"]  # healthy reads work
        with pytest.raises(barecat.BarecatIntegrityError):
            bc[victim.path]


def test_truncated_and_missing_shards_name_their_files(run: Run, sharded: str) -> None:
    infos = _infos(sharded)
    last_shard = max(f.shard or 0 for f in infos.values())
    cut = infos[max(infos, key=lambda p: (infos[p].shard, infos[p].offset))]
    os.truncate(f"{sharded}-shard-{last_shard:05d}", (cut.offset or 0) + 10)
    os.remove(f"{sharded}-shard-00001")
    expect_missing = {p for p, f in infos.items() if f.shard == 1}
    code, out, _ = run("verify", sharded)
    assert code == 1 and _bad_paths(out) == expect_missing | {cut.path}
    assert "shard file is missing" in out and "cut short" in out
    code, out, _ = run("verify", "--quick", sharded)  # shard sizes are part of the quick check
    assert code == 1 and _bad_paths(out) == expect_missing | {cut.path}
    with barecat.Barecat(sharded) as bc:
        healthy = next(p for p, f in infos.items() if f.shard == 0)
        assert bc[healthy] == FILES[healthy]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_broken_index_is_one_clear_line(run: Run, sharded: str, damage: str) -> None:
    size = os.path.getsize(sharded)
    if damage == "garbage":
        Path(sharded).write_bytes(os.urandom(size))
    elif damage == "truncated":
        os.truncate(sharded, size // 2)
    else:
        os.truncate(sharded, 0)
    code, out, err = run("verify", sharded)
    assert code == 1 and out == "" and "Traceback" not in err and err.strip()
    assert len([line for line in err.splitlines() if line.startswith("barecat")]) <= 1


def test_overlapping_ranges_are_index_problems(run: Run, sharded: str) -> None:
    infos = _infos(sharded)
    a = infos["dir0/file-00-ü.bin"]
    with barecat.Barecat(sharded, readonly=False) as bc:
        b = next(f for f in infos.values() if f.shard == a.shard and f.offset == a.end)
        bc.index.update_file(b.path, new_offset=(a.offset or 0) + 5)
    code, out, _ = run("verify", sharded)
    assert code == 1 and f"index: bytes of {b.path!r} overlap those of {a.path!r}" in out


def test_repair_cuts_stray_tails_and_fixes_statistics_idempotently(run: Run, sharded: str) -> None:
    infos = _infos(sharded)
    shard0 = f"{sharded}-shard-00000"
    before = os.path.getsize(shard0)
    with open(shard0, "ab") as f:
        f.write(b"half-written file from a crash")
    con = sqlite3.connect(sharded)
    con.execute("UPDATE config SET value_int = 0 WHERE key = 'use_triggers'")
    con.execute("UPDATE dirs SET num_files = 99, size_tree = 1 WHERE path = 'dir2'")
    con.execute("UPDATE config SET value_int = 1 WHERE key = 'use_triggers'")
    con.commit()
    con.close()
    assert run("verify", sharded)[0] == 1
    code, out, _ = run("repair", sharded)
    assert code == 0 and "cut 30 bytes" in out and "rebuilt directory data" in out
    assert os.path.getsize(shard0) == before
    code, out, _ = run("repair", sharded)
    assert (code, out) == (0, "nothing to repair\n")
    assert run("verify", sharded)[0] == 0
    assert {p: f.crc32c for p, f in _infos(sharded).items()} == {
        p: f.crc32c for p, f in infos.items()
    }


def test_repair_reports_bad_files_and_drops_them_only_when_asked(run: Run, sharded: str) -> None:
    victim = _infos(sharded)["dir2/file-05-ü.bin"]
    with open(f"{sharded}-shard-{victim.shard:05d}", "r+b") as f:
        f.seek(victim.offset or 0)
        f.write(b"\x00\x01")
    code, _, err = run("repair", sharded)
    assert code == 1 and _bad_paths(err) == {victim.path}
    assert victim.path in _infos(sharded)  # reported, not removed
    code, out, _ = run("repair", "--drop-bad", sharded)
    assert code == 0 and "dropped 1 bad files" in out
    with barecat.Barecat(sharded) as bc:
        assert victim.path not in bc and bc.num_files == len(FILES) - 1
        assert all(bc[p] == d for p, d in FILES.items() if p != victim.path)
    assert run("verify", sharded)[0] == 0


def test_repair_leaves_linked_shards_of_other_archives_alone(run: Run, tmp_path: Path) -> None:
    src = str(tmp_path / "src.barecat")
    with barecat.Barecat(src, readonly=False) as bc:
        bc["a/x"] = b"x" * 100
    with open(f"{src}-shard-00000", "ab") as f:
        f.write(b"trailing bytes that belong to the source archive")
    source_bytes = Path(f"{src}-shard-00000").read_bytes()
    out = str(tmp_path / "out.barecat")
    assert run("merge", "--symlink", "-o", out, src)[0] == 0
    code, _, err = run("repair", out)
    assert code == 0, err
    assert Path(f"{src}-shard-00000").read_bytes() == source_bytes
    with barecat.Barecat(out) as bc:
        assert bc["a/x"] == b"x" * 100


def test_verify_and_repair_on_an_empty_archive_and_one_huge_file(run: Run, tmp_path: Path) -> None:
    empty = str(tmp_path / "empty.barecat")
    barecat.Barecat(empty, readonly=False).close()
    assert run("verify", empty)[:2] == (0, "Verified 0 files (0B), all checksums OK.\n")
    assert run("repair", empty)[:2] == (0, "nothing to repair\n")
    huge = str(tmp_path / "huge.barecat")
    data = os.urandom(48 << 20)
    with barecat.Barecat(huge, readonly=False) as bc:
        bc["big/одна.bin"] = data
    for jobs in ("1", "2"):
        assert run("verify", "-j", jobs, huge)[0] == 0
    with open(f"{huge}-shard-00000", "r+b") as f:
        f.seek(40 << 20)
        f.write(b"\x00")
    code, out, _ = run("verify", "-j", "2", huge)
    assert code == 1 and "big/одна.bin: CRC32C mismatch" in out


DAMAGED_ROWS = [  # (column, value stored in it, words of the report)
    ("shard", "abc", "shard is text 'abc'"),
    ("offset", -5, "offset is negative"),
    ("offset", 2.5, "offset is a real number"),
    ("offset", (1 << 63) - 2, "past the largest possible file offset"),
    ("size", b"\x01", "size is a blob"),
    ("size", None, "size is NULL"),
    ("crc32c", "x", "crc32c is text"),
    ("crc32c", 1 << 40, "not a 32-bit checksum"),
]


def _damage_row(archive: str, path: str, column: str, value: object) -> None:
    conn = sqlite3.connect(archive)
    with conn:
        conn.execute(f"UPDATE files SET {column} = ? WHERE path = ?", (value, path))
    conn.close()


@pytest.mark.parametrize(("column", "value", "words"), DAMAGED_ROWS)
def test_a_malformed_row_is_a_damaged_path_in_verify_and_cat(
    run: Run, sharded: str, column: str, value: object, words: str
) -> None:
    victim = "dir1/file-07-ü.bin"
    _damage_row(sharded, victim, column, value)
    for jobs in ("1", "3"):
        code, out, err = run("verify", "-j", jobs, sharded)
        assert code == 1 and _bad_paths(out) == {victim} and "Traceback" not in err
        assert f"{victim}: damaged index entry: " in out and words in out
    code, out, err = run("cat", sharded, victim)
    assert code == 1 and out == "" and err.count("\n") == 1 and words in err
    assert err.startswith(f"barecat cat: Damaged index entry {victim!r}: ")
    code, out, _ = run("cat", sharded, "dir1/file-04-ü.bin")
    assert code == 0 and out.encode("utf-8", "surrogateescape") == FILES["dir1/file-04-ü.bin"]


@pytest.mark.parametrize(("column", "value", "words"), DAMAGED_ROWS)
def test_every_read_of_a_malformed_row_names_the_path(
    sharded: str, column: str, value: object, words: str
) -> None:
    victim, healthy = "dir1/file-07-ü.bin", "dir1/file-04-ü.bin"
    _damage_row(sharded, victim, column, value)
    with barecat.Barecat(sharded, lookup_table=True) as bc:
        assert bc.index.lookup_table_size == len(FILES) - 1  # left to SQLite, which checks
        reads = {
            "bc[path]": lambda: bc[victim],
            "read": lambda: bc.read(victim),
            "read of a listed record": lambda: bc.read(bc.index.list_direct_fileinfos("dir1")[2]),
            "get_many": lambda: bc.get_many([healthy, victim]),
            "open": lambda: bc.open(victim, "rb").read(),
            "readinto": lambda: bc.readinto(victim, bytearray(10)),
        }
        for name, read in reads.items():
            with pytest.raises(barecat.DamagedEntryBarecatError, match=words) as caught:
                read()
            assert caught.value.filename == victim, name
        assert bc[healthy] == bc.read(healthy) == FILES[healthy]  # the rest reads as ever
        assert len(list(bc.index.iter_all_fileinfos())) == len(FILES)  # listings still list
        assert sum(len(files) for _, _, files in bc.walk("")) == len(FILES)


def test_files_without_a_crc_are_counted_as_unchecked(run: Run, sharded: str) -> None:
    for path in ("dir0/file-00-ü.bin", "dir2/file-05-ü.bin"):
        _damage_row(sharded, path, "crc32c", None)
    code, out, err = run("verify", sharded)
    assert (code, err) == (0, "")
    assert out.startswith(f"Verified {len(FILES)} files") and "2 files without a CRC32C" in out
    with barecat.Barecat(sharded) as bc:
        report = verify_archive(bc.index, bc.sharder)
        assert report.ok and (report.files_checked, report.files_unchecked) == (len(FILES), 2)


@pytest.mark.parametrize(("column", "value"), [("offset", 1 << 40), ("size", 1 << 62)])
def test_an_address_past_the_shard_end_names_the_path(
    sharded: str, column: str, value: int
) -> None:
    victim = "dir1/file-07-ü.bin"
    _damage_row(sharded, victim, column, value)
    with barecat.Barecat(sharded) as bc:
        reads = (
            lambda: bc[victim],
            lambda: bc.read(victim),
            lambda: bc.check_crc32c(victim),
            lambda: bc.get_many([victim]),
        )
        for read in reads:
            with pytest.raises(barecat.BarecatIntegrityError, match="truncated") as caught:
                read()
            assert str(caught.value).startswith(f"{victim}: ")
        with pytest.raises(barecat.BarecatIntegrityError, match="truncated"), bc.open(victim) as f:
            f.read()  # a stream never hands out a file cut short (nor asks for 4 EiB first)
