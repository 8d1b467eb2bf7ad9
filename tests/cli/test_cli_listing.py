"""Listing commands checked against the real tools on the extracted tree.

``tree`` must print what GNU tree prints, ``find`` what GNU find finds, ``ls`` what
``ls -Ap1``/``ls -l`` show, ``du`` the same entries as GNU du with the bytes stored, and
``-H`` GNU's rounding. ``index-to-csv`` must equal the reference's output byte for byte,
and ``ncdu`` itself must read ``to-ncdu-json``. Tools missing here skip with the reason
(``./run test`` installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import barecat
from barecat.cli.terminal import human_size
from helpers import Run
from helpers.reference import reference_env, reference_python
from helpers.trees import make_tree

UTF8 = {**os.environ, "LC_ALL": "C.UTF-8", "TZ": "UTC"}


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (./run test installs it with apt-get)")
    return path


@pytest.fixture
def extracted(run: Run, tmp_path: Path) -> tuple[str, Path]:
    src = make_tree(tmp_path / "src")
    ar = str(tmp_path / "ar.barecat")
    assert run("create", "-C", str(src), ar, ".")[0] == 0
    out = tmp_path / "out"
    assert run("extract", ar, "-C", str(out), "--allow-outside-links")[0] == 0
    return ar, out


def gnu(*argv: str, cwd: Path) -> str:
    return subprocess.run(argv, cwd=cwd, env=UTF8, capture_output=True, text=True).stdout


@pytest.mark.parametrize(
    "args",
    [[], ["-d"], ["-L", "1"], ["-L", "2", "-d"], ["a"], ["-L", "1", "a"], ["empty"], ["private"]],
)
def test_tree_prints_what_gnu_tree_prints(
    run: Run,
    extracted: tuple[str, Path],
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = need("tree")
    ar, out = extracted
    opts = [a for a in args if a.startswith("-") or a.isdigit()]
    where = [a for a in args if a not in opts]
    code, ours, _ = run("tree", *opts, ar, *where)
    assert code == 0
    assert ours == gnu(tree, "-a", *opts, *(where or ["."]), cwd=out)


FIND_CASES = [
    ([], []),
    (["-name", "*.txt"], ["-name", "*.txt"]),
    (["a", "-type", "d"], ["a", "-type", "d"]),
    (["-type", "f"], ["-type", "f"]),
    (["-type", "l"], ["-type", "l"]),
    (["-size", "+5", "-type", "f"], ["-size", "+5c", "-type", "f"]),
    (["-size", "-1k", "-type", "f"], ["-size", "-1024c", "-type", "f"]),
    (["-maxdepth", "1"], ["-maxdepth", "1"]),
    (["a", "-path", "a/b*"], ["a", "-path", "a/b*"]),
    (["-wholename", "*/b/*"], ["-wholename", "./*/b/*"]),
    (["-name", "*e*", "-maxdepth", "2", "-type", "f"],
     ["-maxdepth", "2", "-name", "*e*", "-type", "f"]),
]  # fmt: skip


@pytest.mark.parametrize(("ours_args", "gnu_args"), FIND_CASES)
def test_find_finds_what_gnu_find_finds(
    run: Run,
    extracted: tuple[str, Path],
    ours_args: list[str],
    gnu_args: list[str],
) -> None:
    ar, out = extracted
    start = [a for a in ours_args[:1] if not a.startswith("-")]
    code, ours, _ = run("find", ar, *ours_args)
    assert code == 0
    theirs = gnu("find", *(start or ["."]), *gnu_args[len(start) :], cwd=out)
    normalized = [p.removeprefix("./") for p in theirs.splitlines()]
    assert sorted(ours.splitlines()) == sorted(normalized)


def test_find_output_is_preorder_and_print0(run: Run, extracted: tuple[str, Path]) -> None:
    ar, _ = extracted
    lines = run("find", ar)[1].splitlines()
    seen = set()
    for path in lines:
        parent = path.rsplit("/", 1)[0] if "/" in path else "."
        assert path == "." or parent in seen  # every entry after its directory
        seen.add(path)
    code, out, _ = run("find", ar, "a", "-print0")
    assert code == 0 and out.split("\0")[:-1] == [p for p in lines if p.startswith("a")]
    code, _, err = run("find", ar, "-size", "huge")
    assert code == 1 and "-size" in err
    code, out, err = run("find", ar, "nope")
    assert code == 1 and out == "" and "nope" in err


def test_ls_matches_gnu_ls(run: Run, extracted: tuple[str, Path]) -> None:
    ar, out = extracted
    for where in ([], ["a"], ["a/b"]):
        code, ours, _ = run("ls", ar, *where)
        assert code == 0
        assert ours == gnu("ls", "-Ap1", *where, cwd=out).replace("@", "")
        code, ours, _ = run("ls", "-l", ar, *where)
        theirs = gnu("ls", "-lA", *where, cwd=out).splitlines()[1:]
        ours_lines = ours.splitlines()[1:]
        assert len(ours_lines) == len(theirs)
        for mine, real in zip(ours_lines, theirs, strict=True):
            if mine.startswith("d"):  # a directory's size is its tree's bytes, not 4096
                assert mine.split()[:4] + mine.split()[5:] == real.split()[:4] + real.split()[5:]
            else:
                assert mine.split() == real.split()


def test_ls_recursive_globs_jsonl_and_missing(run: Run, extracted: tuple[str, Path]) -> None:
    ar, out = extracted
    code, ours, _ = run("ls", "-R", ar)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_symlink() or p.is_file())
    assert code == 0 and sorted(ours.splitlines()) == files
    code, ours, _ = run("ls", ar, "a/*")
    assert ours.splitlines() == ["a/b/", "a/link_to_file", "a/x.txt"]
    code, ours, err = run("ls", ar, "a/x.txt", "nope", "empty")
    assert code == 1 and "nope" in err and ours.splitlines() == ["a/x.txt", "empty/"]
    code, ours, _ = run("ls", "--jsonl", ar, "a")
    records = [json.loads(line) for line in ours.splitlines()]
    assert [(r["type"], r["path"]) for r in records] == [
        ("dir", "a/b"), ("symlink", "a/link_to_file"), ("file", "a/x.txt"),
    ]  # fmt: skip
    assert records[2]["size"] == 6 and records[2]["mode"] & 0o777 == 0o640


def _descendant_dirs(root: Path, rel: str) -> list[Path]:
    top = root / rel
    return [top] + [p for p in top.rglob("*") if p.is_dir() and not p.is_symlink()]


@pytest.mark.parametrize("args", [[], ["-a"], ["-s"], ["-d", "1"], ["-a", "a"], ["-d", "0", "a"]])
def test_du_lists_what_gnu_du_lists_with_stored_bytes(
    run: Run,
    extracted: tuple[str, Path],
    args: list[str],
) -> None:
    ar, out = extracted
    where = [a for a in args if a == "a"]
    opts = [a for a in args if a != "a"]
    code, ours, _ = run("du", *opts, ar, *where)
    assert code == 0
    theirs = gnu("du", "-b", *opts, *(where or ["."]), cwd=out)
    gnu_sizes = {
        p.removeprefix("./"): int(n) for n, p in (ln.split("\t") for ln in theirs.splitlines())
    }
    our_rows = [ln.split("\t") for ln in ours.splitlines()]
    assert sorted(p for _, p in our_rows) == sorted(gnu_sizes)
    for size, path in our_rows:
        full = out / path
        if full.is_dir() and not full.is_symlink():  # GNU also counts the directories' own size
            expected = gnu_sizes[path] - sum(d.lstat().st_size for d in _descendant_dirs(out, path))
        else:
            expected = gnu_sizes[path]
        assert int(size) == expected, path
    assert our_rows[-1][1] == (where[0] if where else ".")  # the start comes last


def test_human_sizes_round_as_gnu_du(tmp_path: Path) -> None:
    need("du")
    sizes = [0, 1, 1023, 1024, 1025, 1536, 10239, 10240, 10241, 1048575, 1048576,
             5 * 2**20 + 1, 1023 * 1024 + 1, 2**30 - 1, 10 * 2**30 + 1, 3 * 2**40 + 7]  # fmt: skip
    for n in sizes:
        f = tmp_path / f"f{n}"
        with open(f, "wb") as fh:
            fh.truncate(n)  # sparse: apparent size only
        theirs = subprocess.run(
            ["du", "-h", "--apparent-size", str(f)], capture_output=True, text=True, env=UTF8
        ).stdout.split("\t")[0]
        assert human_size(n) == theirs, n


def test_du_human_and_missing(run: Run, extracted: tuple[str, Path]) -> None:
    ar, _ = extracted
    code, out, _ = run("du", "-H", "-s", ar)
    assert code == 0 and out == "3.1M\t.\n"
    code, out, err = run("du", ar, "nope")
    assert code == 1 and out == "" and "nope" in err


def test_index_to_csv_equals_the_reference_output(run: Run, extracted: tuple[str, Path]) -> None:
    ar, _ = extracted
    ref_bin = Path(reference_python()).parent / "barecat"
    theirs = subprocess.run([ref_bin, "index-to-csv", ar], capture_output=True, env=reference_env())
    assert theirs.returncode == 0, theirs.stderr
    code, ours, _ = run("index-to-csv", ar)
    assert code == 0 and ours.encode("utf-8", "surrogateescape") == theirs.stdout  # CRLF too
    with barecat.Barecat(ar) as bc:
        assert len(ours.splitlines()) == bc.num_files + 1


def test_to_ncdu_json_is_read_by_ncdu(
    run: Run, extracted: tuple[str, Path], tmp_path: Path
) -> None:
    ncdu = need("ncdu")
    ar, _ = extracted
    code, out, _ = run("to-ncdu-json", ar)
    assert code == 0
    exported = tmp_path / "tree.json"
    exported.write_text(out)
    reread = subprocess.run(
        [ncdu, "-f", str(exported), "-o", "-"], capture_output=True, text=True, timeout=30
    )
    assert reread.returncode == 0 and reread.stderr == ""
    data = json.loads(reread.stdout)

    def files(node: list[object] | dict[str, object], prefix: str) -> dict[str, int]:
        if isinstance(node, dict):
            return {prefix + str(node["name"]): int(node.get("asize", 0))}  # type: ignore[call-overload]
        head, *rest = node
        assert isinstance(head, dict)
        found: dict[str, int] = {}
        for child in rest:
            found.update(files(child, prefix + str(head["name"]) + "/"))  # type: ignore[arg-type]
        return found

    root = data[3]
    assert root[0]["name"] == ar
    root[0]["name"] = ""
    listed = {k.removeprefix("/"): v for k, v in files(root, "").items()}
    with barecat.Barecat(ar) as bc:
        expected = {f.path: f.size for f in bc.index.iter_all_fileinfos()}
    assert listed == expected
