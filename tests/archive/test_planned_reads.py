"""The plan of a selection's files (``Barecat.plan_files``: the index's
``IndexListing.planned``, typed rows) and the reader of planned addresses
(``Barecat.planned_reader``: the shards alone, no index). Real archives, plain and
sealed; no engine needed."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

import barecat
from barecat.selection import FileSelection
from helpers import PASSPHRASE
from helpers.engines import build


@pytest.mark.parametrize("options", [{}, {"compression": "zstd", "passphrase": PASSPHRASE}])
def test_planned_rows_name_their_fields_and_read_back(tmp_path: Path, options: dict) -> None:
    path = str(tmp_path / "a.barecat")
    files = {f"d{i % 3}/f{i:03d}.bin": bytes([i]) * (i * 7) for i in range(40)}
    build(path, files, **options)
    with barecat.Barecat(path, passphrase=options.get("passphrase")) as bc:
        rows = bc.plan_files(FileSelection("d1/**", "size > ?", (50,)))
        reader = bc.planned_reader()
        infos = {p: bc.lookup_file(p) for p in files}

    def stored(p: str) -> int:  # what ``size`` is in SQL: a sealed file's sealed length
        return infos[p].sealed_size or 0 if options else infos[p].size

    chosen = sorted(p for p in files if p.startswith("d1/") and stored(p) > 50)
    assert chosen
    assert sorted(r.path for r in rows) == chosen
    assert [(r.shard, r.offset) for r in rows] == sorted((r.shard, r.offset) for r in rows)
    for row in rows:
        info = infos[row.path]
        assert (row.shard, row.offset, row.crc32c) == (info.shard, info.offset, info.crc32c)
        assert row.mtime_ns == info.mtime_ns
        if options:  # sealed: the stored length and the file's own size
            assert (row.stored, row.size) == (info.sealed_size, len(files[row.path]))
        else:
            assert (row.stored, row.size) == (len(files[row.path]), None)
    again = pickle.loads(pickle.dumps(reader))  # as a worker gets it: no index opened
    read = again.read([row[:5] for row in rows])
    assert read == [files[r.path] for r in rows]


def test_path_order_and_a_pattern_that_matches_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"b/1.jpg": b"x", "a/1.jpg": b"y", "a/1.json": b"z"})
    with barecat.Barecat(path) as bc:
        by_path = bc.plan_files(FileSelection(), by_path=True)
        assert [r.path for r in by_path] == ["a/1.jpg", "a/1.json", "b/1.jpg"]
        assert bc.plan_files(FileSelection("../x")) == []
        assert bc.plan_files(FileSelection("a/")) == []  # a directory, not files
        assert [r.path for r in bc.plan_files(FileSelection("a/1.json"))] == ["a/1.json"]


def test_a_damaged_chosen_row_is_named_and_a_bad_condition_raises(tmp_path: Path) -> None:
    path = str(tmp_path / "a.barecat")
    build(path, {"good/one.bin": b"1" * 10, "bad/two.bin": b"2" * 10})
    with sqlite3.connect(path) as conn:  # a size that is text: the row addresses nothing
        conn.execute("UPDATE files SET size = 'big' WHERE path = 'bad/two.bin'")
    conn.close()
    with barecat.Barecat(path) as bc:
        with pytest.raises(barecat.DamagedEntryBarecatError, match=r"bad/two\.bin"):
            bc.plan_files(FileSelection())
        assert [r.path for r in bc.plan_files(FileSelection("good/*"))] == ["good/one.bin"]
        with pytest.raises(sqlite3.Error):
            bc.plan_files(FileSelection(where="no_such_column = 1"))
