"""What a read-only mount's directory listings cost the index: a walk through a tree of
many small directories (the Python standard library has 8,700 of about 7 entries) pays
per directory, so the queries a listing runs are counted here."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import mfusepy
import pytest

import barecat
from barecat.mount.filesystem import ArchiveFilesystem
from barecat.mount.listing import packed_stat


def _archive_of_small_dirs(path: Path) -> str:
    archive = str(path / "dirs.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"a{i:02d}/b/f{j}.txt", b"x" * j) for i in range(20) for j in range(3))
        bc.mkdir("empty")
    return archive


def _mounted(archive: str) -> tuple[ArchiveFilesystem, list[str]]:
    """The filesystem of a read-only mount of ``archive`` (served by no kernel: its
    listings are asked for directly), and the SQL it runs from now on."""
    fs = ArchiveFilesystem(lambda: barecat.Barecat(archive))
    fs.init("/")
    statements: list[str] = []
    fs.archive.index.conn.set_trace_callback(statements.append)
    return fs, statements


def test_a_walk_lists_each_directory_in_two_queries(tmp_path: Path) -> None:
    """A listing with attributes runs the two queries of its entries (subdirectories,
    files), nothing for ``.`` and ``..`` (the kernel takes no attributes from them) nor
    to check that the directory exists; a walk indexes no record by path."""
    fs, statements = _mounted(_archive_of_small_dirs(tmp_path))
    folders = ["/", "/empty"] + [f"/a{i:02d}" for i in range(20)]
    folders += [f"/a{i:02d}/b" for i in range(20)]
    for folder in folders:
        entries = fs.listing(folder, 0)
        assert fs.listing(folder, len(entries)) is entries  # (libfuse's next part: kept)
        assert entries[0][0] == b"." and entries[1][0] == b".."
        assert all(
            stat.S_ISDIR(mfusepy.c_stat.from_buffer_copy(st).st_mode) for _, st in entries[:2]
        )
    assert len(statements) == 2 * len(folders) + 1  # (the empty one's existence checked)
    files = fs.listing("/a03/b", 0)[2:]
    assert [name for name, _ in files] == [b"f0.txt", b"f1.txt", b"f2.txt"]
    assert files[2][1] == packed_stat(stat.S_IFREG | 0o644, 1, *_owner(fs), 2, 1, 0)
    assert fs._listed == {}


def _owner(fs: ArchiveFilesystem) -> tuple[int, int]:
    return fs._uid, fs._gid


@pytest.mark.parametrize("plus", [True, False])
def test_listing_a_missing_directory_or_a_file_fails_as_before(tmp_path: Path, plus: bool) -> None:
    fs, _ = _mounted(_archive_of_small_dirs(tmp_path))
    with pytest.raises(mfusepy.FuseOSError) as missing:
        fs.listing("/nowhere", 0, plus)
    assert missing.value.errno == errno.ENOENT
    with pytest.raises(mfusepy.FuseOSError) as a_file:
        fs.listing("/a00/b/f1.txt", 0, plus)
    assert a_file.value.errno == errno.ENOTDIR
    assert fs.listing("/empty", 0, plus)[2:] == []
