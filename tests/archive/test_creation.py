"""Creating and opening archives loses nothing: a kill at any step of creation leaves no
archive or a whole empty one, no writer makes an index over shards it does not own, and a
create that fails before storing anything leaves no files behind.

Real processes are killed (SIGKILL, at each statement SQLite starts), real SQLite files and
shards are checked, and the command line runs in-process except where a missing package
must be simulated in a process of its own.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import CorruptIndexBarecatError
from barecat.index import connection
from helpers import Run
from helpers.reference import reference_python

BIN = Path(sys.executable).parent


def _fingerprint(paths: list[Path]) -> dict[str, str | None]:
    """What each path holds (None: missing), to show that nothing was changed."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths
    }


def _killed_at(path: str, step: int, spill: bool) -> bool:
    """Create the archive ``path`` in a forked process that SIGKILLs itself as SQLite
    starts its ``step``-th statement; True if it was killed (False: it finished first).

    ``spill``: a one-page cache, so SQLite writes pages into the index before the
    commit and a kill leaves a hot journal to roll back.
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            real_connect, started = connection.connect, itertools.count(1)

            def kill_at_step(_: str) -> None:
                if next(started) == step:
                    os.kill(os.getpid(), signal.SIGKILL)

            def connect(*args: object, **kwargs: object) -> object:
                conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
                if spill:
                    conn.execute("PRAGMA cache_size = 1")
                conn.set_trace_callback(kill_at_step)
                return conn

            connection.connect = connect  # type: ignore[assignment]
            barecat.Barecat(path, readonly=False).close()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _check_recovery(run: Run, state: Path, src: Path, whole: bool = True) -> str:
    """Readers see no archive or an empty one (``whole``: with its root) in the state a
    kill left in ``state``; ``repair`` and ``create --resume`` (each on its own copy)
    make it whole. Returns "none" or "empty", what readers saw."""
    ar = str(state / "ar")
    try:
        with barecat.Barecat(ar) as bc:
            assert len(bc) == 0 and (not whole or bc.listdir("") == [])
        seen = "empty"
    except CorruptIndexBarecatError as e:  # never taken for another layout or schema
        assert ar in str(e)
        seen = "none"
    repaired = state.with_name(state.name + "-repaired")
    shutil.copytree(state, repaired)
    code, _, err = run("repair", str(repaired / "ar"))
    assert code == 0, err
    with barecat.Barecat(str(repaired / "ar")) as bc:
        assert len(bc) == 0 and bc.listdir("") == [] and bc.verify_integrity()
    code, _, err = run("create", "--resume", "-C", str(src), ar, ".")
    assert (code, err) == (0, ""), err
    with barecat.Barecat(ar) as bc:
        assert dict(bc.items()) == {"a.txt": b"a", "d/b.txt": b"bb"} and bc.verify_integrity()
    return seen


def _small_tree(root: Path) -> Path:
    (root / "d").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"a")
    (root / "d/b.txt").write_bytes(b"bb")
    return root


@pytest.mark.parametrize("spill", [False, True], ids=["cached", "spilled"])
@pytest.mark.slow
def test_a_kill_at_any_step_of_creation_leaves_nothing_or_a_whole_archive(
    run: Run, tmp_path: Path, spill: bool
) -> None:
    src = _small_tree(tmp_path / "src")
    seen = []
    hot_journals = 0
    for step in itertools.count(1):
        state = tmp_path / f"step{step:03}"
        state.mkdir()
        if not _killed_at(str(state / "ar"), step, spill):
            break  # the creation ran to its end: every statement was a kill point
        journal, index = state / "ar-journal", state / "ar"
        hot_journals += journal.exists() and journal.stat().st_size > 0 < index.stat().st_size
        seen.append(_check_recovery(run, state, src))
    assert step > 20  # every statement of the schema was one
    assert "none" in seen and "empty" in seen
    assert not spill or hot_journals > 0  # SQLite had to roll a creation back


REFERENCE_KILLER = textwrap.dedent(
    """
    import itertools, os, signal, sqlite3, sys
    import barecat

    def killed_at(path, step):
        pid = os.fork()
        if pid == 0:
            started, real_connect = itertools.count(1), sqlite3.connect
            def kill_at_step(_):
                if next(started) == step:
                    os.kill(os.getpid(), signal.SIGKILL)
            def connect(*args, **kwargs):
                conn = real_connect(*args, **kwargs)
                conn.set_trace_callback(kill_at_step)
                return conn
            sqlite3.connect = connect
            try:
                barecat.Barecat(path, readonly=False).close()
            finally:
                os._exit(0)
        return os.WIFSIGNALED(os.waitpid(pid, 0)[1])

    for step in itertools.count(1):
        state = os.path.join(sys.argv[1], f"step{step:03}")
        os.makedirs(state)
        if not killed_at(os.path.join(state, "ar"), step):
            print(step - 1)
            break
    """
)


@pytest.mark.slow
def test_what_a_kill_leaves_of_the_references_creation_is_recovered(
    run: Run, tmp_path: Path
) -> None:
    """barecat 0.3.1 makes its schema one statement at a time: killed at each one, it
    leaves tables without a version, or without indexes, triggers or a root. Readers
    never take that for the 2023 layout (an index with a version but no root opens as
    an empty archive); repair and create --resume make it whole."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    killer = subprocess.run(
        [reference_python(), "-c", REFERENCE_KILLER, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    steps = int(killer.stdout)
    assert steps > 20
    src = _small_tree(tmp_path / "src")
    seen = [
        _check_recovery(run, tmp_path / f"step{step:03}", src, whole=False)
        for step in range(1, steps + 1)
    ]
    assert "none" in seen


def test_readers_name_an_unfinished_index(tmp_path: Path) -> None:
    import sqlite3

    from barecat.index.known_schema import KNOWN_OBJECTS

    ar = tmp_path / "ar"
    with sqlite3.connect(ar) as conn:  # the first statement of the old creation
        conn.execute(KNOWN_OBJECTS["table", "files"][0])  # (schema.sql's files table)
    with pytest.raises(CorruptIndexBarecatError, match="unfinished barecat index"):
        barecat.Barecat(str(ar))


def _archive_with_big_shard(tmp_path: Path) -> tuple[str, list[Path]]:
    """An archive of 10 MB and a small file, and the paths of its index and shard."""
    ar = tmp_path / "ar"
    with barecat.Barecat(str(ar), readonly=False) as bc:
        bc["big"] = os.urandom(10 << 20)
        bc["small"] = b"abc"
    return str(ar), [ar, tmp_path / "ar-shard-00000"]


@pytest.mark.parametrize("index", ["empty", "missing", "not-sqlite", "other-sqlite"])
def test_no_writer_makes_an_index_over_shards_that_hold_data(
    run: Run, tmp_path: Path, index: str
) -> None:
    """An index lost (0 bytes, deleted, overwritten) beside shards that hold data: every
    command and the API refuse to write, in one line naming the index, and change no
    byte; readers say it is no barecat index. Once the shards are gone, a 0-byte or
    missing index is a new archive (a ``touch``ed file, or what a kill before the schema
    leaves)."""
    ar, parts = _archive_with_big_shard(tmp_path)
    if index == "empty":
        os.truncate(ar, 0)
    elif index == "missing":
        os.remove(ar)
    elif index == "not-sqlite":
        Path(ar).write_bytes(b"not an index\n" * 100)
    else:
        os.remove(ar)
        import sqlite3

        with sqlite3.connect(ar) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
    new = tmp_path / "new.txt"
    new.write_bytes(b"new")
    before, names = _fingerprint(parts), sorted(os.listdir(tmp_path))
    commands = [
        ["add", "-c", ar, str(new)],
        ["create", "--resume", ar, str(new)],
        ["repair", ar],
        ["ls", ar],
    ]
    if index != "missing":  # (add without -c says there is no archive)
        commands.append(["add", ar, str(new)])
    for argv in commands:
        code, _, err = run(*argv)
        assert code == 1 and err.count("\n") == 1 and ar in err, (argv, err)
        assert "barecat index" in err or "not found" in err
        assert _fingerprint(parts) == before and sorted(os.listdir(tmp_path)) == names, argv
    with pytest.raises(CorruptIndexBarecatError, match="barecat index"):
        barecat.Barecat(ar, readonly=False)
    assert _fingerprint(parts) == before and sorted(os.listdir(tmp_path)) == names
    if index in ("empty", "missing"):  # without shards, a 0-byte or missing index is new
        os.remove(parts[1])
        assert run("add", "-c", ar, str(new))[0] == 0
        with barecat.Barecat(ar) as bc:
            assert dict(bc.items()) == {str(new).lstrip("/"): b"new"}


OPEN_AND_STORE = textwrap.dedent(
    """
    import json, sys
    for module in sys.argv[3:]:
        sys.modules[module] = None  # as if it were not installed
    import barecat
    try:
        with barecat.Barecat(sys.argv[1], readonly=False, **json.loads(sys.argv[2])) as bc:
            bc.add("dir", dir=True)
            bc["dir/file"] = b"data" * 100
    except Exception as e:
        print(type(e).__name__, e)
    """
)


@pytest.mark.parametrize(
    ("options", "missing"),
    [
        ({"compression": "bogus"}, []),
        ({"compression": "zstd", "compression_level": 99}, []),
        ({"compression": "lz4"}, ["lz4"]),
        ({"passphrase": "pw"}, ["cryptography"]),
        ({"shard_size_limit": "12Q"}, []),
    ],
    ids=["unknown-codec", "bad-level", "no-lz4", "no-cryptography", "bad-limit"],
)
@pytest.mark.parametrize("before", ["nothing", "empty-index"])
def test_a_create_that_fails_leaves_nothing_behind(
    tmp_path: Path, options: dict[str, object], missing: list[str], before: str
) -> None:
    """Bad option values and missing packages fail ``Barecat(..., readonly=False)`` at
    open, before anything is stored; the files are as before (a 0-byte index stays 0
    bytes), so the corrected call works."""
    ar = tmp_path / "ar"
    if before == "empty-index":
        ar.touch()
    names = sorted(os.listdir(tmp_path))

    def open_and_store(options: dict[str, object], missing: list[str]) -> str:
        argv = [sys.executable, "-c", OPEN_AND_STORE, str(ar), json.dumps(options), *missing]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    assert open_and_store(options, missing)  # an error
    assert sorted(os.listdir(tmp_path)) == names
    assert before == "nothing" or ar.stat().st_size == 0
    assert open_and_store({}, []) == ""
    with barecat.Barecat(str(ar)) as bc:
        assert dict(bc.items()) == {"dir/file": b"data" * 100}


def test_a_with_block_that_raises_before_storing_leaves_no_archive(tmp_path: Path) -> None:
    new, kept, old = (str(tmp_path / name) for name in ("new", "kept", "old"))
    with pytest.raises(RuntimeError), barecat.Barecat(new, readonly=False):
        raise RuntimeError("before anything is stored")
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError), barecat.Barecat(kept, readonly=False) as bc:
        bc["a"] = b"a"
        raise RuntimeError("after a file is stored")
    with barecat.Barecat(kept) as bc:
        assert dict(bc.items()) == {"a": b"a"}
    barecat.Barecat(old, readonly=False).close()  # an empty archive, made on purpose
    with pytest.raises(RuntimeError), barecat.Barecat(old, readonly=False):
        raise RuntimeError("an archive this open did not make is never removed")
    with barecat.Barecat(old) as bc:
        assert len(bc) == 0


@pytest.mark.parametrize(
    ("argv", "corrected"),
    [
        (["create", "AR", "SRC/missing"], ["create", "AR", "SRC"]),
        (
            ["create", "-j", "2", "AR", "SRC/gone", "SRC/missing"],
            ["create", "-j", "2", "AR", "SRC"],
        ),
        (["add", "-c", "AR", "SRC/missing"], ["add", "-c", "AR", "SRC"]),
        (["create", "--compress", "zstd", "--level", "99", "AR", "SRC"], ["create", "AR", "SRC"]),
    ],
    ids=["bad-source", "bad-sources-in-processes", "add-c-bad-source", "bad-level"],
)
def test_a_failed_create_command_leaves_nothing_and_the_corrected_one_works(
    run: Run, tmp_path: Path, argv: list[str], corrected: list[str]
) -> None:
    src = _small_tree(tmp_path / "src")
    ar = str(tmp_path / "ar")

    def filled(args: list[str]) -> list[str]:
        return [a.replace("AR", ar).replace("SRC", str(src)) for a in args]

    code, _, err = run(*filled(argv))
    assert code == 1 and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["src"], err
    code, _, err = run(*filled(corrected))
    assert (code, err) == (0, "")
    with barecat.Barecat(ar) as bc:
        assert len(bc) == 2
    if "--level" not in argv:  # with a source that works too, the rest is stored and kept
        mixed = [a.replace("AR", "AR2") for a in argv] + ["SRC/a.txt"]
        assert run(*filled(mixed))[0] == 1
        with barecat.Barecat(ar + "2") as bc:
            assert len(bc) == 1


def test_failed_creates_by_scripts_and_without_a_package_leave_nothing(tmp_path: Path) -> None:
    """The legacy ``barecat-create`` with a bad path, and ``barecat create --compress
    lz4`` where lz4 is not installed: one error, no files; corrected, both work."""
    _small_tree(tmp_path / "src")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}

    def sh(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=tmp_path)

    r = sh("barecat-create", "--file", "l1", stdin=b"src/missing\n")
    assert r.returncode == 1 and b"src/missing" in r.stderr
    without_lz4 = "import sys; sys.modules['lz4'] = None; from barecat.cli import main; "
    r = sh(sys.executable, "-c", without_lz4 + "sys.exit(main(sys.argv[1:]))",
           "create", "--compress", "lz4", "l2", "src")  # fmt: skip
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"lz4" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["src"]
    assert sh("barecat-create", "--file", "l1", stdin=b"src/a.txt\n").returncode == 0
    assert sh("barecat", "create", "l2", "src").returncode == 0
    for name in ("l1", "l2"):
        with barecat.Barecat(str(tmp_path / name)) as bc:
            assert bc["src/a.txt"] == b"a"
