"""An index read through apsw's VFS, page by page (index/remote_pages.py): every query
answers as on the local file, the pages asked for are the pages needed (a scan reads
ahead), errors of the fetch surface as they are, and nothing can be written."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import RemoteStorageBarecatError
from barecat.index import ReadOnlyIndex
from barecat.index.remote_pages import RemotePages
from barecat.objectstore.page_cache import PageCache

pytest.importorskip("apsw", reason="the remote extra (apsw) is not installed")

PAGE = 65536


class FileSource:
    """A real file's bytes by range, counting the reads (what a ranged request would be)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.size = os.path.getsize(path)
        self.reads: list[tuple[int, int]] = []
        self.fail: BaseException | None = None
        self._lock = threading.Lock()

    def read(self, start: int, end: int) -> bytes:
        if self.fail is not None:
            raise self.fail
        with self._lock:
            self.reads.append((start, end))
        with open(self.path, "rb") as f:
            f.seek(start)
            return f.read(end - start)


def _published(path: Path, count: int) -> str:
    """An archive of ``count`` files in 64 KiB pages and a rollback journal, vacuumed."""
    archive = str(path / "a.barecat")
    with barecat.Barecat(archive, readonly=False) as bc:
        bc.add_many((f"d{i // 500:03d}/f{i:06d}.txt", str(i).encode()) for i in range(count))
    conn = sqlite3.connect(archive)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute(f"PRAGMA page_size = {PAGE}")
    conn.execute("VACUUM")
    conn.close()
    return archive


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _published(tmp_path_factory.mktemp("pages"), 20_000)


def _remote(
    archive: str, cache_bytes: int = 64 << 20, threadsafe: bool = False
) -> tuple[ReadOnlyIndex, FileSource]:
    source = FileSource(archive)
    pages = RemotePages(source, PAGE, {}, PageCache(cache_bytes))
    url = "s3://bucket/a.barecat"
    index = ReadOnlyIndex(url, lookup_table=False, pages=pages, threadsafe=threadsafe)
    return index, source


def test_every_query_answers_as_on_the_local_file(archive: str) -> None:
    remote, _ = _remote(archive)
    with remote, ReadOnlyIndex(archive) as local:
        assert remote.num_files == local.num_files == 20_000
        assert remote.total_size == local.total_size
        assert remote.listing.names("d007") == local.listing.names("d007")
        pattern = "d01[0-2]/*5.txt"
        assert list(remote.listing.glob(pattern)) == list(local.listing.glob(pattern))
        assert list(remote.listing.walk_names("")) == list(local.listing.walk_names(""))
        assert remote.lookup_file("d039/f019999.txt") == local.lookup_file("d039/f019999.txt")
        assert "d000/f000001.txt" in remote and "d000/nope" not in remote
        assert remote.isdir("d001") and not remote.isdir("d001/f000500.txt")


def test_users_sql_on_conn_gets_rows_by_name_as_with_sqlite3(archive: str) -> None:
    remote, _ = _remote(archive)
    with remote, ReadOnlyIndex(archive) as local:
        sql = "SELECT path, size FROM files WHERE parent = ? ORDER BY path LIMIT 3"
        got = remote.conn.execute(sql, ("d002",)).fetchall()
        want = local.conn.execute(sql, ("d002",)).fetchall()
        assert [tuple(r) for r in got] == [tuple(r) for r in want]
        assert [r["path"] for r in got] == [r["path"] for r in want]
        assert got[0].keys() == ["path", "size"]
        cursor = remote.conn.execute("SELECT count(*) AS n FROM dirs")
        assert cursor.description[0][0] == "n"
        assert cursor.fetchone()[0] == local.conn.execute("SELECT count(*) FROM dirs").fetchone()[0]


def test_nothing_can_be_written(archive: str) -> None:
    remote, _ = _remote(archive)
    with remote, pytest.raises(sqlite3.OperationalError):
        remote.conn.execute("DELETE FROM files")


def test_a_point_lookup_fetches_a_page_at_a_time_and_a_scan_reads_ahead(archive: str) -> None:
    remote, source = _remote(archive)
    with remote:
        remote.lookup_file("d020/f010000.txt")
        lookup_reads = list(source.reads)
        assert all(end - start <= PAGE for start, end in lookup_reads)
        source.reads.clear()
        paths = list(remote.listing.file_paths())
        assert len(paths) == 20_000
        pages = -(-os.path.getsize(archive) // PAGE)
        # a scan's requests grow: far fewer requests than the pages it read
        assert len(source.reads) < pages / 2
        assert max(end - start for start, end in source.reads) > PAGE


def test_pages_once_fetched_are_served_from_the_cache(archive: str) -> None:
    remote, source = _remote(archive)
    with remote:
        remote.lookup_file("d030/f015000.txt")
        before = len(source.reads)
        remote.lookup_file("d030/f015000.txt")
        # (SQLite's own cache may answer too: either way, no new request)
        assert len(source.reads) == before


def test_a_bounded_cache_keeps_answers_exact(archive: str) -> None:
    remote, _ = _remote(archive, cache_bytes=2 * PAGE)
    with remote, ReadOnlyIndex(archive) as local:
        for i in range(0, 20_000, 997):
            path = f"d{i // 500:03d}/f{i:06d}.txt"
            assert remote.lookup_file(path) == local.lookup_file(path)


def test_a_failed_fetch_raises_its_own_error(archive: str) -> None:
    remote, source = _remote(archive)
    with remote:
        source.fail = RemoteStorageBarecatError("Could not read s3://bucket/a.barecat: boom")
        with pytest.raises(RemoteStorageBarecatError, match=r"s3://bucket/a\.barecat"):
            remote.lookup_file("d038/f019000.txt")
        source.fail = None
        assert remote.lookup_file("d038/f019000.txt").path == "d038/f019000.txt"


def test_threads_each_read_through_their_own_connection(archive: str) -> None:
    remote, _ = _remote(archive, threadsafe=True)
    failures: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(offset, 20_000, 1_001):
                path = f"d{i // 500:03d}/f{i:06d}.txt"
                assert remote.lookup_file(path).path == path
        except BaseException as e:  # (reported below)
            failures.append(e)

    with remote:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


def test_a_forked_child_reads_through_fresh_connections(archive: str) -> None:
    remote, _ = _remote(archive)
    with remote:
        assert remote.num_files == 20_000
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, never return into pytest
            ok = remote.lookup_file("d011/f005500.txt").path == "d011/f005500.txt"
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
        os.close(read)
