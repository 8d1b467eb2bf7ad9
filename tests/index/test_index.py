"""The Index used directly (``bc.index.*``), as users of the reference do."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess

import pytest

import barecat
from barecat import Order
from barecat.entries import Address
from helpers import mapped_here


@pytest.fixture
def filled(make_archive):  # type: ignore[no-untyped-def]
    files = {
        "train/cat/1.jpg": b"a" * 5,
        "train/cat/2.png": b"b" * 7,
        "train/dog/3.jpg": b"c" * 11,
        "val/4.jpg": b"d" * 13,
        "readme.txt": b"e",
    }
    return make_archive(files), files


def test_orders(filled) -> None:  # type: ignore[no-untyped-def]
    path, files = filled
    with barecat.Barecat(path) as bc:
        idx = bc.index
        by_path = [f.path for f in idx.iter_all_fileinfos(order=Order.PATH)]
        assert by_path == sorted(files)
        assert [f.path for f in idx.iter_all_fileinfos(Order.PATH | Order.DESC)] == by_path[::-1]
        by_address = list(idx.iter_all_fileinfos(order=Order.ADDRESS))
        assert [f.path for f in by_address] == list(files)  # insertion order = storage order
        assert [(f.shard, f.offset) for f in by_address] == sorted(
            (f.shard, f.offset) for f in by_address
        )
        assert sorted(idx.iter_all_filepaths(Order.RANDOM)) == sorted(files)
        assert sorted(idx.iter_all_dirpaths()) == ["", "train", "train/cat", "train/dog", "val"]
        assert len(list(idx.iter_all_paths())) == len(files) + 5
        assert len(list(idx.iter_all_infos())) == len(files) + 5


def test_lookups_and_listings(filled) -> None:  # type: ignore[no-untyped-def]
    path, _ = filled
    with barecat.Barecat(path) as bc:
        idx = bc.index
        f = idx.lookup_file("train/cat/2.png")
        assert (f.size, f.offset) == (7, 5) and f.crc32c is not None
        d = idx.lookup_dir("train")
        assert (d.num_subdirs, d.num_files, d.num_files_tree, d.size_tree) == (2, 0, 3, 23)
        assert idx.lookup("train").isdir() and idx.lookup("readme.txt").isfile()
        assert idx.listdir_names("train/cat", Order.PATH) == ["1.jpg", "2.png"]
        assert [i.path for i in idx.listdir_infos("")] == ["train", "val", "readme.txt"]
        assert [i.path for i in idx.list_subdir_dirinfos("train", Order.PATH)] == [
            "train/cat",
            "train/dog",
        ]
        assert [i.path for i in idx.list_direct_fileinfos("val")] == ["val/4.jpg"]
        assert idx.num_files == len(idx) == 5 and idx.total_size == 37 and idx.num_dirs == 5
        assert "val/4.jpg" in idx and "val" not in idx
        assert idx.get_last_file().path == "readme.txt"
        assert [x.path for x in idx.lookup_files(["val/4.jpg", "readme.txt"])] == [
            "val/4.jpg",
            "readme.txt",
        ]
        with pytest.raises(barecat.FileNotFoundBarecatError):
            idx.lookup_file("nope")
        with pytest.raises(barecat.NotADirectoryBarecatError):
            idx.lookup_dir("readme.txt")
        with pytest.raises(barecat.FileNotFoundBarecatError):
            idx.listdir_infos("nope")
        with pytest.raises(barecat.NotADirectoryBarecatError):
            idx.listdir_infos("readme.txt")
        assert [i.path for i in idx.listdir_infos("train/cat", Order.PATH | Order.DESC)] == [
            "train/cat/2.png",
            "train/cat/1.jpg",
        ]


def test_walk_infos_and_glob_infos(filled) -> None:  # type: ignore[no-untyped-def]
    path, _ = filled
    with barecat.Barecat(path) as bc:
        steps = list(bc.index.walk_infos("train"))
        assert [d.path for d, _, _ in steps] == ["train", "train/cat", "train/dog"]
        assert [f.size for f in steps[1][2]] == [5, 7]
        infos = list(bc.index.iterglob_infos("**/*.jpg", recursive=True))
        assert [i.path for i in infos] == ["train/cat/1.jpg", "train/dog/3.jpg", "val/4.jpg"]
        assert all(i.isfile() for i in infos)


def test_raw_glob_lets_star_cross_directories(filled) -> None:  # type: ignore[no-untyped-def]
    path, _ = filled
    with barecat.Barecat(path) as bc:
        assert sorted(bc.index.raw_glob_paths("*.jpg")) == [
            "train/cat/1.jpg",
            "train/dog/3.jpg",
            "val/4.jpg",
        ]
        assert bc.glob("*.jpg") == []  # the glob.glob-compatible one does not
        assert sorted(bc.index.raw_iterglob_paths_multi(["*.png", "val*"], only_files=True)) == [
            "train/cat/2.png",
            "val/4.jpg",
        ]
        assert {i.path for i in bc.index.raw_iterglob_infos("train*")} == {
            "train",
            "train/cat",
            "train/dog",
            "train/cat/1.jpg",
            "train/cat/2.png",
            "train/dog/3.jpg",
        }


def test_bulk_mode_drops_and_rebuilds(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        with bc.index.bulk_mode(drop_indexes=True):
            names = {r[0] for r in bc.index.conn.execute("SELECT name FROM sqlite_master")}
            assert "idx_files_parent" not in names and "idx_files_path" in names
            for i in range(30):
                bc.add(f"a{i % 2}/b{i % 3}/f{i}", data=b"x" * i)
        names = {r[0] for r in bc.index.conn.execute("SELECT name FROM sqlite_master")}
        assert {"idx_files_parent", "idx_dirs_parent", "idx_files_shard_offset"} <= names
        assert bc.index.find_inconsistencies() == []
        assert bc.index.lookup_dir("a1").num_files_tree == 15
        # uniqueness holds throughout a bulk load
        with pytest.raises(barecat.FileExistsBarecatError), bc.index.bulk_mode():
            bc.add("a0/b0/f0", data=b"dup")


def test_attached_database(make_archive) -> None:  # type: ignore[no-untyped-def]
    other = make_archive({"x/y": b"123"})
    target = make_archive({"z": b"1"})
    with barecat.Barecat(target, readonly=False) as bc:
        with bc.index.attached_database(other) as name:
            rows = bc.index.conn.execute(f"SELECT path, size FROM {name}.files").fetchall()
        assert [tuple(r) for r in rows] == [("x/y", 3)] and rows[0]["path"] == "x/y"
        with pytest.raises(sqlite3.OperationalError):
            bc.index.conn.execute("SELECT * FROM sourcedb.files")


def test_index_opened_on_its_own(filled) -> None:  # type: ignore[no-untyped-def]
    path, files = filled
    with barecat.Index(path) as idx:
        assert sorted(idx) == sorted(files) and idx.shard_size_limit == barecat.SHARD_SIZE_UNLIMITED
        with pytest.raises(PermissionError):
            idx.remove_file("readme.txt")


def test_reference_compatible_helpers(archive_path: str) -> None:
    import datetime

    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc.index.add_files(
            [barecat.BarecatFileInfo(path=f"x/f{i}", shard=0, offset=0, size=0) for i in range(3)]
        )
        bc.add("x/y/data", data=b"0123456789", mtime_ns=1_000_000_000)
        assert bc.index.lookup_dir("x").num_entries == 4  # 3 files + the subdir y
        assert bc.index.lookup_file("x/y/data").mtime_dt == datetime.datetime(
            1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc
        )
        assert list(bc.index.iterdir_names("x", Order.PATH)) == ["y", "f0", "f1", "f2"]
        assert sorted(bc.iglobfiles("x/*")) == ["x/f0", "x/f1", "x/f2"]
        bc.index.remove_files(["x/f0", "x/f1"])
        assert sorted(bc.index.iter_all_filepaths()) == ["x/f2", "x/y/data"]
        assert bc.total_logical_size == 10 and bc.sharder.total_physical_size_seek == 10
        with bc.open("x/y/data", "rb") as f:
            f.seek(4)
            assert f.readall() == b"456789"
        bc.commit()  # SQLite ignores this pragma inside a transaction
        conn = bc.index.conn
        conn.execute("PRAGMA foreign_keys = ON")
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with bc.index.no_foreign_keys():
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        conn.execute("PRAGMA foreign_keys = OFF")  # barecat's own default
        with bc.index.no_triggers():  # files whose directories do not exist yet, more
            for i in range(20):  # than the adds in a row after which statistics are owed
                bc.add(f"new/deep/file{i}", data=b"z")
        assert not bc.isdir("new/deep")
        bc.index.update_dirs()
        bc.index.update_treestats()
        assert bc.isdir("new/deep") and bc.index.find_inconsistencies() == []


def test_big_batches_keep_the_row_triggers(archive_path: str) -> None:
    """Bulk inserts drop the insert triggers inside their savepoint: after a batch, and
    after a batch refused for a duplicate, the triggers are back and keep stats right."""

    def triggers(bc: barecat.Barecat) -> set[str]:
        rows = bc.index.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        return {name for (name,) in rows}

    with barecat.Barecat(archive_path, readonly=False) as bc:
        before = triggers(bc)
        assert {"file_inserted", "file_over_dir"} <= before
        bc.add_many((f"d{i % 7}/f{i}", b"x" * i) for i in range(600))
        assert triggers(bc) == before
        with pytest.raises(barecat.FileExistsBarecatError):
            bc.add_many([(f"new/f{i}", b"y") for i in range(300)] + [("d0/f0", b"dup")])
        assert triggers(bc) == before and "new/f0" not in bc
        bc["d1/single"] = b"12345"  # one by one again: statistics owed, then applied
        assert bc.index.find_inconsistencies() == []
        assert bc.stat("d1").num_files == 87 and bc.total_size == sum(range(600)) + 5


def _committed_triggers(path: str) -> tuple[set[str], int]:
    """Trigger names and the ``use_triggers`` flag as another connection sees them."""
    with sqlite3.connect(path) as c:
        names = {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        (flag,) = c.execute("SELECT value_int FROM config WHERE key = 'use_triggers'").fetchone()
    return names, flag


def test_files_added_one_by_one_have_statistics_before_any_use(archive_path: str) -> None:
    """A loop of adds owes the directory statistics (past a few hundred rows with the row
    triggers dropped inside the transaction): queries, edits and the commit all see them
    applied, errors still come from the add that causes them, and the committed index
    has its triggers, switched on, working for the next writer."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for i in range(700):
            bc[f"a/b{i % 3}/f{i}"] = bytes(i % 50)
        assert bc.stat("a").num_files_tree == 700 and bc.stat("a").num_subdirs == 3
        assert bc.stat("a/b0").num_files == 234
        assert bc.total_size == sum(i % 50 for i in range(700))
        assert bc.index.find_inconsistencies() == []
        for i in range(300):
            bc[f"c/d/f{i}"] = b"z"
        with pytest.raises(barecat.NotADirectoryBarecatError):
            bc["c/d/f0/under"] = b"1"
        with pytest.raises(barecat.IsADirectoryBarecatError):
            bc["c"] = b"1"
        with pytest.raises(barecat.FileExistsBarecatError):
            bc["c/d/f1"] = b"1"
        bc.rename("c", "e")  # an edit right after the adds
        assert bc.stat("e/d").num_files == 300 and bc.stat("e").num_files_tree == 300
        assert bc.index.find_inconsistencies() == []
    assert _committed_triggers(archive_path) == (_committed_triggers(archive_path)[0], 1)
    assert {"file_inserted", "file_over_dir"} <= _committed_triggers(archive_path)[0]
    with sqlite3.connect(archive_path) as c:  # the triggers, not barecat, keep this right
        c.execute("PRAGMA recursive_triggers = ON")
        c.execute("INSERT INTO files (path, shard, offset, size) VALUES ('x/y/z', 0, 0, 3)")
    with barecat.Barecat(archive_path) as bc:
        assert bc.index.find_inconsistencies() == []
        assert (
            bc.stat("x/y").num_files == 1 and bc.total_size == sum(i % 50 for i in range(700)) + 303
        )


def test_adds_in_a_row_leave_statistics_alone_where_the_triggers_would(
    archive_path: str,
) -> None:
    """An index without the ``use_triggers`` flag never fires its triggers: a run of
    adds owes nothing there either (as row by row, no directory rows appear)."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["seed"] = b"1"
    with sqlite3.connect(archive_path) as c:
        c.execute("DELETE FROM config WHERE key = 'use_triggers'")
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for i in range(20):
            bc[f"d/f{i}"] = b"x"
        assert not bc.isdir("d") and len(list(bc.index.iter_all_filepaths())) == 21
    with sqlite3.connect(archive_path) as c:
        assert c.execute("SELECT count(*) FROM config WHERE key = 'use_triggers'").fetchone() == (
            0,
        )


def test_rollback_forgets_statistics_owed(archive_path: str) -> None:
    from barecat.entries import BarecatFileInfo

    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["kept/f"] = b"1"
        bc.commit()
        triggers = _committed_triggers(archive_path)
        for i in range(400):
            bc.index.add_file(BarecatFileInfo(f"gone/f{i}", shard=0, offset=0, size=0))
        bc.index.rollback()
        assert bc.num_files == 1 and not bc.isdir("gone")
        assert bc.index.find_inconsistencies() == []
        bc["kept/g"] = b"22"
    assert _committed_triggers(archive_path) == triggers
    with barecat.Barecat(archive_path) as bc:
        assert bc.stat("kept").num_files == 2 and bc.index.find_inconsistencies() == []


def test_forked_child_does_not_apply_its_parents_owed_statistics(archive_path: str) -> None:
    """A child forked while the writer owes statistics reads through its own connection,
    which has none of the parent's uncommitted rows: it must not apply them there."""
    import os

    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["old/f"] = b"1"
        bc.commit()
        for i in range(30):  # (more than the few adds after which statistics are owed)
            bc[f"new/f{i}"] = b"22"
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it sees, and leave without cleanup
            try:
                seen = f"{bc.num_files} {bc.isdir('new')} {bc.index.find_inconsistencies()}"
            except BaseException as e:
                seen = repr(e)
            os.write(writer, seen.encode())
            os._exit(0)
        os.close(writer)
        os.waitpid(pid, 0)
        with os.fdopen(reader) as f:
            assert f.read() == "1 False []"
        assert bc.num_files == 31 and bc.stat("new").num_files == 30
    with barecat.Barecat(archive_path) as bc:
        assert bc.num_files == 31 and bc.index.find_inconsistencies() == []


def test_logical_end_ignores_empty_files_parked_inside_other_files(archive_path: str) -> None:
    """An empty file may point into another file's bytes (defrag parks them in holes):
    the shard's logical end, where appends go and where repair cuts, must still be the end
    of the data, or new bytes would overwrite committed ones."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["big"] = b"B" * 1000
        bc["empty"] = b""
        bc.index.update_file("empty", new_offset=500)
        assert bc.index.logical_shard_end(0) == 1000
        bc.index.update_file("empty", new_offset=1200)  # past the data: the offset counts
        assert bc.index.logical_shard_end(0) == 1200
        bc.index.update_file("empty", new_offset=500)
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["next"] = b"N" * 10
    with barecat.Barecat(archive_path) as bc:
        assert bc["big"] == b"B" * 1000 and bc["next"] == b"N" * 10 and bc.verify_integrity()


def test_files_after_follow_the_listing_order(archive_path: str) -> None:
    """``files_after``: the next files of the same directory in the order ``listdir``
    gives them, never a subdirectory's, none after the last or for an unknown path."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for name in ["d/c", "d/a", "d/sub/x", "d/b", "e/z", "d/e"]:
            bc[name] = name.encode()
        listed = [name for name in bc.listdir("d") if bc.isfile(f"d/{name}")]
        assert listed == ["c", "a", "b", "e"]
        listing = bc.index.listing
        assert [f.path for f in listing.files_after("d/c", 10)] == ["d/a", "d/b", "d/e"]
        assert [f.path for f in listing.files_after("d/a", 1)] == ["d/b"]
        assert listing.files_after("d/e", 10) == [] and listing.files_after("d/none", 5) == []
        after = listing.files_after("/d//a", 5)  # (paths are normalized)
        assert [(f.path, f.size) for f in after] == [("d/b", 3), ("d/e", 3)]


def test_raw_sql_on_the_connection_gives_rows_by_name_and_by_index(archive_path: str) -> None:
    """``bc.index.conn`` answers ad-hoc SQL with ``sqlite3.Row`` rows, as 0.3.1's did;
    barecat's own queries keep getting tuples from the same connection."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["d/a.txt"] = b"abc"
        bc["d/b.txt"] = b"defgh"
        row = bc.index.conn.execute("SELECT path, size FROM files ORDER BY path").fetchone()
        assert (row["path"], row["size"], row[0], row[1]) == ("d/a.txt", 3, "d/a.txt", 3)
        assert row.keys() == ["path", "size"] and tuple(row) == ("d/a.txt", 3)
        # uncommitted rows are visible: it is the writer's own connection and transaction
        assert bc.index.cursor.execute("SELECT count(*) AS n FROM files").fetchone()["n"] == 2
        # our own queries on the same connection still see tuples
        located = bc.index.lookup_address_in_sqlite("d/b.txt")
        assert type(located) is Address and located.size == 5
        assert bc.index.listdir_names("d") == ["a.txt", "b.txt"]
    for threadsafe in (False, True):
        with barecat.Barecat(archive_path, threadsafe=threadsafe) as bc:
            rows = bc.index.conn.execute("SELECT path, size FROM files ORDER BY path").fetchall()
            assert {r["path"]: r["size"] for r in rows} == {"d/a.txt": 3, "d/b.txt": 5}
            assert [f.path for f in bc.index.iter_all_fileinfos(order=Order.PATH)] == [
                "d/a.txt",
                "d/b.txt",
            ]
            assert bc["d/b.txt"] == b"defgh"


def test_the_reference_docs_raw_sql_examples_work_on_our_archives(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """reference/file-format.rst reads a file with sqlite3 alone, and
    explanation/architecture.rst finds gaps with a window function."""
    base = str(tmp_path / "myarchive.barecat")
    with barecat.Barecat(base, readonly=False) as bc:
        bc["dir/file.txt"] = b"hello from the index"
        bc["dir/gone.bin"] = b"x" * 100
        bc["dir/last.bin"] = b"y" * 10
        bc.remove("dir/gone.bin")
    conn = sqlite3.connect(base)
    try:
        cursor = conn.execute(
            "SELECT shard, offset, size FROM files WHERE path=?", ("dir/file.txt",)
        )
        shard, offset, size = cursor.fetchone()
        gaps = conn.execute(
            "SELECT shard, offset + size AS gap_start, "
            "LEAD(offset) OVER (PARTITION BY shard ORDER BY offset) - (offset + size) AS gap_size "
            "FROM files"
        ).fetchall()
    finally:
        conn.close()
    with open(f"{base}-shard-{shard:05d}", "rb") as f:
        f.seek(offset)
        assert f.read(size) == b"hello from the index"
    assert (0, offset + size, 100) in gaps
    sqlite_cli = shutil.which("sqlite3")
    if sqlite_cli is not None:
        sql = "SELECT shard, offset, size FROM files WHERE path='dir/file.txt'"
        out = subprocess.run([sqlite_cli, base, sql], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == f"{shard}|{offset}|{size}"


def test_raw_sql_on_conn_sees_the_statistics_of_a_run_of_adds(archive_path: str) -> None:
    """0.3.1's contract of ``bc.index.conn``: SQL of one's own, right after a loop of
    ``bc[path] = data`` (whose statistics are owed), sees them applied and the triggers
    on, so its own inserts are counted too."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for i in range(50):
            bc[f"d/e/f{i}"] = b"xy"
        conn = bc.index.conn
        row = conn.execute("SELECT num_files_tree, size_tree FROM dirs WHERE path = 'd'")
        assert tuple(row.fetchone()) == (50, 100)
        flag = conn.execute("SELECT value_int FROM config WHERE key = 'use_triggers'")
        assert flag.fetchone()[0] == 1
        conn.execute("INSERT INTO files (path, shard, offset, size) VALUES ('d/e/raw', 0, 0, 0)")
        assert bc.stat("d/e").num_files == 51 and bc.index.find_inconsistencies() == []


def test_point_queries_leave_no_lock_for_a_writer_to_wait_on(filled) -> None:  # type: ignore[no-untyped-def]
    """exists/isfile/isdir and the totals run on a cursor kept per connection: each must
    finish its statement, or the reader would hold SQLite's shared lock after the call
    and every writer's commit would wait on it."""
    path, _files = filled
    with barecat.Barecat(path) as bc:
        other = sqlite3.connect(path, timeout=0)
        try:
            calls = {
                "exists": lambda: bc.exists("train"),
                "exists (missing)": lambda: not bc.exists("nope"),
                "isfile": lambda: bc.isfile("val/4.jpg"),
                "isdir": lambda: bc.isdir("train/cat"),
                "num_files": lambda: bc.num_files == 5,
                "total_size": lambda: bc.total_size == 37,
                "len": lambda: len(bc) == 5,
            }
            for name, call in calls.items():
                assert call(), name
                other.execute("BEGIN EXCLUSIVE")  # refused at once if a shared lock is held
                other.execute("UPDATE dirs SET mode = ? WHERE path = 'val'", (len(name),))
                other.commit()
                assert bc.lookup_dir("val").mode == len(name)  # the reader sees the commit
        finally:
            other.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc/self/maps")
def test_the_index_is_mapped_at_its_first_query_not_at_open(filled) -> None:  # type: ignore[no-untyped-def]
    path = os.path.realpath(filled[0])
    index = barecat.Index(path)
    try:
        assert not mapped_here(path)  # an open closed unused maps nothing
        assert index.num_files == 5 and sorted(index.listdir_names("train")) == [
            "cat",
            "dog",
        ]
        assert mapped_here(path)  # queries read its pages through the map
    finally:
        index.close()
    assert not mapped_here(path)
