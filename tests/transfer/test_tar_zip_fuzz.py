"""Fuzzing tar and zip ingest: ``convert``, ``convert --wrap`` and the index a mount of a
tar or zip builds, fed real tar (ustar, GNU, PAX, gzip-compressed) and zip (stored,
deflated) files changed the ways storage and hostile writers change them (bits flipped,
bytes and header fields overwritten, bytes inserted, deleted or cut off; tar header
checksums made right again, so that changed fields get past them).

Whatever the bytes, each step works or raises a ``BarecatError`` naming the input, never
``IndexError``, ``struct.error``, ``tarfile.ReadError`` or another foreign exception, nor
allocates memory sized by a damaged length field. What
it stores is never a lie: every file it stores reads back as exactly what Python's own
``tarfile`` and ``zipfile`` read for that member of the changed input (a member they
cannot read, such as a zip member whose bytes fail its CRC-32, is not stored), and the
members that lie wholly before the first changed byte of a tar are all stored.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import barecat
from barecat.exceptions import BarecatError
from barecat.mount.tars import index_of_tars
from barecat.paths import normalize
from barecat.transfer.convert.conversion import archive2barecat
from barecat.transfer.convert.wrapping import wrap_archive
from helpers.fuzzing import bounded_memory, fuzz_settings
from helpers.mutating import Mutation, first_change, mutate, mutation_lists

pytestmark = pytest.mark.slow

MTIME = 1_600_000_000
BRAVO = b"bravo " * 50
FILES = {  # names far apart (no mutation of a few bytes turns one into another)
    "alpha-directory/bravo-first-file.txt": BRAVO,
    "echo-binary-contents.bin": bytes(range(256)) * 8,
    "foxtrot-empty-file": b"",
    "golf-directory/" + "long-name-part-" * 9 + "end.txt": b"a name over 100 bytes",
    "hotel-\u00fcnicode-\u540d\u524d.txt": b"non-ASCII name",
}
LINK = ("charlie-symbolic-link", "alpha-directory/bravo-first-file.txt")
HARD = ("delta-hard-link-copy", "alpha-directory/bravo-first-file.txt")


def _tar(fmt: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:

        def add(info: tarfile.TarInfo, data: bytes | None = None) -> None:
            info.mtime, info.uid, info.gid = MTIME, 1000, 1000
            info.size = len(data) if data is not None else 0
            tar.addfile(info, io.BytesIO(data) if data is not None else None)

        directory = tarfile.TarInfo("alpha-directory")
        directory.type, directory.mode = tarfile.DIRTYPE, 0o755
        add(directory)
        for name, data in list(FILES.items())[:2]:
            add(tarfile.TarInfo(name), data)
        link = tarfile.TarInfo(LINK[0])
        link.type, link.linkname = tarfile.SYMTYPE, LINK[1]
        add(link)
        hard = tarfile.TarInfo(HARD[0])
        hard.type, hard.linkname = tarfile.LNKTYPE, HARD[1]
        add(hard)
        for name, data in list(FILES.items())[2:]:
            if len(name) <= 100 or fmt != tarfile.USTAR_FORMAT:  # (ustar: no long names)
                add(tarfile.TarInfo(name), data)
    return out.getvalue()


def _zip(compression: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as zf:
        d = zipfile.ZipInfo("alpha-directory/", (2020, 9, 13, 12, 26, 40))
        d.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
        d.create_system = 3
        zf.writestr(d, b"")
        for i, (name, data) in enumerate(FILES.items()):
            info = zipfile.ZipInfo(name, (2020, 9, 13, 12, 26, 40))
            info.create_system, info.compress_type = 3, compression
            info.external_attr = (stat.S_IFREG | 0o640) << 16
            if i == 1:  # Info-ZIP's timestamp and owner fields
                info.extra = struct.pack("<HHBi", 0x5455, 5, 1, MTIME)
                info.extra += struct.pack("<HHBBIBI", 0x7875, 11, 1, 4, 1000, 4, 1000)
            zf.writestr(info, data)
        link = zipfile.ZipInfo(LINK[0], (2020, 9, 13, 12, 26, 40))
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, LINK[1])
    return out.getvalue()


class Original:
    """A pristine input and the offsets where mutations matter most (a plain class:
    hypothesis prints it by its repr, not its bytes)."""

    def __init__(self, kind: str, data: bytes) -> None:
        self.kind, self.data = kind, data
        self.suffix = ".zip" if kind.startswith("zip") else ".tar.gz" if kind == "gz" else ".tar"
        self.spots = _zip_spots(data) if self.suffix == ".zip" else _tar_spots(data)

    def __repr__(self) -> str:
        return f"<{self.kind}>"


_TAR_FIELDS = [0, 99, 100, 108, 116, 124, 135, 136, 148, 155, 156, 157, 257, 263, 345, 512]
_ZIP_FIELDS = {  # a record's signature -> offsets of its fields
    b"PK\x03\x04": [0, 4, 6, 8, 14, 18, 22, 26, 28, 30],
    b"PK\x01\x02": [0, 4, 8, 10, 16, 20, 24, 28, 30, 32, 38, 42, 46],
    b"PK\x05\x06": [0, 4, 8, 10, 12, 16, 20],
}


def _tar_spots(data: bytes) -> list[int]:
    return [h + f for h in _tar_headers(data) for f in _TAR_FIELDS]


def _tar_headers(data: bytes) -> list[int]:
    return [at for at in range(0, len(data) - 511, 512) if data[at + 257 : at + 262] == b"ustar"]


def _zip_spots(data: bytes) -> list[int]:
    spots = []
    for signature, fields in _ZIP_FIELDS.items():
        at = data.find(signature)
        while at >= 0:
            spots += [at + f for f in fields]
            at = data.find(signature, at + 1)
    return spots


ORIGINALS = {
    "ustar": _tar(tarfile.USTAR_FORMAT),
    "gnu": _tar(tarfile.GNU_FORMAT),
    "pax": _tar(tarfile.PAX_FORMAT),
    "gz": gzip.compress(_tar(tarfile.PAX_FORMAT), mtime=0),
    "zip-stored": _zip(zipfile.ZIP_STORED),
    "zip-deflated": _zip(zipfile.ZIP_DEFLATED),
}


def fix_checksums(data: bytes) -> bytes:
    """Every tar header's checksum made right for the header's bytes as they are."""
    out = bytearray(data)
    for at in _tar_headers(data):
        block = out[at : at + 512]
        block[148:156] = b" " * 8
        out[at + 148 : at + 156] = b"%06o\0 " % sum(block)
    return bytes(out)


# -- what the readers of the standard library read ----------------------------------------


class Reference:
    """What ``tarfile`` or ``zipfile`` read from a changed input: ``files``, normalized
    path -> a file's bytes or a link's target, and ``damaged``, the paths of members whose
    bytes they refuse (a tar cut short inside them, a zip member failing its CRC-32).
    A path that is also a directory, another member's or below one is in neither: which
    one wins depends on rules they do not have."""

    def __init__(self, path: Path, zipped: bool) -> None:
        self.files: dict[str, bytes] = {}
        self.damaged: set[str] = set()
        self.listed = True
        seen: dict[str, bytes | None] = {}
        taken: set[str] = set()
        dirs: set[str] = set()
        try:
            members = _zip_members(path) if zipped else _tar_members(path)
            for name, read, is_dir in members:
                norm = _normalized(name)
                if norm is not None:
                    seen[norm] = None if read is None or norm in taken else self._read(norm, read)
                    taken.add(norm)
                    if is_dir:
                        dirs.add(norm)
        except Exception:  # whatever they raise: then every member is in doubt
            self.listed = False
            return
        for name in taken:
            parent = name.rpartition("/")[0]
            while parent:
                if parent in taken and parent not in dirs:
                    seen[parent] = seen[name] = None
                    self.damaged -= {parent, name}
                parent = parent.rpartition("/")[0]
        self.files = {name: data for name, data in seen.items() if data is not None}

    def _read(self, name: str, read: Callable[[], bytes]) -> bytes | None:
        try:
            return read()
        except (tarfile.ReadError, zipfile.BadZipFile) as e:
            if "CRC" in str(e) or "unexpected end" in str(e):
                self.damaged.add(name)
            return None
        except Exception:
            return None


Members = Iterator[tuple[str, Callable[[], bytes] | None, bool]]
"""Member names, each with how to read its bytes (None: a directory, or a member that
is not a file or link) and whether it is a directory."""


def _tar_members(path: Path) -> Members:
    with tarfile.open(path, "r:*") as tar:
        for m in tar:
            if m.issym():
                yield m.name, lambda m=m: os.fsencode(m.linkname), False  # type: ignore[misc]
            elif m.isreg() and not m.issparse():
                yield m.name, lambda m=m: tar.extractfile(m).read(), False  # type: ignore[misc,union-attr]
            else:
                yield m.name, None, m.isdir()


def _zip_members(path: Path) -> Members:
    with zipfile.ZipFile(path) as zf:
        for m in zf.infolist():
            is_dir = m.filename.endswith("/")
            readable = not is_dir and not m.flag_bits & 0x1
            yield m.filename, (lambda m=m: zf.read(m)) if readable else None, is_dir  # type: ignore[misc]


def _normalized(name: str) -> str | None:
    try:
        return normalize(name)
    except BarecatError:
        return None


# -- the promises ---------------------------------------------------------------------------


def documented(step: Callable[[], Any]) -> Any:
    """Run one step: its result, or None when it raised a ``BarecatError`` (with a
    message); anything else fails the test."""
    try:
        return step()
    except BarecatError as e:
        assert str(e)
        return None


def stored(archive: str) -> dict[str, bytes]:
    """Every file of the archive, read back (a read error is documented, never foreign)."""
    got: dict[str, bytes] = {}
    with barecat.Barecat(archive) as bc:
        for path in bc.files():
            data = documented(lambda path=path: bc.read(path))
            assert data is not None, f"{path} was stored but cannot be read back"
            got[path] = data
    return got


def check_stored(got: dict[str, bytes], ref: Reference, original: Original, first: int) -> None:
    """No lie: a stored file the reference reads is what it reads, one whose bytes it
    refuses is not stored; the members of a tar before the first change are all there."""
    for path, data in got.items():
        if path in ref.files:
            assert data == ref.files[path], path
        assert path not in ref.damaged, f"{path} is damaged but was stored"
    if original.suffix == ".tar":
        for path, data in _intact_tar_members(original, first).items():
            assert got.get(path) == data, path


def _intact_tar_members(original: Original, first: int) -> dict[str, bytes]:
    """The files and links of the pristine tar whose headers and bytes all lie before
    ``first`` (they can only be stored as they were)."""
    intact: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(original.data)) as tar:
        for m in tar:
            end = m.offset_data + -(-m.size // 512) * 512
            if end > first:
                break
            if m.isreg():
                intact[m.name] = tar.extractfile(m).read()  # type: ignore[union-attr]
            elif m.issym():
                intact[m.name] = os.fsencode(m.linkname)
            elif m.islnk():
                intact[m.name] = intact[m.linkname]
    return intact


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tar-zip-mutated")


def fresh_folder(scratch: Path) -> Path:
    """An empty folder for one example's files."""
    folder = scratch / "run"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    return folder


M = Mutation
FOUND = [  # inputs that once broke ingest (what the old code raised or did), kept as examples
    ("zip-deflated", [M("cut", 3752, nudge=3)], True),  # BadZipFile: not a zip file
    ("zip-stored", [M("insert", 3287, b"\xf7\xec\x01\x96\xe0\x9d\xfb\xfa\xe0\xc5", spot=True),
                    M("flip", 2434, 3, spot=True, nudge=3), M("text", 4447, "77777777777")],
     True),  # BadZipFile: bad magic number
    ("pax", [M("text", 3482, "777"), M("int", 7664, (2, 2**64 - 1), spot=True, nudge=3),
             M("set", 2727, b"\x00\xfd\x81d\x055", spot=True, nudge=2)], False),  # ReadError
    ("ustar", [M("flip", 6336, 6), M("set", 12564, b"x", nudge=1), M("cut", 3251, nudge=-1)],
     False),  # tarfile.ReadError: unexpected end of data
    ("pax", [M("cut", 9453, spot=True)], True),  # tarfile.ReadError: truncated header
    ("zip-deflated", [M("text", 12574, "99999999999", spot=True, nudge=2)], True),  # extra field
    ("zip-deflated", [M("delete", 6457, 20, nudge=2),
                      M("set", 6867, b"P\xf1O\x8aI\xd3\xac,", spot=True)], False),  # Unicode
    ("zip-stored", [M("set", 14078, b"pq", spot=True, nudge=-1), M("flip", 15581, 5)],
     False),  # struct.error: a local header cut short
    ("gnu", [M("int", 5814, (8, 65535), spot=True, nudge=1)], True),  # OverflowError (SQLite)
    ("ustar", [M("insert", 6231, bytes(range(19)), nudge=2),
               M("int", 11525, (2, 2**63 - 1), spot=True)], True),  # ValueError: seek
    ("zip-stored", [M("int", 13601, (8, 2), nudge=-1), M("delete", 1443, 16),
                    M("int", 3941, (1, 0), spot=True, nudge=2)], False),  # IndexError: no name
    ("zip-deflated", [M("set", 12112, b"\x8dP"),
                      M("insert", 838, b"\x1c\xaf\xb1b\xc1\x1c\xaeTT>P|\xd4", spot=True, nudge=2),
                      M("text", 5536, " ", spot=True)], True),  # OSError EINVAL: a negative seek
    ("gz", [M("set", 3, b"\x04"), M("cut", 10)], False),  # TypeError: a gzip header cut short
    ("zip-stored", [M("set", 2950 + 6, b"\xff")], False),  # NotImplementedError: zip version
    ("zip-stored", [M("flip", 200, 0)], False),  # a stored member failing its CRC-32 was wrapped
    ("zip-stored", [M("flip", 3032, 2)], False),  # its compressed size changed: zipfile refuses
    ("pax", [M("flip", 0, 0), M("flip", 133, 1, spot=True),
             M("text", 133, "77777777777", spot=True, nudge=1)],
     True),  # a PAX header of 8 GB read whole by tarfile: MemoryError
]  # fmt: skip


def with_found_examples(test: Callable[..., None]) -> Callable[..., None]:
    for kind, mutations, checksums in FOUND:
        test = example(kind=kind, mutations=mutations, checksums=checksums)(test)
    return test


@pytest.mark.fuzz
@fuzz_settings(300)
@given(kind=st.sampled_from(list(ORIGINALS)), mutations=mutation_lists, checksums=st.booleans())
@with_found_examples
def test_mutated_tar_and_zip_ingest_fails_cleanly_and_never_lies(
    scratch: Path, kind: str, mutations: list[Mutation], checksums: bool
) -> None:
    fresh = fresh_folder(scratch)
    original = Original(kind, ORIGINALS[kind])
    data = mutate(original.data, original.spots, mutations)
    if checksums and original.suffix == ".tar":
        data = fix_checksums(data)
    first = first_change(original.data, data)
    source = fresh / f"input{original.suffix}"
    source.write_bytes(data)
    ref = Reference(source, original.suffix == ".zip")

    converted = str(fresh / "converted.barecat")
    with bounded_memory(MAX_PEAK):
        made = documented(lambda: archive2barecat(str(source), converted))
    if made is not None:
        check_stored(stored(converted), ref, original, first)
    if original.kind == "gz":
        return
    wrapped = str(fresh / "wrapped.barecat")
    with bounded_memory(MAX_PEAK):
        made = documented(lambda: wrap_archive(str(source), wrapped))
    if made is not None:
        check_stored(stored(wrapped), ref, original, first)
    with bounded_memory(MAX_PEAK):
        index = documented(lambda: index_of_tars([str(source)], cache_root=str(fresh / "cache")))
    if index is not None:
        check_stored(stored(index.archive), ref, original, first)


MAX_PEAK = 16 << 20
"""Most memory ingesting a mutated input (a few kilobytes) may take at once."""
