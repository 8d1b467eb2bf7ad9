"""The owner's key vouches only for what it sealed: an archive whose encryption was
removed is refused by anyone who gives the key (API, command line, server, mount), a
source with a file row put back is refused by every copy that holds the key (merge,
subset, convert, rsync) before an output appears, and a file length in the index that
differs from the sealed one is an integrity error on every read path, never a file cut
short."""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
from pathlib import Path

import crc32c
import pytest

import barecat
from barecat.archive import IfEncrypted
from barecat.exceptions import BarecatError, BarecatIntegrityError
from barecat.sealing import Sealer
from barecat.transfer.sync.driver import sync
from helpers import PASSPHRASE, Run

SECRET = b"the real contents, never to be replaced " * 10
FORGED = b"attacker's text"
OTHER = b"another file"
NOT_ENCRYPTED = r"passphrase given but .*private\.barecat is not encrypted"


def encrypted_archive(tmp_path: Path, name: str = "private.barecat") -> str:
    path = str(tmp_path / name)
    with barecat.Barecat(path, readonly=False, passphrase=PASSPHRASE) as bc:
        bc["doc.txt"] = SECRET
        bc["other.txt"] = OTHER
    return path


def sql(archive: str, statement: str, *args: object) -> None:
    with sqlite3.connect(archive) as conn:
        conn.execute(statement, args)


def append_and_point(archive: str, path: str, stored: bytes, logical: int | None) -> None:
    """What someone without the key can do: append bytes to the shard, repoint a row."""
    shard = archive + "-shard-00000"
    offset = os.path.getsize(shard)
    with open(shard, "ab") as f:
        f.write(stored)
    extra = "" if logical is None else f", logical_size = {logical}"
    sql(archive, f"UPDATE files SET offset = ?, size = ?, crc32c = ?{extra} WHERE path = ?",
        offset, len(stored), crc32c.crc32c(stored), path)  # fmt: skip


def downgraded(tmp_path: Path, kind: str) -> str:
    return downgrade(encrypted_archive(tmp_path), kind)


def downgrade(archive: str, kind: str) -> str:
    """Remove an encrypted archive's encryption as someone without the key can: its key
    rows deleted and its files pointed at compressed-only sealed bytes, or the archive
    replaced whole by a plain one of the attacker's files."""
    if kind == "compressed":
        sql(archive, "DELETE FROM config WHERE key LIKE 'sealing_kdf%' OR key IN "
            "('sealing_wrapped_key', 'sealing_key_id', 'sealing_index_digest')")  # fmt: skip
        for path, data in (("doc.txt", FORGED), ("other.txt", OTHER)):
            append_and_point(archive, path, Sealer("zstd", 3).seal(path, data), len(data))
    else:
        barecat.Barecat(archive, readonly=False, overwrite=True).close()
        with barecat.Barecat(archive, readonly=False) as bc:
            bc["doc.txt"] = FORGED
            bc["other.txt"] = OTHER
    return archive


# -- 8: an archive whose encryption was removed ------------------------------------------


@pytest.mark.parametrize("kind", ["compressed", "plain"])
def test_a_key_given_in_any_form_refuses_an_archive_that_is_not_encrypted(
    tmp_path: Path, kind: str
) -> None:
    archive = downgraded(tmp_path, kind)
    asked: list[int] = []

    def ask() -> str:
        asked.append(1)
        return PASSPHRASE

    for given in (PASSPHRASE, PASSPHRASE.encode(), ask):
        for readonly in (True, False):
            with pytest.raises(BarecatError, match=NOT_ENCRYPTED):
                barecat.Barecat(archive, readonly=readonly, passphrase=given)
    assert asked == []  # refused before anything asks for it, or reads a file
    with barecat.Barecat(archive, passphrase=IfEncrypted(ask)) as bc:  # no claim made
        assert bc["doc.txt"] == FORGED and asked == []
    with barecat.Barecat(archive) as bc:
        assert bc["doc.txt"] == FORGED


def test_a_compressed_only_archive_refuses_a_key(tmp_path: Path, run: Run, pw_file: str) -> None:
    archive = str(tmp_path / "packed.barecat")
    with barecat.Barecat(archive, readonly=False, compression="zstd") as bc:
        bc["a.txt"] = b"packed"
    for given in (PASSPHRASE, lambda: PASSPHRASE):
        with pytest.raises(BarecatError, match=r"passphrase given but .*packed\.barecat"):
            barecat.Barecat(archive, passphrase=given)
    code, out, err = run("cat", "--passphrase-file", pw_file, archive, "a.txt")
    assert code == 1 and out == "" and "passphrase given but" in err
    assert run("cat", archive, "a.txt")[:2] == (0, "packed")


def test_a_key_given_makes_a_new_archive_encrypted_and_refuses_an_existing_plain_one(
    tmp_path: Path,
) -> None:
    """A function was taken as no key at all by a new archive, which stayed plain."""
    made = str(tmp_path / "made.barecat")
    with barecat.Barecat(made, readonly=False, passphrase=lambda: PASSPHRASE) as bc:
        bc["a.txt"] = SECRET
    with barecat.Barecat(made, passphrase=PASSPHRASE) as bc:
        assert bc.encrypted and bc["a.txt"] == SECRET
    assert SECRET[:20] not in (tmp_path / "made.barecat-shard-00000").read_bytes()
    empty = str(tmp_path / "empty.barecat")
    barecat.Barecat(empty, readonly=False).close()  # (emptied by someone, say)
    for given in (PASSPHRASE, lambda: PASSPHRASE):
        with pytest.raises(BarecatError, match=r"passphrase given but .*empty\.barecat"):
            barecat.Barecat(empty, readonly=False, passphrase=given)


def test_a_pickled_reader_refuses_the_archive_downgraded_since(tmp_path: Path) -> None:
    archive = encrypted_archive(tmp_path)
    with barecat.Barecat(archive, passphrase=PASSPHRASE) as bc:
        bc.unlock()
        pickled = pickle.dumps(bc)  # as DataLoader workers get it, with the data key
    downgrade(archive, "plain")
    with pytest.raises(BarecatError, match=NOT_ENCRYPTED):
        pickle.loads(pickled)


@pytest.mark.parametrize("kind", ["compressed", "plain"])
def test_the_command_line_refuses_a_downgraded_archive_when_given_the_key(
    tmp_path: Path, run: Run, pw_file: str, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    archive = downgraded(tmp_path, kind)
    out_dir = tmp_path / "out"
    for key in (["--passphrase-file", pw_file], []):
        if not key:
            monkeypatch.setenv("BARECAT_PASSPHRASE", PASSPHRASE)
        code, out, err = run("cat", *key, archive, "doc.txt")
        assert code == 1 and "attacker" not in out and "passphrase given but" in err, err
        code, out, err = run("verify", *key, archive)
        assert code == 1 and "passphrase given but" in err, out
        code, _, err = run("extract", *key, archive, "-C", str(out_dir))
        assert code == 1 and "passphrase given but" in err and not out_dir.exists()
    # no key given: a plain archive is plain (BARECAT_PASSPHRASE set empty counts as unset)
    monkeypatch.setenv("BARECAT_PASSPHRASE", "")
    assert run("cat", archive, "doc.txt")[:2] == (0, FORGED.decode())


def test_creating_with_the_key_exported_makes_what_the_options_say(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BARECAT_PASSPHRASE exported: create without --encrypt still makes a plain archive
    (the key claims nothing for an archive being made), and that archive is then read
    with the variable unset."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"plain")
    monkeypatch.setenv("BARECAT_PASSPHRASE", PASSPHRASE)
    plain, sealed = str(tmp_path / "plain.barecat"), str(tmp_path / "sealed.barecat")
    assert run("create", plain, "-C", str(src), ".")[0] == 0
    assert run("create", "--encrypt", sealed, "-C", str(src), ".")[0] == 0
    assert run("cat", sealed, "a.txt")[:2] == (0, "plain")
    code, _, err = run("ls", plain)
    assert code == 1 and "passphrase given but" in err
    with barecat.Barecat(plain) as bc:
        assert not bc.sealed and bc["a.txt"] == b"plain"


def test_the_server_refuses_a_downgraded_archive_when_given_the_key(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="the server extra is not installed")
    import subprocess
    import sys

    archive = downgraded(tmp_path, "compressed")
    served = subprocess.run(
        [sys.executable, "-m", "barecat.cli", "serve", "--port", "0", archive],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "BARECAT_PASSPHRASE": PASSPHRASE},
    )  # fmt: skip
    assert served.returncode == 1 and "passphrase given but" in served.stderr
    assert "http://" not in served.stdout


def test_a_mount_refuses_a_downgraded_archive_when_given_the_key(tmp_path: Path) -> None:
    import subprocess

    from barecat.mount import is_mounted
    from helpers import BARECAT, wait_for
    from helpers.mounting import FUSE_PROBLEM

    if FUSE_PROBLEM:
        pytest.skip(FUSE_PROBLEM)
    archive = downgraded(tmp_path, "plain")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {**os.environ, "BARECAT_PASSPHRASE": PASSPHRASE}
    for foreground in (["-f"], []):
        mount = subprocess.Popen([BARECAT, "mount", *foreground, archive, str(mnt)],
                                 stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        try:
            wait_for(lambda m=mount: m.poll() is not None or is_mounted(str(mnt)), "the mount")
            assert not is_mounted(str(mnt))
            assert mount.wait() == 1 and "passphrase given but" in (mount.stderr or "").read()
        finally:
            if is_mounted(str(mnt)):
                subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=False)
            mount.kill()
            mount.wait()
            if mount.stderr is not None:
                mount.stderr.close()


# -- 9: no copy launders a row put back ---------------------------------------------------


def replayed(tmp_path: Path) -> str:
    """An encrypted archive with a file row put back from an older index (its old
    ciphertext still in a hole): ``verify`` with the key flags it."""
    archive = encrypted_archive(tmp_path, "source.barecat")
    with sqlite3.connect(archive) as conn:
        old = conn.execute("SELECT shard, offset, size, crc32c, logical_size FROM files "
                           "WHERE path = 'doc.txt'").fetchone()  # fmt: skip
    with barecat.Barecat(archive, readonly=False, passphrase=PASSPHRASE) as bc:
        bc.remove("doc.txt")
        bc["doc.txt"] = b"the new version"
    sql(archive, "UPDATE files SET shard = ?, offset = ?, size = ?, crc32c = ?, "
        "logical_size = ? WHERE path = 'doc.txt'", *old)  # fmt: skip
    with barecat.Barecat(archive, passphrase=PASSPHRASE) as bc:
        assert bc["doc.txt"] == SECRET  # the old version is served...
        assert "do not match the index digest" in (bc.verify_index_digest()[0] or "")
    return archive


def leftovers(folder: Path, name: str) -> list[str]:
    return sorted(e for e in os.listdir(folder) if e.startswith((name, f".{name}")))


def test_merge_and_subset_refuse_a_source_whose_rows_fail_its_digest(tmp_path: Path) -> None:
    source = replayed(tmp_path)
    target = str(tmp_path / "out.barecat")
    key = IfEncrypted(lambda: PASSPHRASE)
    with barecat.Barecat(target, readonly=False, passphrase=key) as out:
        with pytest.raises(BarecatIntegrityError, match=r"source\.barecat: the file rows do not"):
            out.merge([source])
        with (
            barecat.Barecat(source, passphrase=PASSPHRASE) as src,
            pytest.raises(BarecatIntegrityError, match=r"source\.barecat"),
        ):
            out.take_subset(src, None)
        assert out.num_files == 0 and not out.sealed  # refused before it took anything
    # the digest row deleted: the wrapped key says there must be one
    sql(source, "DELETE FROM config WHERE key = 'sealing_index_digest'")
    with (
        barecat.Barecat(target, readonly=False, passphrase=key) as out,
        pytest.raises(BarecatIntegrityError, match=r"source\.barecat: the index digest is"),
    ):
        out.merge([source])


@pytest.mark.parametrize(
    "argv",
    [
        ["merge", "-o", "{out}.barecat", "{src}"],
        ["merge", "--symlink", "-o", "{out}.barecat", "{src}"],
        ["subset", "{src}", "-o", "{out}.barecat", "--pattern", "*.txt"],
        ["convert", "--encrypt", "{src}", "{out}.barecat"],
        ["convert", "{src}", "{out}.barecat"],
        ["convert", "{src}", "{out}.tar"],
        ["convert", "{src}", "{out}.cc"],
        ["rsync", "--decrypt", "{src}::/", "{out}.barecat::"],
        ["rsync", "{src}::/", "{out}/"],
        ["extract", "{src}", "-C", "{out}"],
    ],
)
def test_no_copy_launders_a_row_put_back(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """Each of these wrote an output whose own fresh digest verified; now each refuses,
    naming the source, and leaves no output (nor a hidden partial one)."""
    source = replayed(tmp_path)
    monkeypatch.setenv("BARECAT_PASSPHRASE", PASSPHRASE)
    out = str(tmp_path / "out")
    code, _, err = run(*(a.format(src=source, out=out) for a in argv))
    assert code == 1, err
    assert "source.barecat: the file rows do not match the index digest" in err
    assert leftovers(tmp_path, "out") == []


def test_rsync_asks_before_storing_an_encrypted_archive_decrypted(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = encrypted_archive(tmp_path)
    monkeypatch.setenv("BARECAT_PASSPHRASE", PASSPHRASE)
    plain = str(tmp_path / "plain.barecat")
    code, _, err = run("rsync", f"{source}::/", f"{plain}::")
    assert code == 1 and "would be stored there decrypted" in err and "--decrypt" in err
    assert leftovers(tmp_path, "plain") == []  # not even an empty destination
    code, _, err = run("rsync", "-n", f"{source}::/", f"{plain}::")
    assert code == 1 and "--decrypt" in err
    with barecat.Barecat(plain, readonly=False) as bc:  # an existing plain destination
        bc["old.txt"] = b"old"
    code, _, err = run("rsync", f"{source}::/", f"{plain}::")
    assert code == 1 and "would be stored there decrypted" in err
    with barecat.Barecat(plain) as bc:
        assert sorted(bc) == ["old.txt"]
    assert run("rsync", "--decrypt", f"{source}::/", f"{plain}::")[0] == 0
    with barecat.Barecat(plain) as bc:
        assert not bc.sealed and bc["doc.txt"] == SECRET and bc["old.txt"] == b"old"
    # into an encrypted archive, or a directory (as extract does): no flag needed
    other = str(tmp_path / "other.barecat")
    with barecat.Barecat(other, readonly=False, passphrase=PASSPHRASE) as bc:
        bc["mine.txt"] = b"mine"
    assert run("rsync", f"{source}::/", f"{other}::")[0] == 0
    with barecat.Barecat(other, passphrase=PASSPHRASE) as bc:
        assert bc["doc.txt"] == SECRET and bc.verify_index_digest()[0] is None
    assert run("rsync", f"{source}::/", str(tmp_path / "dir") + "/")[0] == 0
    assert (tmp_path / "dir" / "doc.txt").read_bytes() == SECRET
    # the library: the same rule, decrypt=True to ask
    with pytest.raises(BarecatError, match="decrypt=True"):
        sync([f"{source}::/"], f"{tmp_path / 'lib.barecat'}::", passphrase=PASSPHRASE)
    assert sync([f"{source}::/"], f"{tmp_path / 'lib.barecat'}::", passphrase=PASSPHRASE,
                decrypt=True).done  # fmt: skip


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
