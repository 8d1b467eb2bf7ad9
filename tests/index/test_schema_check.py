"""Schema objects barecat did not make never run: an index holding a trigger, a view or
another object that could run inside barecat's statements is refused at open (before
any statement that could fire it), and before every commit of a writer; ``barecat
repair`` removes them. Every index that this barecat, 0.3.1, 0.2.x and the 2023 layout
make still opens."""

from __future__ import annotations

import os
import runpy
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import CorruptIndexBarecatError, ForeignSchemaBarecatError
from barecat.index.known_schema import KNOWN_OBJECTS
from barecat.index.schema_check import SchemaObject, foreign_objects, is_allowed
from barecat.ops.repair import drop_foreign_schema
from barecat.ops.upgrade import upgrade
from helpers import DATA, PASSPHRASE, REPO, Run
from helpers.reference import reference_env, reference_python


def sql(path: str, *statements: str) -> None:
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)


def foreign_in(index: str) -> list[SchemaObject]:
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        return foreign_objects(conn)


def copy_data(name: str, where: Path) -> str:
    """Copy a checked-in archive (index and shards) into ``where``; its base path."""
    for src in DATA.iterdir():
        if src.name.startswith(name):
            shutil.copy(src, where / src.name)
    return str(where / name)


def row(path: str, name: str) -> tuple[int, ...]:
    with sqlite3.connect(path) as conn:
        columns = "shard, offset, size, crc32c, logical_size"
        found = conn.execute(f"SELECT {columns} FROM files WHERE path = ?", (name,))
        return tuple(found.fetchone())


# -- what barecat makes, and what it may hold besides ------------------------------------


def test_every_index_barecat_makes_passes(tmp_path: Path, make_archive) -> None:  # type: ignore[no-untyped-def]
    made = [
        make_archive({"a/b": b"1", "c": b"2"}),
        make_archive({"a/b": b"1"}, compression="zstd"),
        make_archive({"a/b": b"1"}, passphrase=PASSPHRASE),
    ]
    bulk = str(tmp_path / "bulk.barecat")
    with barecat.Barecat(bulk, readonly=False) as bc:  # triggers dropped and made again,
        bc.add_many([(f"d{i % 9}/f{i}", b"x") for i in range(3000)])  # statistics analysed
        with bc.index.bulk_mode(drop_indexes=True):
            bc["late"] = b"y"
        bc.index.optimize()
    for index in [*made, bulk]:
        assert foreign_in(index) == [], index
    for name in ("ref031-small.barecat", "ref031-sharded.barecat", "ref031-oldnaming-sqlite-index"):
        index = str(DATA / name)
        assert foreign_in(index) == [], name
        with barecat.Barecat(index) as bc:
            assert len(bc) > 0
    for name in ("ref025-sharded", "ref027-small", "prev-small"):  # the older layouts too:
        assert foreign_in(str(DATA / f"{name}-sqlite-index")) == [], name  # upgrade reads them
        assert upgrade(copy_data(name, tmp_path)).upgraded


def test_archives_the_reference_writes_open(tmp_path: Path) -> None:
    """Fresh 0.3.1 archives: as made, after its bulk mode, and with the plain index a user
    of 0.3.1's ``Index.conn`` may add for queries of their own."""
    archive = str(tmp_path / "ref.barecat")
    snippet = (
        "import barecat, sys\n"
        "with barecat.Barecat(sys.argv[1], readonly=False) as bc:\n"
        "    for i in range(300):\n"
        "        bc[f'd{i % 7}/f{i}'] = b'x' * (i % 5)\n"
        "    with bc.index.no_triggers():\n"
        "        bc['quiet'] = b'q'\n"
        "    bc.index.conn.execute('CREATE INDEX by_size ON files (size DESC, mtime_ns)')\n"
        "    bc.index.optimize()\n"
    )
    made = subprocess.run(
        [reference_python(), "-I", "-c", snippet, archive],
        capture_output=True,
        env=reference_env(),
    )
    assert made.returncode == 0, made.stderr
    assert foreign_in(archive) == []
    with barecat.Barecat(archive, readonly=False) as bc:
        bc["ours"] = b"o"
    with barecat.Barecat(archive) as bc:
        assert len(list(bc)) == 302 and bc["ours"] == b"o" and bc["d3/f3"] == b"xxx"


def test_known_schema_is_what_the_tool_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    """``index/known_schema.py`` holds what ``tools/known_schema.py`` reads from real
    indexes now: a schema change without a rerun of the tool fails here."""
    monkeypatch.setenv("BARECAT_REFERENCE_PYTHON", reference_python())
    tool = runpy.run_path(os.path.join(REPO, "tools", "known_schema.py"))
    found = tool["collect"]()
    assert {key: set(texts) for key, texts in found.items()} == {
        key: set(texts) for key, texts in KNOWN_OBJECTS.items()
    }


def test_other_data_and_plain_indexes_are_left_alone(make_archive, run: Run) -> None:  # type: ignore[no-untyped-def]
    """Tables barecat never reads or writes (their indexes, whatever they are), SQLite's
    statistics and a plain index on barecat's tables run nothing inside its statements."""
    path = make_archive({"a": b"1", "b/c": b"22"})
    sql(
        path,
        "CREATE TABLE notes (path TEXT, note TEXT CHECK (length(note) < 100))",
        "CREATE UNIQUE INDEX notes_by_path ON notes (lower(path)) WHERE note IS NOT NULL",
        "INSERT INTO notes VALUES ('a', 'first')",
        "CREATE INDEX by_size ON files (size DESC, mtime_ns)",
        'CREATE INDEX "by mode" ON dirs ("mode")',
        "CREATE VIRTUAL TABLE words USING fts5(x)",  # (refused: removed below)
    )
    code, out, _ = run("repair", path)
    assert code == 0 and out.splitlines()[0] == (
        "removed table 'words' from the index: barecat did not make it"
    )
    with barecat.Barecat(path, readonly=False) as bc:
        bc["d"] = b"333"
        bc.remove("a")
    with barecat.Barecat(path) as bc:
        assert sorted(bc) == ["b/c", "d"] and bc["d"] == b"333"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT note FROM notes").fetchall() == [("first",)]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"notes", "notes_by_path", "by_size", "by mode"} <= names and "words" not in names
    code, out, _ = run("repair", path)
    assert code == 0 and out == "nothing to repair\n"


REFUSED = {
    "a trigger": ["CREATE TRIGGER stamp AFTER INSERT ON dirs BEGIN SELECT 1; END"],
    "a view": ["CREATE VIEW recent AS SELECT path FROM files"],
    "a trigger on other data": [
        "CREATE TABLE log (x)",
        "CREATE TRIGGER logged AFTER INSERT ON log BEGIN SELECT 1; END",
    ],
    "a virtual table": ["CREATE VIRTUAL TABLE spatial USING rtree(id, lo, hi)"],
    "a unique index": ["CREATE UNIQUE INDEX one_per_size ON files (size)"],
    "an index on an expression": ["CREATE INDEX by_abs ON files (abs(size))"],
    "a partial index": ["CREATE INDEX some ON files (size) WHERE size > 10"],
    "an index with a collation": ["CREATE INDEX folded ON files (path COLLATE NOCASE)"],
    "barecat's trigger redefined": [
        "DROP TRIGGER file_deleted",
        "CREATE TRIGGER file_deleted AFTER DELETE ON files "
        "BEGIN INSERT INTO files (path, shard, offset) VALUES ('ghost', 0, 0); END",
    ],
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_objects_that_could_run_are_refused_and_repair_removes_them(
    what: str, make_archive, run: Run
) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1", "b/c": b"22"})
    sql(path, *REFUSED[what])
    planted = foreign_in(path)
    assert len(planted) == 1
    named = planted[0].describe()
    for readonly in (True, False):
        with pytest.raises(ForeignSchemaBarecatError) as caught:
            barecat.Barecat(path, readonly=readonly)
        assert caught.value.index == path and caught.value.objects == [named]
        assert path in str(caught.value) and named in str(caught.value)
    code, out, err = run("ls", path)
    assert code == 1 and out == "" and err.count("\n") == 1 and named in err and path in err
    code, out, _ = run("repair", path)
    assert code == 0
    if what == "barecat's trigger redefined":
        assert out.splitlines()[0] == f"made {named} again as barecat makes it: it had other SQL"
    else:
        assert out.splitlines()[0] == f"removed {named} from the index: barecat did not make it"
    assert foreign_in(path) == []
    with barecat.Barecat(path, readonly=False) as bc:
        bc["z"] = b"333"
        bc.remove("a")
    with barecat.Barecat(path) as bc:
        assert sorted(bc) == ["b/c", "z"] and bc.index.find_inconsistencies() == []


def test_repair_never_removes_barecats_own_tables(make_archive, run: Run) -> None:  # type: ignore[no-untyped-def]
    path = make_archive({"a": b"1"})
    sql(path, "ALTER TABLE config ADD COLUMN planted TEXT DEFAULT 'x'")
    with pytest.raises(ForeignSchemaBarecatError, match="table 'config'"):
        barecat.Barecat(path)
    code, out, err = run("repair", path)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "restore the index from a copy" in err
    with sqlite3.connect(path) as conn:  # nothing removed
        assert conn.execute("SELECT count(*) FROM config").fetchone()[0] >= 4


def test_what_sqlite_would_build_is_judged_not_what_the_row_says() -> None:
    ours = KNOWN_OBJECTS["table", "files"][0]
    assert is_allowed(SchemaObject("table", "files", "files", ours))
    spaced = "create   TABLE files" + ours.removeprefix("CREATE TABLE files").replace("\n", "\n  ")
    assert is_allowed(SchemaObject("table", "files", "files", spaced + " -- a comment"))
    for kind, name, text in [
        ("table", "notes", ours),  # the row names other data; SQLite builds `files`
        ("table", "notes", "CREATE TABLE main.notes (x)"),
        ("table", "notes", "CREATE TABLE notes (x); CREATE VIEW v AS SELECT 1"),
        ("index", "i", "CREATE INDEX i ON files (size) ; DROP TABLE files"),
        ("index", "i", "CREATE INDEX i ON files (\"size\" || '')"),
        ("trigger", "file_deleted", ours),
    ]:  # fmt: skip
        assert not is_allowed(SchemaObject(kind, name, name, text)), text
    assert is_allowed(SchemaObject("index", "sqlite_autoindex_notes_1", "notes", None))


# -- the attack: a planted trigger replays an old row, the owner's key vouches for it ---


def encrypted_with_a_hole(tmp_path: Path) -> tuple[str, tuple[int, ...]]:
    """An encrypted archive whose ``salary.txt`` was replaced (its old ciphertext left in
    a hole), and the old row."""
    path = str(tmp_path / "private.barecat")
    with barecat.Barecat(path, readonly=False, passphrase=PASSPHRASE) as bc:
        bc["salary.txt"] = b"old: 100"
        bc["x"] = b"x"
    old = row(path, "salary.txt")
    with barecat.Barecat(path, readonly=False, passphrase=PASSPHRASE) as bc:
        bc.remove("salary.txt")
        bc["salary.txt"] = b"new: 200"
    return path, old


def replay_trigger(old: tuple[int, ...]) -> str:
    shard, offset, size, crc, logical = old
    return (
        "CREATE TRIGGER replay AFTER INSERT ON files BEGIN UPDATE files SET "
        f"shard = {shard}, offset = {offset}, size = {size}, crc32c = {crc}, "
        f"logical_size = {logical} WHERE path = 'salary.txt'; END"
    )


def test_a_planted_trigger_never_runs_in_the_owners_add(
    tmp_path: Path, run: Run, pw_file: str
) -> None:
    path, old = encrypted_with_a_hole(tmp_path)
    new = row(path, "salary.txt")
    sql(path, replay_trigger(old))
    note = tmp_path / "note.txt"
    note.write_bytes(b"note")
    for argv in (["add", "--passphrase-file", pw_file, path, str(note)],
                 ["verify", "--passphrase-file", pw_file, path],
                 ["cat", "--passphrase-file", pw_file, path, "salary.txt"]):  # fmt: skip
        code, out, err = run(*argv)
        assert code == 1 and out == "" and err.count("\n") == 1, (argv, out, err)
        assert "trigger 'replay' on files" in err and path in err
    assert row(path, "salary.txt") == new  # it never ran
    code, out, _ = run("repair", path)
    assert code == 0 and "removed trigger 'replay' on files" in out
    code, out, _ = run("verify", "--passphrase-file", pw_file, path)
    assert code == 0, out
    with barecat.Barecat(path, passphrase=PASSPHRASE) as bc:
        assert bc["salary.txt"] == b"new: 200" and bc.verify_index_digest()[0] is None


def test_a_trigger_planted_during_a_session_is_never_committed(tmp_path: Path) -> None:
    """A long-lived writer (a mount, a server) may see a trigger appear between two of its
    commits and fire it: the commit that would keep what it did is refused."""
    path, old = encrypted_with_a_hole(tmp_path)
    new = row(path, "salary.txt")
    bc = barecat.Barecat(path, readonly=False, passphrase=PASSPHRASE)
    try:
        bc["early"] = b"committed before"
        bc.commit()
        sql(path, replay_trigger(old))
        bc["late"] = b"fires the trigger"
        with pytest.raises(ForeignSchemaBarecatError, match="trigger 'replay' on files"):
            bc.commit()
    finally:
        with pytest.raises(ForeignSchemaBarecatError):
            bc.close()
    assert row(path, "salary.txt") == new
    assert drop_foreign_schema(path) == [("trigger 'replay' on files", False)]
    with barecat.Barecat(path, passphrase=PASSPHRASE) as bc:
        assert sorted(bc) == ["early", "salary.txt", "x"]
        assert bc["salary.txt"] == b"new: 200" and bc.verify_index_digest()[0] is None


# -- a view named files: refused at once, not run forever -------------------------------

ENDLESS_FILES_VIEW = (
    "ALTER TABLE files RENAME TO stored_files",
    "CREATE VIEW files AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT 'f' || i AS path, 0 AS shard, 0 AS offset, 0 AS size, 0 AS crc32c FROM n",
)


def test_a_view_named_files_is_refused_not_run(make_archive, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every read of such an index once ran the view, which never ends. In a child
    process, so that a regression fails (after a generous timeout) instead of hanging."""
    path = make_archive({"a": b"1"})
    sql(path, *ENDLESS_FILES_VIEW)
    base = copy_data("ref027-small", tmp_path)
    sql(base + "-sqlite-index", *ENDLESS_FILES_VIEW)
    code = (
        "import sys, barecat\n"
        "from barecat.ops.upgrade import upgrade\n"
        "for attempt in (lambda: barecat.Barecat(sys.argv[1])['a'],\n"
        "                lambda: barecat.Barecat(sys.argv[1], readonly=False),\n"
        "                lambda: upgrade(sys.argv[2])):\n"
        "    try:\n"
        "        attempt()\n"
        "    except barecat.ForeignSchemaBarecatError as e:\n"
        "        print(e.objects)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", code, path, base], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all("view 'files'" in line for line in lines), lines


def test_upgrade_refuses_what_it_would_run(tmp_path: Path) -> None:
    base = copy_data("ref027-small", tmp_path)
    sql(base + "-sqlite-index", "CREATE TRIGGER t AFTER UPDATE ON dirs BEGIN SELECT 1; END")
    with pytest.raises(ForeignSchemaBarecatError, match="trigger 't' on dirs"):
        upgrade(base)
    with pytest.raises(CorruptIndexBarecatError):  # (the same error, by its family name)
        upgrade(base)
