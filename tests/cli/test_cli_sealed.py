"""Sealed (compressed, encrypted) archives through every command of the command line."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import crc32c
import pytest

import barecat
from helpers import BIN, PASSPHRASE, Run
from helpers.killing import check_after_kill, finish, kill_at, printed
from helpers.trees import make_numbered_tree, make_tree, tree_state


@pytest.fixture
def encrypted(run: Run, tmp_path: Path, pw_file: str) -> tuple[str, Path]:
    """An encrypted, zstd-compressed archive made by ``barecat create`` from a tree."""
    src = make_tree(tmp_path / "src")
    archive = str(tmp_path / "enc.barecat")
    code, _, err = run(
        "create", "-q", "--compress", "zstd", "--encrypt", "--passphrase-file", pw_file,
        "-C", str(src), archive, ".",
    )  # fmt: skip
    assert code == 0, err
    return archive, src


def detached(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``barecat ARGV`` in a new session: no controlling terminal to prompt on."""
    return subprocess.run(
        [sys.executable, "-m", "barecat.cli", *argv],
        capture_output=True,
        text=True,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )


def test_create_stores_sealed_files_and_listing_needs_no_key(
    run: Run, encrypted: tuple[str, Path]
) -> None:
    archive, src = encrypted
    with open(archive + "-shard-00000", "rb") as f:
        assert (src / "a/b/big.bin").read_bytes()[:64] not in f.read()
    with barecat.Barecat(archive) as bc:
        assert bc.encrypted and bc.stat("a/b/big.bin").size == 3 << 20
    code, out, err = run("ls", "-l", archive, "a/b")  # (link targets would need the key)
    assert code == 0, err
    big_line = next(line for line in out.splitlines() if line.endswith(" big.bin"))
    assert f" {3 << 20} " in big_line  # the file's own length, not its sealed one
    for argv in (
        ("find", archive, "-name", "*.txt"),
        ("tree", archive),
        ("du", archive),
        ("index-to-csv", archive),
        ("to-ncdu-json", archive),
        ("ls", "-l", archive, "a"),  # a link: shown locked
    ):
        code, out, err = run(*argv)
        assert code == 0 and out, (argv, err)
    assert "link_to_file -> (encrypted)" in out


def test_reading_contents_asks_for_the_passphrase(
    run: Run, encrypted: tuple[str, Path], pw_file: str, tmp_path: Path
) -> None:
    archive, src = encrypted
    no_key = detached("cat", archive, "a/x.txt", env={"BARECAT_PASSPHRASE": ""})
    assert no_key.returncode == 1
    assert "a passphrase is needed: --passphrase-file FILE or $BARECAT_PASSPHRASE" in no_key.stderr
    wrong = detached("cat", archive, "a/x.txt", env={"BARECAT_PASSPHRASE": "nope"})
    assert wrong.returncode == 1 and "Wrong passphrase for this archive" in wrong.stderr
    by_env = detached("cat", archive, "a/x.txt", env={"BARECAT_PASSPHRASE": PASSPHRASE})
    assert by_env.returncode == 0 and by_env.stdout == "hello\n"
    out_dir = tmp_path / "out"
    code, _, err = run("extract", "--passphrase-file", pw_file, archive, "-C", str(out_dir))
    assert code == 0, err
    assert tree_state(out_dir) == tree_state(src)


def test_verify_checks_crcs_without_the_key_and_tags_with_it(
    run: Run, encrypted: tuple[str, Path], pw_file: str
) -> None:
    archive, _ = encrypted
    code, out, err = run("verify", archive)
    assert code == 0 and "all checksums OK." in out and "only the checksums" in err
    code, out, _ = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 0 and "every file authenticated" in out
    # forge: flip a stored byte and give the index the CRC of the forged bytes
    with barecat.Barecat(archive, lookup_table=False) as bc:
        f = bc.index.lookup_file("a/b/big.bin")
    start, size = f.offset or 0, f.stored_size
    with open(archive + "-shard-00000", "r+b") as shard:
        shard.seek(start + size // 2)
        byte = shard.read(1)
        shard.seek(start + size // 2)
        shard.write(bytes([byte[0] ^ 0x40]))
        shard.seek(start)
        forged = crc32c.crc32c(shard.read(size))
    with sqlite3.connect(archive) as conn:
        conn.execute("UPDATE files SET crc32c = ? WHERE path = 'a/b/big.bin'", (forged,))
    with contextlib.suppress(FileNotFoundError):
        os.remove(archive + "-lookup")
    code, out, _ = run("verify", archive)
    assert code == 0  # the checksum was forged with the bytes: only the tag can tell
    code, out, err = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 1
    assert "a/b/big.bin: a/b/big.bin: block" in out and "fails authentication" in out


def test_rekey_from_files_and_from_the_environment(
    run: Run, encrypted: tuple[str, Path], pw_file: str, tmp_path: Path
) -> None:
    archive, _ = encrypted
    new_file = tmp_path / "new.txt"
    new_file.write_text("second passphrase\n")
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("not it\n")
    code, _, err = run(
        "rekey", "--passphrase-file", str(wrong), "--new-passphrase-file", str(new_file), archive
    )
    assert code == 1 and "Wrong passphrase" in err
    code, out, err = run(
        "rekey", "--passphrase-file", pw_file, "--new-passphrase-file", str(new_file), archive
    )
    assert code == 0 and "Changed the passphrase" in out, err
    assert detached("cat", archive, "a/x.txt", env={"BARECAT_PASSPHRASE": PASSPHRASE}).returncode
    third = detached(
        "rekey",
        archive,
        env={"BARECAT_PASSPHRASE": "second passphrase", "BARECAT_NEW_PASSPHRASE": "third"},
    )
    assert third.returncode == 0, third.stderr
    got = detached("cat", archive, "a/x.txt", env={"BARECAT_PASSPHRASE": "third"})
    assert got.stdout == "hello\n"
    plain = tmp_path / "plain.barecat"
    with barecat.Barecat(str(plain), readonly=False) as bc:
        bc["f"] = b"1"
    code, _, err = run("rekey", "--new-passphrase-file", str(new_file), str(plain))
    assert code == 1 and "not encrypted" in err


def test_maintenance_commands_move_sealed_bytes(
    run: Run, encrypted: tuple[str, Path], pw_file: str, tmp_path: Path
) -> None:
    archive, src = encrypted
    expected = tree_state(src)
    with barecat.Barecat(archive, readonly=False, passphrase=PASSPHRASE) as bc:
        bc.remove("a/x.txt")  # a hole for defrag
    steps = [
        ("defrag", archive),
        ("reshard", "-s", "4M", archive),
        ("repair", archive),
        (
            "subset",
            "--pattern",
            "a/**",
            "-o",
            str(tmp_path / "sub.barecat"),
            archive,
            "--passphrase-file",
            pw_file,
        ),
        ("merge", "-o", str(tmp_path / "merged.barecat"), archive, "--passphrase-file", pw_file),
        ("upgrade", archive),
    ]
    for argv in steps:
        code, out, err = run(*argv)
        assert code == 0, (argv, out, err)
    assert "already at schema 1.3, nothing to do" in out
    for name, selected in (("enc", None), ("sub", "a/"), ("merged", None)):
        path = archive if name == "enc" else str(tmp_path / f"{name}.barecat")
        out_dir = tmp_path / f"out-{name}"
        code, _, err = run("extract", "--passphrase-file", pw_file, path, "-C", str(out_dir))
        assert code == 0, err
        got = tree_state(out_dir)
        want = {
            k: v
            for k, v in expected.items()
            if k != "a/x.txt" and (selected is None or k.startswith(selected) or k == "a")
        }
        assert {k: v for k, v in got.items() if v[0] != "dir"} == {
            k: v for k, v in want.items() if v[0] != "dir"
        }
    other = tmp_path / "other.barecat"
    with barecat.Barecat(str(other), readonly=False, passphrase="another key") as bc:
        bc["z"] = b"z"
    mixed = str(tmp_path / "mixed.barecat")
    code, _, err = run("merge", "-o", mixed, archive, str(other), "--passphrase-file", pw_file)
    assert code == 1 and "not encrypted with the same key" in err
    # taking encrypted files keeps the target's index digest, so it needs the passphrase
    code, _, err = run("merge", "-f", "-o", mixed, archive)
    assert code == 1 and "a passphrase is needed" in err


def test_convert_seals_unseals_and_exports(run: Run, tmp_path: Path, pw_file: str) -> None:
    src = make_tree(tmp_path / "src")
    tar_path = tmp_path / "in.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(src, arcname=".")
    sealed = str(tmp_path / "sealed.barecat")
    code, _, err = run(
        "convert", "-q", "--encrypt", "--compress", "lz4", "--passphrase-file", pw_file,
        str(tar_path), sealed,
    )  # fmt: skip
    assert code == 0, err
    with barecat.Barecat(sealed) as bc:
        assert bc.encrypted
    plain = str(tmp_path / "plain.barecat")
    code, _, err = run("convert", "-q", "--passphrase-file", pw_file, sealed, plain)
    assert code == 0, err
    with barecat.Barecat(plain) as bc:
        assert not bc.sealed and bc["a/x.txt"] == b"hello\n"
        assert bc.index.schema_version == (0, 3)  # the reference reads this copy
    resealed = str(tmp_path / "zstd.barecat")
    code, _, err = run("convert", "-q", "--compress", "zstd", plain, resealed)
    assert code == 0, err
    out_tar = tmp_path / "out.tar"
    code, _, err = run("convert", "-q", "--passphrase-file", pw_file, sealed, str(out_tar))
    assert code == 0, err
    with tarfile.open(out_tar) as tar:
        big = tar.extractfile("a/b/big.bin")
        assert big is not None and big.read() == (src / "a/b/big.bin").read_bytes()
    code, _, err = run("convert", "--wrap", "--encrypt", str(tar_path), str(tmp_path / "w.barecat"))
    assert code == 1 and "--wrap keeps the input's bytes as they are" in err
    for archive in (plain, resealed):
        out_dir = tmp_path / f"out-{Path(archive).stem}"
        assert run("extract", archive, "-C", str(out_dir))[0] == 0
        assert without_mtimes(tree_state(out_dir)) == without_mtimes(tree_state(src))


def without_mtimes(state: dict[str, tuple[object, ...]]) -> dict[str, tuple[object, ...]]:
    """(Python's tarfile, which made the input here, keeps whole seconds only.)"""
    return {path: v[:2] + v[3:] for path, v in state.items()}


def test_add_shell_and_rsync_on_an_encrypted_archive(
    run: Run, encrypted: tuple[str, Path], pw_file: str, tmp_path: Path
) -> None:
    archive, src = encrypted
    more = tmp_path / "more"
    more.mkdir()
    (more / "new.txt").write_bytes(b"added later\n")
    code, _, err = run("add", "-q", "--passphrase-file", pw_file, archive, "-C", str(more), ".")
    assert code == 0, err
    code, out, err = run(
        "shell", "--passphrase-file", pw_file, "-w", "-c", "cat new.txt; mv new.txt moved.txt",
        archive,
    )  # fmt: skip
    assert code == 0 and out == "added later\n", err
    code, _, err = run(
        "rsync", "--passphrase-file", pw_file, f"{archive}:a/b/", str(tmp_path / "r")
    )
    assert code == 0, err
    assert (tmp_path / "r/big.bin").read_bytes() == (src / "a/b/big.bin").read_bytes()
    with barecat.Barecat(archive, passphrase=PASSPHRASE) as bc:
        assert bc["moved.txt"] == b"added later\n" and not bc.exists("new.txt")
        assert bc.verify_seals() == []


def test_rsync_by_checksum_into_an_encrypted_archive_is_idempotent(
    run: Run, encrypted: tuple[str, Path], pw_file: str
) -> None:
    archive, src = encrypted
    argv = ("rsync", "-c", "-v", "--passphrase-file", pw_file, f"{src}/a/", f"{archive}:a/")
    code, out, err = run(*argv)
    assert code == 0, err
    assert out == ""  # same contents: the sealed files' checksums are of their contents
    (src / "a/x.txt").write_bytes(b"HELLO\n")  # same size, same mtime: only -c sees it
    with barecat.Barecat(archive) as bc:
        mtime = bc.stat("a/x.txt").mtime_ns
    os.utime(src / "a/x.txt", ns=(mtime, mtime))
    code, out, err = run(*argv)
    assert code == 0 and "x.txt" in out, err
    with barecat.Barecat(archive, passphrase=PASSPHRASE) as bc:
        assert bc["a/x.txt"] == b"HELLO\n"


def test_create_with_a_trained_dictionary(run: Run, tmp_path: Path) -> None:
    src = tmp_path / "labels"
    src.mkdir()
    for i in range(2000):
        (src / f"{i:05d}.json").write_text(
            f'{{"id": {i}, "label": "{["cat", "dog", "bird"][i % 3]}", "score": 0.{i:04d}}}'
        )
    sizes = {}
    for name, extra in (("zstd", ()), ("dict", ("--dictionary", "--dictionary-size", "8K"))):
        archive = str(tmp_path / f"{name}.barecat")
        code, _, err = run(
            "create", "-q", "--compress", "zstd", *extra, archive, "-C", str(src), "."
        )
        assert code == 0, err
        code, out, _ = run("cat", archive, "01234.json")
        assert out == (src / "01234.json").read_text()
        sizes[name] = os.path.getsize(archive + "-shard-00000")
    assert sizes["dict"] < sizes["zstd"] * 0.8
    code, _, err = run("create", "--compress", "lz4", "--dictionary", str(tmp_path / "x"), str(src))
    assert code == 1 and "--dictionary is for zstd" in err


@pytest.mark.parametrize("sealing", [("--compress", "lz4"), ("--encrypt", "--dictionary")])
def test_create_with_several_processes_seals_like_one(
    tmp_path: Path, pw_file: str, sealing: tuple[str, ...]
) -> None:
    """``create -j 3`` of a sealed archive: the parts share the output's settings, data key
    and dictionary, so their bytes read (and authenticate) in the joined archive."""
    src = tmp_path / "src"
    files = make_numbered_tree(src, dirs=6, per_dir=40)
    archives = {}
    for jobs in ("1", "3"):
        archives[jobs] = str(tmp_path / f"j{jobs}.barecat")
        done = detached(
            "create", "-q", "-j", jobs, "-s", "64K", *sealing, "--passphrase-file", pw_file,
            "-C", str(src), archives[jobs], ".",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    key = PASSPHRASE if "--encrypt" in sealing else None
    with (
        barecat.Barecat(archives["1"], passphrase=key) as one,
        barecat.Barecat(archives["3"], passphrase=key) as three,
    ):
        assert three.sealed and three.encrypted == one.encrypted
        assert three.index.sealing_config().keys() == one.index.sealing_config().keys()
        assert {p: three[p] for p in three} == {p: one[p] for p in one} == files
        assert three.sharder.num_shards >= 3  # at least one shard from each part
        assert three.verify_integrity() and three.verify_seals() == []
    if key is not None:
        wrong = detached("cat", archives["3"], next(iter(files)), env={"BARECAT_PASSPHRASE": "no"})
        assert wrong.returncode == 1 and "passphrase" in wrong.stderr.lower()


@pytest.mark.parametrize("sealed", [False, True])
def test_the_many_machines_recipe_of_the_readme(tmp_path: Path, sealed: bool) -> None:
    """Two concurrent "nodes" each add a share of a file list to a part (a copy of one
    template when sealed), and ``merge --symlink`` joins the parts."""
    src = tmp_path / "src"
    files = make_numbered_tree(src, dirs=4, per_dir=30)
    listed = sorted(files)
    env = {"BARECAT_PASSPHRASE": PASSPHRASE} if sealed else {}  # (given: must be encrypted)
    template = str(tmp_path / "template.barecat")
    if sealed:
        assert (
            detached("create", "--compress", "zstd", "--encrypt", template, env=env).returncode == 0
        )
    nodes = []
    for k in range(2):
        share = tmp_path / f"share-{k}"
        share.write_text("".join(p + "\n" for p in listed[k::2]))
        part = str(tmp_path / f"part-{k}.barecat")
        if sealed:
            shutil.copyfile(template, part)
        else:
            assert detached("create", part, env=env).returncode == 0
        nodes.append(subprocess.Popen(
            [sys.executable, "-m", "barecat.cli", "add", part, "-C", str(src), "-T", str(share)],
            env={**os.environ, **env}, start_new_session=True,
        ))  # fmt: skip
    assert [node.wait() for node in nodes] == [0, 0]
    out = str(tmp_path / "ds.barecat")
    parts = [str(tmp_path / f"part-{k}.barecat") for k in range(2)]
    merged = detached("merge", "--symlink", "-o", out, *parts, env=env)
    assert merged.returncode == 0, merged.stderr
    assert detached("verify", out, env=env).returncode == 0
    assert all(os.path.islink(f"{out}-shard-{i:05d}") for i in range(2))
    with barecat.Barecat(out, passphrase=PASSPHRASE if sealed else None) as bc:
        assert bc.encrypted == sealed
        assert {p: bc[p] for p in bc} == files


@pytest.mark.slow
def test_kill_during_an_encrypted_create_keeps_committed_files(tmp_path: Path) -> None:
    """SIGKILL a sealed create after its first commit: what -v listed is there, decrypts,
    and ``--resume`` (with the passphrase) adds exactly the rest."""
    src = tmp_path / "src"
    expected = make_numbered_tree(src, 20, 400)
    archive = str(tmp_path / "killed.barecat")
    env = {"BARECAT_PASSPHRASE": PASSPHRASE}
    argv = [str(BIN / "barecat"), "create", "-q", "-v", "-j", "1", "--compress", "zstd",
            "--encrypt", "-C", str(src), archive, "."]  # fmt: skip
    killed = kill_at(argv, printed(1), env)  # the first commit is done: kill right after it
    assert killed.cut_short
    kept = check_after_kill(archive, {p: expected[p] for p in killed.lines}, env=env)
    assert kept is not None and all(expected[p] == data for p, data in kept.items())
    with barecat.Barecat(archive, passphrase=PASSPHRASE) as bc:
        assert bc.verify_seals() == []
    finish([*argv[:2], "--resume", *argv[2:]], archive, expected, env)


def on_a_terminal(argv: list[str], answers: list[str]) -> tuple[int, str]:
    """Run ``barecat ARGV`` with a pseudo-terminal as its controlling terminal, typing
    each of ``answers`` after a prompt ending in ': '; returns (exit code, screen)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: the pty is its terminal
        os.execv(str(BIN / "barecat"), [str(BIN / "barecat"), *argv])
    screen = b""
    answered = 0  # where the screen stood when the last answer was typed
    pending = list(answers)
    while True:
        if not select.select([master], [], [], 60)[0]:
            os.kill(pid, 9)
            pytest.fail(f"no output for 60 s; the screen so far: {screen!r}")
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
        if pending and screen[answered:].rstrip().endswith(b":"):
            os.write(master, pending.pop(0).encode() + b"\n")
            answered = len(screen)
    os.close(master)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), screen.decode("utf-8", "replace")


def test_passphrases_typed_at_the_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "note.txt").write_text("typed\n")
    archive = str(tmp_path / "t.barecat")
    for name in ("BARECAT_PASSPHRASE", "BARECAT_NEW_PASSPHRASE"):
        monkeypatch.delenv(name, raising=False)
    code, screen = on_a_terminal(
        ["create", "-q", "--encrypt", archive, "-C", str(src), "."], ["open sesame", "typo"]
    )
    assert code == 1 and "New passphrase:" in screen and "Repeat it:" in screen
    assert "the two passphrases differ" in screen
    code, screen = on_a_terminal(
        ["create", "-q", "-f", "--encrypt", archive, "-C", str(src), "."],
        ["open sesame", "open sesame"],
    )
    assert code == 0, screen
    code, screen = on_a_terminal(["cat", archive, "note.txt"], ["open sesame"])
    assert code == 0 and "Passphrase:" in screen and "typed" in screen
    assert "open sesame" not in screen  # not echoed
    code, screen = on_a_terminal(["ls", archive], [])
    assert code == 0 and "Passphrase" not in screen and "note.txt" in screen
