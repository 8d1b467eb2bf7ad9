"""The owner's key vouches only for what it sealed: a file length in the index that
differs from the sealed one is an integrity error on every read path that reports or
relies on it, never a file cut short or padded."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import BarecatError, BarecatIntegrityError
from helpers import PASSPHRASE, Run

OTHER = b"another file"


def sql(archive: str, statement: str, *args: object) -> None:
    with sqlite3.connect(archive) as conn:
        conn.execute(statement, args)


# -- 10: the length the index gives is the length read, or an error -----------------------

LONG = bytes(range(256)) * 40  # 10,240 bytes


def resized(tmp_path: Path, logical: int, encrypted: bool = True) -> str:
    """A sealed archive whose index gives ``doc.bin`` another length than it has (a
    column anyone can change; lowered, it made reads cut the file short)."""
    tmp_path.mkdir(exist_ok=True)
    archive = str(tmp_path / "private.barecat")
    key = {"passphrase": PASSPHRASE} if encrypted else {"compression": "zstd"}
    with barecat.Barecat(archive, readonly=False, **key) as bc:  # type: ignore[arg-type]
        bc["doc.bin"] = LONG
        bc["other.txt"] = OTHER
    sql(archive, "UPDATE files SET logical_size = ? WHERE path = 'doc.bin'", logical)
    return archive


LENGTH = r"^doc\.bin: the index gives its length as \d+ bytes, its sealed bytes hold 10240"


@pytest.mark.parametrize("logical", [10, len(LONG) + 100])
@pytest.mark.parametrize("encrypted", [True, False])
def test_a_changed_logical_size_is_an_integrity_error_on_every_read(
    tmp_path: Path, logical: int, encrypted: bool
) -> None:
    archive = resized(tmp_path, logical, encrypted)
    key = PASSPHRASE if encrypted else None
    with barecat.Barecat(archive, passphrase=key) as bc:
        info = bc.lookup_file("doc.bin")
        assert info.size == logical  # what stat reports before reading: the index's
        for read in (
            lambda: bc.read(info),
            lambda: bc.read("doc.bin", 0, logical),
            lambda: bc.read("doc.bin", 3, 5),
            lambda: bc.open("doc.bin").read(),
            lambda: bc.readinto("doc.bin", bytearray(logical)),
            lambda: bc.readinto(info, bytearray(5)),
        ):
            with pytest.raises(BarecatIntegrityError, match=LENGTH):
                read()
        # reads that give no length first return the sealed (authenticated) one
        assert bc["doc.bin"] == LONG and bc.read("doc.bin") == LONG
        assert bc.get_many(["other.txt", "doc.bin"]) == [OTHER, LONG]
        assert [p for p, _ in bc.verify_seals()] == ["doc.bin"]
        assert bc.read("other.txt", 0, 7) == OTHER[:7]


def test_extract_and_verify_name_the_file_whose_length_changed(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    packed = resized(tmp_path / "packed", 10, encrypted=False)
    out = tmp_path / "out"
    code, _, err = run("extract", packed, "-C", str(out))
    assert code == 1 and "doc.bin: the index gives its length as 10 bytes" in err
    assert (out / "other.txt").read_bytes() == OTHER and not (out / "doc.bin").exists()
    archive = resized(tmp_path, 10)  # (whole, it fails its digest check first: named files)
    shutil.rmtree(out)
    code, _, err = run("extract", "--passphrase-file", pw_file, archive, "doc.bin",
                       "other.txt", "-C", str(out))  # fmt: skip
    assert code == 1 and "doc.bin: the index gives its length as 10 bytes" in err
    assert (out / "other.txt").read_bytes() == OTHER and not (out / "doc.bin").exists()
    code, stdout, _ = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 1 and "doc.bin: the index gives its length as 10 bytes" in stdout
    code, stdout, err = run("cat", "--passphrase-file", pw_file, archive, "doc.bin")
    assert code == 1 and stdout == "" and "doc.bin: the index gives its length as 10" in err


@pytest.mark.parametrize("logical", [10, len(LONG) + 100])
def test_the_server_reports_the_index_length_and_refuses_to_serve_another(
    tmp_path: Path, logical: int
) -> None:
    httpx = pytest.importorskip("httpx", reason="the server extra is not installed")
    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    from helpers.serving import serving

    archive = resized(tmp_path, logical)
    with (
        serving(archive, env={"BARECAT_PASSPHRASE": PASSPHRASE}) as (url, _),
        httpx.Client(base_url=url) as http,
    ):
        head = http.head("/a/private/files/doc.bin")
        assert head.headers["content-length"] == str(logical)  # sizes before reading: the index
        for ranged in (None, "bytes=0-4", "bytes=2-"):
            headers = {"Range": ranged} if ranged else {}
            answer = http.get("/a/private/files/doc.bin", headers=headers)
            assert answer.status_code >= 500 and LONG[:10] not in answer.content
        assert http.get("/a/private/files/other.txt").content == OTHER
        client = barecat.HttpBarecat(url)  # the client raises it too
        with pytest.raises(BarecatError):
            client.read("doc.bin")
        client.close()


@pytest.mark.parametrize("logical", [10, len(LONG) + 100])
def test_a_mount_reports_the_index_length_and_refuses_to_read_another(
    tmp_path: Path, logical: int
) -> None:
    from helpers.mounting import FUSE_PROBLEM, served

    if FUSE_PROBLEM:
        pytest.skip(FUSE_PROBLEM)
    archive = resized(tmp_path, logical)
    mnt = tmp_path / "mnt"
    with served(archive, mnt, env={"BARECAT_PASSPHRASE": PASSPHRASE}):
        assert (mnt / "doc.bin").stat().st_size == logical
        for _ in range(2):  # (and again: nothing cached from the first refusal)
            with pytest.raises(OSError) as e:
                (mnt / "doc.bin").read_bytes()
            assert e.value.errno == 5  # EIO
        with open(mnt / "doc.bin", "rb") as f, pytest.raises(OSError):
            f.seek(logical // 2)  # (past the size stat gave, the kernel asks nothing)
            f.read(10)
        assert (mnt / "other.txt").read_bytes() == OTHER


def test_fsspec_refuses_a_file_whose_length_changed(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    archive = resized(tmp_path, 10)
    fs = fsspec.filesystem("barecat", fo=archive, passphrase=PASSPHRASE, skip_instance_cache=True)
    assert fs.size("doc.bin") == 10
    assert fs.cat_file("doc.bin") == LONG  # no length given first: the sealed one
    with pytest.raises(BarecatIntegrityError, match=LENGTH):
        fs.cat_file("doc.bin", 0, 5)
    with pytest.raises(BarecatIntegrityError, match=LENGTH), fs.open("doc.bin") as f:
        f.read()
    assert fs.cat_file("other.txt") == OTHER
