"""Creating a schema-0.3 index and checking the version of an existing one.

The schema text lives in ``sql/*.sql`` next to this module, the single source of truth
for tables, indexes and triggers. Imports ``exceptions`` and ``entries`` only.
"""

from __future__ import annotations

import sqlite3
from importlib import resources

from barecat.entries import SHARD_SIZE_UNLIMITED
from barecat.exceptions import CorruptIndexBarecatError, SchemaVersionBarecatError

SCHEMA_VERSION_MAJOR = 0
SCHEMA_VERSION_MINOR = 3
SEALED_SCHEMA_VERSION_MAJOR = 1
"""The major version of an archive with sealed (compressed or encrypted) files: the 0.3
layout plus a ``logical_size`` column and ``sealing*`` config rows. Being a newer major,
it makes barecat 0.3.x refuse the archive with its own error instead of returning
sealed bytes as if they were the files."""
SEALING_KEY = "sealing"
"""The config row whose presence marks a sealed archive (its text: the sealing version)."""

ConfigValue = str | int


def _sql(name: str) -> str:
    return (
        resources.files("barecat.index").joinpath("sql").joinpath(name).read_text(encoding="utf-8")
    )


def create_schema(conn: sqlite3.Connection, shard_size_limit: int | None) -> None:
    """Create tables, indexes, triggers, config rows and the root directory, then commit."""
    conn.executescript(_sql("schema.sql"))
    conn.executescript(_sql("triggers.sql"))
    limit = SHARD_SIZE_UNLIMITED if shard_size_limit is None else shard_size_limit
    conn.executemany(
        "INSERT INTO config (key, value_int) VALUES (?, ?)",
        [
            ("use_triggers", 1),
            ("shard_size_limit", limit),
            ("schema_version_major", SCHEMA_VERSION_MAJOR),
            ("schema_version_minor", SCHEMA_VERSION_MINOR),
        ],
    )
    conn.execute("INSERT INTO dirs (path) VALUES ('')")
    conn.commit()


def is_sealed(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM config WHERE key = ?", (SEALING_KEY,)).fetchone()
    return row is not None


def read_config(conn: sqlite3.Connection, prefix: str) -> dict[str, ConfigValue]:
    """The config rows whose key starts with ``prefix``, each as its text or integer."""
    rows = conn.execute(
        "SELECT key, value_text, value_int FROM config WHERE substr(key, 1, ?) = ?",
        (len(prefix), prefix),
    )
    return {key: text if text is not None else int(number) for key, text, number in rows}


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
    if conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None:
        raise SchemaVersionBarecatError(
            "Only an empty archive can become a sealed one; copy the files into a new "
            "sealed archive instead (barecat subset, or barecat create from an extraction)"
        )
    with conn:
        conn.execute("ALTER TABLE files ADD COLUMN logical_size INTEGER DEFAULT NULL")
        write_config(conn, {**records, "schema_version_major": SEALED_SCHEMA_VERSION_MAJOR})


def read_version(conn: sqlite3.Connection, where: str) -> tuple[int, int]:
    """Schema (major, minor) of an index; (-1, 0) for the unversioned pre-0.2 layout.

    One query when the ``config`` table exists (every open pays for this); the table
    list is read only to tell the 2023 layout from a file that is no index at all.
    """
    try:
        rows = dict(
            conn.execute(
                "SELECT key, value_int FROM config "
                "WHERE key IN ('schema_version_major', 'schema_version_minor')"
            ).fetchall()
        )
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "files" in tables:
            return (-1, 0)
        raise CorruptIndexBarecatError(
            f"{where} is not a barecat index (no config or files table)"
        ) from e
    except sqlite3.DatabaseError as e:
        raise CorruptIndexBarecatError(f"{where} is not a barecat index: {e}") from e
    return (int(rows.get("schema_version_major", 0)), int(rows.get("schema_version_minor", 0)))


def check_version(conn: sqlite3.Connection, where: str) -> tuple[int, int]:
    """Refuse an index whose major schema differs from the one this code implements.

    Minor versions of the same major are readable; older minors are still opened (their
    only difference is trigger logic) but are reported so `barecat upgrade` can fix them.
    """
    major, minor = read_version(conn, where)
    if major == SEALED_SCHEMA_VERSION_MAJOR and is_sealed(conn):
        return major, minor
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
    return major, minor
