"""Names that are not UTF-8 (legal on Linux) at every place a name enters an archive.

No representation of such a name is both lossless and readable by barecat 0.3.1 (SQLite
TEXT through Python's driver must be UTF-8), so each one is skipped with one line naming
it, bytes escaped, and everything else is stored; the exit code is 1. Covered: ``barecat
create`` (walked names and command-line paths), the legacy ``barecat-create``, the API's
``plan_sources`` + ``ingest`` (also with a plan made by hand), tar and zip members
(``convert`` and ``convert --wrap``), and ``barecat rsync``.
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import barecat
from barecat.paths import is_utf8, normalize, normalize_many, shown
from barecat.transfer import Source, ingest, plan_sources
from barecat.transfer.ingest.sources import IngestPlan
from helpers import Run
from helpers.reference import reference_python

BAD_FILE = b"bad\xff\xfe.txt"
BAD_DIR = b"dir\xe9"
GOOD = {"src/ok.txt": b"ok", "src/sub/inner.txt": b"inner", "src/caf\u00e9.txt": b"utf8"}


def make_source_tree(root: Path) -> None:
    """``src/`` with good names (one non-ASCII UTF-8), a file and a directory whose names
    are not UTF-8 (the directory holding a file)."""
    for path, data in GOOD.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    src = os.fsencode(root / "src")
    with open(os.path.join(src, BAD_FILE), "wb") as f:
        f.write(b"lost")
    os.mkdir(os.path.join(src, BAD_DIR))
    with open(os.path.join(src, BAD_DIR, b"inner"), "wb") as f:
        f.write(b"lost too")


def stored(archive: str) -> dict[str, bytes]:
    with barecat.Barecat(archive) as bc:
        assert bc.verify_integrity()
        return {path: bc[path] for path in bc.index.iter_all_filepaths()}


def reference_lists(archive: str) -> list[str]:
    """The files barecat 0.3.1 sees in ``archive`` (run in its own interpreter)."""
    snippet = (
        "import barecat, sys\n"
        "with barecat.Barecat(sys.argv[1]) as bc:\n"
        "    print('\\n'.join(sorted(bc.index.iter_all_filepaths())))\n"
    )
    done = subprocess.run(
        [reference_python(), "-I", "-c", snippet, archive], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_paths_module_refuses_and_shows_names_that_are_not_utf8() -> None:
    name = os.fsdecode(b"a/" + BAD_FILE)
    assert not is_utf8(name) and is_utf8("caf\u00e9") and is_utf8("plain")
    assert shown(name) == "a/bad\\xff\\xfe.txt" and shown("x\ud800") == "x\\ud800"
    for refuse in (lambda: normalize(name), lambda: normalize_many(["ok", name])):
        with pytest.raises(barecat.InvalidPathBarecatError, match=r"not valid UTF-8.*\\xff"):
            refuse()
    assert normalize("caf\u00e9/x") == "caf\u00e9/x"


def test_api_add_refuses_a_name_that_is_not_utf8(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        with pytest.raises(barecat.InvalidPathBarecatError, match="UTF-8"):
            bc[os.fsdecode(BAD_FILE)] = b"x"
        bc["fine"] = b"y"
    assert stored(archive_path) == {"fine": b"y"}


def test_create_skips_them_one_line_each_and_stores_the_rest(run: Run, tmp_path: Path) -> None:
    make_source_tree(tmp_path)
    os.chdir(tmp_path)
    bad_arg = os.fsdecode(b"src/" + BAD_FILE)  # also named on the command line
    code, _, err = run("create", "-q", "out.barecat", "src", bad_arg)
    assert code == 1
    assert err.splitlines() == [
        f"barecat create: {path}: name is not valid UTF-8, which an archive path must be; skipped"
        for path in ("src/bad\\xff\\xfe.txt", "src/dir\\xe9", "src/bad\\xff\\xfe.txt")
    ] + ["barecat create: 3 sources could not be added"]
    assert stored("out.barecat") == GOOD
    assert reference_lists("out.barecat") == sorted(GOOD)


def test_legacy_create_skips_them(tmp_path: Path) -> None:
    make_source_tree(tmp_path)
    listing = b"src/ok.txt\nsrc/" + BAD_FILE + b"\nsrc/caf\xc3\xa9.txt\n"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from barecat.cli.legacy import create; sys.exit(create())",
            "--file",
            "l.barecat",
        ],
        input=listing,
        capture_output=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert b"barecat: src/bad\\xff\\xfe.txt: name is not valid UTF-8" in done.stderr
    assert stored(str(tmp_path / "l.barecat")) == {
        "src/ok.txt": b"ok",
        "src/caf\u00e9.txt": b"utf8",
    }


def test_api_ingest_reports_them_as_failures(tmp_path: Path, archive_path: str) -> None:
    make_source_tree(tmp_path)
    plan = plan_sources(["src"], base_directory=str(tmp_path))
    src = os.fsencode(tmp_path / "src")
    bad_paths = {os.fsdecode(os.path.join(src, name)) for name in (BAD_FILE, BAD_DIR)}
    by_hand = IngestPlan(files=[Source(str(tmp_path / "src/ok.txt"), os.fsdecode(BAD_FILE))])
    with barecat.Barecat(archive_path, readonly=False) as bc:
        result = ingest(bc, plan)
        assert {path for path, _ in result.failures} == bad_paths
        assert all(e.errno == errno.EILSEQ for _, e in result.failures)
        assert result.files == len(GOOD)
        by_hand_result = ingest(bc, by_hand)  # a plan made without plan_sources
        assert [e.errno for _, e in by_hand_result.failures] == [errno.EILSEQ]
    assert stored(archive_path) == GOOD


def bad_name_tar(path: Path) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [("ok.txt", b"ok"), (os.fsdecode(BAD_FILE), b"lost")]:
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))


def bad_name_zip(path: Path) -> None:
    """A zip as ``zip`` on Linux writes one: the name's raw bytes, no UTF-8 flag."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in [("ok.txt", b"ok"), ("badXX.txt", b"lost")]:
            member = zipfile.ZipInfo(name)
            member.create_system = 3
            zf.writestr(member, data)
    path.write_bytes(buffer.getvalue().replace(b"badXX.txt", BAD_FILE))


@pytest.mark.parametrize("make", [bad_name_tar, bad_name_zip], ids=["tar", "zip"])
@pytest.mark.parametrize("wrap", [False, True], ids=["copy", "wrap"])
def test_convert_skips_members_named_so(run: Run, tmp_path: Path, make, wrap: bool) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / ("in.zip" if make is bad_name_zip else "in.tar")
    make(source)
    out = str(tmp_path / "out.barecat")
    code, _, err = run("convert", *(["--wrap"] if wrap else []), str(source), out)
    assert code == 1
    assert err.splitlines() == [
        "barecat convert: skipped bad\\xff\\xfe.txt: Path is not valid UTF-8: 'bad\\xff\\xfe.txt'"
    ]
    assert stored(out) == {"ok.txt": b"ok"}


def test_rsync_skips_them_and_syncs_the_rest(run: Run, tmp_path: Path) -> None:
    make_source_tree(tmp_path)
    os.chdir(tmp_path)
    code, _, err = run("rsync", "src/", "r.barecat:in/")
    assert code == 1
    assert err.splitlines() == [
        f"barecat rsync: {path}: name is not valid UTF-8, which an archive path must be; skipped"
        for path in ("src/bad\\xff\\xfe.txt", "src/dir\\xe9")
    ]
    assert stored("r.barecat") == {"in/" + p.removeprefix("src/"): d for p, d in GOOD.items()}
    code, _, _ = run("rsync", "src/", "r.barecat:in/")  # again: nothing else to do
    assert code == 1 and stored("r.barecat")["in/ok.txt"] == b"ok"
