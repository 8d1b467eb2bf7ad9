"""What scripts written for barecat 0.3.1 expect of the command line: its old one-purpose
scripts' rules, its wording where scripts grep for it, its ``mount -o`` options.

Scripts run as real processes (the installed entry points) over real trees and archives.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
from barecat.cli.main import _normalize_pattern
from barecat.exceptions import FileTooLargeBarecatError
from helpers import Run
from helpers.reference import made_by_reference, reference_env, reference_python

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}


def sh(
    *argv: str | Path, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run an installed script, as a shell script would."""
    return subprocess.run(
        [str(a) for a in argv], input=stdin, capture_output=True, env=ENV, cwd=cwd
    )


def contents(archive: Path | str) -> dict[str, bytes]:
    with barecat.Barecat(archive) as bc:
        return {p: bc[p] for p in bc.index.iter_all_filepaths()}


@pytest.fixture
def trees(tmp_path: Path) -> Path:
    """d1/a.txt, d1/s/b.txt, d2/c.txt, an empty d2/e and d3, and a file f.txt."""
    for d in ("d1/s", "d2/e", "d3"):
        (tmp_path / d).mkdir(parents=True)
    for name, data in {
        "d1/a.txt": b"a",
        "d1/s/b.txt": b"b",
        "d2/c.txt": b"c",
        "f.txt": b"f",
    }.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


def test_null_separated_paths_through_sort_keep_the_last_one(trees: Path) -> None:
    # sort ends its output with a newline after the last NUL; it ends the text, not a name
    shell = "find . -name '*.txt' -print0 | sort | barecat-create --null --file=out.barecat"
    done = subprocess.run(shell, shell=True, cwd=trees, env=ENV, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert contents(trees / "out.barecat") == {
        "d1/a.txt": b"a", "d1/s/b.txt": b"b", "d2/c.txt": b"c", "f.txt": b"f",
    }  # fmt: skip


def test_a_newline_ends_only_an_unterminated_last_name(run: Run, trees: Path) -> None:
    ar = str(trees / "ar.barecat")
    (trees / "nl\n").write_bytes(b"newline in the name")
    stdin = b"d1/a.txt\0nl\n\0d2/c.txt\n"  # a name ending in a newline, NUL-terminated
    code, _, err = run("create", "-C", str(trees), "-T", "-", "--null", ar, stdin=stdin)
    assert code == 0, err
    assert sorted(contents(ar)) == ["d1/a.txt", "d2/c.txt", "nl\n"]


def test_create_recursive_stores_each_directorys_contents_at_the_root(trees: Path) -> None:
    r = sh("barecat-create-recursive", "--file", "r.barecat", "d1/", "d2", "d3", "f.txt", cwd=trees)
    assert r.returncode == 0, r.stderr
    assert contents(trees / "r.barecat") == {
        "a.txt": b"a",
        "s/b.txt": b"b",
        "c.txt": b"c",
        "f.txt": b"f",
    }
    with barecat.Barecat(trees / "r.barecat") as bc:
        assert sorted(bc.index.iter_all_dirpaths()) == ["", "e", "s"]
    # --strip-root is what 0.3.1 always does: accepted, same result
    r = sh("barecat-create-recursive", "--file", "s.barecat", "--strip-root", "d1", cwd=trees)
    assert r.returncode == 0 and sorted(contents(trees / "s.barecat")) == ["a.txt", "s/b.txt"]


def test_create_recursive_names_a_path_two_roots_provide(trees: Path) -> None:
    (trees / "d2/a.txt").write_bytes(b"other a")
    r = sh("barecat-create-recursive", "--file", "r.barecat", "d1", "d2", cwd=trees)
    assert r.returncode == 1
    assert "d2/a.txt" in r.stderr.decode() and "already stored from d1/a.txt" in r.stderr.decode()
    assert contents(trees / "r.barecat")["a.txt"] == b"a"  # the first root's file is kept


def test_extract_single_of_a_recursive_archive(trees: Path) -> None:
    assert sh("barecat-create-recursive", "--file", "r", "d1", cwd=trees).returncode == 0
    r = sh("barecat-extract-single", "--barecat-file", "r", "--path", "s/b.txt", cwd=trees)
    assert (r.returncode, r.stdout) == (0, b"b")


def test_add_to_a_missing_archive_says_it_does_not_exist(run: Run, trees: Path) -> None:
    missing = str(trees / "missing.barecat")
    code, _, err = run("add", missing, str(trees / "d1"))
    assert code == 1 and f"{missing}: archive does not exist" in err and "add -c" in err
    assert not os.path.exists(missing)


def test_verify_prints_findings_on_stdout_and_the_verdict_on_stderr(trees: Path) -> None:
    assert sh("barecat-create-recursive", "--file", "r", "d1", cwd=trees).returncode == 0
    with open(trees / "r-shard-00000", "r+b") as f:
        f.write(b"X")  # the first file's byte: a.txt comes first
    for argv in (["barecat-verify", "r"], ["barecat", "verify", "r"]):
        r = sh(*argv, cwd=trees)
        assert r.returncode == 1
        assert r.stdout.decode() == "a.txt: CRC32C mismatch\n"
        assert "Verification failed: 1 bad files" in r.stderr.decode()


def test_sizes_logical_and_physical_meet_after_defrag(tmp_path: Path) -> None:
    ar = tmp_path / "ar.barecat"
    with barecat.Barecat(ar, readonly=False) as bc:
        for i in range(5):
            bc[f"f{i}"] = bytes(100)
        assert bc.total_logical_size == bc.total_size == 500 == bc.total_physical_size_seek
        del bc["f1"]
        assert (bc.total_logical_size, bc.total_physical_size_seek) == (400, 500)
        assert bc.total_physical_size_stat == 500
    r = sh("barecat", "defrag", ar)
    assert r.returncode == 0, r.stderr
    with barecat.Barecat(ar) as bc:
        assert bc.total_logical_size == bc.total_physical_size_seek == 400


def test_a_file_too_large_is_a_value_error_and_an_os_error(tmp_path: Path) -> None:
    archive = barecat.Barecat(tmp_path / "ar", readonly=False, shard_size_limit=10)
    with archive as bc, pytest.raises(ValueError) as caught:
        bc["big"] = bytes(11)
    assert isinstance(caught.value, FileTooLargeBarecatError)
    assert isinstance(caught.value, OSError) and "10 bytes" in str(caught.value)


def test_a_pattern_ending_in_a_slash_selects_the_directorys_contents(
    run: Run, make_archive
) -> None:  # type: ignore[no-untyped-def]
    assert [_normalize_pattern(p) for p in ("thumbs/", "/", "a/**", "*.py")] == [
        "thumbs/**", "/**", "a/**", "*.py",
    ]  # fmt: skip
    ar = make_archive({"keep/a": b"1", "keep/s/b": b"2", "drop/c": b"3"})
    out = ar + ".subset"
    assert run("subset", ar, "-o", out, "--pattern", "keep/")[0] == 0
    assert sorted(contents(out)) == ["keep/a", "keep/s/b"]


def test_index_to_csv_is_byte_for_byte_the_reference_output(tmp_path: Path) -> None:
    ar = str(tmp_path / "ar.barecat")
    made_by_reference(ar, {'x/y,z "q".txt': b"hello", "b": b"", "ü/1": b"12345"})
    with barecat.Barecat(ar, readonly=False) as bc:  # a row without a checksum
        bc.index.add_file(barecat.BarecatFileInfo(path="nocrc", shard=0, offset=0, size=3))
    ref_bin = Path(reference_python()).parent
    theirs = subprocess.run(
        [ref_bin / "barecat", "index-to-csv", ar], capture_output=True, env=reference_env()
    )
    assert theirs.returncode == 0 and theirs.stdout.startswith(b'"path","shard"')
    for argv in (["barecat", "index-to-csv", ar], ["barecat-index-to-csv", ar]):
        assert sh(*argv).stdout == theirs.stdout
    assert theirs.stdout.endswith(b'"\xc3\xbc/1",0,5,5,416359221\r\n')


def test_du_h_is_human_readable_and_help_is_long_only(run: Run, make_archive) -> None:  # type: ignore[no-untyped-def]
    ar = make_archive({"d/big": bytes(3 << 20), "d/small": b"x"})
    for flag in ("-h", "-H", "--human-readable"):
        assert run("du", flag, "-s", ar) == (0, "3.1M\t.\n", "")
    code, out, _ = run("du", "--help")
    assert code == 0 and out.startswith("usage: barecat du [--help]")


def test_ls_l_total_counts_the_listed_files_in_1k_blocks(run: Run, tmp_path: Path) -> None:
    # as GNU ls: per entry, rounded up; a subdirectory's contents are not counted
    src = tmp_path / "src"
    (src / "s").mkdir(parents=True)
    for name, size in {"a": 1, "b": 5000, "empty": 0, "s/c": 1 << 20}.items():
        (src / name).write_bytes(bytes(size))
    os.symlink("a" * 2000, src / "link")  # a link takes no blocks (as a fast symlink)
    ar = str(tmp_path / "ar.barecat")
    assert run("create", "-C", str(src), ar, ".")[0] == 0
    code, out, _ = run("ls", "-l", ar)
    assert code == 0 and out.splitlines()[0] == "total 6"  # 1 + 5 + 0
    assert run("ls", "-l", ar, "s")[1].splitlines()[0] == "total 1024"


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("lsit", "barecat: unknown command 'lsit'; did you mean 'list' or 'ls'?\n"),
        ("extrct", "barecat: unknown command 'extrct'; did you mean 'extract'?\n"),
        (
            "__complet",
            "barecat: unknown command '__complet' (see 'barecat --help' for the commands)\n",
        ),
    ],
)
def test_a_mistyped_command_suggests_public_ones(run: Run, typed: str, message: str) -> None:
    assert run(typed, "ar.barecat") == (2, "", message)
    r = sh("barecat", typed)  # the installed script says the same
    assert (r.returncode, r.stderr.decode()) == (2, message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["convert", "--forse", "a", "b"],
            "barecat convert: unknown option '--forse'; did you mean '--force'?\n",
        ),
        (["--verison"], "barecat: unknown option '--verison'; did you mean '--version'?\n"),
        (
            ["find", "ar", "-nme", "*.jpg"],
            "barecat find: unknown option '-nme'; did you mean '-name'?\n",
        ),
        (
            ["create", "--exlude=*.tmp", "ar", "."],
            "barecat create: unknown option '--exlude'; did you mean '--exclude' or '--include'?\n",
        ),
        (
            ["extract", "--overwirte", "ar"],
            "barecat extract: unknown option '--overwirte' (see 'barecat extract --help' for "
            "the options)\n",
        ),
    ],
)
def test_a_mistyped_option_suggests_the_nearest(run: Run, argv: list[str], message: str) -> None:
    """One line naming the option and the nearest ones of that command, exit code 2,
    before anything is opened (the archive 'ar' does not exist)."""
    assert run(*argv) == (2, "", message)
    r = sh("barecat", *argv)
    assert (r.returncode, r.stderr.decode()) == (2, message)
