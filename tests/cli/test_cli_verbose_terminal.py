"""What ``create -v`` and ``extract -v`` show on a terminal, beside their progress bar: each
listed name on a line of its own above the bar (none starting on the bar's line), names
escaped as ``tar -v`` escapes them (``new\\nline.txt``), and ``ls -l`` quoting as GNU
``ls`` does (``'new'$'\\n''line.txt'``); into a pipe, names exactly as they are.

Real commands on a real terminal (tmux), the screen read back with its history; the
escaping checked against GNU ``tar`` itself, name for name.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

from barecat.cli.names import tar_escaped
from helpers.hostile_names import C_LOCALE, NAME_SETS, folder_of
from helpers.screens import barecat_in_tmux

NEWLINE = "new\nline.txt"
FILES = 600


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    for k in range(FILES):
        (src / "d" / f"f{k:04d}").write_bytes(b"x" * k)
    (src / "d" / NEWLINE).write_bytes(b"n")
    (src / "d" / "back\\slash").write_bytes(b"b")
    return src


def listed_lines(screen: str) -> list[str]:
    return [line.rstrip() for line in screen.splitlines()]


def check_listing(screen: str, command: str) -> None:
    """Every file listed on a whole line of its own, escaped; every frame of the bar
    alone on its line (a listed name after it would follow its closing ``]``)."""
    lines = listed_lines(screen)
    expected = {f"d/f{k:04d}" for k in range(FILES)} | {"d/new\\nline.txt", "d/back\\\\slash"}
    assert expected <= set(lines), screen
    bars = [line for line in lines if line.startswith(f"{command}:")]
    assert bars and all(line.endswith("]") for line in bars), bars
    assert not any("d/f" in line for line in bars), bars


@pytest.mark.slow
def test_create_and_extract_list_above_the_bar_with_names_escaped(
    tree: Path, tmp_path: Path
) -> None:
    ar = str(tmp_path / "a.barecat")
    with barecat_in_tmux(
        tmp_path / "c.sock", "create", "-v", "-C", str(tree), ar, "d", height=40, keep=True
    ) as terminal:
        check_listing(terminal.wait_exited(), "create")
    out = str(tmp_path / "out")
    with barecat_in_tmux(
        tmp_path / "x.sock", "extract", "-v", ar, "-C", out, height=40, keep=True
    ) as terminal:
        check_listing(terminal.wait_exited(), "extract")
    assert (tmp_path / "out" / "d" / NEWLINE).read_bytes() == b"n"
    with barecat_in_tmux(tmp_path / "l.sock", "ls", "-l", ar, "d", keep=True) as terminal:
        screen = terminal.wait_exited()
        assert " 'new'$'\\n''line.txt'" in screen and " 'back\\slash'" in screen, screen


def test_a_pipe_gets_the_listed_names_as_they_are(tree: Path, tmp_path: Path) -> None:
    ar = str(tmp_path / "a.barecat")

    def listed(*args: str) -> bytes:
        argv = [sys.executable, "-m", "barecat.cli", *args]
        return subprocess.run(argv, capture_output=True, check=True).stdout

    created = listed("create", "-v", "-C", str(tree), ar, "d")
    assert b"d/new\nline.txt\n" in created and b"d/back\\slash\n" in created
    extracted = listed("extract", "-v", ar, "-C", str(tmp_path / "out"))
    assert b"d/new\nline.txt\n" in extracted and b"d/back\\slash\n" in extracted
    assert b" new\nline.txt\n" in listed("ls", "-l", ar, "d")


def test_tar_escaped_examples() -> None:
    assert tar_escaped(NEWLINE) == "new\\nline.txt"
    assert tar_escaped("back\\slash") == "back\\\\slash"
    assert tar_escaped("esc\x1b[2K\x7f") == "esc\\033[2K\\177"
    assert (
        tar_escaped("c1\u009bx") == "c1\\302\\233x"
        and tar_escaped("ls\u2028") == "ls\\342\\200\\250"
    )
    assert tar_escaped("bad\udcff") == "bad\\377"  # (a byte that is not UTF-8)
    assert tar_escaped("é名 sp'ace\"?") == "é名 sp'ace\"?"


def gnu_tar() -> bool:
    tar = shutil.which("tar")
    if tar is None:
        return False
    return b"GNU tar" in subprocess.run([tar, "--version"], capture_output=True).stdout


@pytest.mark.skipif(not gnu_tar(), reason="needs GNU tar")
@settings(max_examples=60, deadline=None, derandomize=True)
@given(names=NAME_SETS)
def test_tar_escaped_is_what_gnu_tar_v_prints(
    tmp_path_factory: pytest.TempPathFactory, names: set[str]
) -> None:
    folder, names = folder_of(tmp_path_factory, names)
    archive = str(folder) + ".tar"
    argv = ["tar", "-cvf", archive, "--null", "--verbatim-files-from", "-T", "-"]
    listing = "\0".join(sorted(names)).encode()
    done = subprocess.run(argv, cwd=folder, input=listing, capture_output=True, env=C_LOCALE)
    assert sorted(done.stdout.decode().splitlines()) == sorted(map(tar_escaped, names))
