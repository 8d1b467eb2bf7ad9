"""Sealed archives: files stored compressed and/or encrypted, through the whole Barecat API."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import barecat
from barecat.archive import IfEncrypted
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    FileExistsBarecatError,
    WrongPassphraseBarecatError,
)
from barecat.ops.merge import merge_archives
from barecat.transfer.extraction import extract_to_directory
from barecat.transfer.ingest.threads import add_directory
from helpers.reference import reference_python

MODES = {
    "zstd": {"compression": "zstd"},
    "lz4": {"compression": "lz4"},
    "encrypted": {"compression": "none", "passphrase": "correct horse"},
    "zstd+encrypted": {"compression": "zstd", "passphrase": "correct horse"},
}
BLOCK = 256 << 10


def sample_files(rng: random.Random) -> dict[str, bytes]:
    text = b"".join(b'{"id": %d, "label": "cat", "box": [1, 2, 3]}\n' % i for i in range(4000))
    return {
        "labels/all.jsonl": text,
        "images/a.jpg": rng.randbytes(30_000),
        "images/b.jpg": rng.randbytes(1),
        "empty.txt": b"",
        "big/mixed.bin": text[: BLOCK + 100] + rng.randbytes(2 * BLOCK + 17),
    }


def reopen(path: str, mode: str, **extra: object) -> barecat.Barecat:
    passphrase = MODES[mode].get("passphrase")
    return barecat.Barecat(path, passphrase=passphrase, **extra)  # type: ignore[arg-type]


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sealed(tmp_path: os.PathLike[str], mode: str) -> Iterator[tuple[str, dict[str, bytes]]]:
    files = sample_files(random.Random(7))
    path = os.path.join(os.fspath(tmp_path), "sealed.barecat")
    with barecat.Barecat(path, readonly=False, **MODES[mode]) as bc:  # type: ignore[arg-type]
        for p, data in files.items():
            bc[p] = data
    yield path, files


def shard_bytes(path: str) -> bytes:
    with open(path + "-shard-00000", "rb") as f:
        return f.read()


def test_every_read_path_returns_the_original_bytes(
    sealed: tuple[str, dict[str, bytes]], mode: str
) -> None:
    path, files = sealed
    with reopen(path, mode) as bc:
        assert bc.sealed and bc.encrypted == ("passphrase" in MODES[mode])
        assert {p: bc[p] for p in bc} == files
        assert bc.get_many(list(reversed(files))) == list(reversed(files.values()))
        for p, data in files.items():
            assert bc.read(p) == data
            assert bc.stat(p).size == len(data)
            with bc.open(p, "rb") as f:
                assert f.read() == data
            buffer = bytearray(len(data) + 5)
            assert bc.readinto(p, buffer) == len(data)
            assert bytes(buffer[: len(data)]) == data
        assert (
            bc.open("labels/all.jsonl").readline()
            == '{"id": 0, "label": "cat", "box": [1, 2, 3]}\n'
        )
        sizes = {e.path: e.size for e in bc.scandir("images")}
        assert sizes == {"images/a.jpg": 30_000, "images/b.jpg": 1}
        assert sorted(bc.glob("**/*.jpg", recursive=True)) == ["images/a.jpg", "images/b.jpg"]
        assert bc.verify_integrity()


def test_the_shards_hold_no_plaintext_and_text_shrinks(
    sealed: tuple[str, dict[str, bytes]], mode: str
) -> None:
    path, files = sealed
    stored = shard_bytes(path)
    if "encrypted" in mode:
        assert b'"label": "cat"' not in stored
        assert files["images/a.jpg"][:64] not in stored  # encrypted even when not compressed
    if mode != "encrypted":
        with barecat.Barecat(path) as bc:
            text = bc.index.lookup_file("labels/all.jsonl")
        assert text.sealed_size is not None and text.sealed_size < text.size // 5  # type: ignore[operator]


@settings(max_examples=40, deadline=None)
@given(start=st.integers(0, 3 * BLOCK + 200), length=st.integers(0, 2 * BLOCK))
@pytest.mark.slow
def test_partial_reads_across_block_boundaries(
    start: int, length: int, sealed_mixed: tuple[str, bytes]
) -> None:
    path, data = sealed_mixed
    with barecat.Barecat(path, passphrase="pw") as bc:
        assert bc.read("f", start, length) == data[start : start + length]
        with bc.open("f", "rb") as f:
            f.seek(start)
            assert f.read(length) == data[start : start + length]
            assert f.tell() == min(start + length, len(data)) if start < len(data) else True


@pytest.fixture(scope="module")
def sealed_mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    rng = random.Random(3)
    data = (b"abc" * BLOCK)[: BLOCK + 5] + rng.randbytes(2 * BLOCK)
    path = str(tmp_path_factory.mktemp("mixed") / "m.barecat")
    with barecat.Barecat(path, readonly=False, compression="zstd", passphrase="pw") as bc:
        bc["f"] = data
    return path, data


def test_writing_through_open_in_every_mode(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "w.barecat")
    with barecat.Barecat(path, readonly=False, compression="zstd", passphrase="pw") as bc:
        with bc.open("notes.txt", "w") as f:
            f.write("first\n")
        with bc.open("notes.txt", "a") as f:
            f.write("second\n")
        with bc.open("data.bin", "wb") as f:
            f.write(b"0123456789")
        with bc.open("data.bin", "r+b") as f:
            f.seek(2)
            f.write(b"ab")
        with pytest.raises(FileExistsBarecatError):
            bc.open("data.bin", "xb")
    with barecat.Barecat(path, passphrase="pw") as bc:
        assert bc["notes.txt"] == b"first\nsecond\n"
        assert bc["data.bin"] == b"01ab456789"
        assert bc.stat("data.bin").size == 10
        assert bc.verify_integrity()


def test_add_options_update_and_add_many(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "a.barecat")
    text = b"the same words again and again\n" * 2000
    with barecat.Barecat(path, readonly=False, compression="zstd") as bc:
        bc.add("raw.txt", data=text, compress=False)
        bc.add("packed.txt", data=text)
        with open(__file__, "rb") as f:
            bc.add("source.py", fileobj=f)
        assert bc.add_many((f"many/{i}.txt", b"%d" % i * i) for i in range(300)) == 300
        bc.update_file("packed.txt", data=b"replaced")
    with barecat.Barecat(path) as bc:
        raw, packed = bc.index.lookup_file("raw.txt"), bc.index.lookup_file("packed.txt")
        assert raw.sealed_size is not None and raw.sealed_size >= len(text)  # stored, not packed
        assert bc["raw.txt"] == text and bc["packed.txt"] == b"replaced"
        assert packed.size == len(b"replaced")
        assert bc["many/299.txt"] == b"299" * 299
        with open(__file__, "rb") as f:
            assert bc["source.py"] == f.read()


def test_wrong_or_missing_passphrase(sealed: tuple[str, dict[str, bytes]], mode: str) -> None:
    path, files = sealed
    if "passphrase" not in MODES[mode]:
        with pytest.raises(BarecatError, match="not encrypted"):
            barecat.Barecat(path, passphrase="anything")
        return
    with pytest.raises(WrongPassphraseBarecatError, match="Wrong passphrase"):
        barecat.Barecat(path, passphrase="wrong")
    with barecat.Barecat(path) as bc:  # without the key: names, sizes and CRCs only
        assert sorted(bc) == sorted(files)
        assert bc.stat("images/a.jpg").size == 30_000
        assert bc.verify_integrity()
        with pytest.raises(BarecatError, match="encrypted: open it with its passphrase"):
            bc["images/a.jpg"]
    asked: list[int] = []

    def ask() -> str:
        asked.append(1)
        return "correct horse"

    with barecat.Barecat(path, passphrase=ask) as bc:
        assert bc.listdir("images") == ["a.jpg", "b.jpg"] and asked == []
        assert bc["images/b.jpg"] == files["images/b.jpg"]
        assert bc["images/a.jpg"] == files["images/a.jpg"]
        assert asked == [1]


def _rewrite_row(path: str, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql, args)


def test_tampering_fails_the_read_and_names_the_path(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "t.barecat")
    with barecat.Barecat(path, readonly=False, passphrase="pw") as bc:
        bc["a.txt"] = b"A" * 5000
        bc["b.txt"] = b"B" * 5000
    with barecat.Barecat(path, passphrase="pw", lookup_table=False) as bc:
        a, b = bc.index.lookup_file("a.txt"), bc.index.lookup_file("b.txt")
    # 1. a flipped ciphertext byte, with a CRC forged to match: authentication catches it
    stored = bytearray(shard_bytes(path))
    stored[(a.offset or 0) + a.stored_size - 3] ^= 1
    with open(path + "-shard-00000", "r+b") as f:
        f.write(stored)
    forged = crc32c.crc32c(bytes(stored[(a.offset or 0) : (a.offset or 0) + a.stored_size]))
    _rewrite_row(path, "UPDATE files SET crc32c = ? WHERE path = 'a.txt'", forged)
    with barecat.Barecat(path, passphrase="pw", lookup_table=False) as bc:
        assert bc.verify_integrity()  # the CRC alone is satisfied...
        with pytest.raises(BarecatIntegrityError, match=r"a\.txt: block 0 fails authentication"):
            bc["a.txt"]  # ...the tag is not
        assert bc["b.txt"] == b"B" * 5000
    # 2. b's row pointed at a's (intact) bytes: bound to another path, refused
    _rewrite_row(
        path,
        "UPDATE files SET offset = ?, size = ?, crc32c = ? WHERE path = 'b.txt'",
        a.offset,
        a.stored_size,
        forged,
    )
    with (
        barecat.Barecat(path, passphrase="pw", lookup_table=False) as bc,
        pytest.raises(BarecatIntegrityError, match=r"b\.txt"),
    ):
        bc["b.txt"]
    # 3. truncated sealed bytes (row shortened, CRC forged)
    _rewrite_row(
        path,
        "UPDATE files SET offset = ?, size = ?, crc32c = ? WHERE path = 'b.txt'",
        b.offset,
        b.stored_size - 10,
        crc32c.crc32c(bytes(stored[(b.offset or 0) : (b.offset or 0) + b.stored_size - 10])),
    )
    with (
        barecat.Barecat(path, passphrase="pw", lookup_table=False) as bc,
        pytest.raises(BarecatIntegrityError, match=r"b\.txt"),
    ):
        bc["b.txt"]


def test_renames_reseal_encrypted_files(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "r.barecat")
    files = {f"d/sub/{i}.txt": b"file %d " % i * 50 for i in range(20)}
    with barecat.Barecat(path, readonly=False, passphrase="pw") as bc:
        for p, data in files.items():
            bc[p] = data
        bc["other.txt"] = b"x"
        bc.rename("d", "e")
        bc.rename("e/sub/3.txt", "three.txt")
        with pytest.raises(FileExistsBarecatError):
            bc.rename("other.txt", "three.txt")
        end = bc.sharder.write_position[1]
    with barecat.Barecat(path, passphrase="pw") as bc:
        assert bc["three.txt"] == files["d/sub/3.txt"]
        assert bc["e/sub/7.txt"] == files["d/sub/7.txt"]
        assert bc["other.txt"] == b"x"
        assert not bc.exists("d")
        assert os.path.getsize(path + "-shard-00000") == end  # the refused rename left nothing
        assert bc.verify_integrity()
    with barecat.Barecat(path, readonly=False, passphrase="pw") as bc:
        freed = bc.defrag()
        assert freed > 0  # the bytes sealed for the old paths were holes
    with barecat.Barecat(path, passphrase="pw") as bc:
        assert bc["e/sub/0.txt"] == files["d/sub/0.txt"] and bc.verify_integrity()


@pytest.mark.parametrize("mode", ["encrypted", "zstd+encrypted"])
def test_rekey_rewraps_the_key_and_rewrites_no_file(
    sealed: tuple[str, dict[str, bytes]], mode: str
) -> None:
    path, files = sealed
    before = shard_bytes(path)
    with reopen(path, mode, readonly=False) as bc:
        bc.rekey("new passphrase")
    assert shard_bytes(path) == before
    with pytest.raises(WrongPassphraseBarecatError):
        barecat.Barecat(path, passphrase="correct horse")
    with barecat.Barecat(path, passphrase="new passphrase") as bc:
        assert {p: bc[p] for p in bc} == files


def test_plain_archives_stay_plain(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "p.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc["a"] = b"1"
    with pytest.raises(BarecatError, match="plain archive"):
        barecat.Barecat(path, readonly=False, compression="zstd")
    with sqlite3.connect(path) as conn:
        version = dict(conn.execute("SELECT key, value_int FROM config WHERE key LIKE 'schema%'"))
        columns = [r[1] for r in conn.execute("PRAGMA table_info(files)")]
    assert version == {"schema_version_major": 0, "schema_version_minor": 3}
    assert "logical_size" not in columns


def test_the_reference_refuses_a_sealed_archive(sealed: tuple[str, dict[str, bytes]]) -> None:
    path, _ = sealed
    script = textwrap.dedent(
        """
        import sys, barecat
        try:
            barecat.Barecat(sys.argv[1])
        except Exception as e:
            print(type(e).__name__, e)
        else:
            print("opened")
        """
    )
    out = subprocess.run(
        [reference_python(), "-I", "-c", script, path], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("BarecatError Database schema version 1.3 is newer than supported")


def test_merge_and_subset_move_sealed_bytes_when_the_sealing_agrees(
    tmp_path: os.PathLike[str],
) -> None:
    base = os.fspath(tmp_path)

    def make(name: str, files: dict[str, bytes], **kw: object) -> str:
        path = os.path.join(base, name)
        with barecat.Barecat(path, readonly=False, **kw) as bc:  # type: ignore[arg-type]
            for p, data in files.items():
                bc[p] = data
        return path

    enc = make("enc.barecat", {"a/1": b"one" * 100, "a/2": b"two"}, passphrase="pw")
    other_key = make("enc2.barecat", {"b/1": b"x"}, passphrase="pw")
    packed = make("z.barecat", {"c/1": b"zzz" * 100}, compression="zstd")
    plain = make("plain.barecat", {"p": b"plain"})

    # encrypted files join an archive whose index digest follows them: never keylessly
    target = os.path.join(base, "merged.barecat")
    with barecat.Barecat(target, readonly=False) as out:
        with pytest.raises(BarecatError, match="needs the passphrase"):
            merge_archives(out.index, out.sharder, [enc])
        assert not out.sealed and out.num_files == 0
    # an empty target takes the source's sealing, key included, and keeps its digest
    # (IfEncrypted: a passphrase that claims nothing; any other would encrypt it now)
    with barecat.Barecat(target, readonly=False, passphrase=IfEncrypted(lambda: "pw")) as out:
        merge_archives(out.index, out.sharder, [enc], seal_like=out.seal_like)
        with pytest.raises(BarecatError, match="not encrypted with the same key"):
            merge_archives(out.index, out.sharder, [other_key])
        with pytest.raises(BarecatError, match="bound to their paths"):
            merge_archives(out.index, out.sharder, [enc], prefix="again")
        with pytest.raises(BarecatError, match="plain archive's files"):
            merge_archives(out.index, out.sharder, [plain])
    with barecat.Barecat(target, passphrase="pw") as bc:
        assert bc["a/1"] == b"one" * 100 and sorted(bc) == ["a/1", "a/2"]
        assert bc.verify_index_digest()[0] is None
    # compressed-only files carry no path binding: a prefix is fine
    zipped = os.path.join(base, "z2.barecat")
    with barecat.Barecat(zipped, readonly=False) as out:
        merge_archives(out.index, out.sharder, [packed], prefix="under")
    with barecat.Barecat(zipped) as bc:
        assert bc["under/c/1"] == b"zzz" * 100
    # a plain archive with files refuses sealed bytes
    with (
        barecat.Barecat(plain, readonly=False) as out,
        pytest.raises(BarecatError, match="plain archive with files"),
    ):
        merge_archives(out.index, out.sharder, [packed])


def test_ingest_extract_and_pickle(tmp_path: os.PathLike[str]) -> None:
    base = os.fspath(tmp_path)
    tree = os.path.join(base, "tree")
    rng = random.Random(5)
    expected = {}
    for i in range(300):
        rel = f"d{i % 7}/f{i}.bin"
        data = rng.randbytes(rng.randint(0, 3000)) if i % 2 else b"text %d\n" % i * 40
        os.makedirs(os.path.join(tree, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(tree, rel), "wb") as f:
            f.write(data)
        expected[rel] = data
    os.symlink("f1.bin", os.path.join(tree, "d1", "link"))
    path = os.path.join(base, "i.barecat")
    with barecat.Barecat(path, readonly=False, compression="lz4", passphrase="pw") as bc:
        assert add_directory(bc, tree) == 301
    with barecat.Barecat(path, passphrase="pw") as bc:
        assert {p: bc[p] for p in expected} == expected
        clone = pickle.loads(pickle.dumps(bc))  # a DataLoader worker, say
        assert clone["d3/f3.bin"] == expected["d3/f3.bin"]
        clone.close()
        result = extract_to_directory(bc, os.path.join(base, "out"))
    assert result.files == 300 and result.links == 1
    for rel, data in expected.items():
        with open(os.path.join(base, "out", rel), "rb") as f:
            assert f.read() == data
    assert os.readlink(os.path.join(base, "out", "d1", "link")) == "f1.bin"


def label_files(count: int, seed: int = 1) -> dict[str, bytes]:
    """Small, similar JSON files: what a trained dictionary is for."""
    rng = random.Random(seed)
    kinds = ["cat", "dog", "car", "person", "bicycle"]
    return {
        f"labels/{i:06d}.json": json.dumps(
            {
                "image_id": i,
                "file": f"train/{i:08d}.jpg",
                "annotations": [
                    {
                        "category": rng.choice(kinds),
                        "bbox": [round(rng.uniform(0, 600), 1) for _ in range(4)],
                        "iscrowd": 0,
                    }
                ],
            }
        ).encode()
        for i in range(count)
    }


def test_a_trained_dictionary_shrinks_small_similar_files(tmp_path: os.PathLike[str]) -> None:
    files = label_files(3000)
    dictionary = barecat.sealing.train_dictionary(list(files.values())[::3], 16 << 10)
    sizes = {}
    for name, extra in (("plain", {}), ("dict", {"compression_dictionary": dictionary})):
        path = os.path.join(os.fspath(tmp_path), f"{name}.barecat")
        with barecat.Barecat(path, readonly=False, compression="zstd", **extra) as bc:  # type: ignore[arg-type]
            bc.add_many(files.items())
        with barecat.Barecat(path) as bc:
            assert {p: bc[p] for p in bc} == files
            assert bc.verify_seals() == []
        sizes[name] = os.path.getsize(path + "-shard-00000")
    assert sizes["dict"] < sizes["plain"] * 0.7
    # bytes compressed with a dictionary move only to archives that have it
    target = os.path.join(os.fspath(tmp_path), "target.barecat")
    with barecat.Barecat(target, readonly=False, compression="zstd") as out:
        out["x"] = b"x"
        with pytest.raises(BarecatError, match="compression dictionary"):
            merge_archives(
                out.index, out.sharder, [os.path.join(os.fspath(tmp_path), "dict.barecat")]
            )
    with pytest.raises(BarecatError, match="dictionary is for zstd only"):
        barecat.Barecat(
            os.path.join(os.fspath(tmp_path), "lz4.barecat"),
            readonly=False,
            compression="lz4",
            compression_dictionary=dictionary,
        )


def test_codecs_decode_sealed_files(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "c.barecat")
    with barecat.Barecat(path, readonly=False, compression="zstd", passphrase="pw") as bc:
        view = barecat.DecodedView(bc)
        view["meta/a.json"] = {"label": "cat", "box": [1, 2, 3]}
        view["meta/b.json.gz"] = [1, 2, 3]
    with barecat.Barecat(path, passphrase="pw") as bc:
        view = barecat.DecodedView(bc)
        assert view["meta/a.json"] == {"label": "cat", "box": [1, 2, 3]}
        assert view["meta/b.json.gz"] == [1, 2, 3]
        assert json.loads(bc["meta/a.json"]) == {"label": "cat", "box": [1, 2, 3]}


@pytest.mark.parametrize(
    ("module", "options", "hint"),
    [
        ("cryptography", {"passphrase": "pw"}, "need cryptography ("),
        ("lz4", {"compression": "lz4"}, "need lz4 ("),
    ],
)
def test_a_missing_backend_is_named(
    tmp_path: os.PathLike[str], module: str, options: dict[str, str], hint: str
) -> None:
    path = os.path.join(os.fspath(tmp_path), "m.barecat")
    with barecat.Barecat(path, readonly=False, **options) as bc:  # type: ignore[arg-type]
        bc["f"] = b"data" * 100
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{module!r}] = None  # as if it were not installed
        import barecat
        try:
            with barecat.Barecat({path!r}, passphrase={options.get("passphrase")!r}) as bc:
                bc["f"]
        except ModuleNotFoundError as e:
            print("missing:", e)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("missing:") and hint in out and "pip install '.[sealing]'" in out


@pytest.mark.slow
def test_big_files_are_sealed_block_by_block_in_bounded_memory(
    tmp_path: os.PathLike[str],
) -> None:
    """A 192 MB file (from add with a file object, and through a directory ingest) goes
    into an encrypted archive with the process staying far below the file's size."""
    base = os.fspath(tmp_path)
    big = os.path.join(base, "tree", "big.bin")
    os.makedirs(os.path.dirname(big))
    rng = random.Random(9)
    with open(big, "wb") as f:
        for _ in range(48):  # half compressible, half not
            f.write(b"compressible " * 157_000 + rng.randbytes(2_000_000))
    size = os.path.getsize(big)
    script = textwrap.dedent(
        f"""
        import resource, barecat
        from barecat.transfer.ingest.threads import add_directory
        peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        with barecat.Barecat({base + "/a.barecat"!r}, readonly=False, passphrase="pw") as bc:
            before = peak()  # scrypt's 32 MiB included
            with open({big!r}, "rb") as f:
                bc.add("big.bin", fileobj=f)
        with barecat.Barecat({base + "/b.barecat"!r}, readonly=False, passphrase="pw") as bc:
            add_directory(bc, {base + "/tree"!r})
        print(peak() - before)
        """
    )
    growth = int(
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
    )
    assert growth < 64_000_000 < size // 3
    for name in ("a", "b"):
        with barecat.Barecat(os.path.join(base, f"{name}.barecat"), passphrase="pw") as bc:
            info = bc.index.lookup_file("big.bin")
            assert info.size == size and info.sealed_size is not None
            assert info.sealed_size < size * 0.8
            assert bc.verify_integrity() and bc.verify_seals() == []
            with bc.open("big.bin", "rb") as f, open(big, "rb") as original:
                while chunk := original.read(1 << 22):
                    assert f.read(len(chunk)) == chunk


def test_a_stream_shorter_than_announced_leaves_nothing(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "s.barecat")
    with barecat.Barecat(path, readonly=False, compression="zstd") as bc:
        bc["before"] = b"kept"
        with pytest.raises(BarecatError, match="shrank"):
            bc.update_file("before", fileobj=io.BytesIO(b"short"), size=1000)
    with barecat.Barecat(path) as bc:
        assert bc["before"] == b"kept" and bc.verify_integrity()
        end = bc.index.lookup_file("before").end
    assert os.path.getsize(path + "-shard-00000") == end  # the half-written seal was cut
