"""kill -9 of ``-f`` (``overwrite=True``): an archive replaced by a new one is, at every
moment, the old archive or the new one, whole, whatever runs next.

The replacing process is stopped right after each step of the replace (each link,
rename and removal from the first that touches the target's names, counted in the child
by a prelude that wraps those calls and then waits forever) and SIGKILLed there: a state
reached, never a time. Then the next build of the same target runs and is killed as it
starts its own build (after it removed what dead builds left), and only then is the
target opened: it must be exactly the old archive or the new one (the new one once the
replace's plan was durable), and verify. Both ways in: ``create -f`` (the API's
``overwrite=True``) and ``merge -f -o`` (a build under a temporary name); and a target
under 0.3.1's naming (``ARCHIVE-sqlite-index``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import barecat
from barecat.layout import OLD_INDEX_SUFFIX, archive_exists, lookup_table_path
from helpers import BARECAT
from helpers.killing import (
    Child,
    appeared,
    barecat_cli,
    barecat_with,
    contents,
    finish,
    hidden_leftovers,
    kill_at,
    printed,
)

pytestmark = pytest.mark.slow

Files = dict[str, bytes]

STOP_AFTER_STEP = """
import os, threading
_name = os.environ["BARECAT_TEST_TARGET"]
_stop_at = int(os.environ["BARECAT_TEST_STOP_AT"])
_steps = [0, False]
def _of_target(args):
    names = [os.path.basename(os.fspath(a)) for a in args if isinstance(a, (str, os.PathLike))]
    return any(n == _name or n.startswith((_name + "-", "." + _name + ".replace")) for n in names)
def _counted(call):
    def step(*args, **kwargs):
        result = call(*args, **kwargs)
        _steps[1] = _steps[1] or _of_target(args)
        if _steps[1]:
            _steps[0] += 1
            if _steps[0] == _stop_at:
                print("stopped", flush=True)
                threading.Event().wait()
        return result
    return step
os.link, os.replace, os.rename = _counted(os.link), _counted(os.replace), _counted(os.rename)
os.remove, os.unlink = _counted(os.remove), _counted(os.unlink)
"""
"""Counts the steps of a replace (each link, rename and removal from the first one that
touches the target's own names: the journal's link) and stops the process after step
``$BARECAT_TEST_STOP_AT``, printing ``stopped``."""

PLAN_DURABLE_AT = 3
"""The first step after which the new archive is the one that stays: 1 links the
(empty) journal, 2 removes its draft name, then the plan is written and 3 moves the old
index aside."""


def random_files(prefix: str, n: int, seed: int) -> Files:
    rng = random.Random(seed)
    return {f"{prefix}/{i:04d}": rng.randbytes(300 + i % 700) for i in range(n)}


def build(path: str, files: Files, old_naming: bool = False) -> str:
    """An archive of ``files`` in three shards (and a lookup table), under 0.3.1's
    naming if asked."""
    with barecat.Barecat(path, readonly=False, shard_size_limit="8K") as bc:
        bc.add_many(files.items())
    with barecat.Barecat(path, lookup_table=True):
        pass  # a reader saves the table: one file more to move
    if old_naming:
        os.remove(lookup_table_path(path))
        os.rename(path, path + OLD_INDEX_SUFFIX)
    return path


def staging(target: str) -> Callable[[Child], str]:
    folder, name = os.path.split(target)
    return lambda child: os.path.join(folder, f".{name}.partial-{child.pid}")


SCENARIOS = [("create", False), ("create", True), ("merge", False)]


@pytest.mark.parametrize(("command", "old_naming"), SCENARIOS)
def test_a_replace_killed_at_every_step_leaves_the_old_or_the_new_archive(
    tmp_path: Path, command: str, old_naming: bool
) -> None:
    old = random_files("old", 60, 1)
    new = random_files("new", 40, 2)
    newer = random_files("newer", 10, 3)
    sources = tmp_path / "sources"
    sources.mkdir()

    def argv_making(files: Files, name: str) -> list[str]:
        if command == "merge":
            src = build(str(sources / f"{name}.barecat"), files)
            return ["merge", "-q", "-f", "-s", "8K", "-o", "{target}", src]
        root = sources / name
        for path, data in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        return ["create", "-q", "-f", "-j", "1", "-s", "8K", "-C", str(root), "{target}", "."]

    making_new, making_newer = argv_making(new, "new"), argv_making(newer, "newer")
    step, finished = 0, False
    while not finished:
        step += 1
        folder = tmp_path / f"step{step}"
        folder.mkdir()
        target = str(folder / "ar.barecat")
        build(target, old, old_naming)
        argv = [*barecat_with(STOP_AFTER_STEP), *(a.format(target=target) for a in making_new)]
        env = {"BARECAT_TEST_STOP_AT": str(step), "BARECAT_TEST_TARGET": "ar.barecat"}
        killed = kill_at(argv, printed(1), env=env)
        finished = not killed.cut_short
        if finished:
            assert contents(target) == new
            assert hidden_leftovers(str(folder)) == []
            break
        assert archive_exists(target), f"no archive after step {step}"
        # the next build of the target starts (and dies) before anyone opens it
        again = [BARECAT, *(a.format(target=target) for a in making_newer)]
        assert kill_at(again, appeared(staging(target))).cut_short
        got = contents(target)
        assert got == (new if step >= PLAN_DURABLE_AT else old), f"after step {step}"
        assert barecat_cli("verify", "-q", target) == 0
        assert not os.path.exists(target + OLD_INDEX_SUFFIX) or got == old
        finish([BARECAT, *(a.format(target=target) for a in making_new)], target, new)
        assert hidden_leftovers(str(folder)) == [], f"after step {step}"
    assert step > 10  # the replace had that many steps to die at (3 old shards, 2 new)
