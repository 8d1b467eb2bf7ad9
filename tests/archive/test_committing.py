"""Time commits: a writer that idles has its changes committed by its background
committer, a failed commit is never swallowed, and transactions tell callers waiting for
their changes whether they were committed (real archives, threads, forks, full disks)."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import barecat
from barecat.archive.state import COMMIT_EVERY_FILES
from barecat.exceptions import NotEnoughSpaceBarecatError
from helpers import wait_for
from helpers.disks import fill, small_tmpfs


def committed(path: str) -> dict[str, bytes]:
    """What a reader sees: the committed files."""
    with barecat.Barecat(path) as reader:
        return dict(reader.items())


def committers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "barecat-commit"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "2m") as disk:
        yield disk


def test_an_idle_writer_commits_once_its_changes_are_due(archive_path: str) -> None:
    """Changes made and then left alone are committed after ``commit_interval``, with no
    further call: a reader sees them while the writer idles, and ``on_commit`` tells of
    the commit (from the committer's thread)."""
    called: list[str] = []
    with barecat.Barecat(archive_path, readonly=False, commit_interval=0.2) as bc:
        bc.on_commit = lambda: called.append(threading.current_thread().name)
        files = {f"d/f{i}": bytes([i]) * i for i in range(100)}
        for path, data in files.items():
            bc[path] = data
        wait_for(lambda: committed(archive_path) == files, "the idle writer's commit", 10)
        assert called == ["barecat-commit"]
        assert bc.index.find_inconsistencies() == []  # statistics owed were applied first
    assert committers() == []  # close stopped it


def test_a_busy_writer_commits_every_interval(archive_path: str) -> None:
    """A writer that adds without pause commits by time too: its committer marks the
    changes due when an add holds the writer, and the next add commits them."""
    commits: list[int] = []
    with barecat.Barecat(archive_path, readonly=False, commit_interval=0.01) as bc:
        bc.on_commit = lambda: commits.append(len(bc))
        i = 0
        while len(commits) < 3:
            bc[f"f{i}"] = b"x"
            i += 1
    assert commits[2] < 3 * COMMIT_EVERY_FILES  # not by count


def test_a_lowered_interval_takes_effect_at_once(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False, commit_interval=3600) as bc:
        bc["a"] = b"1"
        bc.commit_interval = 0.1
        wait_for(lambda: committed(archive_path) == {"a": b"1"}, "the commit", 10)


def test_a_writer_shared_by_threads_commits_what_each_added(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False, threadsafe=True, commit_interval=0.1) as bc:

        def add(k: int) -> None:
            for i in range(50):
                bc[f"t{k}/f{i}"] = b"x" * i

        threads = [threading.Thread(target=add, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_for(lambda: len(committed(archive_path)) == 200, "the commit of every thread's files")


def test_a_forked_child_inherits_no_committer(archive_path: str) -> None:
    """The child has no committer thread and closing its copy neither hangs nor commits;
    the parent's committer carries on."""
    with barecat.Barecat(archive_path, readonly=False, commit_interval=0.1) as bc:
        bc["a"] = b"1"
        assert committers()
        with warnings.catch_warnings():  # (Python 3.12 warns of a fork with threads)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            code = 1
            try:
                bc.close()
                code = 0 if not committers() else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        bc["b"] = b"2"
        wait_for(lambda: committed(archive_path) == {"a": b"1", "b": b"2"}, "the commit", 10)


def test_a_failed_background_commit_is_raised_by_the_next_change(small_disk: Path) -> None:
    """The disk fills while changes wait: the background commit fails and rolls them back;
    the writer's next change raises that (naming what was lost), what was committed stays,
    and once space is free the writer goes on."""
    path = str(small_disk / "a.barecat")
    with barecat.Barecat(path, readonly=False, commit_interval=0.2) as bc:
        bc["kept"] = b"committed"
        bc.commit()
        before = bc.transaction
        for i in range(20):
            bc[f"lost/{i}"] = b"y" * 100
        filler = fill(small_disk)
        wait_for(lambda: bc.transaction > before, "the failed background commit", 10)
        with pytest.raises(NotEnoughSpaceBarecatError, match="not stored"):
            bc["next"] = b"z"
        filler.unlink()
        bc["after"] = b"written after the failure"
    assert committed(path) == {"kept": b"committed", "after": b"written after the failure"}
    with barecat.Barecat(path) as bc:
        assert bc.verify_integrity() and bc.index.find_inconsistencies() == []


def _open_in_this_process(path: str) -> list[str]:
    """The archive's files this process still holds open."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(path):
            names.append(target)
    return names


def test_close_raises_a_failed_background_commit_and_still_closes(small_disk: Path) -> None:
    """A background commit that failed and was not yet reported is raised by ``close()``,
    which closes everything anyway: no descriptor stays open, the writer lock is free."""
    path = str(small_disk / "a.barecat")
    bc = barecat.Barecat(path, readonly=False, commit_interval=0.2)
    bc["kept"] = b"committed"
    bc.commit()
    before = bc.transaction
    bc["lost"] = b"y" * 100
    filler = fill(small_disk)
    wait_for(lambda: bc.transaction > before, "the failed background commit", 10)
    with pytest.raises(NotEnoughSpaceBarecatError, match="not stored"):
        bc.close()
    assert repr(bc).endswith("closed)") and _open_in_this_process(path) == []
    filler.unlink()
    with barecat.Barecat(path, readonly=False) as again:  # the lock was released
        assert dict(again.items()) == {"kept": b"committed"}


def test_a_failed_last_commit_closes_the_descriptors(small_disk: Path) -> None:
    path = str(small_disk / "a.barecat")
    bc = barecat.Barecat(path, readonly=False, commit_interval=3600)
    bc["kept"] = b"committed"
    bc.commit()
    for i in range(50):
        bc[f"lost/{i}"] = b"y" * 100
    filler = fill(small_disk)
    with pytest.raises(NotEnoughSpaceBarecatError) as failed:
        bc.close()
    assert _open_in_this_process(path) == []
    assert "not stored" in str(failed.value)
    filler.unlink()
    assert committed(path) == {"kept": b"committed"}


def test_commit_transaction_shares_commits_and_reports_lost_ones(small_disk: Path) -> None:
    """A transaction already committed returns at once; an open one is committed; one
    rolled back after a failure raises, and so does every later ask for it."""
    path = str(small_disk / "a.barecat")
    with barecat.Barecat(path, readonly=False, commit_interval=3600) as bc:
        with bc.exclusive():
            bc["a"] = b"1"
            first = bc.transaction
        with bc.exclusive():
            bc["b"] = b"2"
            assert bc.transaction == first  # one open transaction holds both
        bc.commit_transaction(first)
        assert committed(path) == {"a": b"1", "b": b"2"}
        done = bc.transaction
        bc.commit_transaction(first)  # committed already: nothing to do
        assert bc.transaction == done
        with bc.exclusive():
            bc["c"] = b"3" * 1000
            doomed = bc.transaction
        filler = fill(small_disk)
        with pytest.raises(NotEnoughSpaceBarecatError):
            bc.commit_transaction(doomed)
        for _ in range(2):
            with pytest.raises(NotEnoughSpaceBarecatError, match="not stored"):
                bc.commit_transaction(doomed)
        filler.unlink()
        bc["d"] = b"4"
        bc.commit_transaction(bc.transaction)
    assert committed(path) == {"a": b"1", "b": b"2", "d": b"4"}


def test_a_full_disk_that_rolls_the_transaction_back_leaves_the_statistics_right(
    small_disk: Path,
) -> None:
    """A run of single adds defers its directory statistics; when a statement on a full
    disk makes SQLite roll the whole transaction back, what it owed is dropped with it,
    so the writer goes on with right statistics."""
    path = str(small_disk / "a.barecat")
    with barecat.Barecat(path, readonly=False, commit_interval=3600) as bc:
        bc["base/kept"] = b"k"
        bc.commit()
        filler = None
        with pytest.raises(NotEnoughSpaceBarecatError, match="rolled the open transaction"):
            for i in range(100_000):  # (empty files: only the index, and its journal, grow)
                bc[f"d{i % 7}/sub/{'long name ' * 20}{i}"] = b""
                if i == 200:
                    filler = fill(small_disk)
        assert filler is not None
        filler.unlink()
        bc["e/f"] = b"after"
        assert set(bc) == {"base/kept", "e/f"}  # the run's files went with the transaction
        bc.commit()
        assert bc.index.find_inconsistencies() == []
    with barecat.Barecat(path) as bc:
        assert bc.verify_integrity() and bc.index.find_inconsistencies() == []
