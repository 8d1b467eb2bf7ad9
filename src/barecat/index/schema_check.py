"""Which schema objects an index may hold, checked before any statement of ours can run
one of them.

SQLite runs a trigger inside the statement that fires it, and a view whenever a query
names it. An index file holding a trigger or a view barecat did not make would run
someone else's SQL inside ours: a trigger that puts an older file row back, fired by the
owner's next add (in an encrypted archive, the digest kept with the owner's key then
vouches for the replayed row), or a view named ``files`` that never ends. So every open
reads ``sqlite_master`` once, before any other statement, and refuses an index holding
an object that could run inside barecat's statements and that barecat did not make:

- barecat's own tables, indexes and triggers must have the very SQL that this barecat,
  barecat 0.3.0/0.3.1, schema 0.2 (0.2.5 to 0.2.7) or the unversioned layout of 2023
  gives them (``known_schema.py``; a text that differs only in spacing, comments or the
  letter case of keywords and names is the same statement);
- any other trigger, any view and any virtual table is refused;
- an index on one of barecat's tables must be a plain one, as users of 0.3.1's
  ``Index.conn`` may have added to speed up their own queries: ``CREATE INDEX name ON
  files (size, mtime_ns)``, column names only, no ``UNIQUE`` (a unique index makes
  ``INSERT OR REPLACE`` delete other rows), no expression (which calls functions), no
  ``WHERE``, no ``COLLATE``;
- other tables, their indexes and SQLite's statistics tables are data that barecat
  never reads or writes (nothing in them runs unless they are written), and are left
  alone.

A writer checks again before each commit if the schema changed since it last looked
(:func:`changed_since`): what an object planted during a long session did is rolled
back, never committed. :func:`drop_foreign` removes what is not allowed (``barecat
repair``). Imports ``exceptions`` and this package's ``connection`` and
``known_schema``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from barecat.exceptions import (
    CorruptIndexBarecatError,
    ForeignSchemaBarecatError,
)
from barecat.index.connection import select, writers_locked_out
from barecat.index.errors import open_error
from barecat.index.known_schema import KNOWN_OBJECTS

_SCHEMA_ROWS = "SELECT type, name, tbl_name, sql FROM main.sqlite_master"
_ALL_TEXTS = "SELECT count(sql), group_concat(sql, char(0)) FROM main.sqlite_master"
_KNOWN_TEXTS = frozenset(sql for variants in KNOWN_OBJECTS.values() for sql in variants)
_TABLE_COLUMNS = {
    "files": {
        "path", "parent", "shard", "offset", "size", "crc32c", "mode", "uid", "gid",
        "mtime_ns", "logical_size",
    },
    "dirs": {
        "path", "parent", "num_subdirs", "num_files", "num_files_tree", "size_tree", "mode",
        "uid", "gid", "mtime_ns",
    },
    "config": {"key", "value_text", "value_int"},
}  # fmt: skip
"""The columns of barecat's tables that a user's plain index may be on."""
_BARECAT_TABLES = {name for kind, name in KNOWN_OBJECTS if kind == "table"}
"""The tables of every layout, and SQLite's statistics tables."""
_TOKEN = re.compile(
    r"""(?P<skip>\s+|--[^\n]*|/\*.*?(?:\*/|\Z))"""
    r"""|(?P<quoted>'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])"""
    r"""|(?P<word>\w+)|(?P<operator>->>|->|\|\||<=|>=|==|!=|<>|<<|>>)|(?P<other>.)""",
    re.DOTALL,
)
_DIRECTION = {"asc", "desc"}


@dataclass(frozen=True, slots=True)
class SchemaObject:
    """One row of ``sqlite_master``."""

    type: str
    name: str
    table: str
    sql: str | None

    def describe(self) -> str:
        """``trigger 'x' on files``: what the object is, for messages.

        Returns:
            The description.
        """
        on = f" on {self.table}" if self.type in ("index", "trigger") else ""
        return f"{self.type} {self.name!r}{on}"


def tokens(sql: str) -> tuple[str, ...]:
    """The statement as SQLite reads it: no spacing or comments, words in lower case
    (ASCII ones: SQLite folds no other letters), quoted strings and names as written.

    Args:
        sql: SQL text.

    Returns:
        Its tokens.
    """
    out = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup
        if kind == "skip":
            continue
        text = match.group()
        out.append(text.lower() if kind == "word" and text.isascii() else text)
    return tuple(out)


@cache
def _known_tokens(kind: str, name: str) -> frozenset[tuple[str, ...]]:
    return frozenset(tokens(sql) for sql in KNOWN_OBJECTS.get((kind, name), ()))


def is_allowed(obj: SchemaObject) -> bool:
    """Whether an index may hold ``obj`` (see the module doc).

    Args:
        obj: a row of ``sqlite_master``.

    Returns:
        True for what barecat makes and what runs no code inside its statements.
    """
    sql = obj.sql
    if sql is not None and sql in KNOWN_OBJECTS.get((obj.type, obj.name), ()):
        return True  # (the exact text: nearly every object of nearly every index)
    if sql is None:  # the index SQLite makes for a PRIMARY KEY or UNIQUE constraint
        return obj.type == "index" and obj.name.startswith("sqlite_autoindex_")
    words = tokens(sql)
    declared = _declared(words)
    if declared is None or declared[:2] != (obj.type, obj.name.lower()):
        return False  # (SQLite builds the object its text declares, whatever the row says)
    if words in _known_tokens(obj.type, obj.name):
        return True
    if (obj.type, obj.name) in KNOWN_OBJECTS or ";" in words:
        return False  # one of barecat's names with other SQL; more than one statement
    kind, _, rest = declared
    if kind == "table":  # data barecat never reads or writes; not a virtual table
        return words[1] == "table"
    if kind == "index" and len(rest) >= 4 and rest[0] == "on" and rest[2] == "(":
        table = _unquoted(rest[1])
        if table not in _BARECAT_TABLES:
            return True  # an index of such data: it runs when that table is written
        return words[1] == "index" and _is_plain_index(rest[3:], _TABLE_COLUMNS.get(table))
    return False  # views, triggers: they run inside the statements that name their table


def _unquoted(token: str) -> str:
    if token[:1] in ('"', "`", "[") and len(token) >= 2:
        token = token[1:-1]
    return token.lower() if token.isascii() else token


def _declared(words: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]] | None:
    """(type, name, the tokens after the name) that ``CREATE ...`` declares; None for
    anything else (a qualified name, a TEMP object: neither is stored in an index)."""
    if words[:1] != ("create",):
        return None
    at = 2 if words[1:2] in (("unique",), ("virtual",)) else 1
    kind = words[at] if len(words) > at else ""
    if kind not in ("table", "index", "trigger", "view"):
        return None
    at += 1
    if words[at : at + 3] == ("if", "not", "exists"):
        at += 3
    if len(words) <= at + 1 or words[at + 1] == ".":
        return None
    return kind, _unquoted(words[at]), words[at + 1 :]


def _is_plain_index(terms: tuple[str, ...], columns: set[str] | None) -> bool:
    """``column [ASC|DESC], ... )``: the rest of ``CREATE INDEX name ON table (``, for an
    index of one of barecat's tables (``columns``: its columns)."""
    if columns is None or terms[-1:] != (")",):
        return False
    split: list[list[str]] = [[]]
    for token in terms[:-1]:
        if token == ",":
            split.append([])
        else:
            split[-1].append(token)
    for term in split:
        if len(term) == 2 and term[1] in _DIRECTION:
            term = term[:1]
        if len(term) != 1 or _unquoted(term[0]) not in columns:
            return False
    return True


def foreign_objects(conn: sqlite3.Connection) -> list[SchemaObject]:
    """The objects of the index behind ``conn`` that it may not hold.

    SQLite builds each object from its SQL text alone (a row without one is the index of
    a table's constraint, found by name), so an index whose every text is one that
    barecat stores holds nothing else: the common case, one statement that returns one
    row. Otherwise each row is judged by :func:`is_allowed`.

    Args:
        conn: a connection to the index.

    Returns:
        Them, in ``sqlite_master`` order; empty for an index barecat could have made.
    """
    count, texts = select(conn, _ALL_TEXTS).fetchone()
    if texts is None:
        return []
    parts = texts.split("\0")
    if len(parts) == count and _KNOWN_TEXTS.issuperset(parts):
        return []
    rows = select(conn, _SCHEMA_ROWS)
    return [obj for obj in (SchemaObject(*row) for row in rows) if not is_allowed(obj)]


def check(conn: sqlite3.Connection, where: str) -> None:
    """Refuse an index holding schema objects barecat did not make.

    Args:
        conn: a connection to the index; nothing else must have run on it yet.
        where: the index file, for the message.

    Raises:
        ForeignSchemaBarecatError: naming the index and the objects.
    """
    found = foreign_objects(conn)
    if found:
        raise foreign_schema_error(where, found)


def schema_version(conn: sqlite3.Connection) -> int:
    """SQLite's schema cookie, which every change of the schema moves: read before a
    :func:`check`, so that a change made after it is seen by :func:`changed_since`.

    Args:
        conn: a connection to the index.

    Returns:
        The cookie.
    """
    return int(select(conn, "PRAGMA schema_version").fetchone()[0])


def foreign_schema_error(where: str, found: Iterable[SchemaObject]) -> ForeignSchemaBarecatError:
    """The error for an index holding ``found``.

    Args:
        where: the index file.
        found: the objects barecat did not make.

    Returns:
        The error, to raise.
    """
    objects = [obj.describe() for obj in found]
    return ForeignSchemaBarecatError(
        f"{where} holds schema objects barecat did not make ({', '.join(objects)}); they "
        "could run inside barecat's own statements, so the archive is not used: "
        f"'barecat repair {where}' removes them",
        where,
        objects,
    )


def changed_since(conn: sqlite3.Connection, checked: int, where: str) -> int:
    """For a writer before it commits: check the schema again if it changed since the
    cookie ``checked`` (barecat's own changes move it too: bulk loads, ``ANALYZE``).

    Args:
        conn: the writer's connection, inside its transaction.
        checked: the cookie when the schema was last found clean.
        where: the index file, for the message.

    Returns:
        The cookie now (clean).

    Raises:
        ForeignSchemaBarecatError: an object barecat did not make appeared; the caller
            must not commit.
    """
    now = schema_version(conn)
    if now != checked:
        check(conn, where)
    return now


def drop_foreign(path: str) -> list[tuple[str, bool]]:
    """Remove from the index at ``path`` every object it may not hold, in one
    transaction, with barecat's writers locked out (``barecat repair``). One of barecat's
    triggers or indexes that had other SQL is made again as barecat makes it (the newest
    layout's, ``known_schema.py``'s first text of that name).

    Args:
        path: the index file.

    Returns:
        (``trigger 'x' on files``, whether it was made again) for each object removed.

    Raises:
        ArchiveLockedBarecatError: a writer has the archive open (or another program).
        CorruptIndexBarecatError: the file is not an SQLite database; one of barecat's
            own tables is not defined as barecat defines it (removing it would remove
            rows); an object cannot be removed or made again (a virtual table of a module
            SQLite lacks, say). Nothing changed.
    """
    with writers_locked_out(path):
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("BEGIN")  # (an index with nothing to remove is not written)
            if not foreign_objects(conn):
                return []
            conn.execute("ROLLBACK")
            conn.execute("BEGIN IMMEDIATE")
            done = _drop_all(conn, foreign_objects(conn), path)
            conn.execute("COMMIT")  # (an error before: closing rolls everything back)
        except sqlite3.DatabaseError as e:
            raise open_error(path, e) from e
        finally:
            conn.close()
    return done


def _drop_all(
    conn: sqlite3.Connection, found: list[SchemaObject], path: str
) -> list[tuple[str, bool]]:
    for obj in found:
        if obj.type == "table" and (obj.type, obj.name) in KNOWN_OBJECTS:
            raise CorruptIndexBarecatError(
                f"{path}: {obj.describe()} is not defined as barecat defines it, and "
                "removing it would remove the archive's rows; restore the index from a copy"
            )
    done = []
    # triggers and views first: removing a table removes what hangs on it
    for obj in sorted(found, key=lambda o: o.type == "table"):
        if obj.sql is None or not _exists(conn, obj):  # (an autoindex goes with its table)
            continue
        again = KNOWN_OBJECTS.get((obj.type, obj.name), ())[:1]
        name = '"' + obj.name.replace('"', '""') + '"'
        try:
            conn.execute(f"DROP {obj.type.upper()} {name}")
            for text in again:
                conn.execute(text)
        except sqlite3.Error as e:
            raise CorruptIndexBarecatError(
                f"{path}: {obj.describe()}, which barecat did not make, cannot be "
                f"{'made again' if again else 'removed'} ({e}); nothing was changed"
            ) from e
        done.append((obj.describe(), bool(again)))
    return done


def _exists(conn: sqlite3.Connection, obj: SchemaObject) -> bool:
    sql = "SELECT 1 FROM main.sqlite_master WHERE type = ? AND name = ?"
    return select(conn, sql, (obj.type, obj.name)).fetchone() is not None
