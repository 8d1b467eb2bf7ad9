"""A forged lookup table never answers: a table file made from an edited copy of the index,
the real index's identity copied into its header, serves neither an old version of a file
nor a path the archive does not have, and a table without an empty slot cannot make a
lookup run forever. A table answers only once its contents hash to what its header says
and the index (a plain archive's config row, written by a writer) or the key (an
encrypted archive's tag) vouches for that hash; a legitimate one still answers, with no
SQLite query."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

import barecat
from barecat.index.lookup_table import CONFIG_KEY, LookupTable, identity_now
from barecat.index.table_trust import CHECK_MIN_LOOKUPS
from barecat.layout import lookup_table_path
from helpers import PASSPHRASE, Run

ROW = "shard, offset, size, crc32c"


def index_row(path: str, name: str, columns: str = ROW) -> tuple[int, ...]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(f"SELECT {columns} FROM files WHERE path = ?", (name,))
        return tuple(found.fetchone())


def with_a_replaced_file(tmp_path: Path, **options: object) -> tuple[str, tuple[int, ...]]:
    """An archive whose ``salary.txt`` was replaced (the old bytes left in a hole), and
    the old file's row (with ``logical_size`` when sealed)."""
    path = str(tmp_path / "pay.barecat")
    columns = ROW + (", logical_size" if options else "")
    with barecat.Barecat(path, readonly=False, **options) as bc:  # type: ignore[arg-type]
        bc["salary.txt"] = b"old: 100"
        for i in range(50):
            bc[f"staff/{i}"] = b"%d" % i
    old = index_row(path, "salary.txt", columns)
    with barecat.Barecat(path, readonly=False, **options) as bc:  # type: ignore[arg-type]
        bc.remove("salary.txt")
        bc["salary.txt"] = b"new: 200"
    return path, old


def forge(path: str, tmp_path: Path, *edits: str, full: bool = False) -> LookupTable:
    """A table built from an edited copy of the index at ``path``, saved as its lookup
    table with the real index's identity in its header; ``full`` fills every empty slot."""
    copy = str(tmp_path / "edited-copy")
    shutil.copy(path, copy)
    with sqlite3.connect(copy) as conn:
        for edit in edits:
            conn.execute(edit)
    conn = sqlite3.connect(copy)
    fd = os.open(copy, os.O_RDONLY)
    try:
        table = LookupTable.build(conn, fd)
    finally:
        os.close(fd)
        conn.close()
    assert table is not None
    if full:  # every empty slot taken by a copy of the first entry, under another hash
        slots = table._slots
        first = next(i for i in range(0, len(slots), 4) if slots[i])
        for i in range(0, len(slots), 4):
            if slots[i] == 0:
                slots[i : i + 4] = array("Q", [(i // 4) + 7, *slots[first + 1 : first + 4]])
    fd = os.open(path, os.O_RDONLY)
    try:
        identity = identity_now(fd)
    finally:
        os.close(fd)
    assert identity is not None
    table.set_identity(identity)
    assert table.save(lookup_table_path(path), table.content_hash())
    return table


def vouch_in_the_index(path: str, table: LookupTable) -> None:
    """What only a writer of the index can do: the config row for ``table``, then the
    table made to say it is for the index as that commit leaves it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        counter = int.from_bytes(identity_now(fd)[3], "big")  # type: ignore[index]
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO config (key, value_text, value_int) VALUES (?, ?, ?)",
                (CONFIG_KEY, table.content_hash().hex(), counter + 1),
            )
        identity = identity_now(fd)
    finally:
        os.close(fd)
    assert identity is not None and int.from_bytes(identity[3], "big") == counter + 1
    table.set_identity(identity)
    assert table.save(lookup_table_path(path), table.content_hash())


def sqlite_lookups(bc: barecat.Barecat) -> list[str]:
    """The file lookups by path SQLite answers from now on, on this thread's connection."""
    seen: list[str] = []
    bc.index.conn.set_trace_callback(
        lambda statement: seen.append(statement) if "FROM files WHERE path" in statement else None
    )
    return seen


def test_a_forged_table_never_serves_an_old_version(tmp_path: Path) -> None:
    path, old = with_a_replaced_file(tmp_path)
    forge(path, tmp_path, "UPDATE files SET shard = {}, offset = {}, size = {}, crc32c = {} "
          "WHERE path = 'salary.txt'".format(*old))  # fmt: skip
    with barecat.Barecat(path) as bc:
        for _ in range(2000):  # (past the lookups after which a saved table is checked)
            assert bc["salary.txt"] == b"new: 200"
        assert bc.get_many(["staff/1", "salary.txt"]) == [b"1", b"new: 200"]
        assert bc.read("salary.txt") == b"new: 200"
        assert bc.index.lookup_table_size is None  # refused: nothing in the index vouches


def test_a_forged_table_never_answers_a_path_the_archive_lacks(tmp_path: Path, run: Run) -> None:
    path, _ = with_a_replaced_file(tmp_path)
    ghost = ("INSERT INTO files (path, shard, offset, size, crc32c) SELECT 'ghost', shard, "
             "offset, size, crc32c FROM files WHERE path = 'staff/7'")  # fmt: skip
    forge(path, tmp_path, ghost)
    with barecat.Barecat(path) as bc:
        for _ in range(2000):
            with pytest.raises(KeyError):
                bc["ghost"]
        assert "ghost" not in bc and bc.get("ghost") is None
        with pytest.raises(KeyError):
            bc.get_many(["staff/7", "ghost"])
    code, out, err = run("cat", path, "ghost")
    assert code == 1 and out == "" and "ghost" in err


def test_a_table_without_an_empty_slot_ends_every_probe(tmp_path: Path) -> None:
    """Forged, and vouched for by an edited index (which a plain archive cannot tell from
    its owner's edit): a table without an empty slot is damaged, never used, and even
    probed directly ends every probe (each slot visited at most once). In a child process,
    so that a regression fails instead of hanging."""
    path, _ = with_a_replaced_file(tmp_path)
    table = forge(path, tmp_path, full=True)
    assert not table.has_empty_slot()
    vouch_in_the_index(path, table)
    code = (
        "import os, sys, barecat\n"
        "from barecat.index.lookup_table import LookupTable\n"
        "with barecat.Barecat(sys.argv[1]) as bc:\n"
        "    assert bc.index.lookup_table_size is None  # (damaged: not used)\n"
        "    assert bc.get('missing') is None and bc['staff/1'] == b'1'\n"
        "table = LookupTable.load(sys.argv[1] + '-lookup', os.open(sys.argv[1], os.O_RDONLY))\n"
        "assert table.verify() and table.find('missing') is None\n"
        "assert table.find('staff/1') is not None and table.find_many(['missing']) is None\n"
        "assert sorted(pos for pos, _ in table.find_many(['staff/2', 'staff/1'])) == [0, 1]\n"
        "print('ended')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout == "ended\n", done.stderr


def test_a_forged_table_of_an_encrypted_archive_never_answers(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    """The index's config row is outside what the digest authenticates: an encrypted
    archive's table must carry the key's tag, so even a forger who also writes the row
    gets nothing served, and ``verify --expect-digest`` agrees with every read."""
    path, old = with_a_replaced_file(tmp_path, passphrase=PASSPHRASE)
    with barecat.Barecat(path, passphrase=PASSPHRASE) as bc:
        problem, pin = bc.verify_index_digest()
    assert problem is None and pin is not None
    replay = ("UPDATE files SET shard = {}, offset = {}, size = {}, crc32c = {}, "
              "logical_size = {} WHERE path = 'salary.txt'").format(*old)  # fmt: skip
    table = forge(path, tmp_path, replay)
    vouch_in_the_index(path, table)
    with barecat.Barecat(path, passphrase=PASSPHRASE) as bc:
        for _ in range(2000):
            assert bc["salary.txt"] == b"new: 200"
        assert bc.get_many(["salary.txt"]) == [b"new: 200"]
        assert bc.read("salary.txt") == b"new: 200"
    code, out, _ = run("verify", "--passphrase-file", pw_file, "--expect-digest", pin, path)
    assert code == 0, out
    code, out, _ = run("cat", "--passphrase-file", pw_file, path, "salary.txt")
    assert code == 0 and out == "new: 200"


def test_a_plain_archives_table_is_vouched_for_by_its_writer(make_archive) -> None:  # type: ignore[no-untyped-def]
    files = {f"d{i % 5}/{i}": b"%d" % i for i in range(500)}
    path = make_archive(files)
    with sqlite3.connect(path) as conn:
        (content, counter) = conn.execute(
            "SELECT value_text, value_int FROM config WHERE key = ?", (CONFIG_KEY,)
        ).fetchone()
    fd = os.open(path, os.O_RDONLY)
    try:
        assert int.from_bytes(identity_now(fd)[3], "big") == counter  # type: ignore[index]
    finally:
        os.close(fd)
    table = LookupTable.load(lookup_table_path(path), os.open(path, os.O_RDONLY))
    assert table is not None and table.content == bytes.fromhex(content) and table.verify()
    with barecat.Barecat(path) as bc:
        seen = sqlite_lookups(bc)
        names = list(files)
        for i in range(3000):
            assert bc[names[i % 500]] == files[names[i % 500]]
        # SQLite answers the lookups before the saved table is checked (a one-off read
        # never hashes it), then the table, checked once, answers all
        assert len(seen) == CHECK_MIN_LOOKUPS - 1 and bc.index.lookup_table_size == 500
        seen.clear()
        assert bc.get_many(names[:50]) == [files[n] for n in names[:50]] and seen == []


def test_an_encrypted_archives_table_carries_the_keys_tag(tmp_path: Path) -> None:
    """Readers holding the key save the table they build, tagged, for the next reader
    holding it; a tag made with another key is worth nothing."""
    path = str(tmp_path / "private.barecat")
    files = {f"f{i}": b"%d" % i for i in range(300)}
    with barecat.Barecat(path, readonly=False, passphrase=PASSPHRASE) as bc:
        for name, data in files.items():
            bc[name] = data
    with barecat.Barecat(path, passphrase=PASSPHRASE, lookup_table=True) as bc:
        assert bc.index.lookup_table_size == 300
    assert os.path.exists(lookup_table_path(path))
    with barecat.Barecat(path, passphrase=PASSPHRASE) as bc:
        assert bc["f1"] == b"1"  # (the key is known from here on)
        seen = sqlite_lookups(bc)
        assert bc.index.lookup_table_size == 300
        assert all(bc[n] == d for n, d in files.items()) and seen == []
    other = str(tmp_path / "other.barecat")
    with barecat.Barecat(other, readonly=False, passphrase="another key") as bc:
        for name in files:
            bc[name] = b"other archive"
    with barecat.Barecat(other, passphrase="another key", lookup_table=True) as bc:
        pass
    table = LookupTable.load(lookup_table_path(other), os.open(other, os.O_RDONLY))
    assert table is not None
    fd = os.open(path, os.O_RDONLY)
    table.set_identity(identity_now(fd))  # type: ignore[arg-type]
    os.close(fd)
    table.save(lookup_table_path(path), table.content_hash(), table.tag)
    with barecat.Barecat(path, passphrase=PASSPHRASE) as bc:
        assert bc["f1"] == b"1" and bc.index.lookup_table_size is None


def test_the_config_row_vouches_only_for_the_commit_that_wrote_it(make_archive) -> None:  # type: ignore[no-untyped-def]
    """A table saved by a writer, kept aside and put back after a later commit (by barecat
    0.3.1, say, which knows nothing of the row) with the new identity copied in: the row
    names the older commit, so the table is not used."""
    path = make_archive({"a": b"first", "b": b"bee"})
    saved = lookup_table_path(path) + ".kept"
    shutil.copy(lookup_table_path(path), saved)
    with sqlite3.connect(path) as conn:  # a writer that leaves the row alone
        conn.execute("UPDATE files SET mode = 420 WHERE path = 'a'")
    table = LookupTable.load(saved, os.open(path, os.O_RDONLY))
    assert table is None  # (its identity is stale) ... copied in:
    with open(saved, "rb") as f:
        header = bytearray(f.read())
    fd = os.open(path, os.O_RDONLY)
    ino, size, mtime_ns, counter = identity_now(fd)  # type: ignore[misc]
    os.close(fd)
    header[12:40] = (ino.to_bytes(8, "little") + size.to_bytes(8, "little")
                     + mtime_ns.to_bytes(8, "little", signed=True) + counter)  # fmt: skip
    with open(lookup_table_path(path), "wb") as f:
        f.write(header)
    with barecat.Barecat(path) as bc:
        assert bc.index.lookup_table_size is None and bc["a"] == b"first"
