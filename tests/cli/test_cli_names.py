"""Names that talk to a terminal (``ESC ]0;title BEL`` retitles it, ``CR ESC [2K`` erases
the line) are escaped by ``ls``, ``find``, ``tree`` and ``du`` and by the shell when
stdout is a terminal, as GNU ``ls``, ``find`` and ``tree`` escape them there, and go out
exactly as they are into a pipe.

On a real terminal (tmux): the screen shows the escaped names and the terminal's title
is what it was. In a pipe: the bytes are the names'. ``ls``'s quoting is checked against
GNU ``ls --quoting-style=shell-escape`` itself, name for name.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

import barecat
from barecat.cli.names import ls_quoted, octal_escaped, question_marks
from helpers.hostile_names import C_LOCALE, NAME_SETS, folder_of
from helpers.screens import barecat_in_tmux

TITLE = "a\x1b]0;pwned\x07b"
ERASE = "c\r\x1b[2Kd"
NAMES = {f"dir/{TITLE}": b"1", f"dir/{ERASE}": b"2", "dir/plain.txt": b"3", "dir/sp ace": b"4"}


@pytest.fixture
def hostile(tmp_path: Path) -> str:
    path = str(tmp_path / "names.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        for name, data in NAMES.items():
            bc[name] = data
        bc.add("dir/link", data=TITLE.encode(), mode=0o120777)
    return path


def test_the_styles_escape_as_the_gnu_tools_do() -> None:
    assert ls_quoted(TITLE) == "'a'$'\\033'']0;pwned'$'\\a''b'"
    assert ls_quoted(ERASE) == "'c'$'\\r\\033''[2Kd'"
    assert ls_quoted("plain.txt") == "plain.txt"
    assert ls_quoted("sp ace") == "'sp ace'"
    assert ls_quoted("it's") == '"it\'s"'
    assert ls_quoted("a'\x1b") == "'''a'\\'''$'\\033'"  # gnulib's second pass, as ls 9 prints
    assert ls_quoted("c1\u009b31m") == "'c1'$'\\302\\233''31m'"
    assert question_marks(ERASE) == "c??[2Kd" and question_marks("é.txt") == "é.txt"
    assert octal_escaped(TITLE) == "a\\033]0;pwned\\007b"
    assert octal_escaped("c1\u009bx") == "c1\\233x" and octal_escaped("ls\u2028") == "ls\\20050"


def gnu_ls_quoting() -> bool:
    ls = shutil.which("ls")
    if ls is None:
        return False
    done = subprocess.run([ls, "--quoting-style=shell-escape", "/"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not gnu_ls_quoting(), reason="needs GNU ls")
@settings(max_examples=60, deadline=None, derandomize=True)
@given(names=NAME_SETS)
def test_ls_quotes_as_gnu_ls_does(
    tmp_path_factory: pytest.TempPathFactory, names: set[str]
) -> None:
    folder, names = folder_of(tmp_path_factory, names)
    argv = ["ls", "-1", "-A", "--quoting-style=shell-escape"]
    done = subprocess.run(argv, cwd=folder, capture_output=True, env=C_LOCALE)
    assert sorted(done.stdout.decode().splitlines()) == sorted(map(ls_quoted, names))


COMMANDS = {
    "ls": (["ls", "-l"], ["'a'$'\\033'']0;pwned'$'\\a''b'", "'c'$'\\r\\033''[2Kd'", " plain.txt"]),
    "find": (["find"], ["dir/a?]0;pwned?b", "dir/c??[2Kd", "dir/sp ace"]),
    "tree": (["tree"], ["a\\033]0;pwned\\007b", "c\\015\\033[2Kd", "link -> a\\033]0;pwned\\007b"]),
    "du": (["du", "-a"], ["dir/a?]0;pwned?b", "dir/c??[2Kd"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_terminal_shows_names_escaped_and_keeps_its_title(
    hostile: str, tmp_path: Path, command: str
) -> None:
    argv, expected = COMMANDS[command]
    args = [*argv, hostile, *(["dir"] if command in ("ls", "find") else [])]
    with barecat_in_tmux(tmp_path / "tmux.sock", *args, width=160, keep=True) as terminal:
        title = terminal.pane("pane_title")
        screen = terminal.wait_exited()
        for text in expected:
            assert text in screen, screen
        assert terminal.pane("pane_title") == title != "pwned"


@pytest.mark.slow
def test_the_shell_on_a_terminal_escapes_names_too(hostile: str, tmp_path: Path) -> None:
    script = "cd dir; ls; find; tree; du -a"
    with barecat_in_tmux(tmp_path / "tmux.sock", "shell", "-c", script, hostile, keep=True) as t:
        title = t.pane("pane_title")
        screen = t.wait_exited()
        for text in ["'a'$'\\033'']0;pwned'$'\\a''b'", "dir/c??[2Kd", "a\\033]0;pwned\\007b"]:
            assert text in screen, screen
        assert t.pane("pane_title") == title != "pwned"


def test_a_pipe_gets_the_names_as_they_are(hostile: str) -> None:
    def lines(*args: str) -> set[bytes]:
        done = subprocess.run(
            [sys.executable, "-m", "barecat.cli", *args], capture_output=True, check=True
        )
        return set(done.stdout.split(b"\n"))  # (not splitlines: a name holds a CR)

    raw = {name.encode() for name in NAMES}
    assert lines("ls", hostile, "dir") >= {n[4:] for n in raw}
    assert lines("find", hostile, "dir") >= raw
    assert lines("du", "-a", hostile) >= {b"1\t" + n for n in raw}
    tree = lines("tree", hostile)
    assert "    ├── ".encode() + TITLE.encode() in tree
    assert "    ├── ".encode() + ERASE.encode() in tree
    assert lines("shell", "-c", "cd dir; ls", hostile) >= {n[4:] for n in raw}


def test_an_error_line_shows_a_name_escaped_on_one_line(hostile: str) -> None:
    missing = f"dir/{TITLE}.gone\nnext"
    done = subprocess.run(
        [sys.executable, "-m", "barecat.cli", "cat", hostile, missing], capture_output=True
    )
    assert done.returncode != 0
    line = done.stderr.decode()
    assert line.count("\n") == 1 and line.endswith("\n"), line
    assert "\x1b" not in line and "\x07" not in line, line
    assert "a\\x1b]0;pwned\\x07b.gone\\x0anext" in line, line
