"""The ``barecat`` command line: create/add/extract/cat, errors, Ctrl-C, help, scripts.

Commands run in-process through ``barecat.cli.main(argv)`` over real files; one test per
installed script runs it as a subprocess. Listing commands are in test_cli_listing.py.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

import barecat
import barecat.kernels
from helpers import BIN, Run
from helpers.killing import children_take_ctrl_c, start_with_one_page_stdout
from helpers.reference import made_by_reference
from helpers.terminal import on_a_terminal
from helpers.trees import make_tree, tree_state
from reference_suite import VERSION, fetch_sdist


def test_create_then_extract_reproduces_the_tree(run: Run, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    ar = str(tmp_path / "ar.barecat")
    code, _, err = run("create", "-C", str(src), ar, ".")
    assert (code, err) == (0, "")
    out_dir = tmp_path / "out"
    code, _, err = run("extract", ar, "-C", str(out_dir))
    assert (code, err) == (0, "")
    assert tree_state(out_dir) == tree_state(src)
    diff = subprocess.run(["diff", "-r", "--no-dereference", str(src), str(out_dir)])
    assert diff.returncode == 0
    with barecat.Barecat(ar) as bc:
        assert bc.verify_integrity()
        assert bc.index.lookup_file("link_to_dir").is_symlink_entry
        assert bc["a/link_to_file"] == "../name with spaces ü.txt".encode()


def test_create_names_members_as_tar_does(run: Run, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    os.chdir(tmp_path)
    assert run("create", "rel.barecat", "src/a")[0] == 0
    assert run("create", "abs.barecat", str(src / "a" / "x.txt"))[0] == 0
    with barecat.Barecat("rel.barecat") as bc:
        assert sorted(bc.index.iter_all_filepaths()) == [
            "src/a/b/big.bin", "src/a/b/zero", "src/a/link_to_file", "src/a/x.txt",
        ]  # fmt: skip
        assert bc.stat("src/a").mode == os.stat(src / "a").st_mode
    with barecat.Barecat("abs.barecat") as bc:
        assert list(bc.index.iter_all_filepaths()) == [str(src / "a/x.txt").lstrip("/")]


def test_create_refuses_an_existing_archive_unless_forced(run: Run, make_archive) -> None:  # type: ignore[no-untyped-def]
    ar = make_archive({"old": b"1"})
    code, _, err = run("create", ar, __file__)
    assert code == 1 and "exists" in err and "-f" in err
    with barecat.Barecat(ar) as bc:
        assert list(bc) == ["old"]
    assert run("create", "-f", ar, __file__)[0] == 0
    with barecat.Barecat(ar) as bc:
        assert list(bc) == [__file__.lstrip("/")]


def test_add_needs_an_archive_or_dash_c_and_reports_existing_paths(
    run: Run, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src")
    ar = str(tmp_path / "ar")
    code, _, err = run("add", ar, "-C", str(src), "a")
    assert code == 1 and "archive does not exist" in err and not os.path.exists(ar)
    assert run("add", "-c", ar, "-C", str(src), "a/x.txt")[0] == 0
    code, _, err = run("add", ar, "-C", str(src), "a")
    assert code == 1 and "Archive path already exists: a/x.txt" in err
    with barecat.Barecat(ar) as bc:
        assert bc["a/x.txt"] == b"hello\n" and bc["a/b/zero"] == b""
        assert bc.isfile("a/b/big.bin") and bc.verify_integrity()


def test_unreadable_sources_are_reported_and_the_rest_is_stored(run: Run, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    ar = str(tmp_path / "ar")
    code, _, err = run("create", "-L", "-C", str(src), ar, ".", "missing-file")
    assert code == 1
    assert "dangling: No such file or directory" in err
    assert "missing-file: No such file or directory" in err
    with barecat.Barecat(ar) as bc:
        assert bc["link_to_dir/big.bin"] == (src / "a/b/big.bin").read_bytes()  # followed
        assert not bc.index.lookup_file("a/link_to_file").is_symlink_entry
        assert bc["a/link_to_file"] == b"spaces"
        assert "dangling" not in bc


def test_files_from_stdin_null_separated_with_filters(run: Run, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    listing = b"\0".join([b"a", b"a/x.txt", b"./private", "name with spaces ü.txt".encode()])
    ar = str(tmp_path / "ar")
    code, _, err = run(
        "create", "-T", "-", "-0", "-C", str(src), "--exclude", "*.bin", ar, stdin=listing
    )
    assert (code, err) == (0, "")
    with barecat.Barecat(ar) as bc:
        assert sorted(bc.index.iter_all_filepaths()) == [
            "a/b/zero", "a/link_to_file", "a/x.txt", "name with spaces ü.txt", "private/secret",
        ]  # fmt: skip
    list_file = tmp_path / "list.txt"
    list_file.write_text("a\nempty\n")
    ar2 = str(tmp_path / "ar2")
    assert run("create", "-T", str(list_file), "-C", str(src), "-i", "b/", ar2)[0] == 0
    with barecat.Barecat(ar2) as bc:
        assert sorted(bc.index.iter_all_filepaths()) == ["a/b/big.bin", "a/b/zero"]
        assert bc.listdir("") == ["a"]  # 'empty' holds nothing the include rule covers


def test_shard_limit_and_physical_order_keep_every_byte(run: Run, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    blobs = {f"f{i:03}": os.urandom(1000 + i) for i in range(200)}
    for name, data in blobs.items():
        (src / name).write_bytes(data)
    ar = str(tmp_path / "ar")
    assert (
        run("create", "-s", "50K", "--physical-order", "-j", "3", "-C", str(src), ar, ".")[0] == 0
    )
    with barecat.Barecat(ar) as bc:
        assert bc.sharder.num_shards >= 4
        assert {p: bc[p] for p in bc} == blobs
        assert bc.shard_size_limit == 50 << 10
    code, _, err = run("create", "-s", "lots", str(tmp_path / "other"), str(src))
    assert code == 2 and "invalid size value" in err


def test_extract_selection_and_filters(run: Run, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    ar = str(tmp_path / "ar")
    run("create", "-C", str(src), ar, ".")
    out = tmp_path / "o1"
    assert run("extract", ar, "a/b", "private/secret", "-C", str(out))[0] == 0
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "a", "a/b", "a/b/big.bin", "a/b/zero", "private", "private/secret",
    ]  # fmt: skip
    out = tmp_path / "o2"
    assert run("extract", ar, "-C", str(out), "-i", "*.txt", "-x", "private/")[0] == 0
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "a/x.txt", "name with spaces ü.txt",
    ]  # fmt: skip
    code, listed, _ = run("extract", "-v", ar, "a/b", "-C", str(tmp_path / "o1v"))
    assert code == 0 and listed.splitlines() == ["a/b/big.bin", "a/b/zero"]
    out = tmp_path / "o3"
    assert run("extract", ar, "-C", str(out), "--pattern", "a/**")[0] == 0
    assert (out / "a/b/big.bin").exists() and not (out / ".hidden").exists()
    code, _, err = run("extract", ar, "-C", str(out), "--pattern", "a", "-i", "b")
    assert code == 1 and "--pattern" in err
    code, _, err = run("extract", ar, "nope", "-C", str(tmp_path / "o4"))
    assert code == 1 and "nope" in err and not (tmp_path / "o4").exists()


def test_extract_refuses_links_leaving_the_target(run: Run, tmp_path: Path) -> None:
    ar = str(tmp_path / "ar")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("up", data=b"../../outside", mode=stat.S_IFLNK | 0o777)
        bc.add("abs", data=b"/etc/passwd", mode=stat.S_IFLNK | 0o777)
        bc.add("inside", data=b"d/f", mode=stat.S_IFLNK | 0o777)
        bc["d/f"] = b"data"
    out = tmp_path / "out"
    code, _, err = run("extract", ar, "-C", str(out))
    assert code == 1  # one summary line: what was left out, and how to allow it
    assert err.splitlines() == [
        f"barecat extract: 2 symbolic links pointing outside {out} not created "
        "(use --allow-outside-links to create them; -v lists them)"
    ]
    assert not os.path.lexists(out / "up") and not os.path.lexists(out / "abs")
    assert (out / "inside").read_bytes() == b"data"
    code, _, err = run("extract", "-v", ar, "-C", str(tmp_path / "out1"))
    assert code == 1 and "up: link to '../../outside' not created" in err and "abs: link" in err
    out2 = tmp_path / "out2"
    assert run("extract", ar, "-C", str(out2), "--allow-outside-links")[0] == 0
    assert os.readlink(out2 / "abs") == "/etc/passwd"


def test_extract_never_writes_through_a_link_from_the_archive(run: Run, tmp_path: Path) -> None:
    """An archive with link ``d -> victim_dir`` and a file ``d/owned`` must not write there."""
    victim = tmp_path / "victim"
    victim.mkdir()
    ar = str(tmp_path / "ar")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("d", data=os.fsencode(victim), mode=stat.S_IFLNK | 0o777)
    # A second archive carries a regular file under the same name 'd': extracting both
    # into one directory must not write into the victim through the link made first.
    ar2 = str(tmp_path / "ar2")
    with barecat.Barecat(ar2, readonly=False) as bc:
        bc["d/owned"] = b"x"
    out = tmp_path / "out"
    assert run("extract", ar, "-C", str(out), "--allow-outside-links")[0] == 0
    run("extract", ar2, "-C", str(out))
    assert list(victim.iterdir()) == []


def test_cat_writes_bytes_and_fails_clearly(run: Run, make_archive) -> None:  # type: ignore[no-untyped-def]
    big = os.urandom(3 << 20)
    ar = make_archive({"a/big": big, "b": b"\x00\xffbinary"})
    code, out, err = run("cat", ar, "b", "a/big")
    assert code == 0 and out.encode("utf-8", "surrogateescape") == b"\x00\xffbinary" + big
    code, out, err = run("cat", ar, "missing")
    assert (code, out) == (1, "") and err.startswith("barecat cat: ") and "missing" in err
    code, _, err = run("cat", ar, "a")
    assert code == 1 and "directory" in err.lower()


def test_missing_and_corrupt_archives_are_one_line_errors(run: Run, tmp_path: Path) -> None:
    for argv in (["ls"], ["cat", "x"], ["extract"], ["find"], ["du"], ["tree"]):
        code, out, err = run(argv[0], str(tmp_path / "nope"), *argv[1:])
        assert code == 1 and out == "" and err.count("\n") == 1 and "not found" in err.lower()
    bad = tmp_path / "bad.barecat"
    bad.write_bytes(b"this is not an sqlite database" * 100)
    code, _, err = run("ls", str(bad))
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err


def test_help_version_and_usage_errors(run: Run) -> None:
    code, out, _ = run("--help")
    assert code == 0 and "create" in out and "extract" in out
    code, out, _ = run("--version")
    first, kernels = out.splitlines()  # the version as 0.3.1 prints it, then the kernels
    assert code == 0 and first == f"barecat {barecat.__version__}"
    assert kernels == barecat.kernels.describe()
    code, out, _ = run("create", "--help")
    assert code == 0 and "examples:" in out and "--shard-size-limit" in out
    assert run()[0] == 2
    code, _, err = run("frobnicate")
    assert code == 2 and "unknown command 'frobnicate'" in err and "__complete" not in err


# The commands of the reference's CLI documentation (docs/reference/cli.rst), in its order.
REFERENCE_COMMANDS = [
    "create", "add", "extract", "list", "find", "cat", "shell", "browse", "du", "tree", "ncdu",
    "verify", "defrag", "reshard", "merge", "subset", "rsync", "convert", "to-ncdu-json",
    "index-to-csv", "upgrade", "completion-script",
]  # fmt: skip


def test_reference_command_list_matches_its_docs() -> None:
    """The list above is the reference's own: read from its source distribution (the one
    the drop-in gate runs, downloaded once and pinned by sha256)."""
    with tarfile.open(fetch_sdist()) as sdist:
        member = sdist.extractfile(f"barecat-{VERSION}/docs/reference/cli.rst")
        assert member is not None
        text = member.read().decode()
    documented = [line.split()[1] for line in text.splitlines() if line.startswith("barecat ")]
    assert documented == REFERENCE_COMMANDS


def test_every_command_the_reference_documents_has_help(run: Run) -> None:
    for command in REFERENCE_COMMANDS:
        code, out, _ = run(command, "--help")
        assert code == 0 and "usage: barecat" in out, command
    for alias in ("c", "a", "x", "ls", "l", "t"):
        assert run(alias, "--help")[0] == 0


def test_ctrl_c_during_create_keeps_every_reported_file(tmp_path: Path) -> None:
    """Ctrl-C while ``create -v`` runs: every path listed is stored, none twice or cut.

    Deterministic under any load: stdout is a pipe of one page that the test stops
    reading after the first line, so the listing of 20,000 files (180 KB) cannot end and
    the create cannot finish before the interrupt; it lands wherever the process is
    (most often blocked writing its listing).
    """
    src = tmp_path / "src"
    for d in range(40):
        (src / f"d{d:02}").mkdir(parents=True)
        for i in range(500):
            (src / f"d{d:02}/{i:04}").write_bytes(b"%d-%d" % (d, i) * 50)
    ar = str(tmp_path / "ar")
    argv = [BIN / "barecat", "create", "-v", "-j", "1", "-C", str(src), ar, "."]
    with children_take_ctrl_c():
        proc, listing = start_with_one_page_stdout(argv, stderr=subprocess.PIPE)
    with listing:
        first = listing.readline()  # the first commit is done: files are stored
        proc.send_signal(signal.SIGINT)
        rest = listing.read()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"interrupted" in err
    assert first and (first + rest).endswith(b"\n")
    paths = (first + rest).decode().splitlines()
    assert 0 < len(paths) < 20_000 and len(set(paths)) == len(paths)
    with barecat.Barecat(ar) as bc:
        assert bc.verify_integrity()
        stored = set(bc.index.iter_all_filepaths())
        assert set(paths) <= stored and len(stored) < 20_000
        for p in paths[:: max(1, len(paths) // 50)]:
            d, i = p.split("/")
            assert bc[p] == b"%d-%d" % (int(d[1:]), int(i)) * 50


def test_installed_scripts_run(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}

    def sh(*argv: str | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(a) for a in argv], input=stdin, capture_output=True, env=env, cwd=tmp_path
        )

    r = sh("barecat", "create", "-C", src, "main.barecat", ".")
    assert r.returncode == 0, r.stderr
    r = sh("barecat", "ls", "main.barecat", "a")
    assert r.stdout.decode().splitlines() == ["b/", "link_to_file", "x.txt"]
    for module in ("barecat", "barecat.cli"):
        r = sh("python", "-m", module, "cat", "main.barecat", "a/x.txt")
        assert r.stdout == b"hello\n", r.stderr
    r = sh("barecat-create", "--file", "l1", stdin=b"src/a/x.txt\nsrc/private\n")
    assert r.returncode == 0 and b"deprecated" in r.stderr
    r = sh("barecat-create-recursive", "--file", "l2", "--strip-root", src)
    assert r.returncode == 0, r.stderr
    r = sh("barecat-extract", "--file", "l2", "--target-directory", "out")
    assert r.returncode == 0 and tree_state(tmp_path / "out") == tree_state(src)
    r = sh("barecat-extract-single", "--barecat-file", "l1", "--path", "src/private/secret")
    assert r.stdout == b"s"
    rows = sh("barecat-index-to-csv", "l1").stdout.decode().splitlines()
    assert rows[0] == '"path","shard","offset","size","crc32c"'
    assert [row.split(",")[:4] for row in rows[1:]] == [
        ['"src/a/x.txt"', "0", "0", "6"],
        ['"src/private/secret"', "0", "6", "1"],
    ]
    r = sh("barecat-to-ncdu-json", "l1")
    assert r.returncode == 0 and b'"name": "secret"' in r.stdout
    r = sh("barecat-verify", "--quick", "l1")
    assert r.returncode == 0 and r.stdout.startswith(b"Quick check of 2 files OK: ")
    r = sh("barecat-create", "--file", "l1", stdin=b"src/a\n")
    assert r.returncode == 1 and b"exists" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_owners_are_kept_and_restored_as_root(run: Run, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d/f").write_bytes(b"x")
    os.chown(src / "d/f", 1234, 5678)
    os.chown(src / "d", 4321, 8765)
    ar = str(tmp_path / "ar")
    assert run("create", "-C", str(src), ar, ".")[0] == 0
    with barecat.Barecat(ar) as bc:
        f, d = bc.stat("d/f"), bc.stat("d")
        assert (f.uid, f.gid, d.uid, d.gid) == (1234, 5678, 4321, 8765)
    assert run("extract", ar, "-C", str(tmp_path / "o1"))[0] == 0
    st = os.stat(tmp_path / "o1/d/f")
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert os.stat(tmp_path / "o1/d").st_uid == 4321
    assert run("extract", ar, "--no-same-owner", "-C", str(tmp_path / "o2"))[0] == 0
    assert os.stat(tmp_path / "o2/d/f").st_uid == 0


def test_verify_reports_damage_with_exit_code(run: Run, make_archive) -> None:  # type: ignore[no-untyped-def]
    ar = make_archive({"a": b"first file", "b/c": b"second file" * 100})
    code, out, _ = run("verify", ar)
    assert code == 0 and out.startswith("Verified 2 files")
    with barecat.Barecat(ar) as bc:
        where = bc.index.lookup_file("a")
        shard_file = bc.sharder.get_shard_path(where.shard or 0)
    with open(shard_file, "r+b") as f:
        f.seek((where.offset or 0) + 2)
        f.write(b"X")
    code, out, err = run("verify", ar)  # findings on stdout (as md5sum -c), verdict on stderr
    assert code == 1 and out == "a: CRC32C mismatch\n" and "1 bad files" in err
    code, out, _ = run("verify", "--quick", ar)  # the last file is intact
    assert code == 0 and "quick" in out


def test_extract_refuses_an_archive_with_parent_paths(run: Run, tmp_path: Path) -> None:
    """The reference stores '../' paths; extracting such an archive must write nothing."""
    ar = str(tmp_path / "evil")
    made_by_reference(ar, {"fine/file": b"ok", "../escaped": b"gotcha"})
    out = tmp_path / "deep" / "out"
    code, _, err = run("extract", ar, "-C", str(out))
    assert code == 1 and "outside" in err
    assert not (tmp_path / "deep" / "escaped").exists() and not out.exists()


@pytest.mark.parametrize("system_dir", ["/usr/share/zoneinfo", "/usr/share/doc"])
def test_system_trees_survive_create_and_extract(run: Run, tmp_path: Path, system_dir: str) -> None:
    """Real trees full of file and directory links (absolute ones too) come back equal."""
    if not os.path.isdir(system_dir) or not any(Path(system_dir).rglob("*")):
        pytest.skip(f"{system_dir} is not on this machine")
    ar = str(tmp_path / "sys.barecat")
    code, _, err = run("create", "-q", ar, system_dir)
    assert (code, err) == (0, "")
    out = tmp_path / "out"
    code, _, err = run("extract", "-q", ar, "-C", str(out), "--allow-outside-links")
    assert (code, err) == (0, "")
    extracted = out / system_dir.lstrip("/")
    diff = subprocess.run(
        ["diff", "-r", "--no-dereference", system_dir, str(extracted)], capture_output=True
    )
    assert diff.returncode == 0, diff.stdout[:2000]
    assert tree_state(extracted) == tree_state(Path(system_dir))


def test_progress_ends_on_the_totals_and_one_summary_line(tmp_path: Path) -> None:
    """As a person sees it: each long command's bar ends on every file and byte (a tar
    member over 1 MiB, stored from its stream, counted too), then one summary line."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(300):
        (src / f"f{i:03}").write_bytes(b"z" * 3000)
    (src / "big").write_bytes(b"b" * 1_500_000)  # 2,400,000 bytes in all
    os.mkfifo(src / "fifo")  # not stored: skipped, and said so
    ar, barecat_cmd = tmp_path / "ar", BIN / "barecat"
    number = r"\d+\.\d"

    drawn = on_a_terminal([barecat_cmd, "create", "-C", src, ar, "."])
    assert drawn.code == 0
    bar, skipped, summary = drawn.lines
    assert skipped.endswith("/fifo: not a regular file, directory or link; skipped")
    assert bar.startswith("create: 100%") and "301/301" in bar and "2.4 MB]" in bar
    assert re.fullmatch(
        rf"added 301 files, 2.4 MB and 1 directory to {ar} in {number} s "
        r"\(skipped 1: 1 special file\)",
        summary,
    ), drawn.lines

    drawn = on_a_terminal([barecat_cmd, "extract", ar, "-C", tmp_path / "o"])
    *_, bar, summary = drawn.lines
    assert drawn.code == 0 and "301/301" in bar and "2.4 MB]" in bar
    assert re.fullmatch(
        rf"extracted 301 files, 2.4 MB into {tmp_path / 'o'} in {number} s", summary
    )

    with tarfile.open(tmp_path / "src.tar", "w") as tar:
        tar.add(src / "big", "big")
        tar.add(src / "f000", "f000")
    drawn = on_a_terminal([barecat_cmd, "convert", tmp_path / "src.tar", tmp_path / "c"])
    *_, bar, summary = drawn.lines
    assert drawn.code == 0 and bar.startswith("convert: 2 files") and bar.endswith(", 1.5 MB]")
    assert summary.startswith(f"converted 2 files, 1.5 MB into {tmp_path / 'c'} in ")

    drawn = on_a_terminal([barecat_cmd, "extract", "-q", ar, "-C", tmp_path / "p"])
    assert (drawn.code, drawn.raw) == (0, "")


def test_result_lines_say_how_long_on_a_terminal_only(run: Run, tmp_path: Path) -> None:
    """verify, defrag and reshard end with their result sentence on stdout, worded as
    0.3.1 words it for a script (a pipe), with the time it took for a person (a
    terminal)."""
    ar, barecat_cmd = str(tmp_path / "ar"), BIN / "barecat"
    with barecat.Barecat(ar, readonly=False) as bc:
        for i in range(40):
            bc[f"d/{i:02}"] = bytes([i]) * 5000
        for i in range(0, 40, 2):
            del bc[f"d/{i:02}"]  # holes for defrag to close
    code, out, _ = run("verify", ar)
    assert (code, out) == (0, "Verified 20 files (98KB), all checksums OK.\n")
    took = r" in \d+\.\d s\."
    drawn = on_a_terminal([barecat_cmd, "verify", ar], stdout_too=True)
    assert drawn.code == 0
    assert re.fullmatch(r"Verified 20 files \(98KB\), all checksums OK" + took, drawn.lines[-1])
    drawn = on_a_terminal([barecat_cmd, "defrag", "-q", ar], stdout_too=True)
    assert drawn.code == 0 and drawn.lines[-1].startswith(f"Defragmented {ar}: 20 file moves")
    assert re.search(took + "$", drawn.lines[-1]), drawn.lines
    drawn = on_a_terminal([barecat_cmd, "reshard", "-q", "-s", "50KB", ar], stdout_too=True)
    assert drawn.code == 0 and drawn.lines[-1].startswith(f"Resharded {ar} to shards")
    assert re.search(took + "$", drawn.lines[-1]), drawn.lines


def test_summaries_count_what_was_left_out_by_reason(tmp_path: Path) -> None:
    """extract: links pointing outside, named, hinted, then counted in the summary;
    rsync: its own summary after the names it lists on stdout."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a" * 1200)
    os.symlink("/etc/passwd", src / "out1")
    os.symlink("../../x", src / "out2")
    ar, barecat_cmd = tmp_path / "ar", BIN / "barecat"
    assert on_a_terminal([barecat_cmd, "create", "-q", "-C", src, ar, "."]).code == 0
    drawn = on_a_terminal([barecat_cmd, "extract", ar, "-C", tmp_path / "o"])
    assert drawn.code == 1 and "2 symbolic links pointing outside" in drawn.lines[-2]
    assert re.fullmatch(
        rf"extracted 1 file, 1.2 kB into {tmp_path / 'o'} in \d+\.\d s "
        r"\(skipped 2: 2 link outside\)",
        drawn.lines[-1],
    ), drawn.lines
    drawn = on_a_terminal([barecat_cmd, "rsync", "-v", f"{ar}::", tmp_path / "r"])
    assert drawn.code == 1 and drawn.stdout == "ar/\nar/a\n"
    assert re.fullmatch(
        rf"synced 2 files, 1.2 kB to {tmp_path / 'r'} in \d+\.\d s \(skipped 2: 2 invalid path\)",
        drawn.lines[-1],
    ), drawn.lines


@pytest.mark.parametrize(
    "argv",
    [
        ["repair"],
        ["defrag"],
        ["reshard", "-s", "1M"],
        ["verify"],
        ["digest", "--reset"],
        ["shell", "-w", "-c", "ls"],
    ],
)
def test_commands_on_a_missing_archive_create_nothing(
    run: Run, tmp_path: Path, argv: list[str]
) -> None:
    missing = str(tmp_path / "mistyped.barecat")
    code, _, err = run(*argv, missing)
    assert code == 1 and "not found" in err and missing in err
    assert os.listdir(tmp_path) == []
