"""The two values the engine readers and writers are built from
(``integrations/selection.py``): which files (``FileSelection``) and which archive, where,
with which key (``ArchiveLocation``). Real archives; no engine and no pyarrow needed."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import barecat
from barecat.integrations.selection import ArchiveLocation, FileSelection
from helpers import PASSPHRASE
from helpers.engines import build


def test_a_selection_made_of_arguments_is_frozen_and_hashable() -> None:
    chosen = FileSelection.of("a/**", "size > ?", [10], ["path", "size"], True)
    assert chosen == FileSelection("a/**", "size > ?", (10,), ("path", "size"), True)
    assert hash(chosen) == hash(FileSelection.of("a/**", "size > ?", (10,), ("path", "size"), True))
    assert FileSelection.of(None, None, (), None, False) == FileSelection()
    with pytest.raises(AttributeError):
        chosen.pattern = "b/**"  # type: ignore[misc]


def test_a_location_opens_the_archive_with_its_key_and_never_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "a.barecat"
    build(str(path), {"d/x": b"x" * 10}, passphrase=PASSPHRASE)
    location = ArchiveLocation.of(path, PASSPHRASE)
    assert location.path == str(path) and PASSPHRASE not in repr(location)
    assert ArchiveLocation.of(location) is location
    assert ArchiveLocation("s3://b/a", storage_options={"anon": True}) != ArchiveLocation(
        "s3://b/a"
    )
    with location.open() as bc:
        assert bc["d/x"] == b"x" * 10
        with pytest.raises(barecat.BarecatError):
            bc["d/y"] = b"y"  # opened read-only
    with ArchiveLocation.of(path).open() as bc, pytest.raises(barecat.BarecatError):
        bc["d/x"]  # no key
    again = pickle.loads(pickle.dumps(location))  # travels to workers as it is
    with again.open(lookup_table=False) as bc:
        assert bc["d/x"] == b"x" * 10


def test_no_archive_there_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.barecat")
    with pytest.raises(barecat.FileNotFoundBarecatError, match="none"):
        ArchiveLocation(missing).open()
