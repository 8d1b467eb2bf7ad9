"""The lookup table: answers like SQLite, saved beside the index, never stale, never wrong."""

from __future__ import annotations

import os
import shutil

import pytest

import barecat
from barecat.layout import lookup_table_path


def table_file(path: str) -> str:
    return lookup_table_path(path)


def test_lookup_table_answers_like_sqlite(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"d{i % 9}/f{i}": os.urandom(i % 50) for i in range(3000)}
    files["empty"] = b""
    path = make_archive(files)
    for loaded in (True, False):
        if not loaded:
            os.remove(table_file(path))
        with (
            barecat.Barecat(path, lookup_table=True) as fast,
            barecat.Barecat(path, lookup_table=False) as slow,
        ):
            assert fast.index.lookup_table_size == len(files)
            for p in [*list(files)[::7], "nope", "d1", "d1/f1/x"]:
                assert fast.index.lookup_address(p) == slow.index.lookup_address(p)
            assert all(fast[p] == d for p, d in files.items())
            some = [*list(files)[::11], "empty", "d2/f2"]
            assert fast.get_many(some) == slow.get_many(some) == [files[p] for p in some]
            with pytest.raises(KeyError):
                fast.get_many(["d1/f1", "nope"])
            with pytest.raises(KeyError):
                fast["d1"]


def test_a_new_archive_leaves_a_table_the_next_reader_uses_at_once(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"x/{i}": bytes([i % 256]) * (i % 7) for i in range(500)}
    path = make_archive(files)
    assert os.path.getsize(table_file(path)) <= 64 + 32 * len(files) + 24  # 32 bytes a file
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == len(files)
        assert all(bc[p] == d for p, d in files.items())


def test_lookup_table_builds_itself_after_enough_lookups(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({f"f{i}": bytes([i % 256]) for i in range(100)}, lookup_table=False)
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None
        for _ in range(100):
            for i in range(100):
                assert bc[f"f{i}"] == bytes([i % 256])
        assert bc.index.lookup_table_size == 100
    assert os.path.exists(table_file(path))  # saved for the next reader ...
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == 100  # ... which has it from the start
    with barecat.Barecat(path, readonly=False) as bc:  # writers never use one
        for i in range(10_050):
            bc[f"f{i % 100}"]
        assert bc.index.lookup_table_size is None


def test_lookup_table_is_retired_by_any_commit(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"old", "b": b"gone soon"})
    with barecat.Barecat(path, lookup_table=True) as reader:
        assert reader["a"] == b"old" and reader.index.lookup_table_size is not None
        with barecat.Barecat(path, readonly=False) as writer:
            writer.update_file("a", data=b"new")
            writer.remove("b")
            writer["c"] = b"added"
        assert reader["a"] == b"new"
        assert "b" not in reader and reader["c"] == b"added"
        assert (
            reader.index.lookup_table_size is None
        )  # rebuilt only when lookups make it worth it again


def test_writers_rebuild_or_drop_the_saved_table(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({f"f{i}": b"%d" % i for i in range(100)})
    with barecat.Barecat(path, readonly=False) as bc:  # a small change: building would not pay
        bc["new"] = b"n"
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["new"] == b"n"
    with barecat.Barecat(path, readonly=False) as bc:  # most of the archive is new: rebuilt
        for i in range(150):
            bc[f"g{i}"] = b"g"
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == 251 and bc["g7"] == b"g" and bc["f3"] == b"3"
    with barecat.Barecat(path, readonly=False):  # opened, nothing committed: kept as it is
        pass
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == 251


def test_a_table_of_another_state_or_archive_is_ignored(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"first", "b": b"bee"})
    other = make_archive({"a": b"other archive's a", "b": b"b"})
    saved = table_file(path) + ".bak"
    shutil.copy(table_file(path), saved)
    with barecat.Barecat(path, readonly=False, lookup_table=False) as bc:
        bc.update_file("a", data=b"second")
    shutil.copy(saved, table_file(path))  # restored from a backup: built for the old index
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"second"
    shutil.copy(table_file(other), table_file(path))  # copied from another archive
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"second"


def test_a_damaged_table_costs_speed_never_correctness(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"d/{i}": os.urandom(20 + i % 40) for i in range(200)}
    path = make_archive(files)
    table = table_file(path)
    with open(table, "r+b") as f:  # every address, size and CRC garbled; header intact
        f.seek(64)
        slots = (os.path.getsize(table) - 64) // 24
        hashes = f.read(8 * slots)
        f.write(os.urandom(16 * slots))
    assert hashes.count(b"\0" * 8) < slots  # the hashes still find the paths
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == len(files)
        assert all(bc[p] == d for p, d in files.items())
        assert bc.get_many(list(files)) == list(files.values())
    with open(table, "r+b") as f:
        f.truncate(os.path.getsize(table) // 2)  # cut short: not even mapped
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["d/5"] == files["d/5"]
    with open(table, "r+b") as f:
        f.seek(64)
        f.write(os.urandom(64))  # garbage where a table should be: ignored as well
    with barecat.Barecat(path) as bc:
        assert bc["d/7"] == files["d/7"]


def test_the_table_goes_with_the_archive(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"})
    assert os.path.exists(table_file(path))
    with barecat.Barecat(path, readonly=False, overwrite=True) as bc:
        assert not os.path.exists(table_file(path))
        bc["z"] = b"2"
    barecat.remove(path)
    assert not os.path.exists(table_file(path)) and not os.path.exists(path)


def test_lookup_table_refused_for_wal_indexes(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"}, wal=True)
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"1"


def test_a_table_that_cannot_be_saved_still_serves_this_reader(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"f{i}": b"%d" % i for i in range(50)}
    path = make_archive(files, lookup_table=False)
    os.mkdir(table_file(path))  # the name is taken: saving must fail cleanly
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc.index.lookup_table_size == len(files)
        assert all(bc[p] == d for p, d in files.items())
    assert os.path.isdir(table_file(path))
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if ".barecat-lookup." in n]
    assert leftovers == []  # no temporary file left behind
