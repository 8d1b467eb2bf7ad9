"""scrypt costs under barecat's ceiling that scrypt itself refuses, or that need more
memory than Python's scrypt takes, are ``KeyDerivationCostBarecatError`` s naming where
the costs came from: never hashlib's raw ``ValueError`` (``test_sealed_trust.py`` has
the costs above the ceiling)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import KeyDerivationCostBarecatError
from barecat.kdf import MAX_MEMORY, MAX_WORK, check_scrypt_costs, scrypt_key
from helpers import PASSPHRASE, Run


@pytest.mark.parametrize(
    ("n", "r", "p", "why"),
    [
        (1 << 16, 1, 1, "invalid"),  # RFC 7914: N below 2^(16 r); OpenSSL said "memory limit"
        (1 << 20, 1, 2, "invalid"),
        (1 << 17, 1, 1, "invalid"),
        (2, 1 << 22, 2, "more than Python's scrypt takes"),  # 3 GiB in all, 1 GiB of table
    ],
)
def test_costs_under_the_ceiling_scrypt_cannot_use_are_refused(
    n: int, r: int, p: int, why: str
) -> None:
    assert 128 * r * n <= MAX_MEMORY and n * r * p <= MAX_WORK  # under the ceiling
    with pytest.raises(KeyDerivationCostBarecatError, match=why) as e:
        scrypt_key(b"secret", b"salt", n, r, p, "a test's settings")
    assert isinstance(e.value, ValueError) and "a test's settings: " in str(e.value)


def test_costs_scrypt_defines_still_derive() -> None:
    check_scrypt_costs(1 << 15, 1, 1)  # the largest N for r = 1
    check_scrypt_costs(1 << 20, 8, 1)  # the ceiling's memory itself
    assert len(scrypt_key(b"secret", b"salt", 1 << 10, 1, 4)) == 32


def test_an_archive_with_such_costs_is_one_clear_line(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    archive = str(tmp_path / "private.barecat")
    with barecat.Barecat(archive, readonly=False, passphrase=PASSPHRASE) as bc:
        bc["doc.txt"] = b"secret text"
    conn = sqlite3.connect(archive)
    with conn:
        conn.execute("UPDATE config SET value_int = 65536 WHERE key = 'sealing_kdf_n'")
        conn.execute("UPDATE config SET value_int = 1 WHERE key = 'sealing_kdf_r'")
    conn.close()
    with pytest.raises(KeyDerivationCostBarecatError, match="sealing settings: invalid"):
        barecat.Barecat(archive, passphrase=PASSPHRASE)
    code, out, err = run("cat", "--passphrase-file", pw_file, archive, "doc.txt")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "invalid scrypt costs N=65536, r=1, p=1" in err
