"""barecat.coldcrate against the real coldcrate 0.2.0 (in its own venv): chunks written
by either read identically in the other, for every compression and every type."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import barecat
from barecat import coldcrate as cc
from helpers import REPO
from helpers.coldcrate import coldcrate_python

# The same schema and rows, built on both sides from this one source text.
MODEL = textwrap.dedent(
    """
    import uuid
    def model(cc):
        schema = cc.Schema(
            description="every type",
            fields=[
                cc.Field("u8", "u8"), cc.Field("u16", "u16"), cc.Field("u32", "u32"),
                cc.Field("u64", "u64"), cc.Field("i8", "i8"), cc.Field("i16", "i16"),
                cc.Field("i32", "i32"), cc.Field("i64", "i64"), cc.Field("f32", "f32"),
                cc.Field("f64", "f64"), cc.Field("flag", "bool"), cc.Field("blob", "bytes"),
                cc.Field("text", "utf8", description="any text"),
                cc.Field("id", "uuid"), cc.Field("at", "timestamp"),
                cc.Field("dims", cc.Struct([cc.Field("w", "u32"), cc.Field("h", "u32")])),
                cc.Field("tags", cc.VarArray("utf8")),
                cc.Field("vec", cc.FixedArray("f32", 3), nullable=True),
                cc.Field("nested", cc.VarArray(cc.Struct([
                    cc.Field("k", "utf8"), cc.Field("v", cc.FixedArray("i16", 2)),
                ]))),
                cc.Field("maybe", "bytes", nullable=True),
            ],
        )
        rows = []
        for i in range(40):
            rows.append((f"rid-{i:03d}".encode(), {
                "u8": 255 - i, "u16": 65535 - i, "u32": 2**32 - 1 - i, "u64": 2**64 - 1 - i,
                "i8": -128 + i, "i16": -(2**15) + i, "i32": -(2**31) + i, "i64": -(2**63) + i,
                "f32": 0.5 * i, "f64": -1.0 / (i + 1), "flag": i % 2 == 0,
                "blob": bytes(range(i % 7)) * (i + 1) * 40, "text": "žluťoučký " * (i % 4),
                "id": uuid.UUID(int=i), "at": 1_700_000_000_000_000 + i,
                "dims": {"w": 640 + i, "h": 480}, "tags": ["a", "bb"][: i % 3],
                "vec": None if i % 5 == 0 else [1.0, 2.5, -i],
                "nested": [{"k": "x" * j, "v": [j, -j]} for j in range(i % 3)],
                "maybe": None if i % 2 else b"\\x00\\xff",
            }))
        return schema, rows
    """
)

DUMP = textwrap.dedent(
    """
    import base64, uuid
    def plain(value):
        if isinstance(value, (bytes, bytearray)):
            return {"b": base64.b64encode(bytes(value)).decode()}
        if isinstance(value, uuid.UUID):
            return {"u": str(value)}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value
    def dump(cc, path, passphrase=None):
        with cc.ChunkReader.open(path, passphrase=passphrase) as r:
            h = r.header
            head = [str(h.chunk_id), h.created_at, h.entry_count, h.tail_offset, h.compression]
            entries = [[e.offset, e.resource_id.decode(), e.tombstone, e.checksum_ok,
                        plain(e.fields)] for e in r.scan()]
        return {"header": head, "entries": entries}
    """
)

WRITE = textwrap.dedent(
    """
    def write(cc, path, compression, passphrase=None):
        schema, rows = model(cc)
        secret = {} if passphrase is None else {
            "encryption": "aes-256-xts", "passphrase": passphrase, "kdf": (10, 8, 1)}
        with cc.ChunkWriter.create(path, schema, compression=compression,
                                   chunk_id=uuid.UUID(int=7), created_at=123, **secret) as w:
            for i, (rid, row) in enumerate(rows):
                w.append(rid, row, compress=False if i % 7 == 3 else None,
                         encrypt=False if passphrase and i % 11 == 4 else None)
            w.append_tombstone(b"rid-005")
    """
)


def run_theirs(
    action: str, path: str, compression: str = "none", passphrase: str | None = None
) -> Any:
    script = "\n".join(
        [
            "import json, sys, uuid",
            "import coldcrate as cc",
            MODEL,
            DUMP,
            WRITE,
            f"action, path, compression = {action!r}, {path!r}, {compression!r}",
            f"passphrase = {passphrase!r}",
            "if action == 'write':",
            "    write(cc, path, compression, passphrase)",
            "print(json.dumps(dump(cc, path, passphrase)))",
        ]
    )
    done = subprocess.run(
        [coldcrate_python(), "-I", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def run_ours(
    action: str, path: str, compression: str = "none", passphrase: str | None = None
) -> Any:
    space: dict[str, Any] = {"uuid": uuid}
    exec(MODEL + DUMP + WRITE, space)  # the same source both sides run
    if action == "write":
        space["write"](cc, path, compression, passphrase)
    return json.loads(json.dumps(space["dump"](cc, path, passphrase)))


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_their_chunks_read_identically_here(tmp_path: Path, compression: str) -> None:
    path = str(tmp_path / "theirs.coldcrate")
    theirs = run_theirs("write", path, compression)
    assert run_ours("read", path) == theirs
    assert len(theirs["entries"]) == 41 and theirs["entries"][-1][2] is True  # tombstone


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_our_chunks_read_identically_there(tmp_path: Path, compression: str) -> None:
    ours_path = str(tmp_path / "ours.coldcrate")
    ours = run_ours("write", ours_path, compression)
    assert run_theirs("read", ours_path) == ours
    their_path = str(tmp_path / "theirs.coldcrate")
    theirs = run_theirs("write", their_path, compression)
    assert ours["entries"] == theirs["entries"]  # the same offsets: the same layout
    assert Path(ours_path).read_bytes() == Path(their_path).read_bytes()


def sample_schema() -> cc.Schema:
    return cc.Schema([cc.Field("n", "u16"), cc.Field("data", "bytes")])


def test_dirty_chunk_is_refused_then_repaired(tmp_path: Path) -> None:
    path = str(tmp_path / "c.coldcrate")
    with cc.ChunkWriter.create(path, sample_schema(), compression="zstd") as w:
        for i in range(5):
            w.append(b"r%d" % i, {"n": i, "data": b"x" * 1000})
    writer = cc.ChunkWriter.open(path)
    # big enough to go to the file at once, but the counters are never committed:
    writer.append(b"late", {"n": 9, "data": os.urandom(2 << 20)})
    os.close(writer._fd)  # the process dies without close()
    with open(path, "ab") as f:
        f.write(b"\xe4\xe4\xe4\xe4partial")  # and a torn entry after it
    with cc.ChunkReader.open(path) as r:
        assert r.header.entry_count is None and r.header.tail_offset is None
    with pytest.raises(cc.InvalidChunkError, match="dirty"):
        cc.ChunkWriter.open(path)
    result = cc.repair(path)
    assert result.entry_count == 6 and result.truncated_bytes == 11
    assert run_ours("read", path)["entries"][-1][1] == "late"
    assert run_theirs("read", path)["header"][2:4] == [6, result.tail_offset]


def test_scan_resyncs_past_damage_like_coldcrate(tmp_path: Path) -> None:
    path = str(tmp_path / "c.coldcrate")
    with cc.ChunkWriter.create(path, sample_schema()) as w:
        offsets = [w.append(b"r%d" % i, {"n": i, "data": b"z" * 200}).offset for i in range(6)]
    with open(path, "r+b") as f:
        f.seek(offsets[2] + 40)
        f.write(b"\x00\x01\x02")  # damage inside entry 2
    ours = run_ours("read", path)
    assert [e[1] for e in ours["entries"]] == ["r0", "r1", "r3", "r4", "r5"]
    assert run_theirs("read", path)["entries"] == ours["entries"]
    with cc.ChunkReader.open(path) as r:
        assert r.read_at(offsets[2]).checksum_ok is False


def test_strict_validation_and_single_writer(tmp_path: Path) -> None:
    path = str(tmp_path / "c.coldcrate")
    with cc.ChunkWriter.create(path, sample_schema()) as w:
        for bad in [
            {"n": 70000, "data": b""},  # out of range
            {"n": True, "data": b""},  # bool is not an int
            {"n": 1},  # missing non-nullable
            {"n": 1, "data": b"", "extra": 1},  # unknown key
            {"n": 1, "data": "text"},  # wrong type
        ]:
            with pytest.raises(cc.SchemaError):
                w.append(b"r", bad)
        with pytest.raises(cc.InvalidEntryError):
            w.append(b"", {"n": 1, "data": b""})
        with pytest.raises(cc.ColdCrateError, match="Another writer"):
            cc.ChunkWriter.open(path)
    with pytest.raises(FileExistsError):
        cc.ChunkWriter.create(path, sample_schema())
    (tmp_path / "not.coldcrate").write_bytes(b"PK" + bytes(200))
    with pytest.raises(cc.InvalidChunkError, match="magic"):
        cc.ChunkReader.open(str(tmp_path / "not.coldcrate"))


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_encrypted_chunks_both_ways(tmp_path: Path, compression: str) -> None:
    """AES-256-XTS chunks (schema, resource ids and payloads encrypted; some entries
    opting out) written by either side decode identically in the other."""
    theirs_path, ours_path = str(tmp_path / "theirs.cc"), str(tmp_path / "ours.cc")
    theirs = run_theirs("write", theirs_path, compression, "correct horse")
    assert run_ours("read", theirs_path, passphrase="correct horse") == theirs
    ours = run_ours("write", ours_path, compression, "correct horse")
    assert run_theirs("read", ours_path, passphrase="correct horse") == ours
    assert ours["entries"] == theirs["entries"]
    for path in (theirs_path, ours_path):
        assert b"rid-0" not in Path(path).read_bytes()  # ids and names hidden
        assert b"every type" not in Path(path).read_bytes()
        with pytest.raises(cc.EncryptionError, match="passphrase"):
            cc.ChunkReader.open(path, passphrase="wrong horse")
        with cc.ChunkReader.open(path) as keyless:  # structure and integrity, no content
            assert keyless.schema is None
            raw = list(keyless.scan_raw())
            assert len(raw) == 41 and all(e.checksum_ok for e in raw)
            with pytest.raises(cc.EncryptionError):
                keyless.read_at(raw[0].offset)


# -- conversion between chunks and archives ------------------------------------------------


def test_archive_to_chunk_and_back_keeps_files_and_metadata(
    tmp_path: Path, run: Any, make_archive: Any
) -> None:
    files = {f"d{i % 3}/f{i}.bin": os.urandom(100 * i) for i in range(12)}
    src = make_archive(files)
    with barecat.Barecat(src, readonly=False) as bc:
        bc.chmod("d0/f0.bin", 0o600)
        bc.utime("d0/f0.bin", ns=(5, 1_600_000_000_123_456_789))
    chunk = str(tmp_path / "all.coldcrate")
    assert run("convert", "-q", src, chunk)[0] == 0
    theirs = run_theirs("read", chunk)  # the real coldcrate reads our export
    assert [e[1] for e in theirs["entries"]] == sorted(files)
    back = str(tmp_path / "back.barecat")
    assert run("convert", "-q", chunk, back)[0] == 0
    with barecat.Barecat(back) as bc:
        assert {p: bc[p] for p in bc} == files
        info = bc.index.lookup_file("d0/f0.bin")
        assert stat.S_IMODE(info.mode or 0) == 0o600 and info.mtime_ns == 1_600_000_000_123_456_789


def test_foreign_chunk_maps_to_blobs_and_row_sidecars(
    tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk of another schema, written by coldcrate itself with tombstones and a
    repeated id: the latest entry per id wins, the blob becomes the file, the rest a
    JSON sidecar, and the schema is kept in the archive."""
    chunk = str(tmp_path / "theirs.coldcrate")
    run_theirs("write", chunk, "zstd", "pw")
    monkeypatch.setenv("BARECAT_PASSPHRASE", "pw")
    out = str(tmp_path / "mapped.barecat")
    assert run("convert", "-q", chunk, out)[0] == 0
    space: dict[str, Any] = {"uuid": uuid}
    exec(MODEL, space)
    _, rows = space["model"](cc)
    with barecat.Barecat(out) as bc:
        ids = sorted(p for p in bc if not p.endswith(".row.json") and not p.startswith("."))
        assert ids == sorted(r.decode() for r, _ in rows if r != b"rid-005")  # tombstoned
        rid, row = rows[7]
        assert bc[rid.decode()] == row["blob"]
        sidecar = json.loads(bc[rid.decode() + ".row.json"])
        assert sidecar["text"] == row["text"] and sidecar["id"] == str(row["id"])
        assert json.loads(bc[".coldcrate/schema.json"])["description"] == "every type"


def test_encrypted_chunk_needs_a_passphrase_from_file_or_env(tmp_path: Path, run: Any) -> None:
    chunk = str(tmp_path / "e.coldcrate")
    run_theirs("write", chunk, "none", "s3cret")
    convert = ["convert", chunk, str(tmp_path / "x.barecat")]
    code, _, err = subprocess_run(convert)
    assert code == 1 and "passphrase" in err
    with_file = ["convert", "--passphrase-file", str(tmp_path / "pw.txt"), *convert[1:]]
    for secret, expected in [("wrong", 1), ("s3cret", 0)]:
        (tmp_path / "pw.txt").write_text(secret + "\n")
        code, _, err = subprocess_run(with_file)
        assert code == expected, err
        assert expected == 0 or "wrong passphrase" in err.lower()
    assert not any(p.name.startswith(".x.barecat") for p in tmp_path.iterdir())


def subprocess_run(argv: list[str]) -> tuple[int, str, str]:
    """The CLI as a separate process with no terminal and no passphrase in the env."""
    env = {k: v for k, v in os.environ.items() if k != "BARECAT_PASSPHRASE"}
    done = subprocess.run(
        [sys.executable, "-m", "barecat.cli", *argv],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, cwd=REPO,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_version_1_chunks_and_hostile_headers(tmp_path: Path) -> None:
    path = tmp_path / "v1.coldcrate"
    with cc.ChunkWriter.create(str(path), sample_schema()) as w:
        w.append(b"r", {"n": 1, "data": b"v1"})
    raw = bytearray(path.read_bytes())
    raw[8:10] = (1).to_bytes(2, "little")  # format 1: the same layout when not encrypted
    path.write_bytes(bytes(raw))
    with cc.ChunkReader.open(str(path)) as r:
        assert r.header.version == 1
        assert [(e.resource_id, e.fields) for e in r.scan()] == [(b"r", {"n": 1, "data": b"v1"})]
    for offset, value, message in [
        (8, (3).to_bytes(2, "little"), "version"),  # from the future
        (36, (64 << 20).to_bytes(4, "little"), "Schema block"),  # an absurd schema size
        (40, bytes([9]), "compression"),
    ]:
        bad = bytearray(raw)
        bad[offset : offset + len(value)] = value
        (tmp_path / "bad.coldcrate").write_bytes(bytes(bad))
        with pytest.raises(cc.InvalidChunkError, match=message):
            cc.ChunkReader.open(str(tmp_path / "bad.coldcrate"))
    (tmp_path / "short.coldcrate").write_bytes(bytes(raw[:100]))
    with pytest.raises(cc.InvalidChunkError, match="truncated"):
        cc.ChunkReader.open(str(tmp_path / "short.coldcrate"))


def test_chunk_output_needs_force_and_appears_only_whole(
    tmp_path: Path, run: Any, make_archive: Any
) -> None:
    src = make_archive({"a.txt": b"a", "b/c.txt": b"c"})
    out = tmp_path / "o.coldcrate"
    out.write_bytes(b"precious")
    code, _, err = run("convert", src, str(out))
    assert code == 1 and "exists" in err and out.read_bytes() == b"precious"
    assert run("convert", "-f", src, str(out))[0] == 0
    with cc.ChunkReader.open(str(out)) as r:
        assert [e.resource_id for e in r.scan()] == [b"a.txt", b"b/c.txt"]
        assert r.header.entry_count == 2  # committed: the file is complete
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
