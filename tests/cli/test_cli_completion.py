"""Shell completion: the engine in-process, then the real bash and zsh scripts.

The engine is driven through ``barecat.cli.main`` exactly as the scripts call it. The
shell tests source the script that ``barecat completion-script`` names into a real bash
or zsh and check the candidates the shell ends up with; two of them go through a
terminal, so readline and zle themselves insert the completion.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import barecat
from barecat.cli import completion
from barecat.cli.main import build_parser, main
from barecat.shell_completion import script_path

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
BARECAT = VENV_BIN / "barecat"
ZSH = shutil.which("zsh") or "/usr/bin/zsh"
SHELL_ENV = {
    **os.environ,
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "HOME": os.environ.get("HOME", "/tmp"),
}
FILES = {
    "a.txt": b"a",
    ".hidden": b"h",
    "docs/readme.md": b"r",
    "docs/guide/intro.md": b"i",
    "docs/guide/advanced.md": b"v",
    "dir one/sub/deep.bin": b"d",
    "images/cat.jpg": b"c",
    "clock/12:30.log": b"t",
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory holding an archive, a plain file and a subdirectory, made current."""
    with barecat.Barecat(str(tmp_path / "data.barecat"), readonly=False) as bc:
        for path, content in FILES.items():
            bc[path] = content
    (tmp_path / "plain.txt").write_bytes(b"not an archive")
    (tmp_path / "outdir").mkdir()
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def registered_commands() -> set[str]:
    parser = build_parser()
    tables = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(tables[0].choices)


def engine(
    words: Sequence[str], capsys: pytest.CaptureFixture[str], replaced: str | None = None
) -> list[str]:
    """What ``barecat __complete zsh`` prints for ``words`` (the last is being typed)."""
    capsys.readouterr()
    replaced = words[-1] if replaced is None else replaced
    marked = [":" + w for w in (replaced, *words)]
    assert main(["__complete", "zsh", *marked]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out.splitlines()


# -- the commands themselves ---------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_prints_the_absolute_path_of_a_shipped_script(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion-script", shell]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_absolute() and path.is_file()
    assert path.parent.name == "completion_scripts"
    text = path.read_text()
    if shell == "zsh":
        assert text.startswith("#compdef barecat\n")
    else:
        assert "complete -F _barecat barecat" in text


def test_completion_script_refuses_unknown_shells(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion-script", "fish"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_hidden_command_stays_out_of_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "completion-script" in out
    assert "__complete" not in out and "SUPPRESS" not in out


def test_root_options_match_the_real_parser() -> None:
    parser = build_parser()
    assert set(completion.ROOT_OPTIONS) == set(parser._option_string_actions)


# -- the engine ----------------------------------------------------------------------


def test_subcommands_include_aliases_but_not_the_hidden_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    everything = engine(["barecat", ""], capsys)
    assert everything[0] == "words"
    for name in ("create", "c", "list", "ls", "l", "t", "cat", "find", "completion-script"):
        assert name in everything
    assert not any(name.startswith("_") for name in everything[1:])
    assert engine(["barecat", "li"], capsys) == ["words", "list"]
    assert engine(["barecat", "--v"], capsys) == ["words", "--version"]


def test_option_names_of_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert engine(["barecat", "create", "--sh"], capsys) == ["words", "--shard-size-limit"]
    assert engine(["barecat", "c", "--sh"], capsys) == ["words", "--shard-size-limit"]
    assert engine(["barecat", "find", "a", "-ty"], capsys) == ["words", "-type"]
    names = engine(["barecat", "list", "-"], capsys)
    assert {"-l", "--long", "-R", "--recursive", "-h"} <= set(names[1:])


def test_options_given_once_are_not_offered_again_unless_they_repeat(
    capsys: pytest.CaptureFixture[str],
) -> None:
    after_force = engine(["barecat", "create", "-f", "--"], capsys)
    assert "--force" not in after_force and "--shard-size-limit" in after_force
    after_exclude = engine(["barecat", "create", "--exclude", "*.o", "--ex"], capsys)
    assert after_exclude == ["words", "--exclude"]


def test_choices_of_options_and_positionals(capsys: pytest.CaptureFixture[str]) -> None:
    types = engine(["barecat", "find", "a.barecat", "-type", ""], capsys)
    assert types[0] == "words" and {"f", "d"} <= set(types[1:])
    assert engine(["barecat", "completion-script", ""], capsys) == ["words", "bash", "zsh"]
    assert engine(["barecat", "completion-script", "z"], capsys) == ["words", "zsh"]
    assert engine(["barecat", "find", "a", "-type=f", "-na"], capsys) == ["words", "-name"]


def test_free_text_option_values_get_no_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    assert engine(["barecat", "find", "a.barecat", "-name", ""], capsys) == ["words"]
    assert engine(["barecat", "create", "-s", ""], capsys) == ["words"]


def test_local_path_options_ask_the_shell_for_files_or_directories(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert engine(["barecat", "extract", "a", "-C", "ou"], capsys) == ["dirs", "", "ou", "0"]
    assert engine(["barecat", "create", "a", "-T", "li"], capsys) == ["files", "", "li", "0"]
    long_form = engine(["barecat", "extract", "a", "--directory=ou"], capsys)
    assert long_form == ["dirs", "--directory=", "ou", "0"]
    attached = engine(["barecat", "extract", "a", "-Cou"], capsys)
    assert attached == ["dirs", "-C", "ou", "0"]
    # bash replaces only what follows the '=': it keeps 12 characters of the word itself
    split = engine(["barecat", "extract", "a", "--directory=ou"], capsys, replaced="ou")
    assert split == ["dirs", "--directory=", "ou", "12"]


def test_archive_argument_offers_archives_and_directories(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine(["barecat", "list", ""], capsys) == ["paths", "data.barecat", "outdir/"]
    assert engine(["barecat", "list", "d"], capsys) == ["paths", "data.barecat"]
    full = str(workdir) + "/da"
    assert engine(["barecat", "ls", full], capsys) == ["paths", str(workdir) + "/data.barecat"]


def test_archive_argument_falls_back_to_plain_files(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine(["barecat", "list", "pl"], capsys) == ["files", "", "pl", "0"]
    assert engine(["barecat", "list", "outdir/"], capsys) == ["files", "", "outdir/", "0"]
    assert engine(["barecat", "list", "/no/such/dir/x"], capsys) == [
        "files",
        "",
        "/no/such/dir/x",
        "0",
    ]


def test_old_style_index_names_are_offered_by_their_archive_name(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "old-sqlite-index").write_bytes(b"")
    (workdir / "old-shard-00000").write_bytes(b"")
    assert engine(["barecat", "list", "o"], capsys) == ["paths", "old", "outdir/"]


def test_paths_inside_the_archive_level_by_level(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    top = engine(["barecat", "list", "data.barecat", ""], capsys)
    assert top == ["paths", "a.txt", "clock/", "dir one/", "docs/", "images/"]
    assert engine(["barecat", "cat", "data.barecat", "do"], capsys) == ["paths", "docs/"]
    docs = engine(["barecat", "cat", "data.barecat", "docs/"], capsys)
    assert docs == ["paths", "docs/guide/", "docs/readme.md"]
    guide = engine(["barecat", "cat", "data.barecat", "docs/guide/a"], capsys)
    assert guide == ["paths", "docs/guide/advanced.md"]
    assert engine(["barecat", "ls", "data.barecat", "dir one/"], capsys) == [
        "paths",
        "dir one/sub/",
    ]


@pytest.mark.parametrize("command", ["list", "ls", "cat", "find", "du", "tree", "extract", "x"])
def test_every_command_reading_members_completes_them(
    command: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if command not in registered_commands():
        pytest.skip(f"'{command}' is not registered yet")
    assert engine(["barecat", command, "data.barecat", "im"], capsys) == ["paths", "images/"]


def test_members_hide_dot_names_until_a_dot_is_typed_and_keep_a_leading_slash(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ".hidden" not in engine(["barecat", "list", "data.barecat", ""], capsys)
    assert engine(["barecat", "list", "data.barecat", "."], capsys) == ["paths", ".hidden"]
    assert engine(["barecat", "list", "data.barecat", "/do"], capsys) == ["paths", "/docs/"]


def test_options_between_archive_and_path_do_not_confuse_the_engine(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = ["barecat", "list", "-l", "data.barecat", "-R", "docs/r"]
    assert engine(words, capsys) == ["paths", "docs/readme.md"]
    words = ["barecat", "find", "data.barecat", "-type", "f", "-name", "x", "im"]
    assert engine(words, capsys) == ["paths", "images/"]
    words = ["barecat", "extract", "-C", "outdir", "data.barecat", "docs/g"]
    assert engine(words, capsys) == ["paths", "docs/guide/"]


def test_paths_after_the_archive_of_create_and_add_are_local(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine(["barecat", "create", "new.barecat", "ou"], capsys) == ["files", "", "ou", "0"]
    assert engine(["barecat", "add", "data.barecat", "do"], capsys) == ["files", "", "do", "0"]


def test_missing_or_broken_archives_give_no_members(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine(["barecat", "cat", "nothere.barecat", ""], capsys) == ["paths"]
    (workdir / "broken.barecat").write_bytes(b"this is not sqlite" * 100)
    (workdir / "broken.barecat-shard-00000").write_bytes(b"")
    assert engine(["barecat", "cat", "broken.barecat", ""], capsys) == ["paths"]
    assert engine(["barecat", "cat", "data.barecat", "nodir/"], capsys) == ["paths"]
    assert engine(["barecat", "cat", "data.barecat", "../"], capsys) == ["paths"]


def test_unknown_command_or_too_many_words_give_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert engine(["barecat", "frobnicate", ""], capsys) == ["words"]
    assert engine(["barecat", "completion-script", "bash", ""], capsys) == ["words"]


def test_bash_words_are_unquoted_and_cut_to_what_readline_replaces(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def bash(words: list[str], replaced: str) -> list[str]:
        capsys.readouterr()
        marked = [":" + w for w in (replaced, *words)]
        assert main(["__complete", "bash", *marked]) == 0
        return capsys.readouterr().out.splitlines()

    assert bash(["barecat", "ls", "data.barecat", "dir\\ one/"], "dir one/") == [
        "paths",
        "dir one/sub/",
    ]
    assert bash(["barecat", "ls", "'data.barecat'", '"dir one/s'], "dir one/s") == [
        "paths",
        "dir one/sub/",
    ]
    # readline splits `clock/12:3` at ':' and replaces only the `3`
    assert bash(["barecat", "cat", "data.barecat", "clock/12:3"], "3") == ["paths", "30.log"]
    assert bash(["barecat", "cat", "data.barecat", "clock/12:"], "") == ["paths", "30.log"]


def test_engine_reads_option_like_words_as_data(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine(["barecat", "create", "--", "-"], capsys) == ["files", "", "-", "0"]
    assert engine(["barecat", "-h"], capsys) == ["words", "-h"]
    capsys.readouterr()
    assert main(["__complete", "bash"]) == 0
    assert capsys.readouterr().out == ""


def test_dequote_follows_bash_quoting() -> None:
    assert completion.dequote("a\\ b") == "a b"
    assert completion.dequote("'it''s'") == "its"
    assert completion.dequote('"a \\"q\\" \\n"') == 'a "q" \\n'
    assert completion.dequote('"unterminated wo') == "unterminated wo"
    assert completion.dequote("trailing\\") == "trailing"


# -- real bash -----------------------------------------------------------------------


def readline_words(line: str) -> list[str]:
    """Split ``line`` the way readline fills COMP_WORDS: at blanks, with runs of '=' and
    ':' (COMP_WORDBREAKS) as words of their own, quotes and backslashes respected."""
    words: list[str] = []
    cur, quote, i = "", "", 0
    breaks = set("=:")
    while i < len(line):
        c = line[i]
        if quote:
            cur += c
            quote = "" if c == quote else quote
        elif c == "\\":
            cur += line[i : i + 2]
            i += 1
        elif c.isspace():
            if cur:
                words.append(cur)
            cur = ""
        else:
            if cur and (c in breaks) != all(ch in breaks for ch in cur):
                words.append(cur)
                cur = ""
            quote = c if c in "'\"" else ""
            cur += c
        i += 1
    return [*words, cur]


def bash_complete(line: str, cwd: Path) -> tuple[list[str], list[str]]:
    """COMPREPLY, and the compopt calls made, when TAB is pressed at the end of ``line``."""
    words = readline_words(line)
    current = words[-1]
    text = "" if current and set(current) <= set("=:") else completion.dequote(current)
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    script = f"""
        source "$(barecat completion-script bash)" || exit 9
        compopt() {{ printf 'COMPOPT %s\\n' "$*"; }}  # the builtin only works under readline
        spec=$(complete -p barecat) || exit 8
        fn=${{spec#*-F }}; fn=${{fn%% *}}
        COMP_WORDS=({quoted})
        COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
        COMP_LINE=$1
        COMP_POINT=${{#COMP_LINE}}
        "$fn" barecat "$2" "${{COMP_WORDS[COMP_CWORD-1]}}"
        printf 'REPLY %s\\n' "${{COMPREPLY[@]}}"
    """
    proc = subprocess.run(
        ["bash", "-c", script, "bash", line, text],
        cwd=cwd,
        env=SHELL_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    reply = [x[6:] for x in lines if x.startswith("REPLY ") and x != "REPLY "]
    return reply, [x[8:] for x in lines if x.startswith("COMPOPT ")]


def test_readline_words_match_bash() -> None:
    assert readline_words("x --directory=ab") == ["x", "--directory", "=", "ab"]
    assert readline_words("x --directory=") == ["x", "--directory", "="]
    assert readline_words('x "a b" c\\ d ') == ["x", '"a b"', "c\\ d", ""]


def test_bash_completes_subcommands_options_and_choices(workdir: Path) -> None:
    commands, _ = bash_complete("barecat ", workdir)
    assert {"create", "list", "ls", "cat", "find", "completion-script"} <= set(commands)
    assert "__complete" not in commands
    assert bash_complete("barecat li", workdir)[0] == ["list"]
    assert bash_complete("barecat create --sh", workdir)[0] == ["--shard-size-limit"]
    assert bash_complete("barecat completion-script ", workdir)[0] == ["bash", "zsh"]
    assert {"f", "d"} <= set(bash_complete("barecat find data.barecat -type ", workdir)[0])


def test_bash_completes_archives_then_members_level_by_level(workdir: Path) -> None:
    archives, opts = bash_complete("barecat list ", workdir)
    assert archives == ["data.barecat", "outdir"]  # readline adds the '/' to real dirs
    assert "-o filenames" in opts
    assert bash_complete("barecat ls da", workdir)[0] == ["data.barecat"]
    assert bash_complete("barecat ls pl", workdir)[0] == ["plain.txt"]
    top, _ = bash_complete("barecat list data.barecat ", workdir)
    assert top == ["a.txt", "clock/", "dir one/", "docs/", "images/"]
    docs, opts = bash_complete("barecat cat data.barecat do", workdir)
    assert docs == ["docs/"] and "-o nospace" in opts
    guide, _ = bash_complete("barecat cat data.barecat docs/", workdir)
    assert guide == ["docs/guide/", "docs/readme.md"]
    deep, opts = bash_complete("barecat cat data.barecat docs/guide/i", workdir)
    assert deep == ["docs/guide/intro.md"] and "-o nospace" not in opts


def test_bash_handles_quoted_and_escaped_member_names(workdir: Path) -> None:
    assert bash_complete("barecat cat data.barecat dir\\ one/", workdir)[0] == ["dir one/sub/"]
    assert bash_complete('barecat cat data.barecat "dir one/s', workdir)[0] == ["dir one/sub/"]
    assert bash_complete("barecat cat data.barecat clock/12:", workdir)[0] == ["30.log"]


def test_bash_completes_local_paths_for_path_options(workdir: Path) -> None:
    assert bash_complete("barecat extract data.barecat -C ou", workdir)[0] == ["outdir"]
    assert bash_complete("barecat extract data.barecat --directory=ou", workdir)[0] == ["outdir"]
    assert bash_complete("barecat extract data.barecat -Cou", workdir)[0] == ["-Coutdir/"]
    assert bash_complete("barecat create new.barecat -T pl", workdir)[0] == ["plain.txt"]
    assert bash_complete("barecat create new.barecat pl", workdir)[0] == ["plain.txt"]


def test_bash_stays_quiet_on_broken_archives(workdir: Path) -> None:
    (workdir / "broken.barecat").write_bytes(b"garbage" * 100)
    (workdir / "broken.barecat-shard-00000").write_bytes(b"")
    assert bash_complete("barecat cat broken.barecat ", workdir)[0] == []


# -- real zsh ------------------------------------------------------------------------

needs_zsh = pytest.mark.skipif(
    not os.path.exists(ZSH), reason="zsh is not installed, so its script cannot be tried"
)


def run_zsh(body: str, cwd: Path) -> str:
    script = f"""
        autoload -U compinit && compinit -u -D
        {body}
    """
    proc = subprocess.run(
        [ZSH, "-f", "-c", script],
        cwd=cwd,
        env=SHELL_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def zsh_complete(line: str, cwd: Path) -> list[str]:
    """The compadd/compset/_files calls _barecat makes for TAB at the end of ``line``,
    with those builtins replaced by functions that print their arguments."""
    body = """
        source "$(barecat completion-script zsh)"
        compadd() { print -r -- "compadd ${(j:|:)@}"; }
        compset() { print -r -- "compset $*"; return 0; }
        _files() { print -r -- "_files $*"; }
        words=("${(@z)1}"); [[ $1 == *' ' ]] && words+=('')
        CURRENT=${#words}; PREFIX=${words[CURRENT]}
        _barecat
    """
    proc = subprocess.run(
        [ZSH, "-f", "-c", f"autoload -U compinit && compinit -u -D\n{body}", "zsh", line],
        cwd=cwd,
        env=SHELL_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@needs_zsh
def test_zsh_script_binds_when_sourced(workdir: Path) -> None:
    out = run_zsh(
        'source "$(barecat completion-script zsh)"\n'
        'print -r -- "bound=${_comps[barecat]} kind=$(whence -w _barecat)"',
        workdir,
    )
    assert out.strip() == "bound=_barecat kind=_barecat: function"


@needs_zsh
def test_zsh_script_binds_when_found_on_fpath(workdir: Path) -> None:
    scripts = script_path("zsh").parent
    script = f"""
        fpath=({scripts} $fpath)
        autoload -U compinit && compinit -u -D
        print -r -- "bound=${{_comps[barecat]}}"
    """
    proc = subprocess.run(
        [ZSH, "-f", "-c", script], cwd=workdir, env=SHELL_ENV, capture_output=True, text=True
    )
    assert proc.stdout.strip() == "bound=_barecat", proc.stderr


@needs_zsh
def test_zsh_offers_commands_options_and_choices(workdir: Path) -> None:
    commands = zsh_complete("barecat ", workdir)
    assert len(commands) == 1 and commands[0].startswith("compadd --|")
    assert {"create", "ls", "cat", "completion-script"} <= set(commands[0].split("|"))
    assert zsh_complete("barecat create --sh", workdir) == ["compadd --|--shard-size-limit"]
    assert zsh_complete("barecat completion-script ", workdir) == ["compadd --|bash|zsh"]
    types = zsh_complete("barecat find data.barecat -type ", workdir)
    assert {"f", "d"} <= set(types[0].split("|"))


@needs_zsh
def test_zsh_offers_members_with_directories_left_open(workdir: Path) -> None:
    assert zsh_complete("barecat list data.barecat ", workdir) == [
        "compadd -S||-d|dir_names|--|clock/|dir one/|docs/|images/",
        "compadd -d|file_names|--|a.txt",
    ]
    assert zsh_complete("barecat cat data.barecat docs/g", workdir) == [
        "compadd -S||-d|dir_names|--|docs/guide/"
    ]
    assert zsh_complete("barecat cat data.barecat dir\\ one/", workdir) == [
        "compadd -S||-d|dir_names|--|dir one/sub/"
    ]


@needs_zsh
def test_zsh_hands_local_paths_to_its_own_file_completion(workdir: Path) -> None:
    assert zsh_complete("barecat extract data.barecat -C o", workdir) == ["_files -/"]
    assert zsh_complete("barecat extract data.barecat --directory=o", workdir) == [
        "compset -P --directory=",
        "_files -/",
    ]
    assert zsh_complete("barecat list pl", workdir) == ["_files "]


# -- through a terminal: readline and zle insert the completion themselves ----------


def type_in_terminal(argv: list[str], setup: str, typed: str, cwd: Path) -> str:
    """Start an interactive shell on a pseudo-terminal, run ``setup``, type ``typed``
    (with TABs in it), then go to the start of the line and turn it into an ``echo``:
    returns the words the finished line holds, as the shell parsed them."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child becomes the shell
        os.chdir(cwd)
        os.execvpe(argv[0], argv, {**SHELL_ENV, "TERM": "dumb", "PS1": "$ "})
    try:
        os.write(fd, setup.encode() + b"; echo READY$((1+1))\n")
        _read_until(fd, "READY2", 30)
        os.write(fd, typed.encode() + b"\x01echo RESULT$((6*7)) \r")
        screen = _read_until(fd, "\r\n", 30, after="RESULT42 ")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
    return screen.partition("RESULT42 ")[2].partition("\r")[0]


def _read_until(fd: int, expect: str, timeout: float, after: str = "") -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if after in seen and expect in (seen.partition(after)[2] if after else seen):
            break
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 65536).decode(errors="replace")
            except OSError:
                break
    return seen


def test_bash_readline_inserts_member_paths(workdir: Path) -> None:
    setup = 'source "$(barecat completion-script bash)"'
    typed = "barecat cat data.ba\tdi\tsu\tde\t"
    argv = ["bash", "--norc", "--noprofile", "-i"]
    assert type_in_terminal(argv, setup, typed, workdir) == (
        "barecat cat data.barecat dir one/sub/deep.bin"
    )


@needs_zsh
@pytest.mark.parametrize("loading", ["source", "fpath"])
def test_zsh_zle_inserts_member_paths(loading: str, workdir: Path) -> None:
    if loading == "source":
        setup = 'autoload -U compinit; compinit -u -D; source "$(barecat completion-script zsh)"'
    else:
        scripts = script_path("zsh").parent
        setup = f"fpath=({scripts} $fpath); autoload -U compinit; compinit -u -D"
    typed = "barecat cat data.ba\tdir\\ o\tsu\tde\t"
    assert type_in_terminal([ZSH, "-f", "-i"], setup, typed, workdir) == (
        "barecat cat data.barecat dir one/sub/deep.bin"
    )
