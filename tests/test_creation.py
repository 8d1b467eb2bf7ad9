"""Creating and opening archives loses nothing: a kill at any step of creation leaves no
archive or a whole empty one, and no writer makes an index over shards it does not own.

Real processes are killed (SIGKILL, at each statement SQLite starts), real SQLite files and
shards are checked, and the command line runs in-process.
"""

from __future__ import annotations

import hashlib
import itertools
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
from conftest import Run, reference_python

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

    ar = tmp_path / "ar"
    with sqlite3.connect(ar) as conn:  # the first statement of the old creation
        conn.execute("CREATE TABLE files (path TEXT NOT NULL, shard INTEGER, offset INTEGER)")
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
