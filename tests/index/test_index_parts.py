"""The index as a set of parts: a write through a read-only index is a type error (mypy
refuses it) and a run-time ``ReadOnlyBarecatError``; barecat 0.3.1's names all stay on
``barecat.Index``; no class ladder in ``barecat.index`` deeper than one base."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
import barecat.index
from barecat.index import Index, ReadOnlyIndex
from helpers import REPO
from helpers.reference import reference_env, reference_python

NOT_PROVIDED = {"check_merge_conflicts", "find_space"}
"""0.3.1 names barecat does not offer (its own merge checks conflicts in the
merge, and places files itself); ``tests/compat/expected_failures.txt`` has the tests."""
NOT_PROVIDED |= {"iterglob_infos_incl_excl", "raw_iterglob_infos_incl_excl"}

_QUIET = ("--follow-imports=silent", "--ignore-missing-imports")
"""Only the snippet's own errors (barecat is checked by the lint step)."""

_SNIPPET = """\
import barecat
from barecat.index import Index, ReadOnlyIndex

info = barecat.BarecatFileInfo(path="f", shard=0, offset=0, size=0)


def through_a_reader(bc: barecat.Barecat, ro: ReadOnlyIndex) -> None:
    bc.index.edits.add_file(info)  # line 8
    ro.add_file(info)  # line 9
    ro.edits.remove_file("f")  # line 10
    with ro.bulk_mode():  # (the connection part's: allowed, refused at run time)
        pass


def through_a_writer(w: Index) -> None:
    w.edits.add_file(info)
    w.add_file(info)
    w.edits.rename("f", "g")
"""


def test_a_write_through_a_read_only_index_is_a_type_error(tmp_path: Path) -> None:
    snippet = tmp_path / "writes.py"
    snippet.write_text(_SNIPPET)
    env = {**os.environ, "MYPYPATH": os.path.join(REPO, "src")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *_QUIET, str(snippet)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    errors = [
        line
        for line in result.stdout.splitlines()
        if ": error:" in line and line.startswith(snippet.name)
    ]
    lines = sorted(int(line.split(":")[1]) for line in errors)
    assert lines == [8, 9, 10], result.stdout


def test_a_write_through_a_read_only_index_raises_read_only(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"f": b"1"})
    info = barecat.BarecatFileInfo(path="g", shard=0, offset=0, size=0)
    with barecat.Barecat(path) as bc:
        assert type(bc.index) is ReadOnlyIndex and not hasattr(bc.index, "edits")
        for write in (
            lambda: bc.index.add_file(info),  # type: ignore[misc]
            lambda: bc.index.add_files([info]),
            lambda: bc.index.remove_file("f"),  # type: ignore[misc]
            lambda: bc.index.update_treestats(),  # type: ignore[misc]
        ):
            with pytest.raises(barecat.ReadOnlyBarecatError, match="read-only"):
                write()
    with Index(barecat.layout.index_path(path), readonly=True) as index:  # 0.3.1's read-only
        with pytest.raises(barecat.ReadOnlyBarecatError, match="read-only"):
            index.add_file(info)
        with pytest.raises(barecat.ReadOnlyBarecatError, match="read-only"):
            index.edits.rename("f", "h")
    with pytest.raises(barecat.BarecatError, match="opens read-only"):
        ReadOnlyIndex(barecat.layout.index_path(path), readonly=False)
    with barecat.Barecat(path, readonly=False) as bc:
        assert type(bc.index) is Index
        bc.index.edits.rename("f", "h")  # type: ignore[attr-defined]
        assert bc.index.lookups.isfile("h") and not bc.index.isfile("f")


def test_the_reference_index_names_are_all_on_barecat_index() -> None:
    listed = subprocess.run(
        [reference_python(), "-c", "import barecat; print(' '.join(dir(barecat.Index)))"],
        capture_output=True,
        text=True,
        env=reference_env(),
        check=True,
    ).stdout.split()
    reference = {name for name in listed if not name.startswith("_")}
    assert len(reference) > 60
    missing = sorted(reference - NOT_PROVIDED - set(dir(barecat.Index)))
    assert not missing


def test_every_reference_name_answers_on_an_open_index(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"d/f": b"12"})
    with barecat.Barecat(path, readonly=False) as bc:
        index = bc.index
        assert index.iter_all_fileinfos(barecat.Order.PATH, 100).__next__().path == "d/f"
        assert list(index.iterdir_names("d", barecat.Order.ANY, 10)) == ["f"]
        assert index.listdir_names("") == ["d"]
        assert [i.path for i in index.list_direct_fileinfos("d")] == ["d/f"]
        assert list(index.iterglob_paths("**", True, False, 5, True)) == ["d/f"]
        assert list(index.raw_iterglob_paths_multi(["d/*"], barecat.Order.ANY, True, 9)) == ["d/f"]
        assert [i.path for i in index.raw_iterglob_infos("d*", False, 9)] == ["d", "d/f"]
        assert [s[0].path for s in index.walk_infos("", 3)] == ["", "d"]
        assert index.conn.execute("SELECT count(*) FROM files").fetchone()[0] == 1
        assert index.num_files == 1 and index.verify_integrity()
        index.shard_size_limit = 1 << 20
        assert index.connection.shard_size_limit == 1 << 20


def _index_classes() -> list[type]:
    found = []
    for module in pkgutil.iter_modules(barecat.index.__path__, "barecat.index."):
        loaded = importlib.import_module(module.name)
        classes = inspect.getmembers(loaded, inspect.isclass)
        found += [c for _, c in classes if c.__module__ == module.name]
    return [c for c in found if not getattr(c, "_is_protocol", False)]


def test_no_class_of_the_index_has_more_than_one_base_of_its_own() -> None:
    for cls in _index_classes():
        own = [c for c in cls.__mro__[1:] if c.__module__.startswith("barecat.index")]
        assert len(own) <= 1, f"{cls.__name__}: {[c.__name__ for c in own]}"
    defines = [
        c.__name__ for c in _index_classes() if inspect.isfunction(vars(c).get("settled_conn"))
    ]
    assert defines == ["IndexConnection"]
