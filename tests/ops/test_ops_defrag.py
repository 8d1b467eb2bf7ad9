"""defrag and reshard: every file keeps its bytes, holes go away, and a kill at any moment
loses nothing (real archives, real processes killed with SIGKILL)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Callable

import crc32c
import pytest

import barecat
from barecat.exceptions import FileTooLargeBarecatError, ReadOnlyBarecatError
from barecat.index.placement import holes, placements_after, placements_before
from barecat.ops import compaction, rounds
from barecat.ops.defrag import DefragResult, defrag, fragmentation
from barecat.ops.reshard import reshard
from barecat.shards.moving import copy_files
from helpers import Run
from helpers.fragments import assert_packed, fragmented
from helpers.reference import reference_python

Files = dict[str, bytes]


def check(path: str, expected: Files) -> barecat.Barecat:
    """Every file there with its bytes and CRC32C, the index consistent; returns it open."""
    bc = barecat.Barecat(path)
    assert bc.index.find_inconsistencies() == []
    assert bc.verify_integrity()
    assert dict(bc.items()) == expected
    return bc


def layout(path: str) -> list[tuple[str, int, int, int]]:
    with barecat.Barecat(path) as bc:
        files = placements_after(bc.index, (0, 0, -1), 10**9)
    return [(f.path, f.shard, f.offset, f.size) for f in files]


def shard_sizes(path: str) -> list[int]:
    with barecat.Barecat(path) as bc:
        return [bc.sharder.physical_shard_end(i) for i in range(bc.sharder.num_shards)]


def run_op(path: str, op: Callable[..., DefragResult], *args: object, **kw: object) -> DefragResult:
    with barecat.Barecat(path, readonly=False) as bc:
        return op(bc.index, bc.sharder, *args, **kw)


# -- defrag ---------------------------------------------------------------------------------


@pytest.mark.parametrize("quick", [False, True])
def test_empty_archive(archive_path: str, quick: bool) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["x"] = b"gone"
        del bc["x"]
    result = run_op(archive_path, defrag, quick=quick)
    assert result.files_moved == 0 and result.bytes_reclaimed == 4
    assert shard_sizes(archive_path) in ([], [0])
    check(archive_path, {}).close()
    assert run_op(archive_path, reshard, 1000).files_moved == 0


def test_no_gaps_is_a_no_op(make_archive: Callable[..., str]) -> None:
    files = {f"a/{i}": bytes([i]) * (i * 37 % 500) for i in range(200)}
    path = make_archive(files, shard_size_limit=10_000)
    before, sizes = layout(path), shard_sizes(path)
    for quick in (False, True):
        result = run_op(path, defrag, quick=quick)
        assert (result.files_moved, result.bytes_moved, result.bytes_reclaimed) == (0, 0, 0)
    assert layout(path) == before and shard_sizes(path) == sizes
    check(path, files).close()


def test_holes_from_deletions_and_updates_are_squeezed_out(archive_path: str) -> None:
    expected = fragmented(archive_path)
    with barecat.Barecat(archive_path) as bc:
        frag = fragmentation(bc.index, bc.sharder)
    assert frag.holes > 20 and frag.reclaimable == frag.hole_bytes + frag.slack_bytes > 0
    result = run_op(archive_path, defrag)
    assert result.bytes_reclaimed == frag.reclaimable
    assert result.physical_size_after == sum(len(v) for v in expected.values())
    assert not result.timed_out and result.corrupt_files == []
    assert_packed(archive_path)
    check(archive_path, expected).close()


def test_files_keep_their_storage_order(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for i in range(300):
            bc[f"f{i:03d}"] = os.urandom(1000)
        for i in (*range(5, 13), 50, 51, 120, 299):
            del bc[f"f{i:03d}"]
        expected = {p: bc[p] for p in bc}
    order = [p for p, *_ in layout(archive_path)]
    result = run_op(archive_path, defrag)
    assert [p for p, *_ in layout(archive_path)] == order
    assert result.bytes_moved == 1000 * (300 - 5 - 12) and result.rounds < 40
    check(archive_path, expected).close()


def test_a_tiny_hole_in_front_of_much_data_takes_few_rounds(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["tiny"] = b"t"
        for i in range(2000):
            bc[f"f{i:04d}"] = os.urandom(1000)
        del bc["tiny"]
        expected = {p: bc[p] for p in bc}
    result = run_op(archive_path, defrag)
    assert result.rounds < 2 * compaction.GROW_ROUNDS and result.bytes_reclaimed == 1
    assert result.bytes_moved < 1.2 * 2000 * 1000  # a few files relocated to make room
    assert_packed(archive_path)
    check(archive_path, expected).close()


def test_second_run_changes_nothing(tmp_path: os.PathLike[str]) -> None:
    for seed, limit in [(1, None), (2, 9000), (3, 4000)]:
        path = os.path.join(os.fspath(tmp_path), f"idem{seed}.barecat")
        expected = fragmented(path, limit=limit, seed=seed)
        run_op(path, defrag)
        once = layout(path)
        again = run_op(path, defrag)
        assert (again.files_moved, again.bytes_reclaimed) == (0, 0)
        assert layout(path) == once
        check(path, expected).close()


def test_one_huge_file_behind_a_tiny_hole(archive_path: str) -> None:
    big = os.urandom(6 << 20)
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["tiny"] = b"x"
        bc["huge.bin"] = big
        bc["after"] = b"tail"
        del bc["tiny"]
    result = run_op(archive_path, defrag)
    assert result.bytes_reclaimed == 1 and result.corrupt_files == []
    # it cannot slide one byte over itself: it goes past the end and comes back
    assert result.bytes_moved == 2 * len(big) + 4
    assert_packed(archive_path)
    check(archive_path, {"huge.bin": big, "after": b"tail"}).close()
    assert run_op(archive_path, defrag).files_moved == 0


def test_unicode_and_odd_paths(make_archive: Callable[..., str]) -> None:
    files = {
        "ünïcödé/日本語/ファイル.txt": "こんにちは".encode(),
        "emoji/🎉🎉.bin": os.urandom(3000),
        "spaces and 'quotes'/\"x\".txt": b"q",
        "ελληνικά": b"",
    }
    path = make_archive({**files, "gap/1": os.urandom(5000), "gap/2": os.urandom(5000)})
    with barecat.Barecat(path, readonly=False) as bc:
        bc.rmtree("gap")
    run_op(path, defrag)
    assert_packed(path)
    check(path, files).close()


def test_many_shards_emptied_shards_are_deleted(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit=1000) as bc:
        for i in range(40):
            bc[f"f{i:02d}"] = bytes([i]) * 400  # two per shard
        for i in range(40):
            if i % 4 or i >= 20:
                del bc[f"f{i:02d}"]
        expected = {p: bc[p] for p in bc}
    assert len(shard_sizes(archive_path)) == 20
    result = run_op(archive_path, defrag)
    assert (result.shards_before, result.shards_after) == (20, 3)
    assert shard_sizes(archive_path) == [800, 800, 400]
    assert not os.path.exists(archive_path + "-shard-00003")
    check(archive_path, expected).close()


def test_archive_stays_usable_after_defrag_in_the_same_session(archive_path: str) -> None:
    expected = fragmented(archive_path, limit=5000)
    with barecat.Barecat(archive_path, readonly=False) as bc:
        defrag(bc.index, bc.sharder)
        bc["new/file"] = b"appended after defrag"
        expected["new/file"] = b"appended after defrag"
    check(archive_path, expected).close()
    assert_packed(archive_path, 5000)


def test_refuses_read_only_and_append_only(archive_path: str) -> None:
    fragmented(archive_path, n=20)
    with barecat.Barecat(archive_path) as bc, pytest.raises(ReadOnlyBarecatError):
        defrag(bc.index, bc.sharder)
    with (
        barecat.Barecat(archive_path, readonly=False, append_only=True) as bc,
        pytest.raises(barecat.BarecatError, match="append-only"),
    ):
        reshard(bc.index, bc.sharder, 10_000)


def test_refuses_archives_with_shards_linked_to_another(tmp_path: os.PathLike[str]) -> None:
    root = os.fspath(tmp_path)
    other = os.path.join(root, "other.barecat")
    expected = fragmented(other, n=30)
    linked = os.path.join(root, "linked.barecat")
    with barecat.Barecat(linked, readonly=False) as bc:
        bc["own"] = b"own bytes"
    os.rename(linked + "-shard-00000", linked + "-shard-00001")
    os.symlink(other + "-shard-00000", linked + "-shard-00000")
    with barecat.Barecat(linked, readonly=False) as bc:
        bc.index.update_file("own", new_shard=1)
    before = shard_sizes(other)
    for op, args in ((defrag, ()), (reshard, (1 << 20,))):
        with pytest.raises(barecat.BarecatError, match="link to a file this archive does not own"):
            run_op(linked, op, *args)
    assert shard_sizes(other) == before
    check(other, expected).close()


def test_corrupt_bytes_are_moved_unchanged_and_reported(archive_path: str, run: Run) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["hole"] = b"h" * 100
        bc["bad"] = b"good bytes"
        bc["ok"] = b"fine"
        del bc["hole"]
    with open(archive_path + "-shard-00000", "r+b") as f:
        f.seek(100)
        f.write(b"B")
    code, _, err = run("defrag", archive_path)
    assert code == 1 and "bad: checksum was already wrong" in err and "1 files" in err
    with barecat.Barecat(archive_path) as bc:
        bad = bc.index.lookup_file("bad")
        assert bc["ok"] == b"fine" and bad.offset == 0
        assert bc.sharder.pread(0, 0, 10) == b"Bood bytes"


# -- quick ----------------------------------------------------------------------------------


def test_quick_fills_holes_from_the_end(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for i in range(10):
            bc[f"f{i}"] = bytes([65 + i]) * 100
        for i in (1, 3, 5):
            del bc[f"f{i}"]
        expected = {p: bc[p] for p in bc}
    result = run_op(archive_path, defrag, quick=True)
    assert (result.files_moved, result.bytes_reclaimed, result.timed_out) == (3, 300, False)
    assert shard_sizes(archive_path) == [700]
    check(archive_path, expected).close()


def test_quick_never_grows_and_never_moves_for_nothing(tmp_path: os.PathLike[str]) -> None:
    for seed, limit in [(4, None), (5, 6000), (6, 4500)]:
        path = os.path.join(os.fspath(tmp_path), f"q{seed}.barecat")
        expected = fragmented(path, n=400, limit=limit, seed=seed)
        for _ in range(3):
            result = run_op(path, defrag, quick=True)
            assert result.bytes_reclaimed >= 0
            assert result.bytes_reclaimed > 0 or result.files_moved == 0
            check(path, expected).close()


def test_quick_with_a_tiny_time_budget(archive_path: str) -> None:
    expected = fragmented(archive_path, n=600)
    result = run_op(archive_path, defrag, quick=True, time_budget=0.0)
    assert result.timed_out and result.files_moved == 0
    check(archive_path, expected).close()
    result = run_op(archive_path, defrag, quick=True, time_budget=1e-4)
    check(archive_path, expected).close()
    assert run_op(archive_path, defrag, quick=True, time_budget=30).bytes_reclaimed > 0
    check(archive_path, expected).close()


def test_empty_files_never_keep_a_shard_alive(tmp_path: os.PathLike[str]) -> None:
    for quick in (False, True):
        path = os.path.join(os.fspath(tmp_path), f"e{quick}.barecat")
        with barecat.Barecat(path, readonly=False, shard_size_limit=100) as bc:
            bc["a"] = b"a" * 60
            bc["b"] = b"b" * 30
            bc["gone"] = b"g" * 60
            bc["empty"] = b""  # stored at the end of the doomed shard
            del bc["gone"]
        assert len(shard_sizes(path)) == 2
        run_op(path, defrag, quick=quick)
        assert shard_sizes(path) == [90]
        check(path, {"a": b"a" * 60, "b": b"b" * 30, "empty": b""}).close()
        again = run_op(path, defrag, quick=quick)
        assert (again.files_moved, again.bytes_reclaimed) == (0, 0)


# -- reshard --------------------------------------------------------------------------------


@pytest.mark.parametrize(("start", "new"), [(4500, 20_000), (20_000, 4000), (None, 5000)])
def test_reshard_keeps_every_byte(archive_path: str, start: int | None, new: int) -> None:
    expected = fragmented(archive_path, n=400, limit=start, seed=new)
    result = run_op(archive_path, reshard, new)
    assert result.new_limit == new and result.corrupt_files == []
    assert_packed(archive_path, new)
    with check(archive_path, expected) as bc:
        assert bc.shard_size_limit == new
    again = run_op(archive_path, reshard, new)
    assert (again.files_moved, again.bytes_reclaimed) == (0, 0)


def test_reshard_refuses_a_limit_below_the_largest_file(archive_path: str) -> None:
    expected = fragmented(archive_path, n=50)
    before = layout(archive_path)
    with pytest.raises(FileTooLargeBarecatError, match="4000 bytes"):
        run_op(archive_path, reshard, 3999)
    assert layout(archive_path) == before
    with check(archive_path, expected) as bc:
        assert bc.shard_size_limit == barecat.SHARD_SIZE_UNLIMITED


def test_reference_reads_the_results(tmp_path: os.PathLike[str]) -> None:
    python = reference_python()
    paths = {}
    for name, op in [("defrag", "defrag"), ("quick", "quick"), ("reshard", "reshard")]:
        path = paths[name] = os.path.join(os.fspath(tmp_path), f"{name}.barecat")
        expected = fragmented(path, n=200, limit=6000)
        if op == "reshard":
            run_op(path, reshard, 2500 * 4)
        else:
            run_op(path, defrag, quick=op == "quick")
        want = {p: crc32c.crc32c(v) for p, v in expected.items()}
        script = textwrap.dedent(
            """
            import json, sys, barecat, crc32c
            with barecat.Barecat(sys.argv[1]) as bc:
                got = {p: crc32c.crc32c(bc[p]) for p in bc.files()}
                print(json.dumps([got, bc.verify_integrity(), bc.shard_size_limit]))
            """
        )
        out = subprocess.run(
            [python, "-I", "-c", script, path], capture_output=True, text=True, check=True
        ).stdout
        got, ok, limit = json.loads(out)
        assert got == want and ok
        assert limit == (10_000 if op == "reshard" else 6000)


# -- command line ---------------------------------------------------------------------------


def test_cli_defrag_reshard_and_dry_run(archive_path: str, run: Run) -> None:
    expected = fragmented(archive_path, limit=8000)
    code, out, _ = run("defrag", "-n", archive_path)
    assert code == 0 and "Reclaimable:" in out and "Holes between files:" in out
    code, out, _ = run("defrag", "--quick", "--time-budget", "10", archive_path)
    assert code == 0 and out.startswith("Quick defrag of") and "freed" in out
    code, out, _ = run("defrag", "--smart", archive_path)
    assert code == 0 and out.startswith("Defragmented") and "shards" in out
    code, out, _ = run("defrag", archive_path)
    assert code == 0 and "nothing to defragment" in out
    code, out, _ = run("reshard", "-s", "20K", archive_path)
    assert code == 0 and "shards of at most 20KB" in out
    check(archive_path, expected).close()
    assert_packed(archive_path, 20 << 10)
    code, _, err = run("reshard", "-s", "1K", archive_path)
    assert code == 1 and "does not fit in shards of 1024 bytes" in err
    code, _, err = run("reshard", archive_path)
    assert code == 2 and "--shard-size-limit" in err
    code, _, err = run("defrag", os.path.join(os.path.dirname(archive_path), "missing"))
    assert code == 1
    code, out, _ = run("defrag", "--help")
    assert code == 0 and "examples:" in out and "--time-budget" in out


def test_legacy_barecat_defrag(archive_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    from barecat.cli.defrag import legacy_defrag

    expected = fragmented(archive_path)
    assert legacy_defrag(["--quick", archive_path]) == 0
    assert legacy_defrag([archive_path]) == 0
    assert "deprecated" in capsys.readouterr().err
    assert_packed(archive_path)
    check(archive_path, expected).close()
    assert legacy_defrag([archive_path + ".missing"]) == 1
    assert legacy_defrag(["--bogus"]) == 2


# -- primitives -----------------------------------------------------------------------------


def test_copy_files_checksums_scattered_adjacent_and_big_sources(archive_path: str) -> None:
    data = os.urandom(3 << 20)
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["all"] = data
    with barecat.Sharder(archive_path, readonly=False) as sh:
        sources = [
            (0, 0, 10),
            (0, 10, 0),
            (0, 10, 20_000),  # adjacent: read together with the two before
            (0, 40_000, 10_000),
            (0, 100_000, 2 << 20),  # big: mapped and copied in the kernel
            (0, 30, 5),
        ]
        crcs = copy_files(sh, sources, 0, len(data), bytearray(4096))
        want = b"".join(data[o : o + n] for _, o, n in sources)
        assert sh.pread(0, len(data), len(want)) == want
        assert crcs == [crc32c.crc32c(data[o : o + n]) for _, o, n in sources]
        with pytest.raises(barecat.BarecatIntegrityError, match="truncated"):
            copy_files(sh, [(0, sh.physical_shard_end(0) - 10, 2 << 20)], 1, 0)


def test_placement_pages_and_holes_with_empty_files(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for i in range(30):
            bc[f"f{i:02d}"] = b"x" * (i % 3)  # every third is empty and shares an offset
        for i in range(0, 30, 4):
            del bc[f"f{i:02d}"]
        index = bc.index
        up, key = [], (0, 0, -1)
        while page := placements_after(index, key, 4):
            up += page
            key = page[-1].key
        down, key = [], (2**62, 0, 0)
        while page := placements_before(index, key, 5):
            down += page
            key = page[-1].key
        assert [f.path for f in up] == [f.path for f in reversed(down)]
        assert sorted(f.path for f in up) == sorted(bc.files())
        ends = {f.offset for f in up} | {f.end for f in up}
        for shard, offset, size in holes(index):
            assert shard == 0 and size > 0 and offset in ends | {0}
            assert not any(f.offset < offset + size and f.end > offset for f in up if f.size)


@pytest.mark.parametrize("op", ["defrag", "reshard"])
def test_rounds_are_bounded(archive_path: str, monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    """No round copies more than ROUND_BYTES plus the one file that filled it: a crash
    loses at most one round's copying, and a round's bytes are fsynced together. The
    limit is lowered so that a small archive needs many rounds."""
    limit = 20_000
    monkeypatch.setattr(rounds, "ROUND_BYTES", limit)
    expected = fragmented(archive_path, n=600)
    largest = max(len(v) for v in expected.values())
    copied: list[int] = []
    kw = {"on_progress": lambda files, nbytes: copied.append(nbytes)}
    if op == "defrag":
        result = run_op(archive_path, defrag, **kw)
    else:
        result = run_op(archive_path, reshard, 50_000, **kw)
    per_round = [n for n in copied if n]
    assert len(per_round) == result.rounds > 5
    assert sum(per_round) == result.bytes_moved
    assert max(per_round) <= limit + largest, per_round
    assert max(per_round) >= limit  # rounds are cut by bytes here, not by files or time
    assert_packed(archive_path, 50_000 if op == "reshard" else None)
    check(archive_path, expected).close()


def test_the_facade_returns_full_results_and_reports_progress(archive_path: str) -> None:
    """``bc.defragment``/``reshard``/``verify``/``repair`` give the ops' results and call
    the progress callbacks; 0.3.1's ``defrag`` and ``verify_integrity`` keep their types."""
    expected = fragmented(archive_path, n=200, limit=5000)
    with barecat.Barecat(archive_path) as bc:
        ahead = bc.fragmentation()
        with pytest.raises(ReadOnlyBarecatError):
            bc.defragment()
        with pytest.raises(ReadOnlyBarecatError):
            bc.reshard(10_000)
        checked: list[str] = []
        report = bc.verify(on_file=lambda f: checked.append(f.path), workers=2)
        assert report.ok and report.files_checked == len(expected)
        assert sorted(checked) == sorted(expected)
        assert bc.verify_integrity() is True
    assert ahead.reclaimable > 0
    moved: list[tuple[int, int]] = []
    with barecat.Barecat(archive_path, readonly=False) as bc:
        result = bc.defragment(on_progress=lambda files, nbytes: moved.append((files, nbytes)))
        assert isinstance(result, DefragResult)
        assert result.bytes_reclaimed == ahead.reclaimable and result.files_moved > 0
        assert moved and sum(n for _, n in moved) >= result.bytes_moved > 0
        assert bc.defrag() == 0  # 0.3.1's method: the bytes freed, nothing left to free
        bc["after/defragment"] = b"appended where the files now end"
        expected["after/defragment"] = b"appended where the files now end"
        resharded = bc.reshard("20K")  # sizes are binary: 20480
        assert (resharded.old_limit, resharded.new_limit) == (5000, 20_480)
        assert bc.shard_size_limit == 20_480
        repaired = bc.repair()
        assert not repaired.changed and repaired.bad_files == []
    check(archive_path, expected).close()
    assert_packed(archive_path, 20_480)
