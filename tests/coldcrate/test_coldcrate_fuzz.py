"""Fuzzing the ColdCrate reader with real chunks (written by coldcrate 0.2.0) changed the
ways storage and hostile writers change them: bits flipped, bytes overwritten, inserted,
deleted or cut off, hostile header and entry-preamble values, hostile schemas.

Whatever the bytes, the reader returns entries that are exactly ones that were written,
where the format checksums them (an entry's resource id and stored payload; the flags
and the schema are not covered, so a flipped tombstone bit or a changed schema is only
held to the second promise), or raises a ``ColdCrateError`` (a ``BarecatError``) — never
``struct.error``, ``IndexError``, ``MemoryError``, ``UnicodeDecodeError``, a JSON error
or a huge allocation sized by a length field. ``barecat convert`` of such a chunk says
what was wrong in lines naming the chunk and converts the rest.

The scrypt costs in an encrypted chunk's header (bytes 58-60) are mutated too, under a
ceiling (``barecat.kdf``, set through its environment variables) just above the chunk's
own costs, so that costs barecat refuses are refused at once and allowed ones stay fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import barecat
from barecat import coldcrate as cc
from barecat.cli import main
from barecat.exceptions import BarecatError
from helpers.coldcrate import coldcrate_python
from helpers.fuzzing import bounded_memory, fuzz_settings
from helpers.mutating import Mutation, mutate

pytestmark = pytest.mark.slow

# The rows, built on both sides from this source: small, so mutations hit structure often.
MODEL = textwrap.dedent(
    """
    import uuid
    def model(cc):
        schema = cc.Schema(description="fuzz", fields=[
            cc.Field("n", "u16"), cc.Field("t", "i64"), cc.Field("x", "f64"),
            cc.Field("ok", "bool"), cc.Field("blob", "bytes"), cc.Field("name", "utf8"),
            cc.Field("id", "uuid", nullable=True), cc.Field("at", "timestamp"),
            cc.Field("dims", cc.Struct([cc.Field("w", "u32"), cc.Field("h", "u8")])),
            cc.Field("tags", cc.VarArray("utf8")),
            cc.Field("vec", cc.FixedArray("f32", 3), nullable=True),
            cc.Field("kv", cc.VarArray(cc.Struct([cc.Field("k", "utf8"),
                                                  cc.Field("v", cc.FixedArray("i16", 2))]))),
        ])
        rows = []
        for i in range(7):
            rows.append((b"rid-%d" % (i % 6), {
                "n": 1000 + i, "t": -(2**40) - i, "x": i / 4, "ok": i % 2 == 0,
                "blob": bytes(range(i * 9 % 256, 256))[: 40 + 30 * i] * 2, "name": "é" * i,
                "id": None if i % 3 == 0 else uuid.UUID(int=i), "at": 1_700_000_000 + i,
                "dims": {"w": 640 + i, "h": i}, "tags": ["a", "bc"][: i % 3],
                "vec": None if i % 4 == 1 else [1.5, -2.0, i],
                "kv": [{"k": "k%d" % j, "v": [j, -j]} for j in range(i % 3)],
            }))
        return schema, rows

    def write(cc, path, compression, passphrase=None):
        schema, rows = model(cc)
        secret = {} if passphrase is None else {
            "encryption": "aes-256-xts", "passphrase": passphrase, "kdf": (10, 8, 1)}
        with cc.ChunkWriter.create(path, schema, compression=compression,
                                   chunk_id=uuid.UUID(int=3), created_at=5, **secret) as w:
            for i, (rid, row) in enumerate(rows):
                w.append(rid, row, compress=False if i == 2 else None,
                         encrypt=False if passphrase and i == 4 else None)
            w.append_tombstone(b"rid-1")
    """
)
KINDS = {"none": ("none", None), "lz4": ("lz4", None), "zstd": ("zstd", None)}
KINDS["encrypted"] = ("zstd", "fuzz phrase")
LOW_CEILING = {"BARECAT_SCRYPT_MAX_WORK": str(1 << 14), "BARECAT_SCRYPT_MAX_MEMORY": str(4 << 20)}
"""Twice the test chunk's scrypt work (2^13) and four times its memory."""
MAX_PEAK = 8 << 20
"""Most memory reading a mutated chunk (a few KiB) may take at once."""


class Original:
    """A pristine chunk and what was written to it (a plain class: hypothesis prints
    dataclass arguments field by field, and this one holds the chunk's bytes)."""

    def __init__(self, kind: str, data: bytes, passphrase: str | None, schema: cc.Schema,
                 header: cc.ChunkHeader, entries: list[cc.Entry]) -> None:  # fmt: skip
        self.kind, self.data, self.passphrase = kind, data, passphrase
        self.schema, self.header = schema, header
        self.written = {e.offset: (e.resource_id, e.fields) for e in entries}
        """Offset -> resource id and row (None: a tombstone)."""
        self.spots = [8, 10, 36, 40, 41, 64, 72, 128, header.data_start - 1]
        """Offsets where mutations matter most: header fields, schema ends, preambles."""
        for e in entries:
            self.spots += [e.offset + d for d in (0, 4, 6, 8, 16, 24, 24 + len(e.resource_id))]

    @property
    def encrypted(self) -> bool:
        return self.passphrase is not None

    def __repr__(self) -> str:
        return f"<{self.kind} chunk>"


@pytest.fixture(scope="session")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Original]:
    """Chunks of every compression and an encrypted one, written by coldcrate 0.2.0."""
    folder = tmp_path_factory.mktemp("coldcrate-fuzz")
    script = (
        MODEL
        + "\nimport coldcrate as cc\n"
        + "".join(
            f"write(cc, {str(folder / name)!r}, {comp!r}, {secret!r})\n"
            for name, (comp, secret) in KINDS.items()
        )
    )
    done = subprocess.run([coldcrate_python(), "-I", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    space: dict[str, Any] = {"uuid": uuid}
    exec(MODEL, space)
    schema, rows = space["model"](cc)
    found = {}
    for name, (_, secret) in KINDS.items():
        with cc.ChunkReader.open(folder / name, passphrase=secret) as reader:
            entries = list(reader.scan())
            header = reader.header
        assert [(e.resource_id, e.fields) for e in entries] == [*rows, (b"rid-1", None)]
        data = (folder / name).read_bytes()
        found[name] = Original(name, data, secret, schema, header, entries)
    return found


# -- mutations ---------------------------------------------------------------------------

HOSTILE = [0, 1, 2, 7, 8, 9, 24, 0x7F, 0xFF, 0x100, 0xFFFF, 1 << 20, (1 << 31) - 1, (1 << 32) - 1]
HOSTILE += [1 << 40, (1 << 63) - 1, (1 << 64) - 1, -1, -8]
"""Integers written over header and preamble fields (negative: that far below the
file's size)."""
WORDS = ["fields", "name", "type", "nullable", "description", "version", "struct"]
WORDS += ["fixed_array", "var_array", "u8", "u32", "f32", "bytes", "utf8", "uuid", "bool"]


def _json_values(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(WORDS), inner, max_size=3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.sampled_from(HOSTILE)
    | st.floats() | st.sampled_from(WORDS) | st.text(max_size=4),
    _json_values,
    max_leaves=6,
)  # fmt: skip
_where = {
    "at": st.integers(0, 1 << 12),
    "spot": st.booleans(),
    "nudge": st.sampled_from([0, 0, 1, 2, 3, -1]),
}
_ints = st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from(HOSTILE))
mutation_lists = st.lists(
    st.one_of(
        st.builds(Mutation, st.just("flip"), value=st.integers(0, 7), **_where),
        st.builds(Mutation, st.just("set"), value=st.binary(min_size=1, max_size=8), **_where),
        st.builds(Mutation, st.just("int"), value=_ints, **_where),
        st.builds(Mutation, st.just("insert"), value=st.binary(min_size=1, max_size=24), **_where),
        st.builds(Mutation, st.just("delete"), value=st.integers(1, 24), **_where),
        st.builds(Mutation, st.just("cut"), **_where),
        st.builds(Mutation, st.just("schema"), st.integers(0, 1 << 20), json_values),
    ),
    min_size=1,
    max_size=3,
)


def schema_node(tree: Any, pick: int) -> tuple[Any, Any]:
    """The container and key of the node of a schema's JSON that ``pick`` chooses: at
    each level it stops when ``pick % 4 == 0``, else goes into a child."""
    parent, key, node = None, None, tree
    while isinstance(node, dict | list) and node and pick % 4:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        parent, key = node, keys[(pick // 4) % len(keys)]
        node, pick = node[key], pick // 4 // len(keys)
    return parent, key


def _with_schema(original: Original, data: bytearray, m: Mutation) -> bytearray:
    """The chunk with a hostile schema: a node of its JSON replaced, the header's schema
    size set, the entries moved to the new data start."""
    tree = original.schema.to_dict()
    parent, key = schema_node(tree, m.at)
    if parent is None:
        tree = m.value
    else:
        parent[key] = m.value
    schema = json.dumps(tree).encode()
    start = original.header.data_start
    data[36:40] = len(schema).to_bytes(4, "little")
    return data[:128] + schema + bytes(-len(schema) % 8) + data[start:]


def apply(original: Original, mutations: list[Mutation]) -> tuple[bytes, bool]:
    """The mutated bytes, and whether every entry kept its offset. Besides the kinds of
    ``helpers.mutating``, ``schema`` replaces the node of the schema's JSON that ``at``
    picks by ``value``; in an encrypted chunk nothing changes the (encrypted) schema as a
    schema."""
    data, kept = original.data, True
    for m in mutations:
        if m.kind == "schema":
            if not original.encrypted:
                data = bytes(_with_schema(original, bytearray(data), m))
                kept = kept and len(data) == len(original.data)
            continue
        if not data:
            break
        data = mutate(data, original.spots, [m])
        kept = kept and m.kind not in ("insert", "delete")
    return data, kept


# -- the promises --------------------------------------------------------------------------


def documented(step: Callable[[], Any]) -> Any:
    """Run one reader call: a result, or None when it raised a documented error."""
    try:
        return step()
    except cc.ColdCrateError as e:
        assert isinstance(e, BarecatError) and str(e)
        return None


def entries_of(scan: Iterator[Any]) -> list[Any]:
    """A scan's entries up to its end or the documented error that ends it."""
    got: list[Any] = []
    while (entry := documented(lambda: next(scan, StopIteration))) is not None:
        if entry is StopIteration:
            break
        got.append(entry)
    return got


def check_entry(original: Original, reader: cc.ChunkReader, entry: Any, kept: bool) -> None:
    """A checksummed entry of an unchanged format is one that was written: the same id
    and row at the same place (or anywhere, after bytes were inserted or deleted)."""
    same = (reader.schema == original.schema and reader.header.version == original.header.version
            and reader.header.compression == original.header.compression
            and reader.header.encryption == original.header.encryption)  # fmt: skip
    if not entry.checksum_ok or not same or (original.encrypted and not kept):
        return  # (XTS is keyed by offset and unauthenticated: moved bytes decrypt to noise)
    if kept:
        assert entry.offset in original.written, entry
        candidates = [original.written[entry.offset]]
    else:
        candidates = list(original.written.values())
    assert (entry.resource_id, entry.fields) in candidates, entry


def read_everything(original: Original, path: Path, kept: bool) -> None:
    """Every way of reading: open, scans with and without checks, raw scans, reads at
    every offset seen, the valid run; then repair and a scan of the repaired chunk."""
    reader = documented(lambda: cc.ChunkReader.open(path, passphrase=original.passphrase))
    if reader is not None:
        with reader:
            offsets = set(original.written)
            for verify in (True, False):
                raws = entries_of(reader.scan_raw(verify=verify))
                assert [r.offset for r in raws] == sorted({r.offset for r in raws})
                assert all(r.offset % 8 == 0 and r.offset < reader.size for r in raws)
                offsets |= {r.offset for r in raws}
                for entry in entries_of(reader.scan(verify=verify)):
                    check_entry(original, reader, entry, kept)
            for offset in sorted(offsets):
                entry = documented(lambda: reader.read_at(offset))  # noqa: B023
                if entry is not None:
                    check_entry(original, reader, entry, kept)
            documented(reader.valid_run)
    if original.encrypted:  # keyless: the structure and checksums, no content
        keyless = documented(lambda: cc.ChunkReader.open(path))
        if keyless is not None:
            with keyless:
                entries_of(keyless.scan_raw())
                assert entries_of(keyless.scan()) == []
    if documented(lambda: cc.repair(path)) is None:
        return
    repaired = documented(lambda: cc.ChunkReader.open(path, passphrase=original.passphrase))
    if repaired is not None:
        with repaired:
            for entry in entries_of(repaired.scan()):
                check_entry(original, repaired, entry, kept)


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("coldcrate-mutated")


@pytest.mark.fuzz
@pytest.mark.parametrize("kind", list(KINDS))
@fuzz_settings(120)
@given(mutations=mutation_lists)
@example(mutations=[Mutation("schema", 645, [])])  # a field named [] (TypeError)
@example(mutations=[Mutation("schema", 1, ["x"])])  # version ["x"] (TypeError)
@example(mutations=[Mutation("schema", 10293, 5)])  # "fixed_array": 5 (TypeError)
@example(mutations=[Mutation("schema", 10293, ["f32", "three"])])  # (ValueError)
@example(mutations=[Mutation("schema", 3285, {"struct": 7})])  # (TypeError)
@example(mutations=[Mutation("schema", 148533, 1 << 40)])  # f32 * 2**40 (a 1 TiB format)
@example(mutations=[Mutation("set", 43, b"\x04", spot=True, nudge=3)])  # lz4: a 64 MiB buffer
@example(mutations=[Mutation("flip", 11, 0, spot=True)])  # a row read as a tombstone
@example(mutations=[Mutation("set", 58, b"\x1e\x08\xff")])  # scrypt: 2^30 N, 255 p
def test_mutated_chunks_read_exactly_or_fail_cleanly(
    originals: dict[str, Original], scratch: Path, kind: str, mutations: list[Mutation]
) -> None:
    original = originals[kind]
    mutated, kept = apply(original, mutations)
    path = scratch / f"{kind}.coldcrate"
    path.write_bytes(mutated)
    with bounded_memory(MAX_PEAK), low_scrypt_ceiling():
        read_everything(original, path, kept)


@contextlib.contextmanager
def low_scrypt_ceiling() -> Iterator[None]:
    """:data:`LOW_CEILING` in the environment for the block (restored after)."""
    saved = {name: os.environ.get(name) for name in LOW_CEILING}
    os.environ.update(LOW_CEILING)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


# -- conversion ----------------------------------------------------------------------------

FILES = {f"d/{i}.txt": b"%d " % i * (20 + 30 * i) for i in range(6)}


@pytest.fixture(scope="session")
def files_chunk(tmp_path_factory: pytest.TempPathFactory) -> Original:
    """A chunk of the file schema, made by ``barecat convert`` from a small archive."""
    folder = tmp_path_factory.mktemp("coldcrate-files")
    archive, chunk = str(folder / "a.barecat"), str(folder / "a.coldcrate")
    with barecat.Barecat(archive, readonly=False) as bc:
        for path, data in FILES.items():
            bc[path] = data
    assert convert(archive, chunk)[0] == 0
    with cc.ChunkReader.open(chunk) as reader:
        entries, header, schema = list(reader.scan()), reader.header, reader.schema
    assert schema is not None
    return Original("files", Path(chunk).read_bytes(), None, schema, header, entries)


def convert(*argv: str) -> tuple[int, list[str]]:
    """``barecat convert -q -f ARGV`` in this process: exit code and error lines."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["convert", "-q", "-f", *argv])
    return code, err.getvalue().splitlines()


@pytest.mark.fuzz
@fuzz_settings(40)
@given(mutations=mutation_lists)
@example(mutations=[Mutation("flip", 4, 0, spot=True)])  # "encrypted": a passphrase, for what?
def test_converting_a_mutated_chunk_names_it_and_keeps_the_rest_exact(
    files_chunk: Original, scratch: Path, mutations: list[Mutation]
) -> None:
    """Each thing wrong is one line naming the chunk; every file converted is exactly the
    one written (while the schema and compression are the chunk's own)."""
    mutated, _ = apply(files_chunk, mutations)
    chunk, out = scratch / "files.coldcrate", scratch / "files.barecat"
    chunk.write_bytes(mutated)
    for made in scratch.glob("files.barecat*"):
        made.unlink()
    code, lines = convert(str(chunk), str(out))
    assert (code, lines) == (0, []) or (code == 1 and lines), lines
    assert all(line.startswith("barecat convert: ") and str(chunk) in line for line in lines)
    reader = documented(lambda: cc.ChunkReader.open(chunk))
    if reader is None:
        assert len(lines) == 1 and not out.exists()
        return
    with reader:
        same = reader.schema == files_chunk.schema
        same = same and reader.header.compression == files_chunk.header.compression
    if same and out.exists():
        with barecat.Barecat(str(out)) as bc:
            converted = {path: bc[path] for path in bc}
        assert all(FILES.get(path) == data for path, data in converted.items())


def test_a_chunk_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path) -> None:
    chunk = tmp_path / "bad.coldcrate"
    for junk in (b"COLDCRT\x00garbage", b"\x00" * 300):
        chunk.write_bytes(junk)
        code, lines = convert(str(chunk), str(tmp_path / "out.barecat"))
        assert code == 1 and len(lines) == 1 and f"{chunk}: " in lines[0], lines
        assert not (tmp_path / "out.barecat").exists()


def test_damaged_entries_are_reported_and_the_rest_converted(
    files_chunk: Original, tmp_path: Path
) -> None:
    """A damaged entry and one flagged a tombstone (the flags are not checksummed, but a
    tombstone has no payload): one line each naming the chunk and the bytes; every other
    file converted exactly."""
    data = bytearray(files_chunk.data)
    offsets = sorted(files_chunk.written)
    data[offsets[1] + 40] ^= 0xFF  # inside entry 1: its checksum fails
    data[offsets[3] + 6] |= 1  # entry 3 flagged a tombstone
    chunk, out = tmp_path / "damaged.coldcrate", tmp_path / "out.barecat"
    chunk.write_bytes(bytes(data))
    code, lines = convert(str(chunk), str(out))
    assert code == 1 and len(lines) == 2, lines
    for line, (start, end) in zip(lines, [offsets[1:3], offsets[3:5]], strict=True):
        assert line.startswith(f"barecat convert: skipped {chunk}: bytes {start}-{end}"), line
    with barecat.Barecat(str(out)) as bc:
        assert {path: bc[path] for path in bc} == {
            path: FILES[path] for path in FILES if path not in ("d/1.txt", "d/3.txt")
        }


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_length_prefixes_cannot_size_a_huge_buffer(tmp_path: Path, compression: str) -> None:
    """Entries whose checksums hold but whose sizes lie (a hostile writer): the u64
    original length, or a zstd frame's own content size (here a real 64 MiB of zeros
    under a prefix of 5,004 bytes). A CompressionError each, and no buffer of the size
    claimed is allocated."""
    path = tmp_path / f"{compression}.coldcrate"
    schema = cc.Schema([cc.Field("data", "bytes")])
    with cc.ChunkWriter.create(path, schema, compression=compression) as w:
        good = w.append(b"good", {"data": b"x" * 5000})
        packed = w._codec.compress(schema.encode_row({"data": b"y" * 5000}))
        lies = [n.to_bytes(8, "little") + packed[8:] for n in (1 << 40, 1 << 26, 5005)]
        if compression == "zstd":
            lies.append(packed[:8] + w._codec.compress(bytes(1 << 26))[8:])
        for lie in lies:
            w._write(b"liar", lie, cc.chunks.FLAG_COMPRESSED)
    with bounded_memory(MAX_PEAK), cc.ChunkReader.open(path) as reader:
        entries = list(reader.scan_raw())
        assert len(entries) == 1 + len(lies)
        assert reader.read_at(good.offset).fields == {"data": b"x" * 5000}
        for entry in entries[1:]:
            with pytest.raises(cc.CompressionError):
                reader.read_at(entry.offset)
