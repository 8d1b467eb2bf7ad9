"""Creating a schema-0.3 index and checking the version of an existing one.

The schema text lives in ``sql/*.sql`` next to this module, the single source of truth
for tables, indexes and triggers. Imports ``exceptions``, ``entries`` and
``barecat.index``'s ``connection`` and ``query``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from barecat.entries import SHARD_SIZE_UNLIMITED
from barecat.exceptions import (
    CorruptIndexBarecatError,
    DamagedIndexBarecatError,
    SchemaVersionBarecatError,
)
from barecat.index.connection import select
from barecat.index.query import sql_kind

SCHEMA_VERSION_MAJOR = 0
SCHEMA_VERSION_MINOR = 3
SEALED_SCHEMA_VERSION_MAJOR = 1
"""The major version of an archive with sealed (compressed or encrypted) files: the 0.3
layout plus a ``logical_size`` column and ``sealing*`` config rows. Being a newer major,
it makes barecat 0.3.x refuse the archive with its own error instead of returning
sealed bytes as if they were the files."""
SEALING_KEY = "sealing"
"""The config row whose presence marks a sealed archive (its text: the sealing version)."""
SEALED_COLUMN_SQL = "ALTER TABLE files ADD COLUMN logical_size INTEGER DEFAULT NULL"
"""What turns the ``files`` table of an empty index into a sealed archive's."""

ConfigValue = str | int


def _sql(name: str) -> str:
    from importlib import resources  # (pathlib, zipfile...) only to create or upgrade an index

    return (
        resources.files("barecat.index").joinpath("sql").joinpath(name).read_text(encoding="utf-8")
    )


def create_schema(
    conn: sqlite3.Connection, shard_size_limit: int | None, replace_unfinished: bool = False
) -> None:
    """Create tables, indexes, triggers, config rows and the root directory in one
    transaction: a kill part-way leaves an index SQLite rolls back to nothing, never one
    with some of the tables (which would pass for the 2023 layout).

    ``replace_unfinished`` first drops, in the same transaction, the tables of an index
    whose creation was cut short (:func:`lacks_schema` says ``"unfinished"``).
    """
    limit = SHARD_SIZE_UNLIMITED if shard_size_limit is None else int(shard_size_limit)
    rows = [
        ("use_triggers", 1),
        ("shard_size_limit", limit),
        ("schema_version_major", SCHEMA_VERSION_MAJOR),
        ("schema_version_minor", SCHEMA_VERSION_MINOR),
    ]
    values = ", ".join(f"('{key}', {int(value)})" for key, value in rows)
    drops = "".join(f"DROP TABLE IF EXISTS {t};\n" for t in _SCHEMA_TABLES)
    script = (
        f"BEGIN;\n{drops if replace_unfinished else ''}"
        f"{_sql('schema.sql')}\n{_sql('triggers.sql')}\n"
        f"INSERT INTO config (key, value_int) VALUES {values};\n"
        "INSERT INTO dirs (path) VALUES ('');\nCOMMIT;"
    )
    try:
        conn.executescript(script)
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


_SCHEMA_TABLES = ("files", "dirs", "config")


def lacks_schema(conn: sqlite3.Connection) -> str | None:
    """Why the index behind ``conn`` holds no archive yet, or None if it is anything else
    (an archive of any schema, or not a barecat index at all).

    ``"empty"``: no table at all (a new or 0-byte file, or a creation SQLite rolled
    back). ``"unfinished"``: only schema-0.3 tables, no file, and no schema version or
    no directory (a complete index always has its root): what a kill leaves of barecat
    0.3.1 and of this barecat before its creation became one transaction, which made
    the schema one statement at a time. Either holds nothing, so a writer may make the
    schema (again).
    """
    tables = {r[0] for r in select(conn, "SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return "empty"
    if not tables <= set(_SCHEMA_TABLES) or _has_rows(conn, tables, "files"):
        return None
    versioned = (
        "config" in tables
        and select(conn, "SELECT 1 FROM config WHERE key = 'schema_version_major'").fetchone()
    )
    if versioned and _has_rows(conn, tables, "dirs"):
        return None
    return "unfinished"


def _has_rows(conn: sqlite3.Connection, tables: set[str], table: str) -> bool:
    return table in tables and select(conn, f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None


def make_schema_if_missing(
    conn: sqlite3.Connection,
    where: str,
    shard_size_limit: int | None,
    shard_files: Callable[[], list[str]],
) -> bool:
    """For a writer: make the schema of an index that holds no archive yet
    (:func:`lacks_schema`), in one transaction. Returns whether it did.

    Args:
        conn: A read-write connection to the index ``where``.
        where: The index file, for messages.
        shard_size_limit: The limit a new schema records (None: unlimited).
        shard_files: The archive's shard files that hold bytes, asked only when a schema
            is due.

    Raises:
        CorruptIndexBarecatError: A schema is due but shards hold bytes: a new index
            would own none of them and its appends would overwrite them.
    """
    missing = lacks_schema(conn)
    if missing is None:
        return False
    shards = shard_files()
    if shards:
        more = f" and {len(shards) - 1} more" if len(shards) > 1 else ""
        state = "it is empty" if missing == "empty" else "its creation was cut short"
        raise CorruptIndexBarecatError(
            f"{where} is not a barecat index ({state}), but shards of the archive hold data "
            f"({shards[0]}{more}): a new index would not know their files and would "
            "overwrite them, so none is made; restore the index, or remove the shards "
            "to start afresh"
        )
    create_schema(conn, shard_size_limit, replace_unfinished=missing == "unfinished")
    return True


def is_sealed(conn: sqlite3.Connection) -> bool:
    row = select(conn, "SELECT 1 FROM config WHERE key = ?", (SEALING_KEY,)).fetchone()
    return row is not None


def read_config(conn: sqlite3.Connection, prefix: str, where: str) -> dict[str, ConfigValue]:
    """The config rows whose key starts with ``prefix``, each as its text or integer.

    Raises:
        DamagedIndexBarecatError: a row of the index ``where`` holds neither text nor an
            integer (NULL in both columns, a blob, a real number).
    """
    rows = select(
        conn,
        "SELECT key, value_text, value_int FROM config WHERE substr(key, 1, ?) = ?",
        (len(prefix), prefix),
    )
    config: dict[str, ConfigValue] = {}
    for key, text, number in rows:
        if type(text) is str:
            config[key] = text
        elif text is None and type(number) is int:
            config[key] = number
        else:
            shown = number if text is None else text
            raise DamagedIndexBarecatError(where, f"its config row {key!r} holds {sql_kind(shown)}")
    return config


def config_int(value: object, key: str, where: str) -> int | None:
    """A config row's ``value_int`` as read: an integer, or None for NULL.

    Raises:
        DamagedIndexBarecatError: text, a real number or a blob, in the index ``where``.
    """
    if value is None or type(value) is int:
        return value
    raise DamagedIndexBarecatError(
        where, f"its config row {key!r} holds {sql_kind(value)}, not an integer"
    )


def write_config(conn: sqlite3.Connection, records: dict[str, ConfigValue]) -> None:
    """Insert or replace config rows (text in ``value_text``, integers in ``value_int``);
    the caller commits."""
    conn.executemany(
        "INSERT OR REPLACE INTO config (key, value_text, value_int) VALUES (?, ?, ?)",
        [
            (key, value, None) if isinstance(value, str) else (key, None, value)
            for key, value in records.items()
        ],
    )


def enable_sealing(conn: sqlite3.Connection, records: dict[str, ConfigValue]) -> None:
    """Turn an empty schema-0.3 index into a sealed one, in one transaction."""
    if select(conn, "SELECT 1 FROM files LIMIT 1").fetchone() is not None:
        raise SchemaVersionBarecatError(
            "Only an empty archive can become a sealed one; copy the files into a new "
            "sealed archive instead (barecat subset, or barecat create from an extraction)"
        )
    with conn:
        conn.execute(SEALED_COLUMN_SQL)
        write_config(conn, {**records, "schema_version_major": SEALED_SCHEMA_VERSION_MAJOR})


def read_version(conn: sqlite3.Connection, where: str) -> tuple[int, int]:
    """Schema (major, minor) of an index; (-1, 0) for the unversioned pre-0.2 layout.

    One query when the ``config`` table exists (every open pays for this); the table
    list is read only to tell the 2023 layout from a file that is no index at all, or
    from one whose creation was cut short (:func:`lacks_schema`).
    """
    return read_version_and_limit(conn, where)[0]


def read_version_and_limit(
    conn: sqlite3.Connection, where: str
) -> tuple[tuple[int, int], int | None]:
    """:func:`read_version`, and the stored shard size limit (None when there is none)
    from the same query: what opening an archive reads from the config.

    Returns:
        ((major, minor), shard size limit or None).

    Raises:
        DamagedIndexBarecatError: a value that is no integer, a NULL version, or a
            ``sealing`` row under a plain schema version (a row lost to damage).
    """
    try:
        rows = dict(
            select(
                conn,
                "SELECT key, value_int FROM config WHERE key IN "
                "('schema_version_major', 'schema_version_minor', 'shard_size_limit', 'sealing')",
            ).fetchall()
        )
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        _refuse_unfinished(conn, where)
        tables = {r[0] for r in select(conn, "SELECT name FROM sqlite_master WHERE type='table'")}
        if "files" in tables:
            return (-1, 0), None
        raise CorruptIndexBarecatError(
            f"{where} is not a barecat index (no config or files table)"
        ) from e
    except sqlite3.DatabaseError as e:
        raise CorruptIndexBarecatError(f"{where} is not a barecat index: {e}") from e
    if "schema_version_major" not in rows:
        _refuse_unfinished(conn, where)
    major, minor = (
        config_int(rows.get(key, 0), key, where)
        for key in ("schema_version_major", "schema_version_minor")
    )
    if major is None or minor is None:
        raise DamagedIndexBarecatError(where, "its schema version in the config table is NULL")
    if SEALING_KEY in rows and major < SEALED_SCHEMA_VERSION_MAJOR:  # (its sealed bytes
        raise DamagedIndexBarecatError(  # would be served as the files' own)
            where, f"its config holds sealing settings but schema version {major}.{minor}"
        )
    return (major, minor), config_int(rows.get("shard_size_limit"), "shard_size_limit", where)


def _refuse_unfinished(conn: sqlite3.Connection, where: str) -> None:
    if lacks_schema(conn) == "unfinished":
        raise CorruptIndexBarecatError(
            f"{where} is an unfinished barecat index (its creation was interrupted): it "
            "holds no files; opening the archive for writing (barecat create --resume, "
            "barecat repair) makes it again"
        )


def check_version(conn: sqlite3.Connection, where: str) -> tuple[int, int]:
    """Refuse an index whose major schema differs from the one this code implements.

    Minor versions of the same major are readable; older minors are still opened (their
    only difference is trigger logic) but are reported so `barecat upgrade` can fix them.
    """
    return check_version_and_limit(conn, where)[0]


def check_version_and_limit(
    conn: sqlite3.Connection, where: str
) -> tuple[tuple[int, int], int | None]:
    """:func:`check_version`, and the stored shard size limit from the same query
    (:func:`read_version_and_limit`).

    Returns:
        ((major, minor), shard size limit or None).

    Raises:
        SchemaVersionBarecatError: as :func:`check_version`.
    """
    (major, minor), limit = read_version_and_limit(conn, where)
    if major == SEALED_SCHEMA_VERSION_MAJOR and is_sealed(conn):
        return (major, minor), limit
    if major > SCHEMA_VERSION_MAJOR:
        raise SchemaVersionBarecatError(
            f"{where} uses barecat index schema {major}.{minor}, newer than the "
            f"{SCHEMA_VERSION_MAJOR}.{SCHEMA_VERSION_MINOR} this barecat supports; "
            "upgrade the barecat package to open it"
        )
    if major < SCHEMA_VERSION_MAJOR:
        raise SchemaVersionBarecatError(
            f"{where} uses the unversioned barecat index layout of 2023 (before schema 0.2), "
            f"which this barecat does not open; convert it in place with `barecat upgrade "
            f"{where}` (the old index is kept as {where}.old)"
        )
    return (major, minor), limit
