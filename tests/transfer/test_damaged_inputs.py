"""Bad tar and zip input to ``convert`` and ``convert --wrap``: one clear line naming it,
and the rest done.

A member that cannot be stored (a file below a file, a path deeper than an archive
holds, an owner or time out of the range an archive holds, a file named as the root, a
zip member whose bytes fail its CRC-32 when wrapped) is left out with a line naming it,
and the rest is stored. An input that is corrupt or truncated (a header damaged or cut
short in the middle of a tar, a size no file has, a zip name flagged UTF-8 that is not,
a zip member failing its CRC-32 when converted) is one line naming the file and the
member, exit code 1, and no archive; no traceback, whatever Python's readers raise.
Where ``tarfile`` takes a damaged header for the end of the archive and would leave out
every member after it without a word, the conversion fails instead.
"""

from __future__ import annotations

import io
import stat
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import barecat
from helpers import Run

WRAP = [pytest.param([], id="convert"), pytest.param(["--wrap"], id="wrap")]


def add(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 1_700_000_000
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data))


def hostile_tar(path: Path) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "ok.txt", b"ok")
        add(tar, "ok.txt/child", b"below a file")
        add(tar, "a/" + "d/" * 1200 + "f", b"too deep")
        add(tar, "owner.txt", b"uid", uid=2**70)
        add(tar, "n" * 5000, b"a long name")
        add(tar, "good/b.txt", b"b")


@pytest.mark.parametrize("wrap", WRAP)
def test_hostile_members_are_left_out_and_the_rest_stored(
    tmp_path: Path, run: Run, wrap: list[str]
) -> None:
    hostile_tar(tmp_path / "h.tar")
    out = str(tmp_path / "h.barecat")
    code, _, err = run("convert", *wrap, str(tmp_path / "h.tar"), out)
    lines = sorted(err.splitlines())
    assert code == 1 and len(lines) == 3, err
    assert lines[0].startswith("barecat convert: skipped a/d/d/") and "1202 components" in lines[0]
    assert lines[1] == "barecat convert: skipped ok.txt/child: A parent of 'ok.txt/child' is a file"
    assert lines[2] == (
        f"barecat convert: skipped owner.txt: its uid ({2**70}) is out of the range an "
        "archive holds"
    )
    with barecat.Barecat(out) as bc:
        assert dict(bc.items()) == {"ok.txt": b"ok", "n" * 5000: b"a long name", "good/b.txt": b"b"}


def two_members(first: bytes = b"one") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add(tar, "one.txt", first)
        add(tar, "two.txt", b"two")
        add(tar, "three.txt", b"three")
    return out.getvalue()


def damaged_second_header() -> bytes:
    data = bytearray(two_members())
    data[1024 + 10] ^= 0x20  # the second header's name: its checksum no longer matches
    return bytes(data)


def cut_in_second_header() -> bytes:
    return two_members()[: 1024 + 300]


def negative_size() -> bytes:
    data = bytearray(two_members())
    data[1024 + 124 : 1024 + 136] = b"\xff" + bytes(11)  # GNU base-256: a size of -2**88
    block = data[1024 : 1024 + 512]
    block[148:156] = b" " * 8
    data[1024 + 148 : 1024 + 156] = b"%06o\0 " % sum(block)
    return bytes(data)


def zip_of(*members: tuple[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    return out.getvalue()


def zip_name_not_utf8() -> bytes:
    data = zip_of(("é.txt", b"flagged UTF-8"), ("b.txt", b"b"))
    return data.replace("é".encode(), b"\xff\xfe")  # in both headers; the flag stays


def zip_failing_crc() -> bytes:
    data = bytearray(zip_of(("a.txt", b"hello" * 20), ("b.txt", b"b")))
    data[data.index(b"hello") + 3] ^= 1
    return bytes(data)


DAMAGED: dict[str, tuple[str, Callable[[], bytes], str]] = {
    "a damaged header": (
        "x.tar",
        damaged_second_header,
        "corrupt or truncated tar (after member 'one.txt'): a damaged header: bad checksum",
    ),
    "a header cut short": (
        "x.tar",
        cut_in_second_header,
        "corrupt or truncated tar (after member 'one.txt'): a header cut short: the file "
        "is truncated",
    ),
    "a negative size": ("x.tar", negative_size, "corrupt or truncated tar ("),
    "a name not UTF-8": ("x.zip", zip_name_not_utf8, "corrupt or truncated zip: 'utf-8' codec"),
}


@pytest.mark.parametrize("wrap", WRAP)
@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_input_is_one_line_naming_it(
    tmp_path: Path, run: Run, wrap: list[str], case: str
) -> None:
    name, make, message = DAMAGED[case]
    source = tmp_path / name
    source.write_bytes(make())
    code, out, err = run("convert", *wrap, str(source), str(tmp_path / "x.barecat"))
    assert code == 1 and out == ""
    assert err.startswith(f"barecat convert: {source}: {message}") and err.count("\n") == 1, err
    if name.endswith(".tar"):  # the member, or the last one read whole
        assert "one.txt" in err or "two.txt" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing half made


def test_a_zip_member_failing_its_crc(tmp_path: Path, run: Run) -> None:
    """Converting reads it through zipfile, which refuses it: the input is damaged. A wrap
    reads nothing but to check it: that member is left out, the rest wrapped."""
    source = tmp_path / "x.zip"
    source.write_bytes(zip_failing_crc())
    code, _, err = run("convert", str(source), str(tmp_path / "c.barecat"))
    assert code == 1
    assert err == (
        f"barecat convert: {source}: corrupt or truncated zip (member 'a.txt'): Bad CRC-32 "
        "for file 'a.txt'\n"
    )
    code, _, err = run("convert", "--wrap", str(source), str(tmp_path / "w.barecat"))
    assert (code, err) == (
        1,
        "barecat convert: skipped a.txt: its bytes do not match the zip's CRC-32\n",
    )
    with barecat.Barecat(str(tmp_path / "w.barecat")) as bc:
        assert dict(bc.items()) == {"b.txt": b"b"}


@pytest.mark.parametrize("wrap", WRAP)
def test_a_zip_member_without_a_name_is_left_out(tmp_path: Path, run: Run, wrap: list[str]) -> None:
    data = bytearray(zip_of(("x", b"nameless"), ("b.txt", b"b")))
    central = data.index(b"PK\x01\x02")
    for lengths in (26, central + 28):  # the name's length 1 -> 0, its byte an extra field
        data[lengths : lengths + 4] = struct.pack("<HH", 0, 1)
    source = tmp_path / "x.zip"
    source.write_bytes(data)
    code, _, err = run("convert", *wrap, str(source), str(tmp_path / "x.barecat"))
    assert (code, err) == (1, "barecat convert: skipped : a file cannot be the archive's root\n")
    with barecat.Barecat(str(tmp_path / "x.barecat")) as bc:
        assert dict(bc.items()) == {"b.txt": b"b"}


def test_metadata_out_of_range_in_a_zip_is_left_out(tmp_path: Path, run: Run) -> None:
    """Info-ZIP's owner field may hold ids of any size."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        info = zipfile.ZipInfo("big-owner.txt")
        info.create_system, info.external_attr = 3, (stat.S_IFREG | 0o644) << 16
        info.extra = struct.pack("<HHBB", 0x7875, 3 + 2 * 10, 1, 10) + b"\xff" * 10
        info.extra += bytes([10]) + b"\x01" * 10
        zf.writestr(info, b"x")
        zf.writestr("b.txt", b"b")
    source = tmp_path / "x.zip"
    source.write_bytes(out.getvalue())
    code, _, err = run("convert", str(source), str(tmp_path / "x.barecat"))
    assert code == 1 and err.startswith("barecat convert: skipped big-owner.txt: its uid (")
    with barecat.Barecat(str(tmp_path / "x.barecat")) as bc:
        assert dict(bc.items()) == {"b.txt": b"b"}
