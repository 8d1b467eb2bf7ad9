"""An encrypted archive's index digest: file rows put back, removed or edited without the
key are found by ``verify`` (and some already when the key is first used); every edit
made with the key keeps it; a pinned digest catches a whole index rolled back."""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import BarecatError, BarecatIntegrityError
from barecat.index.file_digest import DIGEST_KEY
from helpers import PASSPHRASE as PW
from helpers import Run


def make_encrypted(tmp_path: Path, files: dict[str, bytes] | None = None) -> str:
    path = str(tmp_path / "private.barecat")
    with barecat.Barecat(path, readonly=False, passphrase=PW) as bc:
        for name, data in (files or {"a/1": b"one", "a/2": b"two" * 50, "b": b"bee"}).items():
            bc[name] = data
    return path


def digest_of(path: str) -> tuple[str | None, str | None]:
    with barecat.Barecat(path, passphrase=PW) as bc:
        return bc.verify_index_digest()


def row(path: str, name: str) -> tuple[int, int, int, int, int]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(
            "SELECT shard, offset, size, crc32c, logical_size FROM files WHERE path = ?",
            (name,),
        ).fetchone()
    return tuple(found)


def sql(path: str, statement: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, args)


def test_a_file_row_put_back_from_an_older_index_fails_verify(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    """The old ciphertext of a replaced file stays in a hole until defrag; restoring its
    old row returned the old contents and passed verify. The digest tells."""
    archive = make_encrypted(tmp_path, {"salary.txt": b"old: 100", "x": b"x"})
    old = row(archive, "salary.txt")
    with barecat.Barecat(archive, readonly=False, passphrase=PW) as bc:
        bc.remove("salary.txt")
        bc["salary.txt"] = b"new: 200"
    assert digest_of(archive)[0] is None
    sql(archive, "UPDATE files SET shard = ?, offset = ?, size = ?, crc32c = ?, "
        "logical_size = ? WHERE path = 'salary.txt'", *old)  # fmt: skip
    problem, _ = digest_of(archive)
    assert problem is not None and "do not match the index digest" in problem
    code, out, _ = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 1 and "do not match the index digest" in out and "OK" not in out


def test_a_removed_row_or_digest_fails_when_the_key_is_first_used(tmp_path: Path) -> None:
    archive = make_encrypted(tmp_path)
    pristine = str(tmp_path / "pristine.barecat")
    shutil.copy(archive, pristine)
    sql(archive, "DELETE FROM files WHERE path = 'b'")
    with barecat.Barecat(archive, passphrase=PW) as bc:
        with pytest.raises(BarecatIntegrityError, match=r"^a/1: not read.*counts 3 files"):
            bc["a/1"]
        assert sorted(bc) == ["a/1", "a/2"]  # listing needs no trust in contents
        worker = pickle.loads(pickle.dumps(bc))  # as DataLoader workers get it
        with pytest.raises(BarecatIntegrityError, match="counts 3 files"):
            worker["a/2"]
        worker.close()
    for tamper in (
        f"DELETE FROM config WHERE key = '{DIGEST_KEY}'",
        "UPDATE config SET value_int = 19 WHERE key = 'sealing_level'",  # bound to it
        f"UPDATE config SET value_text = 'ab' || value_text WHERE key = '{DIGEST_KEY}'",
    ):
        shutil.copy(pristine, archive)
        sql(archive, tamper)
        with barecat.Barecat(archive, passphrase=PW) as bc:
            with pytest.raises(BarecatIntegrityError, match="fails authentication"):
                bc.read("a/2")
            assert bc.verify_index_digest()[0] is not None


def test_without_the_key_the_file_list_cannot_change(tmp_path: Path) -> None:
    archive = make_encrypted(tmp_path)
    before = digest_of(archive)
    with barecat.Barecat(archive, readonly=False) as bc:
        with pytest.raises(BarecatError, match="open it with its passphrase"):
            bc.remove("b")
        with pytest.raises(sqlite3.IntegrityError, match="authenticates its list of files"):
            bc.index.remove_file("b")  # the index alone, past the archive's checks
        bc.chmod("b", 0o600)  # metadata is not covered: no key needed
        bc.defrag()
    assert digest_of(archive) == before


def test_every_edit_with_the_key_keeps_the_digest(tmp_path: Path, run: Run, pw_file: str) -> None:
    archive = make_encrypted(tmp_path)
    pins = []

    def check() -> None:
        problem, pin = digest_of(archive)
        assert problem is None
        pins.append(pin)

    with barecat.Barecat(archive, readonly=False, passphrase=lambda: PW) as bc:
        bc["c/new"] = b"new file"
        bc.rename("a/2", "a/renamed")
        bc.remove("b")
        bc["b"] = b"bee again"
        bc.rmtree("c")
    check()
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    for i in range(30):
        (tree / "d" / f"{i}.txt").write_bytes(b"%d" % i * 100)
    steps = [
        ("add", archive, "-C", str(tree), "d"),
        ("defrag", archive),
        ("reshard", "-s", "1M", archive),
        ("repair", "--drop-bad", archive),
    ]
    for argv in steps:
        code, out, err = run(argv[0], "--passphrase-file", pw_file, *argv[1:])
        assert code == 0, (argv, out, err)
        check()
    assert pins[1] == pins[2] == pins[3] == pins[4]  # moving bytes changes no covered row
    assert pins[0] != pins[1]
    merged, sub, made, converted = (
        str(tmp_path / f"{name}.barecat") for name in ("merged", "sub", "made", "converted")
    )
    for argv in (
        ("merge", "-o", merged, archive),
        ("subset", "--pattern", "d/**", "-o", sub, archive),
        ("create", "--encrypt", made, "-C", str(tree), "d"),
        ("convert", "--encrypt", merged, converted),
    ):
        code, out, err = run(*argv, "--passphrase-file", pw_file)
        assert code == 0, (argv, out, err)
    for path in (merged, sub, made, converted):
        problem, pin = digest_of(path)
        assert problem is None and pin is not None
    assert digest_of(merged)[1] == pins[-1]  # the same rows: the same digest


def test_a_pinned_digest_catches_a_whole_index_rolled_back(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    archive = make_encrypted(tmp_path, {"contract.txt": b"v1"})
    snapshot = str(tmp_path / "snapshot")
    shutil.copy(archive, snapshot)
    with barecat.Barecat(archive, readonly=False, passphrase=PW) as bc:
        bc.remove("contract.txt")
        bc["contract.txt"] = b"v2, the one that counts"
    code, out, err = run("digest", "--passphrase-file", pw_file, archive)
    assert code == 0, err
    pinned = out.strip()
    assert len(pinned) == 32 and int(pinned, 16) >= 0
    args = ("verify", "--passphrase-file", pw_file, "--expect-digest", pinned, archive)
    code, out, err = run(*args)
    assert code == 0 and f"index digest {pinned}" in out, err
    shutil.copy(snapshot, archive)  # index and digest rolled back together
    with barecat.Barecat(archive, passphrase=PW) as bc:
        assert bc["contract.txt"] == b"v1"  # what a pinned digest is for:
    code, out, err = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 0  # the archive is consistent in itself
    code, out, err = run(*args)
    assert code == 1 and f"not {pinned}" in out


def test_an_archive_encrypted_before_digests_gets_one_by_reset(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    """Keys wrapped before digests existed say so (their associated data): such archives
    read as before, verify says they keep no digest, and ``digest --reset`` adds one."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from barecat.sealing import KeyDerivation
    from barecat.sealing.settings import SealingSettings

    archive = make_encrypted(tmp_path)
    with barecat.Barecat(archive, passphrase=PW) as bc:
        settings = SealingSettings.from_config(bc.index.sealing_config())
        data_key = bc._archive.sealing.data_key()  # type: ignore[union-attr]
    assert settings.key_derivation is not None
    derivation = KeyDerivation(os.urandom(16), n=1 << 12)
    nonce = os.urandom(12)
    old_wrap = nonce + AESGCM(derivation.derive(PW)).encrypt(
        nonce, data_key, b"barecat-data-key-v1"
    )
    with sqlite3.connect(archive) as conn:
        conn.execute(f"DELETE FROM config WHERE key = '{DIGEST_KEY}'")
        for key, text, number in [
            ("sealing_wrapped_key", old_wrap.hex(), None),
            ("sealing_kdf_salt", derivation.salt.hex(), None),
            ("sealing_kdf_n", None, derivation.n),
        ]:
            conn.execute(
                "UPDATE config SET value_text = ?, value_int = ? WHERE key = ?", (text, number, key)
            )
    with barecat.Barecat(archive, readonly=False, passphrase=PW) as bc:
        assert bc["a/1"] == b"one" and bc.verify_index_digest() == (None, None)
        bc.remove("b")  # nothing to keep: no key needed beyond reading
    code, _, err = run("verify", "--passphrase-file", pw_file, archive)
    assert code == 0 and "keeps no index digest" in err and "digest --reset" in err
    code, out, err = run("digest", "--passphrase-file", pw_file, "--reset", archive)
    assert code == 0 and len(out.strip()) == 32, err
    problem, pin = digest_of(archive)
    assert problem is None and pin == out.strip()
    sql(archive, "DELETE FROM files WHERE path = 'a/1'")
    assert digest_of(archive)[0] is not None  # kept from now on
