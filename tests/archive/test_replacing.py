"""``overwrite=True`` (and every ``-f``) replaces an archive whole: the old one serves
until the new one is complete, and a kill at any step of putting the new one in place
leaves the old or the new one, which the next open finishes (``layout.replace_archive``).

Real processes (forked, SIGKILLed after the chosen step of the replace), real archives;
the kill suite (``tests/interop/test_kill9_replace.py``) does the same to ``barecat``
commands, with the next build run before anyone opens the target.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

import barecat
from barecat import layout
from barecat.exceptions import ArchiveLockedBarecatError
from barecat.layout import OLD_INDEX_SUFFIX, archive_exists

Files = dict[str, bytes]
OLD: Files = {f"old/{i:03d}": b"%d-old;" % i * (20 + i) for i in range(60)}
NEW: Files = {f"new/{i:03d}": b"%d-new;" % i * (30 + i) for i in range(40)}


def build(path: str, files: Files, old_naming: bool = False) -> str:
    with barecat.Barecat(path, readonly=False, shard_size_limit="4K") as bc:
        bc.add_many(files.items())
    if old_naming:  # (0.3.1 kept no lookup table)
        Path(layout.lookup_table_path(path)).unlink(missing_ok=True)
        os.rename(path, path + OLD_INDEX_SUFFIX)
    return path


def contents(path: str) -> Files:
    with barecat.Barecat(path) as bc:
        assert bc.verify_integrity()
        return dict(bc.items())


def hidden(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


@pytest.mark.parametrize("old_naming", [False, True], ids=["current", "sqlite-index"])
def test_the_old_archive_serves_until_the_new_one_is_closed(
    tmp_path: Path, old_naming: bool
) -> None:
    target = build(str(tmp_path / "ar"), OLD, old_naming)
    with barecat.Barecat(target, readonly=False, overwrite=True, shard_size_limit="4K") as bc:
        bc.add_many(NEW.items())
        bc.commit()
        assert bc.path == target and len(bc) == len(NEW)
        assert contents(target) == OLD  # readers see the old archive, whole
        with pytest.raises(ArchiveLockedBarecatError):
            barecat.Barecat(target, readonly=False)  # and no other writer takes it
    assert contents(target) == NEW
    assert not os.path.exists(target + OLD_INDEX_SUFFIX)  # the old naming went with it
    assert hidden(tmp_path) == []


def test_a_replacement_left_holding_nothing_leaves_the_old_archive(tmp_path: Path) -> None:
    target = build(str(tmp_path / "ar"), OLD)
    with pytest.raises(RuntimeError), barecat.Barecat(target, readonly=False, overwrite=True):
        raise RuntimeError("failed before storing anything")
    assert contents(target) == OLD and hidden(tmp_path) == []
    with barecat.Barecat(target, readonly=False, overwrite=True):
        pass  # closed holding nothing: the new, empty archive replaces the old one
    assert contents(target) == {} and hidden(tmp_path) == []


def test_overwrite_without_an_archive_there_builds_in_place(tmp_path: Path) -> None:
    target = str(tmp_path / "ar")
    with barecat.Barecat(target, readonly=False, overwrite=True) as bc:
        bc["a"] = b"1"
        assert os.path.exists(target)  # (no old one to keep: built where it goes)
    assert contents(target) == {"a": b"1"}


def _replace_killed_after(target: str, step: int, old_naming: bool) -> bool:
    """A forked process replaces the archive at ``target`` (holding ``OLD``) by one of
    ``NEW`` and SIGKILLs itself right after ``step``-th link, rename or removal of the
    replace (counted from the first that touches the target's names); True if killed
    (False: the replace had fewer steps)."""
    build(target, OLD, old_naming)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            name, count = os.path.basename(target), [0, False]

            def counted(call: Callable[..., object]) -> Callable[..., object]:
                def step_of_replace(*args: object) -> object:
                    result = call(*args)
                    names = [os.path.basename(os.fspath(a)) for a in args]  # type: ignore[arg-type]
                    count[1] = count[1] or any(
                        n == name or n.startswith((name + "-", f".{name}.replace")) for n in names
                    )
                    count[0] += count[1]
                    if count[0] == step:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return result

                return step_of_replace

            os.link, os.replace, os.remove = map(counted, (os.link, os.replace, os.remove))  # type: ignore[assignment]
            with barecat.Barecat(target, readonly=False, overwrite=True) as bc:
                bc.add_many(NEW.items())
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


@pytest.mark.parametrize("old_naming", [False, True], ids=["current", "sqlite-index"])
@pytest.mark.parametrize("next_one", ["reader", "build"])
def test_a_replace_killed_at_any_step_is_finished_by_the_next_open(
    tmp_path: Path, old_naming: bool, next_one: str
) -> None:
    """Killed once the plan is durable (its third step on), the new archive is the one
    there; before, the old one; whichever comes next (a reader, or a build of the same
    target, which removes what dead builds left) sees it whole and deletes neither."""
    step = 0
    while True:
        step += 1
        folder = tmp_path / f"step{step}"
        folder.mkdir()
        target = str(folder / "ar")
        if not _replace_killed_after(target, step, old_naming):
            break
        assert archive_exists(target), f"no archive after step {step}"
        if next_one == "build":
            layout.remove_abandoned_builds(target)  # what a next build does first
        assert contents(target) == (NEW if step >= 3 else OLD), f"after step {step}"
        with barecat.Barecat(target, readonly=False, overwrite=True) as bc:
            bc["again"] = b"1"  # the next replace removes what is left of the dead one
        assert contents(target) == {"again": b"1"} and hidden(folder) == [], f"step {step}"
    assert step > 12  # that many steps to die at (5 shards, 3 shards)


def test_no_replace_of_an_archive_a_writer_holds(tmp_path: Path) -> None:
    """``merge -f`` (a build under a temporary name) and ``overwrite=True`` both take
    the old archive's writer lock first: an archive open for writing is not replaced
    under its writer, whose next adds would go to deleted files."""
    target = build(str(tmp_path / "ar"), OLD)
    source = build(str(tmp_path / "src"), NEW)
    with barecat.Barecat(target, readonly=False) as writer:
        with pytest.raises(ArchiveLockedBarecatError):
            barecat.merge([source], target, overwrite=True)
        with pytest.raises(ArchiveLockedBarecatError):
            barecat.Barecat(target, readonly=False, overwrite=True)
        writer["added"] = b"kept"
    assert contents(target) == {**OLD, "added": b"kept"} and hidden(tmp_path) == []
    barecat.merge([source], target, overwrite=True)
    assert contents(target) == NEW and hidden(tmp_path) == []
