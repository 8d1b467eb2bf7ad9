"""The lines the ``barecat`` command says when something is not as asked: each one names
what is really there, or missing, or checked, exactly (run as a user runs it: the
installed command in a subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from helpers import BARECAT, BIN, wait_for
from helpers.damaging import damage
from helpers.killing import children_take_ctrl_c, start_with_one_page_stdout


def barecat(*argv: str, cwd: Path) -> tuple[int, str, str]:
    """``barecat ARGV`` run in ``cwd``: (exit code, stdout, stderr)."""
    done = subprocess.run(
        [BARECAT, *argv], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """``ar.barecat`` in ``tmp_path``, made by the command from a tree of five files."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}.txt").write_bytes(b"%d" % i * 1000)
    code, _, err = barecat("create", "-C", "src", "ar.barecat", ".", cwd=tmp_path)
    assert (code, err) == (0, "")
    return tmp_path / "ar.barecat"


# Every command that opens an archive by name, with the rest of a valid command line.
OPENERS = [
    ("ls", "DIR"),
    ("cat", "DIR", "x"),
    ("extract", "DIR"),
    ("verify", "DIR"),
    ("tree", "DIR"),
    ("find", "DIR"),
    ("du", "DIR"),
    ("defrag", "DIR"),
    ("add", "DIR", "src"),
    ("shell", "-w", "DIR"),
    ("merge", "-o", "out.barecat", "DIR", "ar.barecat"),
    ("upgrade", "DIR"),
    ("mount", "DIR", "mnt"),
]


def test_a_directory_given_as_the_archive_is_said_to_be_one(archive: Path, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "mnt").mkdir()
    for argv in OPENERS:
        command = argv[0]
        code, _, err = barecat(*[a.replace("DIR", "plain") for a in argv], cwd=tmp_path)
        label = "list" if command == "ls" else command
        assert (code, err) == (
            1,
            f"barecat {label}: plain is a directory, not a barecat archive\n",
        ), argv
    # a directory holding archives: named, so the user sees which path they meant
    (tmp_path / "sub").mkdir()
    for name in ("b.barecat", "a.barecat"):
        assert barecat("create", f"sub/{name}", "src", cwd=tmp_path)[0] == 0
    code, _, err = barecat("ls", "sub", cwd=tmp_path)
    assert (code, err) == (
        1,
        "barecat list: sub is a directory, not a barecat archive; it holds the archives "
        "sub/a.barecat, sub/b.barecat\n",
    )
    code, _, err = barecat("ls", "missing.barecat", cwd=tmp_path)  # nothing there: as before
    assert (code, err) == (1, "barecat list: Archive not found: missing.barecat\n")


def test_extract_into_a_file_says_it_is_not_a_directory(archive: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_bytes(b"keep")
    code, out, err = barecat("extract", "ar.barecat", "-C", "afile", cwd=tmp_path)
    assert (code, out, err) == (1, "", "barecat extract: afile: Not a directory\n")
    code, out, err = barecat("extract", "ar.barecat", "-C", "afile/sub", cwd=tmp_path)
    assert (code, out, err) == (1, "", "barecat extract: afile/sub: Not a directory\n")
    assert (tmp_path / "afile").read_bytes() == b"keep"


def test_pattern_and_include_exclude_rules_are_refused_together(
    archive: Path, tmp_path: Path
) -> None:
    """extract, merge and subset choose files by --pattern or by -i/-x, not both: one line
    says so and nothing is written."""
    for argv in [
        ("extract", "ar.barecat", "--pattern", "*.txt", "-x", "f1.txt", "-C", "out"),
        ("merge", "-o", "out.barecat", "ar.barecat", "--pattern", "*.txt", "-i", "f1.txt"),
        ("subset", "ar.barecat", "-o", "out.barecat", "--pattern", "*.txt", "-x", "f1.txt"),
    ]:
        code, out, err = barecat(*argv, cwd=tmp_path)
        assert (code, out) == (1, ""), argv
        assert err == f"barecat {argv[0]}: --pattern cannot be combined with -i/-x\n", argv
        assert not (tmp_path / "out").exists() and not (tmp_path / "out.barecat").exists()


def test_a_missing_archive_argument_is_named_alone(tmp_path: Path) -> None:
    """``paths`` may be left out; what is required and missing is named, options and
    positionals together."""
    for argv, missing in [
        (["extract"], "archive"),
        (["ls"], "archive"),
        (["create"], "archive"),
        (["reshard"], "-s/--shard-size-limit, archive"),
        (["reshard", "-s", "1G"], "archive"),
        (["reshard", "ar.barecat"], "-s/--shard-size-limit"),
        (["merge"], "-o/--output, ARCHIVE"),
        (["subset"], "-o/--output, archive"),
        (["cat"], "archive, path"),
    ]:
        code, out, err = barecat(*argv, cwd=tmp_path)
        label = "list" if argv[0] == "ls" else argv[0]
        assert (code, out) == (2, ""), argv
        assert err.splitlines()[-1] == (
            f"barecat {label}: error: the following arguments are required: {missing}"
        )


def test_quick_verify_says_what_it_checked(archive: Path, tmp_path: Path) -> None:
    for path in ("f0.txt", "f1.txt", "f2.txt"):  # three corrupt files, the last one intact
        damage(str(archive), path, at=10)
    code, out, err = barecat("verify", "--quick", "ar.barecat", cwd=tmp_path)
    assert (code, err) == (0, "")
    assert out == (
        "Quick check of 5 files OK: the index is consistent, every file lies within its "
        "shard, the last file's CRC32C matches; the other 4 files' bytes were not read "
        "(verify without --quick checks them).\n"
    )
    assert "checksums OK" not in out
    code, out, err = barecat("verify", "ar.barecat", cwd=tmp_path)
    assert code == 1 and out.count("CRC32C mismatch") == 3
    assert err == "Verification failed: 3 bad files, 0 index problems.\n"


def interrupted(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``barecat ARGV`` (a ``-v`` listing), send it SIGINT once it listed a stored
    file (not a directory), let it end; returns (exit code, stderr)."""
    with children_take_ctrl_c():
        proc, listing = start_with_one_page_stdout(
            [BARECAT, *argv], cwd=cwd, stderr=subprocess.PIPE
        )
    with listing:
        while (line := listing.readline()).endswith(b"/\n"):
            pass
        assert line  # files are stored; the rest of the listing is held
        proc.send_signal(signal.SIGINT)
        listing.read()
        _, err = proc.communicate(timeout=60)
    return proc.returncode, err.decode()


def in_a_shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the command ``line`` as a user's shell would, this ``barecat`` first on PATH."""
    path = f"{BIN}:{os.environ['PATH']}"
    env = {**os.environ, "PATH": path}
    return subprocess.run(line, shell=True, cwd=cwd, capture_output=True, text=True, env=env)


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """``src/`` of 4,000 small files: a listing of 36 KB, nine pipe pages."""
    for d in range(8):
        (tmp_path / f"src/d{d}").mkdir(parents=True)
        for i in range(500):
            (tmp_path / f"src/d{d}/{i:04}").write_bytes(b"%d" % i)
    return tmp_path


def test_ctrl_c_of_create_says_how_to_resume(many: Path) -> None:
    argv = ["create", "-f", "-v", "-j", "1", "-C", "src", "new ar.barecat", "."]
    code, err = interrupted(argv, many)
    line = "barecat create --resume -v -j 1 -C src 'new ar.barecat' ."
    assert (code, err) == (
        130,
        "barecat create: interrupted; new ar.barecat keeps the files stored so far; "
        f"to finish it: {line}\n",
    )
    done = in_a_shell(line, many)
    assert done.returncode == 0, done.stderr
    assert barecat("verify", "new ar.barecat", cwd=many)[1].startswith("Verified 4000 files")
    # the same through 'add', whose --resume skips what is there
    code, err = interrupted(["add", "-c", "-v", "-C", "src", "more.barecat", "."], many)
    assert code == 130 and err.endswith(
        "; to finish it: barecat add --resume -c -v -C src more.barecat .\n"
    )


def test_ctrl_c_of_a_parallel_create_says_nothing_was_kept(many: Path) -> None:
    """``-j N`` builds the archive whole under another name: an old one stays as it was."""
    assert barecat("create", "old.barecat", "src/d0/0000", cwd=many)[0] == 0
    argv = ["create", "-f", "-v", "-j", "2", "-C", "src", "old.barecat", "."]
    code, err = interrupted(argv, many)
    assert (code, err) == (
        130,
        "barecat create: interrupted; nothing of this run was stored (old.barecat is as it "
        "was): run the command again\n",
    )
    assert barecat("ls", "old.barecat", cwd=many)[1] == "src/\n"


def test_ctrl_c_of_rsync_says_running_it_again_finishes(many: Path) -> None:
    """rsync has no --resume: the same command sends only what still differs."""
    code, err = interrupted(["rsync", "-v", "src/", "synced.barecat::"], many)
    line = "barecat rsync -v src/ synced.barecat::"
    assert (code, err) == (
        130,
        "barecat rsync: interrupted; what was sent is kept; to finish, run it again (it "
        f"sends only what differs): {line}\n",
    )
    done = in_a_shell(line, many)
    assert done.returncode == 0, done.stderr
    assert 0 < len(done.stdout.splitlines()) < 4000  # only what the first run had not sent
    assert barecat("verify", "synced.barecat", cwd=many)[1].startswith("Verified 4000 files")


def test_ctrl_c_of_extract_says_how_to_finish(many: Path) -> None:
    """extract has no --resume: for a whole archive, an rsync out of it copies only what is
    missing or differs (a file cut short included); for a selection, the command again."""
    assert barecat("create", "-C", "src", "ar.barecat", ".", cwd=many)[0] == 0
    code, err = interrupted(["extract", "-v", "ar.barecat", "-C", "out dir"], many)
    line = "barecat rsync ar.barecat::/ 'out dir/'"
    assert (code, err) == (
        130,
        "barecat extract: interrupted; the files extracted so far are in out dir; to finish, "
        f"copy only what is missing or differs: {line}\n",
    )
    done = in_a_shell(line, many)
    assert done.returncode == 0, done.stderr
    assert subprocess.run(["diff", "-r", many / "src", many / "out dir"]).returncode == 0

    code, err = interrupted(["extract", "-v", "ar.barecat", "d1", "d2", "-C", "part"], many)
    assert (code, err) == (
        130,
        "barecat extract: interrupted; the files extracted so far are in part; run the "
        "command again to extract the rest (it writes every file again)\n",
    )


def test_ctrl_c_while_a_command_loads_is_one_line(tmp_path: Path) -> None:
    """A Ctrl-C before the command runs (its modules loading: the first moments of
    'barecat convert') is the same one line, not a traceback."""
    script = (
        "import importlib.abc, sys\n"
        "class CtrlC(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'barecat.cli.convert':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, CtrlC())\n"
        "from barecat.cli.main import console_main\n"
        "sys.argv = ['barecat', 'convert', 'in.tar', 'out.barecat']\n"
        "console_main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "barecat: interrupted\n")


def test_ctrl_c_of_convert_says_nothing_was_written(many: Path) -> None:
    """A converted archive appears only when complete: the line says so. The tar comes
    through stdin, held open after its first half, so the Ctrl-C lands mid-way."""
    tar = subprocess.run(["tar", "-cf", "-", "-C", "src", "."], capture_output=True).stdout
    with children_take_ctrl_c():
        proc = subprocess.Popen(
            [BARECAT, "convert", "--stdin", "tar", "out.barecat"],
            cwd=many,
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    assert proc.stdin is not None
    proc.stdin.write(tar[: len(tar) // 2])
    proc.stdin.flush()
    wait_for(
        lambda: any(p.name.startswith(".out.barecat.partial-") for p in many.iterdir()), "the build"
    )
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.decode()) == (
        130,
        "barecat convert: interrupted; nothing was written (out.barecat appears only when "
        "complete): run the command again\n",
    )
    assert not any(p.name.startswith((".out", "out")) for p in many.iterdir())


def test_a_tar_or_zip_given_as_the_archive_is_said_to_be_one(archive: Path, tmp_path: Path) -> None:
    """Told by content, whatever the name; the mount hint only where it holds (an
    uncompressed tar, which barecat mount reads as it is)."""
    src = tmp_path / "src"
    for name, mode in [("t.tar", "w"), ("tar-named-plainly", "w"), ("t.tar.gz", "w:gz")]:
        with tarfile.open(tmp_path / name, mode) as tar:
            tar.add(src / "f0.txt", "f0.txt")
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as z:
        z.write(src / "f0.txt", "f0.txt")
    (tmp_path / "notes.txt").write_text("notes\n")
    expected = {
        "t.tar": "a tar file, not a barecat archive (barecat mount mounts it as it is)",
        "tar-named-plainly": "a tar file, not a barecat archive (barecat mount mounts it as it is)",
        "t.tar.gz": "a compressed tar file, not a barecat archive",
        "z.zip": "a zip file, not a barecat archive",
        "notes.txt": "not a readable barecat index: file is not a database",
    }
    for name, what in expected.items():
        assert barecat("ls", name, cwd=tmp_path) == (1, "", f"barecat list: {name} is {what}\n")
