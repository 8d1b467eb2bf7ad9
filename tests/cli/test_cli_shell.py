"""``barecat shell``: every command, path resolution, the error policy, -w persistence,
the interactive loop, tab completion, and the installed script."""

from __future__ import annotations

import datetime
import io
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

import barecat
from barecat.cli import listing, main
from barecat.cli.shell import BarecatShell
from barecat.cli.shell_engine import split_commands

FILES = {
    "a/x.txt": b"hello\n",
    "a/b/y.txt": b"".join(b"line%d\n" % i for i in range(1, 13)),
    "c/z.bin": bytes(range(256)),
    "top.txt": b"top\n",
    "B.txt": b"upper\n",
    "\u00e9.txt": b"accent\n",
}
MakeArchive = Callable[..., str]
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def archive(make_archive: MakeArchive) -> str:
    return make_archive(FILES)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run ``barecat shell [-w] -c CMD ARCHIVE`` in-process: (exit code, stdout, stderr)."""

    def run_shell(archive: str, command: str, write: bool = False) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["shell", *(["-w"] if write else []), "-c", command, archive])
        out, err = capsys.readouterr()
        return code, out, err

    return run_shell


def snapshot(path: str) -> dict[str, bytes]:
    with barecat.Barecat(path) as bc:
        return {p: bc.read(p) for p in bc.files()} | {d + "/": b"" for d in bc.dirs()}


# -- ls ---------------------------------------------------------------------------------


def test_ls_sorts_names_bytewise_and_marks_directories(archive: str, run: Run) -> None:
    code, out, err = run(archive, "ls")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["B.txt", "a/", "c/", "top.txt", "\u00e9.txt"]


def test_ls_directory_file_and_relative_operands(archive: str, run: Run) -> None:
    assert run(archive, "ls a")[1].splitlines() == ["b/", "x.txt"]
    assert run(archive, "ls a/x.txt")[1] == "a/x.txt\n"
    assert run(archive, "cd a; ls b")[1] == "y.txt\n"
    assert run(archive, "cd a/b; ls ..")[1].splitlines() == ["b/", "x.txt"]
    assert run(archive, "cd a/b; ls /c")[1] == "z.bin\n"


def test_ls_several_directories_get_headers(archive: str, run: Run) -> None:
    code, out, _ = run(archive, "ls top.txt a c")
    assert code == 0
    assert out == "top.txt\n\na:\nb/\nx.txt\n\nc:\nz.bin\n"


def test_ls_globs_list_matches_as_typed(archive: str, run: Run) -> None:
    assert run(archive, "ls a/*")[1].splitlines() == ["a/b/", "a/x.txt"]
    assert run(archive, "cd a/b; ls ../*")[1].splitlines() == ["../b/", "../x.txt"]
    assert run(archive, "cd a; ls /*.txt")[1].splitlines() == ["/B.txt", "/top.txt", "/\u00e9.txt"]
    assert run(archive, "ls '**/*.txt'")[1].splitlines() == [
        "B.txt",
        "a/b/y.txt",
        "a/x.txt",
        "top.txt",
        "\u00e9.txt",
    ]
    code, _, err = run(archive, "ls '*.nothing'")
    assert code == 1
    assert err == "barecat shell: ls: *.nothing: No match\n"


def test_ls_long_format(archive_path: str, run: Run) -> None:
    old = int(time.mktime((2020, 1, 2, 12, 30, 0, 0, 0, -1))) * 10**9
    recent = (int(time.time()) - 3600) * 10**9
    uid, gid = os.getuid(), os.getgid()
    with barecat.Barecat(archive_path, readonly=False) as bc:
        info = barecat.BarecatFileInfo("d/f.bin", 0o100600, uid, gid, old)
        bc.add(info, data=b"x" * 2048)
        bc.add(barecat.BarecatDirInfo("d/sub", 0o40750, uid, gid, recent))
        bc.add("d/sub/inner/g", data=b"")
    user = pwd.getpwuid(uid).pw_name
    total, *lines = run(archive_path, "ls -l d")[1].splitlines()
    assert total == "total 2048"  # the size of the listed directory's tree, as 'barecat ls -l'
    assert len(lines) == 2
    mode, links, owner, _group, size, month, day, year, name = lines[0].split()
    assert (mode, links, owner, size, name) == ("-rw-------", "1", user, "2048", "f.bin")
    assert (month, day, year) == ("Jan", "2", "2020")
    fields = lines[1].split()
    assert fields[:3] == ["drwxr-x---", "3", user]  # 2 + one subdirectory
    assert fields[4] == "0" and fields[-1] == "sub"
    assert ":" in fields[7]  # recent entries show the time instead of the year
    assert lines[0].index("2048") + len("2048") == lines[1].index(" 0 ") + 2  # right-aligned
    human = run(archive_path, "ls -lh d/f.bin")[1]
    assert " 2.0K " in human and human.rstrip().endswith("d/f.bin")  # a file: no total
    assert run(archive_path, "ls -lh d")[1].startswith("total 2.0K\n")


def test_ls_missing_path_is_one_error_line(archive: str, run: Run) -> None:
    code, out, err = run(archive, "ls nope a/x.txt")
    assert code == 1
    assert out == "a/x.txt\n"
    assert err == "barecat shell: ls: nope: No such file or directory\n"


# -- cd and pwd -----------------------------------------------------------------------------


def test_cd_and_pwd_resolve_relative_paths(archive: str, run: Run) -> None:
    code, out, err = run(archive, "pwd; cd a; pwd; cd b; pwd; cd ..; pwd; cd /c; pwd; cd; pwd")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["/", "/a", "/a/b", "/a", "/c", "/"]


def test_cd_dash_dot_and_dotdot_at_root(archive: str, run: Run) -> None:
    out = run(archive, "cd a/b; cd /; cd -; pwd; cd ./../..; pwd; cd ../../..; pwd; cd /; pwd")[1]
    assert out.splitlines() == ["/a/b", "/", "/", "/"]


def test_cd_into_a_file_or_a_missing_path_fails_and_stays(archive: str, run: Run) -> None:
    code, out, err = run(archive, "cd a; cd x.txt; pwd; cd nope; pwd")
    assert code == 1
    assert out == "/a\n/a\n"
    assert err.splitlines() == [
        "barecat shell: cd: x.txt: Not a directory",
        "barecat shell: cd: nope: No such file or directory",
    ]
    assert "Traceback" not in err


# -- reading ------------------------------------------------------------------------------


def test_cat_writes_exact_bytes(archive: str, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["shell", "-c", "cd c; cat z.bin; cat ../a/x.txt /top.txt", archive]) == 0
    out, err = capsysbinary.readouterr()
    assert out == bytes(range(256)) + b"hello\ntop\n"
    assert err == b""


def test_cat_globs_and_errors_keep_going(archive: str, run: Run) -> None:
    assert run(archive, "cat '*.txt'")[1] == "upper\ntop\naccent\n"
    code, out, err = run(archive, "cat nope a top.txt")
    assert code == 1
    assert out == "top\n"
    assert err.splitlines() == [
        "barecat shell: cat: nope: No such file or directory",
        "barecat shell: cat: a: Is a directory",
    ]
    assert run(archive, "cat")[2] == "barecat shell: cat: missing file operand\n"


def test_cat_into_a_text_stream_without_a_buffer(make_archive: MakeArchive) -> None:
    with barecat.Barecat(make_archive({"t.txt": "grüße\n".encode()})) as bc:
        out = io.StringIO()
        BarecatShell(bc, stdout=out).onecmd("cat t.txt")
    assert out.getvalue() == "grüße\n"


def test_head_prints_the_first_lines(archive: str, run: Run) -> None:
    lines = FILES["a/b/y.txt"].decode().splitlines(keepends=True)
    assert run(archive, "head a/b/y.txt")[1] == "".join(lines[:10])
    assert run(archive, "cd a/b; head -n 2 y.txt")[1] == "".join(lines[:2])
    assert run(archive, "head -n 0 top.txt")[1] == ""
    out = run(archive, "head -n 1 top.txt a/x.txt")[1]
    assert out == "==> top.txt <==\ntop\n\n==> a/x.txt <==\nhello\n"
    code, _, err = run(archive, "head -n x top.txt")
    assert code == 1 and err == "barecat shell: head: -n takes a non-negative number, not 'x'\n"


def test_stat_file_shows_every_stored_field(archive: str, run: Run) -> None:
    code, out, _ = run(archive, "cd a; stat x.txt")
    assert code == 0
    fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())}
    assert fields["File"] == "/a/x.txt"
    assert fields["Type"] == "regular file"
    assert fields["Size"] == "6 bytes"
    assert fields["CRC32C"] == f"0x{crc32c.crc32c(b'hello' + bytes([10])):08x}"
    with barecat.Barecat(archive) as bc:
        info = bc.stat("a/x.txt")
    assert isinstance(info, barecat.BarecatFileInfo)
    assert fields["Shard"] == str(info.shard) and fields["Offset"] == str(info.offset)
    assert fields["Mode"] == "0644 (-rw-r--r--)"
    assert fields["Uid"] == fields["Gid"] == fields["Modified"] == "-"  # never stored


def test_stat_shows_owner_and_nanosecond_mtime(archive_path: str, run: Run) -> None:
    mtime_ns = 1_600_000_000_123_456_789
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc.add("f", data=b"", mode=0o100751, uid=os.getuid(), gid=os.getgid(), mtime_ns=mtime_ns)
    out = run(archive_path, "stat /f")[1]
    local = datetime.datetime.fromtimestamp(1_600_000_000).astimezone()
    assert f"Modified: {local:%Y-%m-%d %H:%M:%S}.123456789 {local:%z}\n" in out
    assert f"     Uid: {os.getuid()} ({pwd.getpwuid(os.getuid()).pw_name})\n" in out
    assert "    Mode: 0751 (-rwxr-x--x)\n" in out


def test_stat_and_info_on_a_directory_show_its_statistics(archive: str, run: Run) -> None:
    out = run(archive, "stat a")[1]
    assert "     Dir: /a\n" in out
    assert "Type: directory" in out
    assert "Subdirs: 1" in out
    assert "Files: 1 directly inside" in out
    assert f"Tree: 2 files, {6 + len(FILES['a/b/y.txt'])} bytes" in out
    assert run(archive, "info a")[1] == out
    assert run(archive, "cd a; stat")[1] == out
    both = run(archive, "stat a/b c")[1]
    assert "Tree: 1 file, " in both and "\n\n     Dir: /c\n" in both  # blank line between


def test_info_without_a_path_summarizes_the_archive(archive: str, run: Run) -> None:
    out = run(archive, "info")[1]
    assert f"Files: {len(FILES)}\n" in out
    assert "Dirs: 4\n" in out  # root, a, a/b, c
    assert f"Size: {sum(map(len, FILES.values()))} bytes" in out
    assert "Open: read-only" in out
    assert "Shards: 1" in out


def test_find_searches_below_the_current_directory(archive: str, run: Run) -> None:
    assert run(archive, "find -name '*.txt' -type f")[1].splitlines() == [
        "B.txt",
        "a/b/y.txt",
        "a/x.txt",
        "top.txt",
        "\u00e9.txt",
    ]
    assert run(archive, "cd a; find")[1].splitlines() == ["a", "a/b", "a/b/y.txt", "a/x.txt"]
    assert run(archive, "find a 'y*'")[1] == "a/b/y.txt\n"
    assert run(archive, "cd a; find -type d -maxdepth 1")[1].splitlines() == ["a", "a/b"]
    assert run(archive, "find c -type f -size +100")[1] == "c/z.bin\n"
    code, _, err = run(archive, "find -type q")
    assert code == 1 and err == "barecat shell: find: -type takes f, d or l\n"


def test_du_reports_tree_sizes(archive: str, run: Run) -> None:
    y = len(FILES["a/b/y.txt"])
    assert run(archive, "cd a; du")[1] == f"{y}\ta/b\n{y + 6}\ta\n"
    assert run(archive, "du -s a")[1] == f"{y + 6}\ta\n"
    assert "6\ta/x.txt\n" in run(archive, "du -a a")[1]
    code, _, err = run(archive, "du nope")
    assert code == 1 and err == "barecat shell: du: nope: No such file or directory\n"


def test_tree_draws_the_current_directory(archive: str, run: Run) -> None:
    out = run(archive, "cd a; tree")[1].replace("\xa0", " ")  # tree's own spacing
    assert out.splitlines()[:4] == ["a", "├── b", "│   └── y.txt", "└── x.txt"]
    assert out.endswith(" files\n")
    expected = io.StringIO()
    with barecat.Barecat(archive) as bc:
        listing.print_tree(bc, "a", expected)  # the same drawing as 'barecat tree'
    assert run(archive, "cd a; tree")[1] == expected.getvalue()
    assert run(archive, "tree -d -L 1")[1].splitlines()[:3] == [".", "├── a", "└── c"]


# -- copying out ----------------------------------------------------------------------------


def test_get_extracts_one_file(archive: str, run: Run, tmp_path: Path) -> None:
    target = tmp_path / "got"
    target.mkdir()
    code, _, err = run(archive, f"lcd {target}; cd a; get x.txt; get b/y.txt renamed")
    assert (code, err) == (0, "")
    assert (target / "x.txt").read_bytes() == FILES["a/x.txt"]
    assert (target / "renamed").read_bytes() == FILES["a/b/y.txt"]
    run(archive, f"get /c/z.bin {target}")
    assert (target / "z.bin").read_bytes() == FILES["c/z.bin"]


def test_get_copies_a_directory_tree(archive: str, run: Run, tmp_path: Path) -> None:
    code, _, err = run(archive, f"lcd {tmp_path}; get a; get a copy; get /a/b copy")
    assert (code, err) == (0, "")
    for tree in (tmp_path / "a", tmp_path / "copy"):  # a missing LOCAL becomes the copy
        assert (tree / "x.txt").read_bytes() == FILES["a/x.txt"]
        assert (tree / "b" / "y.txt").read_bytes() == FILES["a/b/y.txt"]
    assert (tmp_path / "copy" / "b" / "y.txt").is_file()  # an existing one receives it
    assert sorted(os.listdir(tmp_path / "copy")) == ["b", "x.txt"]
    assert oct(os.stat(tmp_path / "copy").st_mode & 0o777) == oct(0o755)


def test_get_of_a_damaged_file_leaves_no_local_file(archive: str, run: Run, tmp_path: Path) -> None:
    with barecat.Barecat(archive) as bc:
        info = bc.stat("top.txt")
    assert isinstance(info, barecat.BarecatFileInfo)
    with open(f"{archive}-shard-{info.shard:05d}", "r+b") as shard:
        shard.seek(info.offset)
        shard.write(b"X")
    code, _, err = run(archive, f"lcd {tmp_path}; get top.txt; get / all")
    assert code == 1
    assert "top.txt" in err and "CRC" in err.upper()
    assert not (tmp_path / "top.txt").exists() and not (tmp_path / "all" / "top.txt").exists()
    assert (tmp_path / "all" / "a" / "x.txt").read_bytes() == FILES["a/x.txt"]  # the rest


def test_mget_copies_matches_by_name(archive: str, run: Run, tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    code, _, err = run(archive, f"lcd {here}; mget '**/*.txt'")
    assert (code, err) == (0, "")
    assert sorted(os.listdir(here)) == sorted(["B.txt", "top.txt", "x.txt", "y.txt", "\u00e9.txt"])
    assert (here / "y.txt").read_bytes() == FILES["a/b/y.txt"]
    into = tmp_path / "into"
    into.mkdir()
    code, _, err = run(archive, f"cd a; mget x.txt 'b/*' {into}")  # an existing local directory
    assert (code, err) == (0, "")
    assert sorted(os.listdir(into)) == ["x.txt", "y.txt"]
    code, _, err = run(archive, f"lcd {tmp_path}; mget top.txt nowhere")
    assert code == 1 and err == "barecat shell: mget: nowhere: No such file or directory\n"
    code, _, err = run(archive, f"lcd {tmp_path}; mget a")
    assert code == 1 and err == "barecat shell: mget: a: Is a directory (use: get a)\n"


def test_mget_refuses_two_matches_with_one_name(
    make_archive: MakeArchive, run: Run, tmp_path: Path
) -> None:
    path = make_archive({"p/n.txt": b"first", "q/n.txt": b"second"})
    code, _, err = run(path, f"lcd {tmp_path}; mget '*/n.txt'")
    assert code == 1
    assert err == "barecat shell: mget: /q/n.txt: its name is taken by /p/n.txt (use mget -d)\n"
    assert (tmp_path / "n.txt").read_bytes() == b"first"
    code, _, err = run(path, f"lcd {tmp_path}; mget -d '*/n.txt'")
    assert (code, err) == (0, "")
    assert (tmp_path / "q" / "n.txt").read_bytes() == b"second"


def test_mget_d_keeps_paths_relative_to_the_cwd(archive: str, run: Run, tmp_path: Path) -> None:
    code, _, err = run(archive, f"lcd {tmp_path}; cd a; mget -d '**'")
    assert (code, err) == (0, "")
    assert (tmp_path / "x.txt").read_bytes() == FILES["a/x.txt"]
    assert (tmp_path / "b" / "y.txt").read_bytes() == FILES["a/b/y.txt"]
    assert oct(os.stat(tmp_path / "b").st_mode & 0o777) == oct(0o755)  # the stored mode
    assert not (tmp_path / "c").exists()
    code, _, err = run(archive, f"lcd {tmp_path}; cd a; mget -d /top.txt")
    assert code == 1 and "/top.txt: outside the current directory" in err


def test_local_helpers(archive: str, run: Run, tmp_path: Path) -> None:
    top = tmp_path / "top"
    (top / "sub").mkdir(parents=True)
    (top / "file").write_bytes(b"")
    before = os.getcwd()
    code, out, _ = run(archive, f"lcd {top}; lpwd; lls; lcd sub; lpwd; lls ..")
    assert code == 0
    assert out.splitlines() == [str(top), "file", "sub/", str(top / "sub"), "file", "sub/"]
    assert os.getcwd() == before  # lcd never changes the process's directory
    code, _, err = run(archive, "lcd /no/such/dir")
    assert code == 1 and err == "barecat shell: lcd: /no/such/dir: No such local directory\n"


# -- changing the archive -------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["put /etc/hostname", "mput /etc/hostname", "rm top.txt", "mv top.txt t2", "mkdir new"],
)
def test_write_commands_need_write_mode(archive: str, run: Run, command: str) -> None:
    before = snapshot(archive)
    code, out, err = run(archive, command)
    assert code == 1 and out == ""
    name = command.split()[0]
    assert err.startswith(f"barecat shell: {name}: the archive is open read-only")
    assert "-w" in err and "Traceback" not in err
    assert snapshot(archive) == before


def test_put_adds_files_and_persists(archive: str, run: Run, tmp_path: Path) -> None:
    local = tmp_path / "note.txt"
    local.write_bytes(b"note\n")
    os.utime(local, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    code, _, err = run(
        archive, f"lcd {tmp_path}; cd a; put note.txt; put note.txt b; put note.txt /n2", True
    )
    assert (code, err) == (0, "")
    with barecat.Barecat(archive) as bc:
        assert bc.read("a/note.txt") == bc.read("a/b/note.txt") == bc.read("n2") == b"note\n"
        assert bc.stat("a/note.txt").mtime_ns == 1_600_000_000_000_000_000
    code, _, err = run(archive, f"lcd {tmp_path}; put note.txt a/x.txt", True)
    assert (
        code == 1 and err == "barecat shell: put: /a/x.txt: already in the archive (rm it first)\n"
    )
    assert snapshot(archive)["a/x.txt"] == FILES["a/x.txt"]


def test_mput_adds_local_globs_and_trees(archive: str, run: Run, tmp_path: Path) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "deep.txt").write_bytes(b"deep")
    (tmp_path / "one.txt").write_bytes(b"1")
    (tmp_path / "two.txt").write_bytes(b"2")
    code, _, err = run(archive, f"lcd {tmp_path}; cd c; mput '*.txt' d", True)
    assert (code, err) == (0, "")
    after = snapshot(archive)
    assert after["c/one.txt"] == b"1" and after["c/two.txt"] == b"2"
    assert after["c/d/e/deep.txt"] == b"deep"
    code, _, err = run(archive, f"lcd {tmp_path}; mput '*.none'", True)
    assert code == 1 and err == "barecat shell: mput: *.none: No match\n"


def test_rm_removes_files_and_with_r_directories(archive: str, run: Run) -> None:
    code, _, err = run(archive, "rm a", True)
    assert code == 1 and err == "barecat shell: rm: a: Is a directory (use rm -r)\n"
    code, _, err = run(archive, "cd a; rm x.txt; rm -r /c; rm '/*.txt'", True)
    assert (code, err) == (0, "")
    after = snapshot(archive)
    assert "a/x.txt" not in after and "c/" not in after and "c/z.bin" not in after
    assert "top.txt" not in after and "B.txt" not in after
    assert after["a/b/y.txt"] == FILES["a/b/y.txt"]
    assert run(archive, "rm -r /", True)[2] == (
        "barecat shell: rm: refusing to remove the root directory\n"
    )


def test_rm_r_of_the_cwd_moves_to_its_parent(archive: str, run: Run) -> None:
    assert run(archive, "cd a/b; rm -r /a/b; pwd", True)[1] == "/a\n"


def test_mv_renames_and_moves_into_directories(archive: str, run: Run) -> None:
    code, _, err = run(archive, "cd a; mv x.txt renamed.txt; mv /top.txt b; mv /c b", True)
    assert (code, err) == (0, "")
    after = snapshot(archive)
    assert after["a/renamed.txt"] == FILES["a/x.txt"]
    assert after["a/b/top.txt"] == FILES["top.txt"]
    assert after["a/b/c/z.bin"] == FILES["c/z.bin"]
    assert "a/x.txt" not in after and "top.txt" not in after and "c/" not in after
    code, _, err = run(archive, "mv a a/b/inside", True)
    assert code == 1 and err == "barecat shell: mv: cannot move 'a' into itself\n"
    code, _, err = run(archive, "mv B.txt \u00e9.txt", True)
    assert code == 1 and err == "barecat shell: mv: \u00e9.txt: File exists\n"


def test_mkdir_creates_directories(archive: str, run: Run) -> None:
    code, _, err = run(archive, "cd a; mkdir new; mkdir -p deep/er; mkdir -p deep", True)
    assert (code, err) == (0, "")
    with barecat.Barecat(archive) as bc:
        assert bc.isdir("a/new") and bc.isdir("a/deep/er")
    code, _, err = run(archive, "mkdir a; mkdir x/y", True)
    assert code == 1
    assert err.splitlines() == [
        "barecat shell: mkdir: a: File exists",
        "barecat shell: mkdir: x/y: No such parent directory (use mkdir -p)",
    ]


# -- the command line ---------------------------------------------------------------------


def test_split_commands_respects_quotes() -> None:
    assert split_commands("cd a; ls -l ;pwd") == ["cd a", "ls -l", "pwd"]
    assert split_commands("cat 's;t' \"u;v\" w\\;x; ;") == ["cat 's;t' \"u;v\" w\\;x"]
    assert split_commands("ls\npwd") == ["ls", "pwd"]
    assert split_commands("  ;  ") == []
    assert split_commands("cd a; !ls; echo 'x\nls") == ["cd a", "!ls; echo 'x", "ls"]
    assert split_commands("echo a!b; pwd") == ["echo a!b", "pwd"]


def test_quoted_semicolons_and_spaces_reach_the_command(
    make_archive: MakeArchive, run: Run
) -> None:
    path = make_archive({"s;t": b"semi\n", "with space/f": b"space\n"})
    code, out, _ = run(path, "cat 's;t'; cd 'with space'; cat f")
    assert (code, out) == (0, "semi\nspace\n")


def test_failures_set_the_exit_code_but_later_commands_run(archive: str, run: Run) -> None:
    code, out, err = run(archive, "cat nope; cd a; pwd")
    assert code == 1
    assert out == "/a\n"
    assert err == "barecat shell: cat: nope: No such file or directory\n"


def test_exit_stops_the_command_line(archive: str, run: Run) -> None:
    assert run(archive, "pwd; exit; cd a; pwd")[:2] == (0, "/\n")
    assert run(archive, "quit; pwd")[:2] == (0, "")


def test_unknown_commands_and_bad_options_are_errors(archive: str, run: Run) -> None:
    code, _, err = run(archive, "frobnicate; ls -z; cat 'unclosed")
    assert code == 1
    assert err.splitlines() == [
        "barecat shell: frobnicate: unknown command (type 'help' for the list)",
        "barecat shell: ls: option -z not recognized",
        "barecat shell: cat: No closing quotation",
    ]


def test_help_lists_commands_and_explains_one(archive: str, run: Run) -> None:
    out = run(archive, "help")[1]
    names = {line.split()[0].rstrip(":") for line in out.splitlines()}
    expected = "ls cd pwd cat head stat info find du tree get mget put mput rm mv mkdir"
    assert names >= set(expected.split()) | {"lcd", "lpwd", "lls", "exit", "help"}
    assert run(archive, "help ls")[1].startswith("ls [-l] [-h] [PATH|GLOB...]:")
    assert "bytewise" in run(archive, "help ls")[1]
    assert run(archive, "help nope")[2] == "barecat shell: help: nope: no such command\n"


def test_missing_archive_is_an_error_even_with_write(run: Run, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.barecat")
    for write in (False, True):
        code, _, err = run(missing, "ls", write)
        assert code == 1 and "missing.barecat" in err and "Traceback" not in err
    assert os.listdir(tmp_path) == []


# -- the interactive loop -------------------------------------------------------------------


def test_interactive_loop_reads_commands_until_exit(archive: str) -> None:
    stdin = io.StringIO("cd a\nls\n\npwd\nexit\npwd\n")
    stdout, stderr = io.StringIO(), io.StringIO()
    with barecat.Barecat(archive) as bc:
        shell = BarecatShell(bc, stdin=stdin, stdout=stdout, stderr=stderr)
        shell.loop()
    assert stdout.getvalue() == (
        "barecat:/> barecat:/a> b/\nx.txt\nbarecat:/a> barecat:/a> /a\nbarecat:/a> "
    )
    assert stderr.getvalue() == "" and not shell.failed


def test_interactive_errors_are_reported_and_the_loop_goes_on(archive: str) -> None:
    stdin = io.StringIO("cat nope\ncd x\ncat top.txt\n")  # ends at EOF, without exit
    stdout, stderr = io.StringIO(), io.StringIO()
    with barecat.Barecat(archive) as bc:
        shell = BarecatShell(bc, stdin=stdin, stdout=stdout, stderr=stderr, show_prompt=False)
        shell.loop()
    assert stdout.getvalue() == "top\n"
    assert stderr.getvalue().splitlines() == [
        "barecat shell: cat: nope: No such file or directory",
        "barecat shell: cd: x: No such file or directory",
    ]
    assert shell.failed


def test_ctrl_c_abandons_the_line_not_the_session(archive: str) -> None:
    class Interrupting(io.StringIO):
        interrupted = False

        def readline(self, size: int | None = -1) -> str:
            if not self.interrupted:
                self.interrupted = True
                raise KeyboardInterrupt
            return super().readline()

    stdout = io.StringIO()
    with barecat.Barecat(archive) as bc:
        shell = BarecatShell(bc, stdin=Interrupting("pwd\n"), stdout=stdout, show_prompt=False)
        shell.loop("hello")
    assert stdout.getvalue() == "hello\n^C\n/\n"  # greeted once, then back at the prompt


def test_piped_stdin_runs_a_script_without_prompts(
    archive: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("cd c\nls\ncat nope\n"))
    assert main(["shell", archive]) == 1
    out, err = capsys.readouterr()
    assert out == "z.bin\n"
    assert err == "barecat shell: cat: nope: No such file or directory\n"


def test_completion_of_archive_and_local_paths(archive: str, tmp_path: Path) -> None:
    (tmp_path / "local.txt").write_bytes(b"")
    (tmp_path / "ldir").mkdir()
    with barecat.Barecat(archive) as bc:
        shell = BarecatShell(bc, stdout=io.StringIO())
        assert shell.completedefault("", "ls ", 3, 3) == [
            "B.txt",
            "a/",
            "c/",
            "top.txt",
            "\u00e9.txt",
        ]
        assert shell.completedefault("a/", "cat a/", 4, 6) == ["a/b/", "a/x.txt"]
        assert shell.completedefault("a/", "cd a/", 3, 5) == ["a/b/"]  # cd: directories only
        assert shell.completedefault("t", "ls -l t", 6, 7) == ["top.txt"]
        shell.onecmd("cd a/b")
        assert shell.completedefault("../", "cat ../", 4, 7) == ["../b/", "../x.txt"]
        assert shell.completedefault("/c/", "stat /c/", 5, 8) == ["/c/z.bin"]
        shell.local_cwd = str(tmp_path)
        assert shell.completedefault("l", "put l", 4, 5) == ["ldir/", "local.txt"]
        assert shell.completedefault("", "put local.txt ", 14, 14) == ["y.txt"]
        assert shell.completedefault("l", "get y.txt l", 10, 11) == ["ldir/", "local.txt"]
        assert shell.completedefault("l", "lcd l", 4, 5) == ["ldir/"]
        assert shell.completedefault("n", "ls nope/n", 3, 9) == []
        assert shell.completedefault("x", "pwd x", 4, 5) == []


# -- the shell as an object -------------------------------------------------------------


def test_shell_opens_an_archive_path_and_closes_it(archive: str, tmp_path: Path) -> None:
    with BarecatShell(archive) as shell:  # read-only by default
        assert shell.bc.readonly
        shell.onecmd("mkdir new")
        assert shell.failed
    with BarecatShell(Path(archive), readonly=False) as shell:
        shell.local_cwd = str(tmp_path)  # put and get use it
        (tmp_path / "note").write_bytes(b"n")
        shell.onecmd("put note; mkdir new; mv top.txt new")
        assert not shell.failed
    with barecat.Barecat(archive, readonly=False):
        pass  # the shell that opened it closed it: another writer may open it
    after = snapshot(archive)  # and what it changed was committed
    assert after["note"] == b"n" and after["new/top.txt"] == FILES["top.txt"]


def test_shell_leaves_an_archive_it_was_given_open(archive: str) -> None:
    with barecat.Barecat(archive) as bc:
        with BarecatShell(bc, stdout=io.StringIO()) as shell:
            shell.onecmd("ls")
        shell.close()
        assert bc.read("top.txt") == FILES["top.txt"]


def test_output_goes_to_the_current_stdout(archive: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with BarecatShell(archive) as shell:
        for name in ("stdout", "stderr"):
            monkeypatch.setattr(f"sys.{name}", io.StringIO())  # replaced after the shell was made
        shell.onecmd("cd a; pwd; cat nope")
        assert sys.stdout.getvalue() == "/a\n"  # type: ignore[attr-defined]
        assert sys.stderr.getvalue() == (  # type: ignore[attr-defined]
            "barecat shell: cat: nope: No such file or directory\n"
        )


def test_dot_commands_are_aliases(archive: str, run: Run) -> None:
    assert run(archive, ".ls a; .cd a; .pwd")[:2] == (0, "b/\nx.txt\n/a\n")
    assert run(archive, ".quit; pwd")[:2] == (0, "")
    code, _, err = run(archive, ".nope")
    assert code == 1 and err == "barecat shell: nope: unknown command (type 'help' for the list)\n"
    code, _, err = run(archive, "lss; pwdd")
    assert code == 1 and err == (
        "barecat shell: lss: unknown command; did you mean 'ls' or 'lls'?\n"
        "barecat shell: pwdd: unknown command; did you mean 'pwd' or 'lpwd'?\n"
    )
    with BarecatShell(archive) as shell:
        assert shell.onecmd(".exit") is True
        assert shell.onecmd(".help") is False


def test_bang_runs_a_local_command_in_the_local_directory(
    archive: str, run: Run, tmp_path: Path
) -> None:
    code, out, err = run(archive, f"lcd {tmp_path}; !pwd; echo a | tr a-z A-Z\nls a")
    assert (code, err) == (0, "")
    assert out == f"{tmp_path}\nA\nb/\nx.txt\n"  # '!' takes the rest of its line
    code, out, err = run(archive, "!echo out; echo err >&2; exit 3\npwd")
    assert code == 1 and out == "out\n/\n"
    assert (
        err == "err\nbarecat shell: shell: 'echo out; echo err >&2; exit 3' exited with status 3\n"
    )
    assert run(archive, "!")[2] == "barecat shell: shell: missing command (e.g. '!ls -l')\n"
    assert run(archive, "shell echo long form")[1] == "long form\n"


def test_bang_writes_to_a_real_file_descriptor(archive: str, tmp_path: Path) -> None:
    log = tmp_path / "log"
    with open(log, "w") as out, BarecatShell(archive, stdout=out) as shell:
        shell.onecmd("pwd; !echo from the child\npwd")
    assert log.read_text() == "/\nfrom the child\n/\n"  # in order: flushed before it ran


def test_bang_in_a_piped_script_does_not_read_the_script(
    archive: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("!cat\ncd a\npwd\n"))
    assert main(["shell", archive]) == 0
    assert capsys.readouterr().out == "/a\n"


# -- the installed script ----------------------------------------------------------------


def test_installed_script_runs_commands(archive: str) -> None:
    script = Path(sys.executable).parent / "barecat"  # the venv under test, e.g. .venv
    result = subprocess.run(
        [str(script), "shell", "-c", "cd a; ls -l; pwd; cat nope", archive],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    total, *lines = result.stdout.splitlines()
    assert total == f"total {6 + len(FILES['a/b/y.txt'])}"
    assert lines[0].startswith("drwxr-xr-x") and lines[0].endswith(" b")
    assert lines[1].startswith("-rw-r--r--") and lines[1].endswith(" x.txt")
    assert lines[2] == "/a"
    assert result.stderr == "barecat shell: cat: nope: No such file or directory\n"
