"""Merging archives and cutting subsets: ``barecat merge``/``subset`` and ``barecat.ops``.

Real archives in a temporary directory, the CLI in-process (``run``), the reference
barecat 0.3.1 in its own interpreter for interchange, and real processes killed with
SIGKILL for crash safety. After every operation the output must be self-consistent
(``find_inconsistencies() == []``) and every file must verify.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import random
import re
import subprocess
import tarfile
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat.cli.merge import legacy_merge, legacy_merge_symlink
from barecat.exceptions import FileExistsBarecatError
from barecat.glob import PathFilter, directory_pattern
from barecat.layout import existing_shard_numbers, shard_path
from barecat.ops.merge import merge_archives
from barecat.ops.subset import select_entries, selected_entries, subset_archive
from barecat.selection import FileSelection
from helpers import BIN, Run
from helpers.reference import reference_python
from helpers.terminal import on_a_terminal

Make = Callable[..., str]


def contents(path: str) -> dict[str, bytes]:
    with barecat.Barecat(path) as bc:
        return {p: bc[p] for p in bc}


def check(path: str) -> dict[str, bytes]:
    """Assert the archive is consistent and verifies; return its contents."""
    with barecat.Barecat(path) as bc:
        assert bc.index.find_inconsistencies() == []
        assert bc.verify_integrity()
        return {p: bc[p] for p in bc}


def dir_stats(path: str) -> dict[str, tuple[int, int, int, int]]:
    with barecat.Barecat(path) as bc:
        return {
            d.path: (d.num_subdirs, d.num_files, d.num_files_tree, d.size_tree)
            for d in bc.index.iter_all_dirinfos()
        }


def shard_digests(path: str) -> dict[str, str]:
    return {
        shard_path(path, n): hashlib.sha256(Path(shard_path(path, n)).read_bytes()).hexdigest()
        for n in existing_shard_numbers(path)
    }


def archive_files_state(path: str) -> dict[str, bytes]:
    """Raw bytes of the index and every shard (to prove nothing changed)."""
    files = [path] + [shard_path(path, n) for n in existing_shard_numbers(path)]
    return {f: Path(f).read_bytes() for f in files}


# -- merging ---------------------------------------------------------------------------


def test_merge_three_archives_with_overlapping_directories(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    a = {"shared/x": b"x" * 10, "shared/deep/1": b"1", "only_a/f": b"af"}
    b = {"shared/y": b"yy", "shared/deep/2": b"22", "shared/deep/er/3": b"333", "top_b": b""}
    c = {"shared/deep/er/4": b"4444", "only_c/g/h": b"h" * 100, "top_c": b"c"}
    inputs = [make_archive(a), make_archive(b), make_archive(c)]
    out = str(tmp_path / "out.barecat")
    code, stdout, err = run("merge", "-o", out, *inputs)
    assert (code, err) == (0, "")
    assert stdout == ""  # the summary is for a terminal: test_summaries_on_a_terminal
    assert check(out) == {**a, **b, **c}
    union = make_archive({**a, **b, **c})
    assert dir_stats(out) == dir_stats(union)
    assert dir_stats(out)["shared"] == (1, 2, 6, 10 + 1 + 2 + 2 + 3 + 4)
    with barecat.Barecat(out) as bc:
        assert bc.num_files == 10 and bc.total_size == 125 and bc.sharder.num_shards == 1


def test_duplicates_are_refused_naming_the_path_and_the_output_keeps_earlier_inputs(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    a = make_archive({"d/same": b"first", "d/a": b"a"})
    b = make_archive({"d/b": b"b", "d/same": b"second"})
    c = make_archive({"c": b"c"})
    out = str(tmp_path / "out.barecat")
    code, _, err = run("merge", "-o", out, a, b, c)
    assert code == 1
    assert "d/same" in err and b in err and "--ignore-duplicates" in err
    assert check(out) == {"d/same": b"first", "d/a": b"a"}  # a stayed, nothing of b (or c)

    before = archive_files_state(out)
    with barecat.Barecat(out, readonly=False) as bc:
        with pytest.raises(FileExistsBarecatError) as info:
            merge_archives(bc.index, bc.sharder, [b])
        assert info.value.filename == "d/same"
    assert archive_files_state(out) == before


def test_ignore_duplicates_keeps_the_first_copy(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    a = make_archive({"d/same": b"first", "d/a": b"a"})
    b = make_archive({"d/b": b"b", "d/same": b"second", "e/f": b"f"})
    out = str(tmp_path / "out.barecat")
    code, stdout, _ = run("merge", "--ignore-duplicates", "-o", out, a, b)
    assert (code, stdout) == (0, "")
    assert check(out) == {"d/same": b"first", "d/a": b"a", "d/b": b"b", "e/f": b"f"}


def test_a_file_where_the_output_has_a_directory_is_refused(make_archive: Make) -> None:
    out = make_archive({"x/inner": b"1"})
    src = make_archive({"x": b"file named like a directory", "y": b"y"})
    with barecat.Barecat(out, readonly=False) as bc:
        with pytest.raises(IsADirectoryError) as is_dir:
            merge_archives(bc.index, bc.sharder, [src])
        # a ValueError with these words too, as barecat 0.3.1 raised
        assert isinstance(is_dir.value, ValueError) and is_dir.value.filename == "x"
        assert str(is_dir.value) == "Source file 'x' conflicts with target directory"
        result = merge_archives(bc.index, bc.sharder, [src], ignore_duplicates=True)
        assert (result.total.files, result.total.skipped) == (1, 1)
    inner = make_archive({"y/z": b"under a file"})
    with barecat.Barecat(out, readonly=False) as bc:
        with pytest.raises(NotADirectoryError) as not_dir:
            merge_archives(bc.index, bc.sharder, [inner])
        assert isinstance(not_dir.value, ValueError)
        assert str(not_dir.value) == "Source directory 'y' conflicts with target file"
        for prefix in ("y", "y/deeper"):
            with pytest.raises(NotADirectoryError) as not_dir:
                bc.merge_from_other_barecat(inner, prefix=prefix)
            assert isinstance(not_dir.value, ValueError)
            assert str(not_dir.value) == f"Cannot use prefix '{prefix}': 'y' exists as a file"
    assert check(out) == {"x/inner": b"1", "y": b"y"}
    under = make_archive({"p/x/inner": b"2", "q/x": b"3"})
    with barecat.Barecat(under, readonly=False) as bc:
        with pytest.raises(IsADirectoryError):
            merge_archives(bc.index, bc.sharder, [src], prefix="p")
        merge_archives(bc.index, bc.sharder, [src], prefix="p", ignore_duplicates=True)
    assert check(under) == {"p/x/inner": b"2", "q/x": b"3", "p/y": b"y"}


def test_append_keeps_the_output_and_implies_ignore_duplicates(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    out = str(tmp_path / "out.barecat")
    assert run("merge", "-o", out, make_archive({"a/1": b"one", "a/2": b"two"}))[0] == 0
    code, stdout, _ = run("merge", "-a", "-o", out, make_archive({"a/2": b"TWO", "b/3": b"3"}))
    assert (code, stdout) == (0, "")
    assert check(out) == {"a/1": b"one", "a/2": b"two", "b/3": b"3"}


def test_existing_output_needs_force_or_append_and_an_input_is_never_the_output(
    run: Run, make_archive: Make
) -> None:
    a = make_archive({"a": b"a"})
    out = make_archive({"old": b"old"})
    code, _, err = run("merge", "-o", out, a)
    assert code == 1 and "already exists" in err and "-f" in err and "-a" in err
    assert contents(out) == {"old": b"old"}
    assert run("merge", "-f", "-o", out, a)[0] == 0
    assert check(out) == {"a": b"a"}
    code, _, err = run("merge", "-f", "-o", a, a, out)
    assert code == 1 and "also an input" in err
    assert check(a) == {"a": b"a"}
    assert run("merge", "-f", "-a", "-o", out, a)[0] == 2  # usage error
    code, _, err = run("merge", "--symlink", "-a", "-o", out, a)
    assert code == 1 and "--append is not supported with --symlink" in err
    code, _, err = run("merge", "-f", "-o", out, "--pattern", "*", "-i", "x", a)
    assert code == 1 and "--pattern" in err
    code, _, err = run("merge", "-f", "-o", out, a + ".missing")
    assert code == 1 and "not found" in err
    tar = Path(a).with_name("data.tar")
    tar.write_bytes(b"not a tar " * 100)
    code, _, err = run("merge", "-f", "-o", out, str(tar))
    assert code == 1 and "corrupt or truncated" in err
    assert check(out) == {"a": b"a"}  # -f removes nothing before the inputs are known good
    assert not list(Path(out).parent.glob(".merge-inputs-*"))


def test_tar_and_zip_inputs_are_merged_like_archives(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    a = make_archive({"x/one": b"from the archive"})
    with tarfile.open(tmp_path / "photos.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("x/two")
        info.size = 8
        tar.addfile(info, io.BytesIO(b"from tar"))
    with zipfile.ZipFile(tmp_path / "extra.zip", "w") as zf:
        zf.writestr("x/three", b"from zip")
    out = str(tmp_path / "all.barecat")
    inputs = [a, str(tmp_path / "photos.tar.gz"), str(tmp_path / "extra.zip")]
    assert run("merge", "-o", out, *inputs)[0] == 0
    assert check(out) == {
        "x/one": b"from the archive",
        "x/two": b"from tar",
        "x/three": b"from zip",
    }
    assert run("merge", "-f", "--as-subdirs", "-o", out, *inputs[1:])[0] == 0
    assert check(out) == {"photos/x/two": b"from tar", "extra/x/three": b"from zip"}
    code, _, err = run("merge", "-f", "--symlink", "-o", out, inputs[1])
    assert code == 1 and "--symlink is not supported with tar/zip inputs" in err and "--wrap" in err
    assert not list(tmp_path.glob(".merge-inputs-*"))


def test_symlink_mode_links_renumbered_shards_and_never_writes_into_them(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    a = make_archive({f"a/{i}": bytes([i]) * 300 for i in range(10)}, shard_size_limit=1000)
    b = make_archive({"b/x": b"x" * 50, "a/0": b"dup"})
    before = {**shard_digests(a), **shard_digests(b)}
    out = str(tmp_path / "view.barecat")
    code, stdout, _ = run("merge", "--symlink", "--ignore-duplicates", "-o", out, a, b)
    assert (code, stdout) == (0, "")
    targets = [shard_path(a, n) for n in range(4)] + [shard_path(b, 0)]
    for n, target in enumerate(targets):
        link = shard_path(out, n)
        assert os.path.islink(link) and not os.path.isabs(os.readlink(link))
        assert os.path.realpath(link) == os.path.realpath(target)
    expected = {**contents(b), **contents(a)}
    assert check(out) == expected

    with barecat.Barecat(out, readonly=False) as bc:
        bc["new/file"] = b"written after the merge"
        assert bc.index.lookup_file("new/file").shard == 5
    assert not os.path.islink(shard_path(out, 5))
    assert {**shard_digests(a), **shard_digests(b)} == before
    assert check(out) == {**expected, "new/file": b"written after the merge"}

    with barecat.Barecat(out, readonly=False) as bc:  # a second writer session too
        bc["more"] = b"m"
    assert {**shard_digests(a), **shard_digests(b)} == before
    with barecat.Barecat(out, readonly=False, allow_writing_symlinked_shard=True) as bc:
        assert bc.sharder.write_position[0] == 5  # its own shard was last; nothing to override

    view = str(tmp_path / "view2.barecat")
    assert run("merge", "--symlink", "-o", view, b)[0] == 0
    assert run("merge", "-a", "-o", view, make_archive({"c": b"copied"}))[0] == 0
    assert not os.path.islink(shard_path(view, 1)) and os.path.islink(shard_path(view, 0))
    assert check(view) == {**contents(b), "c": b"copied"}
    assert {**shard_digests(a), **shard_digests(b)} == before


def test_symlink_merge_of_an_empty_first_input_and_removed_links_on_error(
    make_archive: Make, tmp_path: Path
) -> None:
    empty = make_archive({})
    a = make_archive({"p": b"1"})
    out = str(tmp_path / "v.barecat")
    with barecat.Barecat(out, readonly=False) as bc:
        merge_archives(bc.index, bc.sharder, [empty, a], symlink=True)
        links = existing_shard_numbers(out)
        with pytest.raises(FileExistsBarecatError):
            merge_archives(bc.index, bc.sharder, [a], symlink=True)
        assert existing_shard_numbers(out) == links
    assert check(out) == {"p": b"1"}


def test_output_shard_size_limit_and_a_file_too_large(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    files = {f"d{i % 3}/f{i:02d}": os.urandom(50 + 29 * i) for i in range(30)}
    src = make_archive(files)
    out = str(tmp_path / "out.barecat")
    assert run("merge", "-s", "1000", "-o", out, src)[0] == 0
    sizes = [os.path.getsize(shard_path(out, n)) for n in existing_shard_numbers(out)]
    assert len(sizes) > 10 and max(sizes) <= 1000
    assert check(out) == files
    with barecat.Barecat(out) as bc:
        assert bc.shard_size_limit == 1000

    before = archive_files_state(out)
    big = make_archive({"big": b"z" * 1001})
    code, _, err = run("merge", "-a", "-o", out, big)
    assert code == 1 and "big" in err and "1000" in err
    assert archive_files_state(out) == before


def test_holes_are_squeezed_out_and_empty_files_survive_run_splits(make_archive: Make) -> None:
    rng = random.Random(5)
    for trial in range(12):
        files = {
            f"t/{i:03d}": rng.choice([b"", os.urandom(rng.randint(1, 300))]) for i in range(80)
        }
        src = make_archive(files, shard_size_limit=rng.choice([700, 2000, None]))
        with barecat.Barecat(src, readonly=False) as bc:
            for path in rng.sample(sorted(files), 25):
                bc.remove(path)
                del files[path]
        out = make_archive({"pre": b"existing"})
        limit = rng.choice([300, 512, 4096])
        with barecat.Barecat(out, readonly=False, shard_size_limit=limit) as bc:
            skip = trial % 2 == 0
            merge_archives(bc.index, bc.sharder, [src], ignore_duplicates=skip)
            merge_archives(bc.index, bc.sharder, [src], ignore_duplicates=True)
        assert check(out) == {"pre": b"existing", **files}
        with barecat.Barecat(out) as bc:
            physical = bc.total_physical_size_stat
        assert physical == len(b"existing") + sum(map(len, files.values()))


def test_empty_inputs(run: Run, make_archive: Make, tmp_path: Path) -> None:
    e1, e2 = make_archive({}), make_archive({})
    out = str(tmp_path / "o.barecat")
    code, stdout, _ = run("merge", "-o", out, e1, e2)
    assert (code, stdout) == (0, "")
    assert check(out) == {} and dir_stats(out) == {"": (0, 0, 0, 0)}
    code, _, _ = run("merge", "-f", "-o", out, e1, make_archive({"x/y": b"1"}), e2)
    assert code == 0 and check(out) == {"x/y": b"1"}
    assert run("merge", "--symlink", "-f", "-o", out, e1, e2)[0] == 0
    assert check(out) == {}


def test_unicode_paths(run: Run, make_archive: Make, tmp_path: Path) -> None:
    a = {"ünïcødé/naïve café.txt": b"1", "日本/ファイル": b"2", "emoji 🎉/x": b"3"}
    b = {"ünïcødé/ß": b"4", "Ελληνικά/λ μ": b"5"}
    out = str(tmp_path / "ü.barecat")
    assert run("merge", "-o", out, make_archive(a), make_archive(b))[0] == 0
    assert check(out) == {**a, **b}
    sub = str(tmp_path / "日本.barecat")
    assert run("subset", out, "-o", sub, "--pattern", "ünïcødé/")[0] == 0
    assert check(sub) == {"ünïcødé/naïve café.txt": b"1", "ünïcødé/ß": b"4"}


def test_as_subdirs_and_prefix(run: Run, make_archive: Make, tmp_path: Path) -> None:
    a = make_archive({"x": b"1", "d/y": b"2"})
    b = make_archive({"x": b"3"})
    out = str(tmp_path / "o.barecat")
    assert run("merge", "--as-subdirs", "--prefix", "/all/", "-o", out, a, b)[0] == 0
    name_a, name_b = (os.path.basename(p).removesuffix(".barecat") for p in (a, b))
    assert check(out) == {
        f"all/{name_a}/x": b"1",
        f"all/{name_a}/d/y": b"2",
        f"all/{name_b}/x": b"3",
    }
    assert dir_stats(out)["all"] == (2, 0, 3, 3)


def test_directory_and_file_metadata_is_kept(make_archive: Make, tmp_path: Path) -> None:
    a, b = str(tmp_path / "a.barecat"), str(tmp_path / "b.barecat")
    with barecat.Barecat(a, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("d", mode=0o40700, uid=7, gid=8, mtime_ns=111))
        bc.add(
            barecat.BarecatFileInfo("d/f", mode=0o100600, uid=1, gid=2, mtime_ns=123456789),
            data=b"f",
        )
    with barecat.Barecat(b, readonly=False) as bc:
        bc.add(barecat.BarecatDirInfo("d", mode=0o40755, uid=9, gid=9, mtime_ns=222))
        bc.add(barecat.BarecatDirInfo("e", mode=0o40711, mtime_ns=333))
        bc.add(barecat.BarecatDirInfo("e/empty", mode=0o40701, mtime_ns=444))
        bc.add(barecat.BarecatFileInfo("e/g", mode=0o100755, mtime_ns=987654321), data=b"g")
    out = str(tmp_path / "o.barecat")
    with barecat.Barecat(out, readonly=False) as bc:
        merge_archives(bc.index, bc.sharder, [a, b])
    sub = str(tmp_path / "s.barecat")
    with barecat.Barecat(out) as src, barecat.Barecat(sub, readonly=False) as dst:
        selection = select_entries(src.index, path_filter=PathFilter.from_patterns(["e/"]))
        subset_archive(src.index, src.sharder, dst.index, dst.sharder, selection)
    for path in (out, sub):
        check(path)
        with barecat.Barecat(path) as bc:
            g = bc.index.lookup_file("e/g")
            assert (g.mode, g.mtime_ns) == (0o100755, 987654321)
            e = bc.index.lookup_dir("e")
            assert (e.mode, e.mtime_ns) == (0o40711, 333)
            assert bc.index.lookup_dir("e/empty").mtime_ns == 444  # empty dirs come along
    with barecat.Barecat(out) as bc:
        f, d = bc.index.lookup_file("d/f"), bc.index.lookup_dir("d")
        assert (f.mode, f.uid, f.gid, f.mtime_ns) == (0o100600, 1, 2, 123456789)
        assert (d.mode, d.uid, d.gid, d.mtime_ns) == (0o40700, 7, 8, 111)  # first one wins
    assert "d" not in contents(sub) and set(contents(sub)) == {"e/g"}


# -- subset ------------------------------------------------------------------------------


def test_subset_by_pattern_and_by_rules(run: Run, make_archive: Make, tmp_path: Path) -> None:
    files = {
        "train/cat/1.jpg": b"c1",
        "train/cat/2.png": b"c2",
        "train/dog/3.jpg": b"d3",
        "train/thumbs/4.jpg": b"t4",
        "val/5.jpg": b"v5",
        "val/.hidden.jpg": b"h",
        "readme.txt": b"r",
    }
    src = make_archive(files)
    out = str(tmp_path / "o.barecat")

    def subset(*args: str) -> dict[str, bytes]:
        code, stdout, err = run("subset", src, "-o", out, "-f", *args)
        assert (code, err) == (0, ""), err
        assert stdout == ""
        return check(out)

    jpgs = {p: d for p, d in files.items() if p.endswith(".jpg")}
    assert subset("--pattern", "**/*.jpg") == jpgs
    assert subset("--pattern", "train/") == {p: d for p, d in files.items() if p[:6] == "train/"}
    assert subset("--pattern", "*.txt") == {"readme.txt": b"r"}
    assert subset("-x", "thumbs/", "-i", "*.jpg", "-x", "**") == {
        p: d for p, d in jpgs.items() if "thumbs" not in p
    }
    assert subset("-x", "train/") == {p: d for p, d in files.items() if p[:6] != "train/"}
    assert subset("--pattern", "nothing/**") == {}
    assert set(dir_stats(out)) == {""}

    code, _, err = run("subset", src, "-o", out, "--pattern", "*")
    assert code == 1 and "already exists" in err
    code, _, err = run("subset", src, "-o", out, "-f", "--pattern", "*", "-x", "a")
    assert code == 1 and "--pattern" in err


def test_include_and_exclude_rules_apply_in_the_order_typed(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    """rsync's rule for subset and merge: the first -i/-x that matches a path or one of its
    directories decides; what none matches is kept. ``dir/`` is the directory and all in it."""
    files = {"data/f.txt": b"t", "data/x.log": b"l", "keep/a/b": b"b", "root.txt": b"r"}
    src = make_archive(files)
    out = str(tmp_path / "o.barecat")

    def subset(*args: str) -> tuple[set[str], str]:
        code, _, err = run("subset", src, "-o", out, "-f", *args)
        assert code == 0, err
        return set(check(out)), err

    assert subset("-i", "**/*.txt", "-x", "data/") == ({"data/f.txt", "keep/a/b", "root.txt"}, "")
    kept, err = subset("-x", "data/", "-i", "**/*.txt")
    assert kept == {"keep/a/b", "root.txt"}
    assert "-i after the last -x changes nothing" in err and "-x '**'" in err
    assert subset("--include=keep/", "--exclude", "**") == ({"keep/a/b"}, "")
    assert subset("-x", "*.log", "-x", "keep") == ({"data/f.txt", "root.txt"}, "")
    merged = str(tmp_path / "m.barecat")
    assert run("merge", "-o", merged, "-x", "data/", "-i", "*.txt", "-x", "*", src)[0] == 0
    assert set(check(merged)) == {"root.txt"}
    with barecat.Barecat(merged, readonly=False) as bc:
        bc.merge_from_other_barecat(src, prefix="p", filter_rules=[("+", "*.log"), ("-", "data/")])
    assert set(check(merged)) == {"root.txt", "p/data/x.log", "p/keep/a/b", "p/root.txt"}


def test_subset_copies_in_address_order_into_limited_shards(make_archive: Make) -> None:
    files = {f"{'ab'[i % 2]}/{i:03d}": os.urandom(100) for i in range(60)}
    src = make_archive(files, shard_size_limit=1000)
    out = make_archive({})
    with barecat.Barecat(src) as s, barecat.Barecat(out, readonly=False) as o:
        o.shard_size_limit = 450
        sel = select_entries(s.index, pattern="b/*")
        assert sel is not None and len(sel.files) == 30
        stats = subset_archive(s.index, s.sharder, o.index, o.sharder, sel)
        assert (stats.files, stats.bytes) == (30, 3000)
    assert check(out) == {p: d for p, d in files.items() if p[0] == "b"}
    with barecat.Barecat(out) as bc:
        infos = list(bc.index.iter_all_fileinfos(barecat.Order.PATH))
        assert [(f.shard, f.offset) for f in infos] == sorted((f.shard, f.offset) for f in infos)
        assert bc.sharder.num_shards == 8  # 4 files of 100 bytes per 450-byte shard


def test_a_subset_takes_the_file_selection_the_engines_take(make_archive: Make) -> None:
    files = {"a/x.bin": b"1" * 10, "a/y.bin": b"2" * 300, "b/c/z.bin": b"3" * 400, "e": b""}
    src = make_archive(files)
    with barecat.Barecat(src, readonly=False) as bc:
        bc.mkdir("a/empty")
    with barecat.Barecat(src) as s:
        by_where = selected_entries(s.index, FileSelection(where="size > ?", params=(100,)))
        assert by_where is not None
        assert (by_where.files, by_where.dirs) == (["a/y.bin", "b/c/z.bin"], ["", "a", "b", "b/c"])
        both = selected_entries(s.index, FileSelection("a/**", "size > ?", (100,)))
        assert both is not None and both.files == ["a/y.bin"]
        for pattern in ("a/", "a/*", "**/z.bin", "nothing/*"):  # a pattern: as before
            built = selected_entries(s.index, FileSelection(directory_pattern(pattern)))
            assert select_entries(s.index, pattern) == built
        assert selected_entries(s.index, None) is None
        with pytest.raises(ValueError, match="cannot be combined"):
            selected_entries(s.index, FileSelection("a/*"), PathFilter.from_patterns(["a/"]))
        out = make_archive({})
        with barecat.Barecat(out, readonly=False) as o:
            o.take_subset(s, by_where)
    assert check(out) == {"a/y.bin": b"2" * 300, "b/c/z.bin": b"3" * 400}
    signature = "(index: 'ReadOnlyIndex', pattern: 'str | None' = None, "
    signature += "path_filter: 'PathFilter | None' = None) -> 'Selection | None'"
    assert str(inspect.signature(select_entries)) == signature  # unchanged
    assert str(inspect.signature(barecat.Barecat.select_entries)) == (
        "(self, pattern: 'str | None' = None, path_filter: 'PathFilter | None' = None)"
        " -> 'Selection | None'"
    )


# -- legacy scripts, progress -----------------------------------------------------------


def test_legacy_scripts(
    make_archive: Make, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    a, b = make_archive({"a": b"1"}), make_archive({"b": b"2", "a": b"dup"})
    out = str(tmp_path / "o.barecat")
    assert legacy_merge(["--output", out, "--shard-size-limit", "1K", a]) == 0
    assert legacy_merge(["--output", out, b]) == 1  # appends like the original: 'a' clashes
    assert legacy_merge(["--output", out, "--ignore-duplicates", b]) == 0
    assert check(out) == {"a": b"1", "b": b"2"}
    assert legacy_merge(["--output", out, "--overwrite", b]) == 0
    assert check(out) == {"b": b"2", "a": b"dup"}
    view = str(tmp_path / "v.barecat")
    assert legacy_merge_symlink(["--output", view, "--ignore-duplicates", a, b]) == 0
    assert check(view) == {"a": b"1", "b": b"2"} and os.path.islink(shard_path(view, 0))
    assert legacy_merge_symlink(["--help"]) == 0
    err = capfd.readouterr().err
    assert "deprecated, use 'barecat merge'" in err and "File already exists: a" in err


def test_summaries_on_a_terminal(make_archive: Make, tmp_path: Path) -> None:
    """On a terminal: the bar's last frame shows every file and byte, then one summary
    line on stderr naming what was skipped and why; stdout stays empty."""
    a = make_archive({f"f{i}": b"x" * 100 for i in range(40)})
    b = make_archive({f"g{i}": b"y" * 100 for i in range(60)} | {"f0": b"dup"})
    merge = [BIN / "barecat", "merge", "--ignore-duplicates", "-o", tmp_path / "o", a, b]
    drawn = on_a_terminal(merge)
    assert (drawn.code, drawn.stdout) == (0, "")
    *_, bar, summary = drawn.lines
    assert bar.startswith("merge: 100%") and "101/101" in bar and "10 kB]" in bar
    assert re.fullmatch(
        rf"merged 100 files, 10 kB from 2 archives into {tmp_path / 'o'} in \d+\.\d s "
        r"\(skipped 1: 1 already present\)",
        summary,
    ), summary
    linked = on_a_terminal(
        [BIN / "barecat", "merge", "--symlink", "--ignore-duplicates", "-o", tmp_path / "v", a, b]
    )
    assert linked.code == 0 and "(2 shards linked) in " in linked.lines[-1]
    cut = on_a_terminal([BIN / "barecat", "subset", a, "-o", tmp_path / "s", "-x", "f1*"])
    assert cut.code == 0 and cut.lines[-1].startswith("copied 29 files, 2.9 kB from ")
    quiet = on_a_terminal([BIN / "barecat", "subset", "-q", a, "-o", tmp_path / "q"])
    assert (quiet.code, quiet.raw) == (0, "")


# -- interchange with the reference ---------------------------------------------------------


def reference(body: str, **args: Any) -> Any:
    """Run ``body`` (which sets ``result``) in the reference's interpreter; ``args`` there."""
    script = "\n".join(
        [
            "import json, sys",
            "import barecat",
            "assert barecat.__version__ == '0.3.1', barecat.__version__",
            "args = json.loads(sys.stdin.read())",
            textwrap.dedent(body),
            "print('@@result@@' + json.dumps(result))",
        ]
    )
    proc = subprocess.run(
        [reference_python(), "-I", "-c", script],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("@@result@@"))
    return json.loads(line[len("@@result@@") :])


READ_ALL = """
result = {}
for path in args['paths']:
    with barecat.Barecat(path) as bc:
        result[path] = {
            'files': {p: bc[p].hex() for p in bc.files()},
            'ok': bc.verify_integrity() and bc.index.verify_integrity(),
            'stats': {d.path: [d.num_subdirs, d.num_files, d.num_files_tree, d.size_tree]
                      for d in bc.index.iter_all_dirinfos()},
        }
"""


def test_reference_reads_merged_linked_and_subset_outputs(
    run: Run, make_archive: Make, tmp_path: Path
) -> None:
    a = {f"a/{i}": os.urandom(i * 30) for i in range(20)}
    b = {"a/extra": b"e", "b/ü": b"u", "b/deep/er": os.urandom(700)}
    in_a, in_b = make_archive(a, shard_size_limit=600), make_archive(b)
    merged, linked, sub = (str(tmp_path / n) for n in ("m.barecat", "l.barecat", "s.barecat"))
    assert run("merge", "-s", "800", "-o", merged, in_a, in_b)[0] == 0
    assert run("merge", "--symlink", "-o", linked, in_a, in_b)[0] == 0
    assert run("subset", merged, "-o", sub, "--pattern", "a/1*")[0] == 0
    seen = reference(READ_ALL, paths=[merged, linked, sub])
    expected_sub = {p: d for p, d in a.items() if p.startswith("a/1")}
    for path, want in ((merged, {**a, **b}), (linked, {**a, **b}), (sub, expected_sub)):
        got = seen[path]
        assert got["ok"], path
        assert got["files"] == {p: d.hex() for p, d in want.items()}
        assert {d: tuple(s) for d, s in got["stats"].items()} == dir_stats(path)


def test_merge_accepts_archives_the_reference_wrote(tmp_path: Path) -> None:
    paths = [str(tmp_path / "r1.barecat"), str(tmp_path / "r2.barecat")]
    written = reference(
        """
        result = {}
        for k, path in enumerate(args['paths']):
            with barecat.Barecat(path, readonly=False, shard_size_limit=4000) as bc:
                for i in range(50):
                    bc[f'r{k}/d{i % 4}/f{i}'] = bytes([i]) * (i * 37 % 1000)
                bc.remove(f'r{k}/d1/f5')
                result.update({p: bc[p].hex() for p in bc.files()})
        """,
        paths=paths,
    )
    out = str(tmp_path / "o.barecat")
    with barecat.Barecat(out, readonly=False, shard_size_limit=3000) as bc:
        merge_archives(bc.index, bc.sharder, paths)
    assert {p: d.hex() for p, d in check(out).items()} == written
    view = str(tmp_path / "v.barecat")
    with barecat.Barecat(view, readonly=False) as bc:
        merge_archives(bc.index, bc.sharder, paths, symlink=True)
    assert {p: d.hex() for p, d in check(view).items()} == written


# -- the index's merge, shards placed by hand (barecat 0.3.1's how-to) ---------------------


def _place_shards(source: str, target: str, first: int) -> None:
    for i in existing_shard_numbers(source):
        os.symlink(os.path.abspath(shard_path(source, i)), shard_path(target, first + i))


def test_index_merge_takes_rows_of_shards_placed_after_ours(make_archive: Make) -> None:
    from barecat.core.index import Index

    assert Index is barecat.Index
    src = make_archive({f"f{i}": bytes([i]) * 60 for i in range(5)}, shard_size_limit=128)
    out = make_archive({"f0": b"ours", "d/x": b"x"})
    assert len(existing_shard_numbers(src)) == 3
    _place_shards(src, out, 1)
    with Index(out, readonly=False) as idx:
        idx.merge_from_other_barecat(src, ignore_duplicates=True)
        _place_shards(src, out, 4)  # each merge takes shards placed for it
        idx.merge_from_other_barecat(src, prefix="p/q")
    expected = {"f0": b"ours", "d/x": b"x", **{f"f{i}": bytes([i]) * 60 for i in range(1, 5)}}
    expected.update({f"p/q/f{i}": bytes([i]) * 60 for i in range(5)})
    assert check(out) == expected
    assert dir_stats(out)["p/q"] == (0, 5, 5, 300)


def test_index_merge_refuses_shards_not_in_place_and_writes_nothing(make_archive: Make) -> None:
    src = make_archive({"a": b"source bytes"})
    out = make_archive({"b": b"ours"})
    before = archive_files_state(out)
    with barecat.Index(out, readonly=False) as idx:
        with pytest.raises(barecat.BarecatError, match="not in place") as info:
            idx.merge_from_other_barecat(src)
        assert f"{out}-shard-00001 onwards" in str(info.value)
    assert archive_files_state(out) == before
    Path(shard_path(out, 1)).write_bytes(b"other")  # a shard of ours, not the source's
    with (
        barecat.Index(out, readonly=False) as idx,
        pytest.raises(barecat.BarecatError, match=r"is not .*shard-00000"),
    ):
        idx.merge_from_other_barecat(src)
    os.remove(shard_path(out, 1))
    _place_shards(src, out, 1)
    with barecat.Index(out, readonly=False) as idx:
        with pytest.raises(ValueError, match="'b' exists as a file"):
            idx.merge_from_other_barecat(src, prefix="b")
        idx.merge_from_other_barecat(src, prefix="c")
    assert check(out) == {"b": b"ours", "c/a": b"source bytes"}


# -- barecat 0.3.1's module-level merge functions ------------------------------------------


def test_module_merge_copies_archives_and_tars_and_adds_to_an_existing_target(
    make_archive: Make, tmp_path: Path
) -> None:
    a = make_archive({"x/one": b"1", "x/skip.log": b"l"})
    tar_path = tmp_path / "more.tar"
    with tarfile.open(tar_path, "w") as tar:
        info = tarfile.TarInfo("x/two")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"2"))
    out = str(tmp_path / "out.barecat")
    result = barecat.merge([a, str(tar_path)], out, shard_size_limit="1M", prefix="p")
    assert result.total.files == 3
    assert check(out) == {"p/x/one": b"1", "p/x/skip.log": b"l", "p/x/two": b"2"}
    with pytest.raises(FileExistsBarecatError):
        barecat.merge([a], out, prefix="p")
    barecat.merge([a], out, as_subdirs=True, filter_rules=[("-", "*.log")])
    assert set(check(out)) == {"p/x/one", "p/x/skip.log", "p/x/two", "made0/x/one"}
    barecat.merge([a], out, overwrite=True, pattern="**/*.log")
    assert check(out) == {"x/skip.log": b"l"}
    assert not list(tmp_path.glob(".merge-inputs-*")) and not list(tmp_path.glob(".out*"))


def test_module_merge_symlink_links_shards(make_archive: Make, tmp_path: Path) -> None:
    a, b = make_archive({"a": b"aa"}), make_archive({"b": b"bb"})
    out = str(tmp_path / "view.barecat")
    result = barecat.merge_symlink([a, b], out, prefix="v")
    assert result.total.shards_linked == 2
    assert check(out) == {"v/a": b"aa", "v/b": b"bb"}
    assert all(os.path.islink(shard_path(out, n)) for n in (0, 1))
    with pytest.raises(ValueError, match="not supported"):
        barecat.merge_symlink([a], out, overwrite=True, pattern="*")
    tar_path = tmp_path / "t.tar"
    with tarfile.open(tar_path, "w"):
        pass
    with pytest.raises(barecat.BarecatError, match="tar or zip"):
        barecat.merge_symlink([str(tar_path)], out, overwrite=True)
    assert check(out) == {"v/a": b"aa", "v/b": b"bb"}


def test_get_completion_script_names_the_scripts_the_cli_prints(run: Run) -> None:
    for shell in ("bash", "zsh"):
        path = barecat.get_completion_script(shell)
        assert os.path.isfile(path) and "_barecat" in Path(path).read_text()
        assert run("completion-script", shell)[1].strip() == path
    assert barecat.get_completion_script() == barecat.get_completion_script("bash")
    with pytest.raises(ValueError, match="Unknown shell: fish"):
        barecat.get_completion_script("fish")
