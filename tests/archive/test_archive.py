"""Behaviour of the Barecat facade: dict API, filesystem API, errors, persistence."""

from __future__ import annotations

import errno
import io
import os
import pickle
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import barecat
from barecat import (
    BarecatIntegrityError,
    DirectoryNotEmptyBarecatError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    NotADirectoryLookupBarecatError,
    PathTypeBarecatError,
    ReadableArchive,
    ReadOnlyBarecatError,
)
from barecat.paths import MAX_DEPTH


def test_roundtrip_persists_across_reopen(archive_path: str) -> None:
    files = {f"d{i % 3}/sub{i % 2}/f{i}.bin": os.urandom(i * 7) for i in range(40)}
    with barecat.Barecat(archive_path, readonly=False) as bc:
        for p, d in files.items():
            bc[p] = d
    with barecat.Barecat(archive_path) as bc:
        assert len(bc) == 40
        assert dict(bc.items()) == files
        assert bc.total_size == sum(map(len, files.values()))
        assert sorted(bc) == sorted(files)
        assert os.path.exists(archive_path + "-shard-00000")


def test_dict_api_semantics(writable: barecat.Barecat) -> None:
    writable["a/b.txt"] = b"one"
    assert "a/b.txt" in writable and "a" not in writable and "zz" not in writable
    assert writable.get("missing", b"dflt") == b"dflt"
    with pytest.raises(FileExistsBarecatError):
        writable["a/b.txt"] = b"two"
    assert writable["a/b.txt"] == b"one"
    with pytest.raises(KeyError):
        writable["a"]  # a directory is not a key
    with pytest.raises(KeyError):
        del writable["nope"]
    del writable["a/b.txt"]
    assert len(writable) == 0 and writable.isdir("a")


def test_paths_are_normalized_and_bad_ones_refused(writable: barecat.Barecat) -> None:
    writable["/x//y/./z/"] = b"1"
    assert writable.isfile("x/y/z") and writable["x/y/z"] == b"1"
    assert writable["x/q/../y/z"] == b"1"
    for bad in ["../escape", "a/../../b", "nul\x00byte"]:
        with pytest.raises(InvalidPathBarecatError):
            writable[bad] = b"x"
        with pytest.raises(ValueError):
            writable.add(bad, data=b"x")
    assert len(writable) == 1 and sorted(writable.index.iter_all_dirpaths()) == ["", "x", "x/y"]


def test_paths_deeper_than_the_index_can_follow_are_refused_by_name(
    writable: barecat.Barecat,
) -> None:
    deep = "/".join(["d"] * 4999) + "/f"  # 5,000 components: SQLite's triggers stop at 1,000
    deepest = "/".join(["d"] * (MAX_DEPTH - 1)) + "/f"
    writable["top.txt"] = b"top"
    attempts = {
        "add": lambda: writable.__setitem__(deep, b"x"),
        "add_many": lambda: writable.add_many([("fine.txt", b"1"), (deep, b"x")]),
        "mkdir": lambda: writable.makedirs(deep),
        "rename": lambda: writable.rename("top.txt", deep),
    }
    for name, attempt in attempts.items():
        with pytest.raises(InvalidPathBarecatError, match="5000 components, more than the 999"):
            attempt()
        assert sorted(writable) == ["top.txt"], name  # nothing of a refused batch either
    writable[deepest] = b"deepest"  # the limit itself works, and so do edits there
    writable.rename(deepest, deepest + "2")
    with pytest.raises(InvalidPathBarecatError, match="1000 components"):
        writable.rename("d", "e/e")  # would move the subtree one level too deep
    writable.remove(deepest + "2")
    writable.index.commit()
    assert sorted(writable) == ["top.txt"] and writable.index.find_inconsistencies() == []


def test_text_that_is_not_unicode_is_an_invalid_path_not_an_encoding_error(
    writable: barecat.Barecat,
) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # Latin-1 bytes: a lone surrogate after fsdecode
    writable["ok.txt"] = b"ok"
    attempts = {
        "add": lambda: writable.__setitem__(name, b"x"),
        "add_many": lambda: writable.add_many([(name, b"x")]),
        "read": lambda: writable[name],
        "get_many": lambda: writable.get_many(["ok.txt", name]),
        "exists": lambda: writable.exists(name),
        "rename": lambda: writable.rename("ok.txt", name),
    }
    for what, attempt in attempts.items():
        with pytest.raises(InvalidPathBarecatError, match="not valid UTF-8") as caught:
            attempt()
        assert "caf\\xe9.txt" in str(caught.value), what  # the bytes shown escaped
    assert sorted(writable) == ["ok.txt"]


def test_bytes_are_not_paths(writable: barecat.Barecat) -> None:
    writable["a.txt"] = b"old"
    with pytest.raises(PathTypeBarecatError, match="str, not bytes") as caught:
        writable.update_file("a.txt", b"new")  # the second argument is the new path or info
    assert isinstance(caught.value, TypeError)
    assert sorted(writable) == ["a.txt"] and writable["a.txt"] == b"old"  # not renamed
    writable.update_file("a.txt", data=b"new")
    assert writable["a.txt"] == b"new"
    for attempt in (
        lambda: writable[b"a.txt"],
        lambda: writable.__setitem__(b"b.txt", b"x"),
        lambda: writable.rename("a.txt", b"c.txt"),
        lambda: writable.get_many([b"a.txt"]),
    ):
        with pytest.raises(PathTypeBarecatError):
            attempt()
    assert sorted(writable) == ["a.txt"]


def test_lookups_through_a_file_are_both_enotdir_and_not_found(
    writable: barecat.Barecat,
) -> None:
    """Looking a path up through a file raises an error that is ENOTDIR (as ``os``) and
    also the FileNotFoundBarecatError barecat 0.3.1 raised, so either ``except`` works;
    an edit that would put something below a file stays a plain NotADirectoryBarecatError
    (as in 0.3.1)."""
    writable["f.txt"] = b"file"
    attempts = [
        lambda: writable.listdir("f.txt"),
        lambda: list(writable.walk("f.txt")),
        lambda: writable.index.lookup_dir("f.txt"),
        lambda: writable.index.lookup_file("f.txt/x"),
        lambda: writable.index.listdir_infos("f.txt"),
        lambda: writable.open("f.txt/x", "rb"),
        lambda: writable.index.chmod("f.txt/x", 0o600),
    ]
    for attempt in attempts:
        with pytest.raises(NotADirectoryLookupBarecatError) as caught:
            attempt()
        e = caught.value
        assert isinstance(e, NotADirectoryBarecatError) and isinstance(e, NotADirectoryError)
        assert isinstance(e, FileNotFoundBarecatError) and isinstance(e, FileNotFoundError)
        assert e.errno == errno.ENOTDIR and "Not a directory" in str(e)
        assert e.filename in ("f.txt", "f.txt/x")
    with pytest.raises(NotADirectoryBarecatError) as caught:
        writable["f.txt/x"] = b"x"
    assert not isinstance(caught.value, FileNotFoundError)
    with pytest.raises(NotADirectoryBarecatError) as caught:
        writable.mkdir("f.txt/d")
    assert "f.txt" in str(caught.value)
    with pytest.raises(NotADirectoryBarecatError), writable.open("f.txt/x", "wb") as f:
        f.write(b"x")
    assert sorted(writable) == ["f.txt"]
    assert writable.index.find_inconsistencies() == []


def test_file_where_directory_needed_and_vice_versa(writable: barecat.Barecat) -> None:
    writable["f"] = b"file"
    with pytest.raises(NotADirectoryBarecatError):
        writable["f/child"] = b"x"
    writable["d/child"] = b"x"
    with pytest.raises(IsADirectoryBarecatError):
        writable["d"] = b"x"
    with pytest.raises(IsADirectoryBarecatError):
        writable[""] = b"x"
    with pytest.raises(NotADirectoryBarecatError):
        writable.listdir("f")
    with pytest.raises(FileNotFoundBarecatError):
        writable.listdir("nope")
    with pytest.raises(IsADirectoryBarecatError):
        writable.read("d")
    assert writable.index.find_inconsistencies() == []
    assert sorted(writable) == ["d/child", "f"]


def test_errors_are_builtin_subclasses_with_errno() -> None:
    import errno

    e = FileNotFoundBarecatError("a/b")
    assert (
        isinstance(e, FileNotFoundError)
        and e.errno == errno.ENOENT
        and str(e) == "File not found: a/b"
    )
    assert isinstance(ReadOnlyBarecatError("x"), PermissionError)
    assert isinstance(BarecatIntegrityError("x"), ValueError)
    assert isinstance(DirectoryNotEmptyBarecatError("d"), OSError)


def test_read_only_archive_refuses_writes(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"})
    with barecat.Barecat(path) as bc:
        for op in (
            lambda: bc.__setitem__("b", b"2"),
            lambda: bc.remove("a"),
            lambda: bc.rename("a", "c"),
            lambda: bc.mkdir("m"),
            lambda: bc.open("a", "wb"),
        ):
            with pytest.raises(PermissionError):
                op()
        assert bc["a"] == b"1" and len(bc) == 1


def test_open_missing_archive_read_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FileNotFoundError):
        barecat.Barecat(str(tmp_path / "nothing.barecat"))
    assert not os.path.exists(tmp_path / "nothing.barecat")


def test_second_writer_is_refused_readers_are_not(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["a"] = b"1"
        bc.commit()
        with pytest.raises(barecat.ArchiveLockedBarecatError):
            barecat.Barecat(archive_path, readonly=False)
        with barecat.Barecat(archive_path) as reader:
            assert reader["a"] == b"1"
    with barecat.Barecat(archive_path, readonly=False) as bc:  # lock released on close
        bc["b"] = b"2"


def test_exist_ok_and_overwrite(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"})
    with pytest.raises(FileExistsBarecatError):
        barecat.Barecat(path, readonly=False, exist_ok=False)
    with barecat.Barecat(path, readonly=False, overwrite=True) as bc:
        assert len(bc) == 0


def test_corruption_detected_on_verified_read(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"hello world", "b": b"second"})
    with open(path + "-shard-00000", "r+b") as f:
        f.seek(3)
        f.write(b"X")
    with barecat.Barecat(path) as bc:
        with pytest.raises(BarecatIntegrityError):
            bc["a"]
        with pytest.raises(ValueError):
            bc.read("a")
        assert bc.read("a", offset=3, size=2) == b"Xo"  # partial reads are not verified
        assert bc["b"] == b"second"
        assert not bc.check_crc32c("a") and bc.check_crc32c("b")
        assert not bc.verify_integrity()


def test_truncated_shard_gives_integrity_error(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"x" * 100, "b": b"y" * 100})
    os.truncate(path + "-shard-00000", 150)
    with barecat.Barecat(path) as bc:
        assert bc["a"] == b"x" * 100
        with pytest.raises(BarecatIntegrityError, match="truncated"):
            bc["b"]
        assert not bc.verify_integrity(quick=True)


def test_corrupt_index_file_is_refused_clearly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "junk.barecat"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(barecat.CorruptIndexBarecatError):
        barecat.Barecat(str(path))


def test_sqlite_file_of_another_program_is_refused_clearly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    path = str(tmp_path / "other.db")
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE notes (body TEXT)")
    for readonly in (True, False):
        with pytest.raises(barecat.CorruptIndexBarecatError, match="not a barecat index"):
            barecat.Barecat(path, readonly=readonly)
    with sqlite3.connect(path) as c:  # untouched
        tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master")]
    assert tables == ["notes"]


def test_newer_and_older_schema_refused(make_archive) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    path = make_archive({"a": b"1"})
    with sqlite3.connect(path) as c:
        c.execute("UPDATE config SET value_int = 1 WHERE key = 'schema_version_major'")
    with pytest.raises(barecat.SchemaVersionBarecatError, match="newer"):
        barecat.Barecat(path)
    with sqlite3.connect(path) as c:
        c.execute("DROP TABLE config")
    with pytest.raises(barecat.SchemaVersionBarecatError, match="barecat upgrade"):
        barecat.Barecat(path)


def test_shard_rotation_and_too_large(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit=100) as bc:
        for i in range(10):
            bc[f"f{i}"] = bytes([i]) * 30
        with pytest.raises(barecat.FileTooLargeBarecatError):
            bc["big"] = b"z" * 101
        with pytest.raises(barecat.FileTooLargeBarecatError):
            bc.add("bigstream", fileobj=io.BytesIO(b"z" * 150))
        bc.add("stream", fileobj=io.BytesIO(b"s" * 90), bufsize=16)  # rotates mid-stream
    with barecat.Barecat(archive_path) as bc:
        assert bc.shard_size_limit == bc.sharder.shard_size_limit == 100  # (read at open)
        infos = list(bc.index.iter_all_fileinfos())
        assert all(f.end <= 100 for f in infos)
        assert max(f.shard for f in infos) >= 3
        assert all(bc[f"f{i}"] == bytes([i]) * 30 for i in range(10))
        assert bc["stream"] == b"s" * 90
        assert "big" not in bc and "bigstream" not in bc
        assert bc.verify_integrity()


def test_shard_size_limit_accepts_human_sizes(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit="1K") as bc:
        assert bc.shard_size_limit == 1024
    # a writer that stores another limit at open writes with that one; readers see it
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit="2K") as bc:
        assert bc.shard_size_limit == bc.sharder.shard_size_limit == 2048
    with barecat.Barecat(archive_path) as bc:
        assert bc.shard_size_limit == bc.sharder.shard_size_limit == 2048


def test_open_modes(writable: barecat.Barecat) -> None:
    with writable.open("t.txt", "w") as f:
        f.write("héllo\nworld\n")
    with writable.open("t.txt") as f:
        assert f.readlines() == ["héllo\n", "world\n"]
    with writable.open("b.bin", "wb") as f:
        f.write(b"0123456789")
    with writable.open("b.bin", "rb") as f:
        f.seek(-3, os.SEEK_END)
        assert f.read() == b"789" and f.tell() == 10
        f.seek(2)
        buf = bytearray(4)
        assert f.readinto(buf) == 4 and bytes(buf) == b"2345"
    with writable.open("b.bin", "ab") as f:
        f.write(b"AB")
    assert writable["b.bin"] == b"0123456789AB"
    with writable.open("b.bin", "r+b") as f:
        f.seek(1)
        f.write(b"xy")
        f.seek(0)
        assert f.read(4) == b"0xy3"
    assert writable["b.bin"] == b"0xy3456789AB"
    with writable.open("b.bin", "wb") as f:
        f.write(b"new")
    assert writable["b.bin"] == b"new"
    with pytest.raises(FileExistsBarecatError):
        writable.open("b.bin", "xb")
    with writable.open("c.bin", "xb") as f:
        f.write(b"c")
    with pytest.raises(FileNotFoundBarecatError):
        writable.open("nope", "r+b")
    assert writable.check_crc32c("b.bin") and writable.index.find_inconsistencies() == []


@pytest.mark.parametrize("mode", ["zb", "rbt", "rwb", "bb", "r++b", "b", "", "rU"])
def test_open_refuses_modes_builtin_open_refuses(
    writable: barecat.Barecat, tmp_path: Path, mode: str
) -> None:
    """A mode ``builtins.open`` refuses is a ValueError here too, opening nothing."""
    with pytest.raises(ValueError):
        open(tmp_path / "probe", mode)  # noqa: SIM115 - the builtin is the model
    with pytest.raises(ValueError, match="Invalid mode"):
        writable.open("q.bin", mode)
    assert not writable.exists("q.bin")
    writable["after"] = b"no writer was left open"


def test_open_writer_blocks_other_writes(writable: barecat.Barecat) -> None:
    f = writable.open("w.bin", "wb")
    f.write(b"abc")
    with pytest.raises(barecat.BarecatError, match="still open"):
        writable["other"] = b"x"
    f.close()
    writable["other"] = b"x"
    assert writable["w.bin"] == b"abc"


def test_partial_read_and_readinto(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": bytes(range(200))})
    with barecat.Barecat(path) as bc:
        assert bc.read("a", offset=10, size=5) == bytes(range(10, 15))
        assert bc.read("a", offset=195) == bytes(range(195, 200))
        buf = bytearray(200)
        assert bc.readinto("a", buf) == 200 and bytes(buf) == bytes(range(200))


def test_add_variants_and_metadata(writable: barecat.Barecat, tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src.txt"
    src.write_bytes(b"from disk")
    os.chmod(src, 0o640)
    os.utime(src, ns=(1, 1_600_000_000_123_456_789))
    writable.add_by_path(str(src), "stored/src.txt")
    info = writable.index.lookup_file("stored/src.txt")
    assert (
        info.mtime_ns == 1_600_000_000_123_456_789
        and info.mode is not None
        and info.mode & 0o777 == 0o640
    )
    writable.add("m.bin", data=b"m", mode=0o100600, uid=12, gid=34, mtime_ns=99)
    m = writable.index.lookup_file("m.bin")
    assert (m.mode, m.uid, m.gid, m.mtime_ns, m.size) == (0o100600, 12, 34, 99, 1)
    writable.add(barecat.BarecatFileInfo(path="fi.bin", mode=0o100644), data=b"fi")
    writable.add("m.bin", data=b"other", file_exist_ok=True)
    assert writable["m.bin"] == b"m"
    writable.add(barecat.BarecatDirInfo(path="emptydir", mode=0o40700))
    with pytest.raises(FileExistsBarecatError):
        writable.add(barecat.BarecatDirInfo(path="emptydir"))
    writable.add(barecat.BarecatDirInfo(path="emptydir", uid=5), dir_exist_ok=True)
    assert writable.index.lookup_dir("emptydir").uid == 5
    writable.chmod("m.bin", 0o100644)
    writable.chown("m.bin", 1, 2)
    writable.utime("m.bin", ns=(0, 42))
    m = writable.index.lookup_file("m.bin")
    assert (m.mode, m.uid, m.gid, m.mtime_ns) == (0o100644, 1, 2, 42)


def test_mkdir_makedirs_rmdir_rmtree(writable: barecat.Barecat) -> None:
    with pytest.raises(FileNotFoundBarecatError):
        writable.mkdir("a/b")
    writable.makedirs("a/b/c")
    writable.mkdir("a/b2")
    with pytest.raises(FileExistsBarecatError):
        writable.mkdir("a/b2")
    writable.mkdir("a/b2", exist_ok=True)
    writable["a/b/c/f"] = b"123"
    with pytest.raises(DirectoryNotEmptyBarecatError):
        writable.rmdir("a/b")
    writable.rmdir("a/b2")
    assert writable.listdir("a") == ["b"]
    writable.rmtree("a/b")
    assert writable.listdir("a") == [] and len(writable) == 0
    assert writable.index.lookup_dir("").size_tree == 0
    assert writable.index.find_inconsistencies() == []


def test_rename_files_and_directories(writable: barecat.Barecat) -> None:
    for i in range(5):
        writable[f"src/sub/f{i}"] = b"x" * i
    writable["src/g"] = b"g"
    writable["other"] = b"o"
    writable.rename("src", "dst/deep")
    assert not writable.exists("src")
    assert sorted(writable) == ["dst/deep/g"] + [f"dst/deep/sub/f{i}" for i in range(5)] + ["other"]
    assert writable["dst/deep/sub/f3"] == b"xxx"
    writable.move("dst/deep/g", "g2")
    with pytest.raises(FileExistsBarecatError):
        writable.rename("g2", "other")
    with pytest.raises(barecat.BarecatError):
        writable.rename("dst", "dst/deep/inside")
    with pytest.raises(FileNotFoundBarecatError):
        writable.rename("missing", "x")
    d = writable.index.lookup_dir("dst")
    assert (d.num_files_tree, d.size_tree, d.num_subdirs) == (5, 10, 1)
    assert writable.index.find_inconsistencies() == []


def test_listdir_scandir_stat(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"d/x": b"1", "d/e/y": b"22", "top": b"333"})
    with barecat.Barecat(path) as bc:
        assert bc.listdir() == ["d", "top"]
        assert sorted(bc.listdir("d")) == ["e", "x"]
        entries = {e.name: e for e in bc.scandir("d")}
        assert entries["e"].is_dir() and entries["x"].is_file()
        assert bc.stat("d").isdir() and bc.stat("top").size == 3  # type: ignore[attr-defined]
        root = bc.index.lookup_dir("")
        assert (root.num_subdirs, root.num_files, root.num_files_tree, root.size_tree) == (
            1,
            1,
            3,
            6,
        )


def test_listdir_types_tells_links_and_special_files_from_regular_ones(tmp_path: Path) -> None:
    """The index's typed listing (three queries) gives each entry the type its record
    gives (the protocol's derived answer): a link's mode, a file without a mode or with
    permission bits only as regular."""
    path = str(tmp_path / "typed.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc.add("d/link", data=b"target", mode=stat.S_IFLNK | 0o777)
        bc.add("d/fifo", data=b"", mode=stat.S_IFIFO | 0o600)
        bc.add("d/bits", data=b"1", mode=0o600)
        bc.add("d/plain", data=b"2")
        bc.add("d/sub/x", data=b"3")
    with barecat.Barecat(path) as bc:
        typed = bc.listdir_types("d")
        assert typed == ReadableArchive.listdir_types(bc, "d")  # (from the records)
        assert dict(typed) == {
            "sub": stat.S_IFDIR,
            "link": stat.S_IFLNK,
            "fifo": stat.S_IFIFO,
            "bits": stat.S_IFREG,
            "plain": stat.S_IFREG,
        }


def test_pickle_reopens_read_only(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"})
    with barecat.Barecat(path) as bc:
        clone = pickle.loads(pickle.dumps(bc))
        assert clone["a"] == b"1"
        clone.close()
    with barecat.Barecat(path, readonly=False) as bc, pytest.raises(TypeError):
        pickle.dumps(bc)


def test_fork_child_reads_with_its_own_connection(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({f"f{i}": bytes([i]) * 10 for i in range(20)})
    with barecat.Barecat(path) as bc:
        assert bc["f1"] == bytes([1]) * 10
        parent_conn = bc.index.conn
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            ok = (
                all(bc[f"f{i}"] == bytes([i]) * 10 for i in range(20))
                and bc.index.conn is not parent_conn
            )
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
        os.close(w)
        assert os.read(r, 1) == b"1"
        os.waitpid(pid, 0)
        assert bc["f2"] == bytes([2]) * 10 and bc.index.conn is parent_conn


def test_threadsafe_reads_from_threads(make_archive) -> None:  # type: ignore[no-untyped-def]
    from concurrent.futures import ThreadPoolExecutor

    files = {f"f{i}": os.urandom(100) for i in range(200)}
    path = make_archive(files)
    with barecat.Barecat(path, threadsafe=True) as bc, ThreadPoolExecutor(4) as pool:
        results = list(pool.map(bc.__getitem__, files))
    assert results == list(files.values())


def test_old_sqlite_index_naming_is_kept(tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "old")
    with barecat.Barecat(base, readonly=False) as bc:
        bc["a"] = b"1"
    os.rename(base, base + "-sqlite-index")
    with barecat.Barecat(base, readonly=False) as bc:
        bc["b"] = b"2"
    assert not os.path.exists(base) and os.path.exists(base + "-sqlite-index")
    with barecat.Barecat(base + "-sqlite-index") as bc:
        assert dict(bc.items()) == {"a": b"1", "b": b"2"}
    assert barecat.exists(base)
    barecat.remove(base)
    assert not barecat.exists(base) and not os.path.exists(base + "-shard-00000")


def test_legacy_module_functions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "l.barecat")
    with barecat.open(path, "x+") as bc:
        bc["a/b"] = b"12345"
    with pytest.raises(FileExistsError):
        barecat.open(path, "x+")
    with barecat.open(path, "a+") as bc:
        bc["c"] = b"6"
    assert barecat.read_index(path) == {"a/b": (0, 0, 5), "c": (0, 5, 1)}
    with barecat.open(path, "r") as bc, pytest.raises(PermissionError):
        bc["d"] = b"x"
    with barecat.open(path, "w+") as bc:
        assert len(bc) == 0


def test_failed_insert_leaves_no_bytes_behind(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["a"] = b"first"
        with pytest.raises(FileExistsBarecatError):
            bc["a"] = b"this should not stay in the shard"
        bc["b"] = b"second"
    assert os.path.getsize(archive_path + "-shard-00000") == len(b"firstsecond")
    with barecat.Barecat(archive_path) as bc:
        assert bc["b"] == b"second" and bc.index.lookup_file("b").offset == 5


def test_update_file_replaces_contents_and_can_rename(writable: barecat.Barecat) -> None:
    writable["d/a"] = b"old contents"
    writable.update_file("d/a", data=b"new")
    assert writable["d/a"] == b"new"
    assert writable.index.lookup_dir("d").size_tree == 3
    writable.update_file("d/a", barecat.BarecatFileInfo(path="e/b", mode=0o100600), data=b"moved")
    assert "d/a" not in writable and writable["e/b"] == b"moved"
    assert writable.index.lookup_file("e/b").mode == 0o100600
    with pytest.raises(FileNotFoundBarecatError):
        writable.update_file("missing", data=b"x")
    assert writable.index.find_inconsistencies() == []


def test_append_only_allows_adding_only(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False, append_only=True) as bc:
        bc["a"] = b"1"
        for op in (lambda: bc.remove("a"), lambda: bc.rename("a", "b"), lambda: bc.rmtree("")):
            with pytest.raises(PermissionError):
                op()
        assert bc["a"] == b"1"


def test_bulk_load_without_triggers_then_update_treestats(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        with bc.index.no_triggers():
            for i in range(50):
                bc.add(f"x{i % 3}/y{i % 4}/f{i}", data=b"z" * i)
        bc.index.update_treestats()
        bc.index.conn.commit()
        assert bc.index.find_inconsistencies() == []
        root = bc.index.lookup_dir("")
        assert (root.num_files_tree, root.size_tree, root.num_subdirs) == (50, sum(range(50)), 3)
        bc["after"] = b"triggers are back on"
        assert bc.index.lookup_dir("").num_files == 1
        assert bc.index.find_inconsistencies() == []


def test_walk_matches_structure_and_prunes(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a/b/c/f1": b"1", "a/b/f2": b"2", "a-x/f3": b"3", "a/f4": b"4", "g": b"5"})
    with barecat.Barecat(path) as bc:
        assert list(bc.walk("")) == [
            (".", ["a", "a-x"], ["g"]),
            ("a", ["b"], ["f4"]),
            ("a-x", [], ["f3"]),
            ("a/b", ["c"], ["f2"]),
            ("a/b/c", [], ["f1"]),
        ]
        assert [d for d, _, _ in bc.walk("a/b")] == ["a/b", "a/b/c"]
        seen = []
        for dirpath, dirnames, _ in bc.walk(""):
            seen.append(dirpath)
            if "a" in dirnames:
                dirnames.remove("a")
        assert seen == [".", "a-x"]
        with pytest.raises(NotADirectoryBarecatError):
            list(bc.walk("g"))


def test_empty_files_sharing_an_offset_do_not_hide_the_end(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["b"] = b""
        bc["a"] = b""
        with bc.open("a", "wb") as f:  # 'a' now ends at 1 while 'b' (offset 0) ends at 0
            f.write(b"\x01")
    with barecat.Barecat(archive_path, readonly=False) as bc:
        assert bc.logical_shard_end(0) == 1
        bc["c"] = b"\x02"
    with barecat.Barecat(archive_path) as bc:
        assert (bc["a"], bc["b"], bc["c"]) == (b"\x01", b"", b"\x02") and bc.verify_integrity()


def test_get_many_returns_in_request_order_and_verifies(make_archive) -> None:  # type: ignore[no-untyped-def]
    import random

    files = {f"d{i % 5}/f{i:04d}": os.urandom(i % 300) for i in range(400)}
    path = make_archive(files)
    rng = random.Random(7)
    wanted = [*rng.sample(sorted(files), 150), "d1/f0001", "d1/f0001", "/d2//f0002"]
    with barecat.Barecat(path) as bc:
        for gap in (0, 4096, 1 << 20):  # lone reads, small and large coalesced spans
            got = bc.get_many(wanted, max_gap=gap)
            assert got == [files[barecat.paths.normalize(p)] for p in wanted]
        assert bc.read_many([]) == []
        with pytest.raises(KeyError, match="nope"):
            bc.get_many(["d1/f0001", "nope"])
    offset = barecat.read_index(path)["d3/f0003"][1]
    with open(path + "-shard-00000", "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" if files["d3/f0003"][:1] != b"\xff" else b"\x00")
    with barecat.Barecat(path) as bc:
        for gap in (0, 1 << 20):
            with pytest.raises(BarecatIntegrityError):
                bc.get_many(["d1/f0001", "d3/f0003"], max_gap=gap)


def test_add_many_is_fast_path_with_same_results(archive_path: str) -> None:
    items = [(f"a{i % 3}/b{i % 5}/f{i:04d}", os.urandom(i % 700)) for i in range(1500)]
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit=64 << 10) as bc:
        bc["a0/pre"] = b"existing"
        assert bc.add_many(items, batch_size=400) == 1500
        info = barecat.BarecatFileInfo(path="meta/x", mode=0o100600, uid=7, gid=8, mtime_ns=9)
        bc.add_many([(info, b"m")])
        assert bc.index.find_inconsistencies() == []
    with barecat.Barecat(archive_path) as bc:
        assert len(bc) == 1502 and bc.verify_integrity()
        assert all(bc[p] == d for p, d in items)
        assert bc.sharder.num_shards > 5  # rotated at 64 KiB
        m = bc.index.lookup_file("meta/x")
        assert (m.mode, m.uid, m.gid, m.mtime_ns) == (0o100600, 7, 8, 9)


def test_add_many_batches_are_atomic(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["taken"] = b"t"
        bc["file"] = b"f"
        bc.mkdir("dir")
        cases = [
            ([("ok1", b"1"), ("taken", b"2")], FileExistsBarecatError, "taken"),
            ([("ok1", b"1"), ("ok1", b"2")], FileExistsBarecatError, "ok1"),
            ([("ok1", b"1"), ("file/child", b"2")], NotADirectoryBarecatError, "file"),
            ([("ok1", b"1"), ("dir", b"2")], IsADirectoryBarecatError, "dir"),
            ([("x/y", b"1"), ("x", b"2")], NotADirectoryBarecatError, "x"),
        ]
        for batch, error, name in cases:
            size_before = os.path.getsize(archive_path + "-shard-00000")
            with pytest.raises(error, match=name):
                bc.add_many(batch)
            assert sorted(bc) == ["file", "taken"], batch
            assert os.path.getsize(archive_path + "-shard-00000") == size_before
            assert bc.index.find_inconsistencies() == []
        assert bc.add_many([("ok1", b"1"), ("x/y", b"2")]) == 2
        assert bc["x/y"] == b"2" and bc.index.lookup_dir("x").num_files == 1


def test_reopening_with_a_new_shard_limit_stores_it(archive_path: str) -> None:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["a"] = b"x" * 80
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit=100) as bc:
        bc["b"] = b"y" * 80  # does not fit after 'a' any more
        assert bc.index.lookup_file("b").shard == 1
    with barecat.Barecat(archive_path) as bc:
        assert bc.shard_size_limit == 100 and bc["b"] == b"y" * 80


@pytest.mark.parametrize("padding", [0, 300], ids=["few", "batch-without-triggers"])
def test_add_dirs_creates_updates_and_refuses_files(archive_path: str, padding: int) -> None:
    """Small batches go through the statistics triggers, big ones (``padding`` more
    directories under ``p/``) with them switched off: the same rows either way."""
    extra = [barecat.BarecatDirInfo(f"p/q{i % 3}/d{i}") for i in range(padding)]
    with barecat.Barecat(archive_path, readonly=False) as bc:
        triggers = "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
        names = bc.index.conn.execute(triggers).fetchall()
        bc["x/file"] = b"1"
        bc.add_dirs(
            [
                barecat.BarecatDirInfo("x/sub/deep", mode=0o40700, mtime_ns=5),
                barecat.BarecatDirInfo("x", mode=0o40750, uid=7, gid=8, mtime_ns=6),
                barecat.BarecatDirInfo("y"),
                *extra,
            ]
        )
        x, deep = bc.stat("x"), bc.stat("x/sub/deep")
        assert (x.mode, x.uid, x.gid, x.mtime_ns) == (0o40750, 7, 8, 6)
        assert (deep.mode, deep.mtime_ns) == (0o40700, 5) and bc.isdir("x/sub")
        assert x.num_subdirs == 1 and x.num_files == 1
        assert bc.stat("").num_subdirs == 2 + bool(padding)
        if padding:
            assert bc.stat("p").num_subdirs == 3 and bc.stat("p/q1").num_subdirs == padding // 3
        with pytest.raises(barecat.FileExistsBarecatError):
            bc.add_dirs([barecat.BarecatDirInfo("z"), barecat.BarecatDirInfo("x/file"), *extra])
        with pytest.raises(barecat.NotADirectoryBarecatError):
            bc.add_dirs([barecat.BarecatDirInfo("z"), barecat.BarecatDirInfo("x/file/a"), *extra])
        assert not bc.isdir("z")  # all or nothing
        twice = [barecat.BarecatDirInfo("w", mode=0o40711), barecat.BarecatDirInfo("w", uid=3)]
        bc.add_dirs([*twice, *extra])  # a new path twice: its rows merge, in order
        w = bc.stat("w")
        assert (w.mode, w.uid) == (0o40711, 3)
        assert bc.index.conn.execute(triggers).fetchall() == names
        assert bc.index.find_inconsistencies() == []


def test_add_many_fills_in_the_given_infos_and_renormalizes_edited_paths(
    archive_path: str,
) -> None:
    info = barecat.BarecatFileInfo("a/b", mode=0o100600)
    edited = barecat.BarecatFileInfo("c")
    edited.path = "d//./e/"  # changed after construction: still normalized when stored
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc.add_many([(info, b"hello"), (edited, b"x")])
        assert (info.shard, info.offset, info.size) == (0, 0, 5) and info.crc32c is not None
        assert bc["d/e"] == b"x" and bc.stat("a/b").mode == 0o100600
        edited.path = "../escape"
        with pytest.raises(barecat.InvalidPathBarecatError):
            bc.add_many([(edited, b"y")])


def test_reference_methods_defrag_and_merge_from_other_barecat(tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = str(tmp_path / "other")
    with barecat.Barecat(other, readonly=False) as bc:
        bc["keep/a.txt"] = b"a" * 100
        bc["drop/b.bin"] = b"b" * 100
    main_path = str(tmp_path / "main")
    with barecat.Barecat(main_path, readonly=False) as bc:
        for i in range(20):
            bc[f"f{i}"] = bytes([i]) * 1000
        for i in range(0, 20, 2):
            del bc[f"f{i}"]
        assert bc.defrag() == 10 * 1000
        bc.merge_from_other_barecat(other, prefix="in", filter_rules=[("-", "drop/")])
        bc["after"] = b"written after the merge"
        assert bc.verify_integrity() and bc.index.find_inconsistencies() == []
    with barecat.Barecat(main_path) as bc:
        assert sorted(bc) == sorted(["after", "in/keep/a.txt", *(f"f{i}" for i in range(1, 20, 2))])
        assert bc.total_physical_size_stat == bc.total_size


# -- a writer that changes nothing leaves everything as it was -----------------------------


def _on_disk(path: str) -> dict[str, tuple[int, bytes]]:
    """Every file of the archive at ``path``: its mtime and bytes."""
    folder, name = os.path.split(path)
    found = {}
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(name):
            full = os.path.join(folder, entry)
            with open(full, "rb") as f:
                found[entry] = (os.stat(full).st_mtime_ns, f.read())
    return found


@pytest.mark.parametrize("sealed", [False, True])
def test_a_writer_that_changes_nothing_rewrites_nothing(archive_path: str, sealed: bool) -> None:
    """Opened for writing, read from, files opened r+b/a and closed unwritten: the index,
    its lookup table and every shard keep their bytes and mtimes."""
    kw = {"compression": "zstd", "passphrase": "pw"} if sealed else {}
    with barecat.Barecat(archive_path, readonly=False, shard_size_limit=100, **kw) as bc:
        for i in range(8):
            bc[f"d/f{i}"] = bytes([i]) * 30
    before = _on_disk(archive_path)
    assert f"{os.path.basename(archive_path)}-shard-00002" in before
    address = {}
    with barecat.Barecat(archive_path, readonly=False, **kw) as bc:
        address = {p: bc.index.lookup_file(p) for p in bc.files()}
        assert bc.listdir("d")[:2] == ["f0", "f1"] and bc["d/f3"] == bytes([3]) * 30
        list(bc.walk(""))
        bc.glob("**", recursive=True)
        assert bc.verify_integrity()
        with bc.open("d/f2", "r+b") as f:
            assert f.read() == bytes([2]) * 30
        with bc.open("d/f5", "ab"):
            pass
        with bc.open("d/f6", "r+") as f:  # (text)
            f.read()
    assert _on_disk(archive_path) == before
    with barecat.Barecat(archive_path, **kw) as bc:
        assert {p: bc.index.lookup_file(p) for p in bc.files()} == address


def test_a_file_opened_r_plus_moves_only_when_changed(writable: barecat.Barecat) -> None:
    writable["a"] = b"0123456789"
    writable["b"] = b"after a"
    stored = writable.index.lookup_file("a")
    with writable.open("a", "r+b") as f:
        assert f.read(4) == b"0123"  # read in place
        assert writable.index.lookup_file("a") == stored
        f.seek(2)
        f.write(b"xy")  # the first change copies the file to the end, then writes
        assert f.read() == b"456789"
    moved = writable.index.lookup_file("a")
    assert writable["a"] == b"01xy456789" and moved.offset > stored.offset
    with writable.open("a", "r+b") as f:
        f.truncate(3)
    assert writable["a"] == b"01x" and writable["b"] == b"after a"
    with writable.open("b", "ab") as f:
        f.write(b"!")
    assert writable["b"] == b"after a!"
    assert writable.index.find_inconsistencies() == [] and writable.verify_integrity()


def test_an_empty_archive_has_its_first_shard(archive_path: str) -> None:
    """As barecat 0.3.1 makes it (and needs it to open the archive), empty; a create
    that fails leaves nothing, that shard included."""
    with barecat.Barecat(archive_path, readonly=False):
        pass
    assert os.path.getsize(archive_path + "-shard-00000") == 0
    other = archive_path + "2"
    with pytest.raises(RuntimeError), barecat.Barecat(other, readonly=False):
        raise RuntimeError("failed")
    assert not [n for n in os.listdir(os.path.dirname(other)) if n.startswith("test.barecat2")]


def test_an_empty_file_needs_no_shard(archive_path: str) -> None:
    """An archive of empty files without a shard file (as made before this version)
    reads; a missing shard that holds bytes is still an error naming it."""
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["empty"] = b""
        with bc.open("empty2", "wb"):
            pass
    os.remove(archive_path + "-shard-00000")
    with barecat.Barecat(archive_path) as bc:
        assert bc["empty"] == b"" and bc.read("empty2") == b""
        assert bc.get_many(["empty", "empty2"]) == [b"", b""]
        with bc.open("empty", "rb") as f:
            assert f.read() == b""
        assert bc.readinto("empty", bytearray()) == 0
        assert bc.verify_integrity()
    with barecat.Barecat(archive_path, readonly=False) as bc:
        bc["full"] = b"bytes"
    os.remove(archive_path + "-shard-00000")
    with barecat.Barecat(archive_path) as bc:
        with pytest.raises(BarecatIntegrityError, match="shard-00000 is missing"):
            bc["full"]
        assert bc["empty"] == b""


@pytest.mark.parametrize("overwrite", [False, True], ids=["opened", "overwritten"])
def test_a_change_of_directory_after_opening_by_a_relative_path_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overwrite: bool
) -> None:
    """An archive opened by a path relative to the working directory finds all its files
    (shards read or made later, the index opened again by another thread, the lookup
    table saved at close, a replacement put in place) where it was opened, whatever the
    directory is since."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    with barecat.Barecat("a.barecat", readonly=False, shard_size_limit=100) as bc:
        bc["old.bin"] = b"o" * 80
    with barecat.Barecat(
        "a.barecat", readonly=False, overwrite=overwrite, shard_size_limit=100
    ) as bc:
        reader = None if overwrite else barecat.Barecat("a.barecat", threadsafe=True)
        monkeypatch.chdir(elsewhere)
        if reader is not None:
            with reader, ThreadPoolExecutor(1) as thread:  # (a thread's own connection)
                read = thread.submit(lambda: reader["old.bin"])  # (its shard opened now)
                assert read.result() == b"o" * 80
        bc["new.bin"] = b"n" * 90  # (into a second shard, made now)
        bc["newer.bin"] = b"m" * 90
    assert os.listdir(elsewhere) == []
    monkeypatch.chdir(home)
    with barecat.Barecat("a.barecat") as bc:
        assert bc["new.bin"] == b"n" * 90 and bc["newer.bin"] == b"m" * 90
        assert ("old.bin" in bc) is not overwrite
        assert bc.num_files == 3 - overwrite
    assert sorted(os.listdir(home)) == sorted(
        [
            "a.barecat",
            "a.barecat-lookup",
            *[f"a.barecat-shard-{k:05}" for k in range(3 - overwrite)],
        ]
    )
