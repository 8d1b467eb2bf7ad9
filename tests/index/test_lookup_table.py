"""The lookup table: answers like SQLite, saved beside the index, never stale, never wrong."""

from __future__ import annotations

import os
import shutil
import struct

import pytest
import xxhash

import barecat
from barecat.index.table_trust import CHECK_MIN_LOOKUPS
from barecat.layout import lookup_table_path
from helpers import mapped_here


def table_file(path: str) -> str:
    return lookup_table_path(path)


def test_lookup_table_answers_like_sqlite(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"d{i % 9}/f{i}": os.urandom(i % 50) for i in range(3000)}
    files["empty"] = b""
    path = make_archive(files)
    for loaded in (True, False):
        if not loaded:
            os.remove(table_file(path))
        with (
            barecat.Barecat(path, lookup_table=True) as fast,
            barecat.Barecat(path, lookup_table=False) as slow,
        ):
            assert fast.index.lookup_table_size == len(files)
            for p in [*list(files)[::7], "nope", "d1", "d1/f1/x"]:
                assert fast.index.lookup_address(p) == slow.index.lookup_address(p)
            assert all(fast[p] == d for p, d in files.items())
            some = [*list(files)[::11], "empty", "d2/f2"]
            assert fast.get_many(some) == slow.get_many(some) == [files[p] for p in some]
            with pytest.raises(KeyError):
                fast.get_many(["d1/f1", "nope"])
            with pytest.raises(KeyError):
                fast["d1"]


def test_a_new_archive_leaves_a_table_the_next_reader_uses_at_once(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"x/{i}": bytes([i % 256]) * (i % 7) for i in range(500)}
    path = make_archive(files)
    path_bytes = sum(len(p) for p in files)  # 43 bytes a file, and its path
    assert os.path.getsize(table_file(path)) <= 128 + 43 * len(files) + 32 + path_bytes
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == len(files)
        assert all(bc[p] == d for p, d in files.items())


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc/self/maps")
def test_the_saved_table_is_mapped_once_lookups_make_it_worth_it(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"d{i % 3}/f{i}": b"%d" % i for i in range(200)}
    table = os.path.realpath(table_file(make_archive(files)))
    path = table.removesuffix("-lookup")
    with barecat.Barecat(path) as bc:
        # an open that lists, globs, counts, tests existence or reads a few files never
        # maps the table (nor checks it: SQLite answers those reads)
        assert bc.listdir("d1")[:2] == ["f1", "f4"]
        assert len(bc.glob("**/f1*", recursive=True)) == 1 + 10 + 100
        assert (len(bc), bc.exists("d2"), bc.isfile("d2/f2")) == (200, True, True)
        assert bc["d2/f5"] == b"5" and bc.get_many(["d0/f0"]) == [b"0"]
        assert not mapped_here(table)
        for _ in range(CHECK_MIN_LOOKUPS):  # enough reads: mapped, checked, used
            assert bc["d2/f5"] == b"5"
        assert mapped_here(table)
        assert bc.index.lookup_table_size == len(files)
    assert not mapped_here(table)
    with barecat.Barecat(path) as bc:  # asking its size takes it up too
        assert bc.index.lookup_table_size == len(files)
        assert bc.get_many(["d0/f0", "d0/f3"]) == [b"0", b"3"]


def test_lookup_table_builds_itself_after_enough_lookups(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({f"f{i}": bytes([i % 256]) for i in range(100)}, lookup_table=False)
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None
        for _ in range(100):
            for i in range(100):
                assert bc[f"f{i}"] == bytes([i % 256])
        assert bc.index.lookup_table_size == 100
    # a reader cannot vouch for a plain archive's table (that takes a write to the
    # index): what it built serves it alone ...
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path, readonly=False, lookup_table=True):  # ... a writer asked
        pass  # for one saves it, with its voucher,
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == 100  # ... for every later reader
    with barecat.Barecat(path, readonly=False) as bc:  # writers never use one
        for i in range(10_050):
            bc[f"f{i % 100}"]
        assert bc.index.lookup_table_size is None


def test_lookup_table_is_retired_by_any_commit(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"old", "b": b"gone soon"})
    with barecat.Barecat(path, lookup_table=True) as reader:
        assert reader["a"] == b"old" and reader.index.lookup_table_size is not None
        with barecat.Barecat(path, readonly=False) as writer:
            writer.update_file("a", data=b"new")
            writer.remove("b")
            writer["c"] = b"added"
        assert reader["a"] == b"new"
        assert "b" not in reader and reader["c"] == b"added"
        assert (
            reader.index.lookup_table_size is None
        )  # rebuilt only when lookups make it worth it again


def test_writers_rebuild_or_drop_the_saved_table(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({f"f{i}": b"%d" % i for i in range(100)})
    with barecat.Barecat(path, readonly=False) as bc:  # a small change: building would not pay
        bc["new"] = b"n"
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["new"] == b"n"
    with barecat.Barecat(path, readonly=False) as bc:  # most of the archive is new: rebuilt
        for i in range(150):
            bc[f"g{i}"] = b"g"
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == 251 and bc["g7"] == b"g" and bc["f3"] == b"3"
    with barecat.Barecat(path, readonly=False):  # opened, nothing committed: kept as it is
        pass
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size == 251


def test_a_table_of_another_state_or_archive_is_ignored(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"first", "b": b"bee"})
    other = make_archive({"a": b"other archive's a", "b": b"b"})
    saved = table_file(path) + ".bak"
    shutil.copy(table_file(path), saved)
    with barecat.Barecat(path, readonly=False, lookup_table=False) as bc:
        bc.update_file("a", data=b"second")
    shutil.copy(saved, table_file(path))  # restored from a backup: built for the old index
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"second"
    shutil.copy(table_file(other), table_file(path))  # copied from another archive
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"second"


def test_a_damaged_table_costs_speed_never_correctness(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"d/{i}": os.urandom(20 + i % 40) for i in range(200)}
    path = make_archive(files)
    table = table_file(path)
    with open(table, "r+b") as f:  # every address, size and CRC garbled; header intact
        (capacity,) = struct.unpack_from("<Q", f.read(128), 48)
        slots = list(struct.iter_unpack("<4Q", f.read(32 * capacity)))
        f.seek(128)
        for hash_, _, path_ref, _ in slots:  # (hash, address, path, size and CRC)
            garbage = struct.unpack("<2Q", os.urandom(16))
            f.write(struct.pack("<4Q", hash_, garbage[0], path_ref, garbage[1]))
    assert sum(slot[0] != 0 for slot in slots) == len(files)  # hashes and paths still match
    with barecat.Barecat(path) as bc:  # its contents no longer hash to what its header
        assert bc.index.lookup_table_size is None  # says: not used at all
        assert all(bc[p] == d for p, d in files.items())
        assert bc.get_many(list(files)) == list(files.values())
    with open(table, "r+b") as f:
        f.truncate(os.path.getsize(table) // 2)  # cut short: not even mapped
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["d/5"] == files["d/5"]
    with open(table, "r+b") as f:
        f.seek(128)
        f.write(os.urandom(64))  # garbage where a table should be: ignored as well
    with barecat.Barecat(path) as bc:
        assert bc["d/7"] == files["d/7"]


def test_the_table_goes_with_the_archive(make_archive) -> None:  # type: ignore[no-untyped-def]
    """A replaced archive's table goes with it (the old one serves readers until the new
    one is in place); a removed archive's too."""
    path = make_archive({"a": b"1"})
    old_table = os.stat(table_file(path)).st_ino
    with barecat.Barecat(path, readonly=False, overwrite=True) as bc:
        bc["z"] = b"2"
        assert os.stat(table_file(path)).st_ino == old_table
    assert not os.path.exists(table_file(path)) or os.stat(table_file(path)).st_ino != old_table
    with barecat.Barecat(path) as reader:
        assert dict(reader) == {"z": b"2"}
    barecat.remove(path)
    assert not os.path.exists(table_file(path)) and not os.path.exists(path)


def test_lookup_table_refused_for_wal_indexes(make_archive) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"}, wal=True)
    assert not os.path.exists(table_file(path))
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"1"


def test_a_table_that_cannot_be_saved_still_serves_this_reader(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"f{i}": b"%d" % i for i in range(50)}
    path = make_archive(files, lookup_table=False)
    os.mkdir(table_file(path))  # the name is taken: saving must fail cleanly
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc.index.lookup_table_size == len(files)
        assert all(bc[p] == d for p, d in files.items())
    assert os.path.isdir(table_file(path))
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if ".barecat-lookup." in n]
    assert leftovers == []  # no temporary file left behind


def xxh3_colliding_paths() -> tuple[str, str]:
    """Two different UTF-8 paths with the same xxh3-64 hash: a real collision, no seam.

    Inputs over 240 bytes are hashed in 64-byte stripes. Lane j of stripe s adds its 8
    bytes v to accumulator j ^ 1, and lo32(v ^ k) * hi32(v ^ k) to accumulator j, where k
    is 8 bytes of xxh3's default secret at 8 * (s + j). When the lane's first 4 bytes
    equal the secret's, that product is 0 whatever its last 4 bytes are; so two such
    lanes (same j, stripes of the same 1,024-byte block) can move their last 4 bytes by +d
    and -d and every accumulator ends the same. Secret bytes 48-51 (b8 08 46 74, after a
    lead byte c3) and 120-123 (c8 9f 7e c9, before a continuation byte) can be part of
    UTF-8 text: they are lane 6 of stripes 0 and 9.
    """
    base = bytearray(b"a" * 700)  # > 240 bytes, and stripe 9 is not the last stripe
    base[47:52] = b"\xc3" + b"\xb8\x08\x46\x74"  # lane 6 of stripe 0: 'ø', '\b', 'F', 't'
    base[624:628] = b"\xc8\x9f\x7e\xc9"  # lane 6 of stripe 9
    one, two = bytearray(base), bytearray(base)
    one[52:56], one[628:632] = b"aaaa", b"\x81aaa"
    two[52:56], two[628:632] = b"baaa", b"\x80aaa"  # +1 in one lane, -1 in the other
    return one.decode(), two.decode()


def test_a_path_sharing_a_hash_with_a_stored_one_never_gets_its_bytes(make_archive) -> None:  # type: ignore[no-untyped-def]
    stored, absent = xxh3_colliding_paths()
    assert stored != absent
    assert xxhash.xxh3_64_intdigest(stored.encode()) == xxhash.xxh3_64_intdigest(absent.encode())
    path = make_archive({stored: b"the stored file", "other": b"x"})
    for table_from in ("built", "saved"):
        with barecat.Barecat(path, lookup_table=True) as bc:
            assert bc.index.lookup_table_size == 2, table_from
            assert bc[stored] == b"the stored file"
            assert bc.index.lookup_address(absent) is None
            with pytest.raises(KeyError):
                bc[absent]
            with pytest.raises(KeyError):
                bc.get_many([stored, absent])
            assert bc.get(absent) is None and absent not in bc
        assert os.path.exists(table_file(path))  # the second round maps the saved table


def test_paths_sharing_a_hash_are_both_answered_by_the_table(make_archive) -> None:  # type: ignore[no-untyped-def]
    one, two = xxh3_colliding_paths()
    path = make_archive({one: b"first", two: b"second", "x": b"x"})
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc.index.lookup_table_size == 3
        assert bc[one] == b"first" and bc[two] == b"second"
        assert bc.get_many([two, one, "x"]) == [b"second", b"first", b"x"]
