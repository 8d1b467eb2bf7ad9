"""One conformance suite for every :class:`barecat.ReadableArchive`: a local ``Barecat``,
the HTTP client against ``barecat serve`` on 127.0.0.1 (at the archive's root, and rooted
at a directory through a ``barecat://`` URL), an archive on a local S3 server (moto), and
the ``barecat://`` fsspec filesystem read through fsspec's API (``helpers.fsspec_archive``).
Each answers the same questions about the same tree the same way; the expected answers
come from the tree written to disk (``os.walk``, ``glob.glob``)."""

from __future__ import annotations

import glob as pyglob
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat import (
    BarecatDirInfo,
    BarecatFileInfo,
    FileNotFoundBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    Order,
    ReadableArchive,
)

FILES = {
    "a.txt": b"hello, world\n",
    "empty.bin": b"",
    ".hidden": b"secret",
    "d1/x.bin": bytes(range(256)) * 40,
    "d1/y.bin": b"y" * 3000,
    "d1/sub/z.bin": b"zz",
    "d1/.dot/h.bin": b"h",
    "d1-x/q.bin": b"q" * 10,  # '-' sorts before '/': path order is not depth-first
    "d2/w.bin": os.urandom(5000),
}
EMPTY_DIRS = ["e", "d2/e2"]
ROOT = "top"  # the rooted client's directory


def _build(path: str, prefix: str = "") -> None:
    with barecat.Barecat(path, readonly=False, shard_size_limit="16K") as bc:
        for p, data in FILES.items():
            bc[prefix + p] = data
        for d in EMPTY_DIRS:
            bc.makedirs(prefix + d)
        bc["outside.txt"] = b"not below the root"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files on disk, for ``os.walk`` and ``glob.glob`` to say what is expected."""
    root = tmp_path_factory.mktemp("tree")
    for p, data in {**FILES, "outside.txt": b"not below the root"}.items():
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(data)
    for d in EMPTY_DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The archive, and one holding the same tree below ``ROOT/``."""
    base = tmp_path_factory.mktemp("archives")
    plain, prefixed = str(base / "plain.barecat"), str(base / "prefixed.barecat")
    _build(plain)
    _build(prefixed, f"{ROOT}/")
    return plain, prefixed


def _served(built: tuple[str, str], rooted: bool) -> Iterator[ReadableArchive]:
    pytest.importorskip("httpx", reason="the server extra is not installed")
    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    from helpers.serving import serving

    with serving(*built) as (url, _):
        port = url.rsplit(":", 1)[1]
        target = f"barecat://127.0.0.1:{port}/prefixed::{ROOT}" if rooted else url + "/a/plain"
        with barecat.connect(target) as client:
            yield client


def _on_s3(built: tuple[str, str], cache: Path) -> Iterator[ReadableArchive]:
    s3fs = pytest.importorskip("s3fs", reason="the remote extra is not installed")
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    from helpers.s3 import S3Server, upload

    server = S3Server()
    server.start()
    try:
        fs = s3fs.S3FileSystem(**server.options(), skip_instance_cache=True)
        fs.mkdir("data")
        upload(fs, built[0], "s3://data/plain.barecat")
        options: dict[str, Any] = {"storage_options": server.options()}
        with barecat.Barecat("s3://data/plain.barecat", cache_dir=str(cache), **options) as bc:
            yield bc
    finally:
        server.stop()


def _through_fsspec(built: tuple[str, str]) -> Iterator[ReadableArchive]:
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed")
    from helpers.fsspec_archive import FsspecArchive

    fs = fsspec.filesystem("barecat", fo=built[0], skip_instance_cache=True)
    try:
        yield FsspecArchive(fs, built[0])
    finally:
        fs.archive.close()


@pytest.fixture(scope="module", params=["local", "http", "http-rooted", "s3", "fsspec"])
def archive(
    request: pytest.FixtureRequest,
    built: tuple[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ReadableArchive]:
    kind = request.param
    if kind == "local":
        with barecat.Barecat(built[0]) as bc:
            yield bc
    elif kind == "s3":
        yield from _on_s3(built, tmp_path_factory.mktemp("s3-cache"))
    elif kind == "fsspec":
        yield from _through_fsspec(built)
    else:
        yield from _served(built, rooted=kind == "http-rooted")


def _rooted(archive: ReadableArchive) -> bool:
    return getattr(archive, "root", "") == ROOT


def _expected_files(archive: ReadableArchive) -> dict[str, bytes]:
    return dict(FILES) if _rooted(archive) else {**FILES, "outside.txt": b"not below the root"}


class TestReadableArchive:
    def test_is_a_readable_archive(self, archive: ReadableArchive) -> None:
        assert isinstance(archive, ReadableArchive)

    def test_lookup_and_stat(self, archive: ReadableArchive) -> None:
        f = archive.lookup("d1/x.bin")
        assert isinstance(f, BarecatFileInfo)
        assert (f.path, f.size, f.name) == ("d1/x.bin", len(FILES["d1/x.bin"]), "x.bin")
        d = archive.lookup("d1")
        assert isinstance(d, BarecatDirInfo) and d.path == "d1"
        assert (d.num_files_tree, d.num_subdirs, d.num_files) == (4, 2, 2)
        root = archive.stat("")
        assert isinstance(root, BarecatDirInfo) and root.path == ""
        assert root.num_files_tree == len(_expected_files(archive))
        assert archive.stat("/d2//w.bin") == archive.lookup("d2/w.bin")
        for missing in ("nope", "d1/nope", "a.txt/below"):
            with pytest.raises(FileNotFoundBarecatError):
                archive.lookup(missing)

    def test_path_and_num_files(self, archive: ReadableArchive) -> None:
        assert isinstance(archive.path, str) and archive.path
        assert archive.num_files == len(_expected_files(archive))

    def test_lookup_file_and_dir(self, archive: ReadableArchive) -> None:
        assert archive.lookup_file("/d1//x.bin") == archive.lookup("d1/x.bin")
        assert archive.lookup_dir("d1") == archive.lookup("d1")
        assert archive.lookup_dir("").path == ""
        with pytest.raises(IsADirectoryBarecatError):
            archive.lookup_file("d1")
        with pytest.raises(NotADirectoryBarecatError):
            archive.lookup_dir("a.txt")
        with pytest.raises(FileNotFoundBarecatError):  # (0.3.1 raised this there)
            archive.lookup_dir("a.txt")
        for missing in ("nope", "d1/nope", "a.txt/below"):
            with pytest.raises(FileNotFoundBarecatError):
                archive.lookup_file(missing)
            with pytest.raises(FileNotFoundBarecatError):
                archive.lookup_dir(missing)

    def test_listdir_infos(self, archive: ReadableArchive, tree: Path) -> None:
        infos = archive.listdir_infos("d1")
        kinds = [isinstance(i, BarecatDirInfo) for i in infos]
        assert kinds == sorted(kinds, reverse=True)  # subdirectories first
        assert sorted(i.name for i in infos) == sorted(os.listdir(tree / "d1"))
        assert {i.path for i in infos} == {f"d1/{n}" for n in os.listdir(tree / "d1")}
        assert archive.listdir_infos("e") == []
        assert sorted(archive.listdir("")) == sorted(
            n for n in os.listdir(tree) if not (_rooted(archive) and n == "outside.txt")
        )
        with pytest.raises(FileNotFoundBarecatError):
            archive.listdir_infos("nope")
        with pytest.raises(NotADirectoryBarecatError):
            archive.listdir_infos("a.txt")

    def test_listdir_types(self, archive: ReadableArchive, tree: Path) -> None:
        """Names with their type, as the directory on disk has them, subdirectories
        first (the order ``listdir_infos`` gives)."""
        for folder in ("", "d1", "d1/sub", "e"):
            typed = archive.listdir_types(folder)
            on_disk = {e.name: e for e in os.scandir(tree / folder)}
            if _rooted(archive) and not folder:
                del on_disk["outside.txt"]
            assert [name for name, _ in typed] == [i.name for i in archive.listdir_infos(folder)]
            assert dict(typed) == {
                name: stat.S_IFDIR if e.is_dir() else stat.S_IFREG for name, e in on_disk.items()
            }
        with pytest.raises(FileNotFoundBarecatError):
            archive.listdir_types("nope")
        with pytest.raises(NotADirectoryBarecatError):
            archive.listdir_types("a.txt")

    def test_read_and_ranges(self, archive: ReadableArchive) -> None:
        data = FILES["d1/x.bin"]
        assert archive.read("d1/x.bin") == data
        assert archive.read("d1/x.bin", 100, 50) == data[100:150]
        assert archive.read("d1/x.bin", len(data) - 5, 50) == data[-5:]
        assert archive.read("d1/x.bin", 7) == data[7:]
        assert archive.read("d1/x.bin", 3, 0) == b""
        assert archive.read("empty.bin") == b""
        with pytest.raises(FileNotFoundBarecatError):
            archive.read("nope")

    def test_read_a_record(self, archive: ReadableArchive) -> None:
        data = FILES["d1/x.bin"]
        info = archive.lookup_file("d1/x.bin")
        assert archive.read(info) == data
        assert archive.read(info, 100, 50) == data[100:150]

    def test_getitem(self, archive: ReadableArchive) -> None:
        assert archive["d1/x.bin"] == FILES["d1/x.bin"]
        assert archive["empty.bin"] == b""
        with pytest.raises(KeyError):
            archive["nope"]

    def test_open_seeks_and_reads(self, archive: ReadableArchive) -> None:
        data = FILES["d1/x.bin"]
        with archive.open("d1/x.bin", "rb") as f:
            assert f.read() == data
            f.seek(100)
            assert f.read(50) == data[100:150]
            assert f.tell() == 150
            f.seek(-5, os.SEEK_END)
            assert f.read(50) == data[-5:]
        with archive.open(archive.lookup_file("d2/w.bin"), "rb") as f:
            assert f.read() == FILES["d2/w.bin"]
        with pytest.raises(FileNotFoundBarecatError):
            archive.open("nope", "rb")

    def test_subdirs_and_files_of_a_directory(self, archive: ReadableArchive) -> None:
        assert sorted(d.name for d in archive.subdirs_of("d1")) == [".dot", "sub"]
        assert all(isinstance(d, BarecatDirInfo) for d in archive.subdirs_of("d1"))
        assert sorted(f.path for f in archive.files_in("d1")) == ["d1/x.bin", "d1/y.bin"]
        assert all(isinstance(f, BarecatFileInfo) for f in archive.files_in("d1"))
        for nowhere in ("nope", "a.txt", "e"):
            assert list(archive.subdirs_of(nowhere)) == [] == list(archive.files_in(nowhere))

    def test_files_page_in_path_order(self, archive: ReadableArchive) -> None:
        at_root = sorted(p for p in _expected_files(archive) if "/" not in p)
        assert [f.path for f in archive.files_page("", 0, 100)] == at_root
        assert [f.path for f in archive.files_page("", 1, 2)] == at_root[1:3]
        assert archive.files_page("", len(at_root), 5) == []
        assert archive.files_page("nope", 0, 5) == []
        assert [f.size for f in archive.files_page("d1", 0, 1)] == [len(FILES["d1/x.bin"])]

    def test_files_after_in_listing_order(self, archive: ReadableArchive) -> None:
        listed = [f.path for f in archive.files_in("d1")]
        assert [f.path for f in archive.files_after(listed[0], 10)] == listed[1:]
        assert [f.path for f in archive.files_after(listed[0], 1)] == listed[1:2]
        assert archive.files_after(listed[-1], 10) == []
        assert archive.files_after("d1/nope", 10) == []

    def test_read_many_in_request_order(self, archive: ReadableArchive) -> None:
        wanted = ["d2/w.bin", "a.txt", "empty.bin", "d1/sub/z.bin", "a.txt"]
        assert archive.read_many(wanted) == [FILES[p] for p in wanted]
        assert archive.read_many([]) == []

    def test_iterates_in_order(self, archive: ReadableArchive) -> None:
        expected = _expected_files(archive)
        by_path = [f.path for f in archive.iter_fileinfos(Order.PATH)]
        assert by_path == sorted(expected)
        by_address = list(archive.iter_fileinfos(Order.ADDRESS))
        assert sorted(f.path for f in by_address) == sorted(expected)
        assert all(f.size == len(expected[f.path]) for f in by_address)
        if by_address[0].shard is not None:  # records with addresses: check their order
            addresses = [(f.shard, f.offset) for f in by_address]
            assert addresses == sorted(addresses)  # type: ignore[type-var]

    def test_exists_isfile_isdir(self, archive: ReadableArchive) -> None:
        for path, file, directory in [
            ("a.txt", True, False),
            ("d1", False, True),
            ("", False, True),
            ("e", False, True),
            ("d1/sub/z.bin", True, False),
            ("nope", False, False),
            ("a.txt/x", False, False),
        ]:
            assert archive.exists(path) is (file or directory), path
            assert archive.isfile(path) is file, path
            assert archive.isdir(path) is directory, path

    def test_walk_matches_os_walk_in_path_order(self, archive: ReadableArchive, tree: Path) -> None:
        expected = {}
        for d, dirs, files in os.walk(tree):
            rel = os.path.relpath(d, tree)
            names = [f for f in files if not (_rooted(archive) and f == "outside.txt")]
            expected[rel] = (sorted(dirs), sorted(names))
        walked = list(archive.walk(""))
        assert {d: (dirs, files) for d, dirs, files in walked} == expected
        order = [("" if d == "." else d) for d, _, _ in walked]
        assert order == sorted(order)
        assert [d for d, _, _ in archive.walk("d1")] == ["d1", "d1/.dot", "d1/sub"]

    def test_walk_prunes_in_place(self, archive: ReadableArchive) -> None:
        seen = []
        for d, dirs, _ in archive.walk(""):
            seen.append(d)
            dirs[:] = [x for x in dirs if x != "d1"]
        assert "d1" not in seen and "d1/sub" not in seen and "d2/e2" in seen

    @pytest.mark.parametrize(
        "pattern",
        ["*", "*.txt", "d1/*", "**/*.bin", "**", "d*/", "d1/**", "*/*.bin", "nope/*", "a.txt"],
    )
    @pytest.mark.parametrize("hidden", [False, True])
    def test_glob_matches_glob_glob(
        self, archive: ReadableArchive, tree: Path, pattern: str, hidden: bool
    ) -> None:
        base = f"{tree}/"  # matches spelled as glob.glob spells them below the tree's root
        found_on_disk = pyglob.glob(base + pattern, recursive=True, include_hidden=hidden)
        expected = [p.removeprefix(base) for p in found_on_disk]
        if _rooted(archive):
            expected = [p for p in expected if p != "outside.txt"]
        found = archive.glob(pattern, recursive=True, include_hidden=hidden)
        assert sorted(found) == sorted(expected)
        files = sorted(p for p in expected if (tree / p).is_file())
        assert archive.globfiles(pattern, recursive=True, include_hidden=hidden) == files
        entries = sorted({p.rstrip("/") for p in expected} - {""})
        assert archive.glob_entries(pattern, recursive=True, include_hidden=hidden) == entries
