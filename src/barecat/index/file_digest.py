"""Keeping an encrypted archive's index digest in step with its file rows, in SQL.

The digest (``sealing/digest.py``) lives in the config row :data:`DIGEST_KEY`. A writer
that holds the data key gives each of its connections temporary triggers (this
connection's only: the file's schema is untouched) that call a step function for every
row inserted, deleted, or updated in a column the digest covers, and store what it
returns in that row, inside the same statement: so every commit, rollback and savepoint
leaves digest and rows in agreement, whichever code path edited them. A writer without
the key gets triggers that refuse those edits instead, since it could not keep the
digest. Imports only the standard library.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator

from barecat.index.connection import select

DIGEST_KEY = "sealing_index_digest"
"""The config row (text) holding an encrypted archive's digest of its file rows."""

Step = Callable[[object, int, object, object, object, object], str]
"""(stored digest, +1 added / -1 taken away, path, size, crc32c, logical_size) -> new."""

COVERED = ("path", "size", "crc32c", "logical_size")
"""The columns of a file row the digest covers (not its place, nor its metadata)."""

REFUSAL = (
    "barecat: this encrypted archive authenticates its list of files, so adding, removing "
    "or renaming files needs its passphrase (open it with the passphrase, or unlock() it) "
    "and an index digest that checks (barecat verify)"
)
_EVENTS = {
    "insert": "INSERT",
    "delete": "DELETE",
    "update": f"UPDATE OF {', '.join(COVERED)}",
}


def _row(alias: str) -> str:
    return ", ".join(f"{alias}.{column}" for column in COVERED)


_STEPS = {
    "insert": f"barecat_digest_step(value_text, 1, {_row('NEW')})",
    "delete": f"barecat_digest_step(value_text, -1, {_row('OLD')})",
    "update": (
        f"barecat_digest_step(barecat_digest_step(value_text, -1, {_row('OLD')}), 1, {_row('NEW')})"
    ),
}


def install(conn: sqlite3.Connection, step: Step | None) -> None:
    """Give ``conn`` the triggers that keep the digest with ``step``, or (None) the ones
    that refuse every change the digest would have to follow; replaces earlier ones."""
    for event in _EVENTS:
        conn.execute(f"DROP TRIGGER IF EXISTS temp.barecat_digest_{event}")
    if step is not None:
        conn.create_function("barecat_digest_step", 6, step)
    for event, clause in _EVENTS.items():
        if step is None:
            body = f"SELECT RAISE(ABORT, '{REFUSAL}');"
            when = "BEFORE"
        else:
            body = f"UPDATE config SET value_text = {_STEPS[event]} WHERE key = '{DIGEST_KEY}';"
            when = "AFTER"
        conn.execute(
            f"CREATE TEMP TRIGGER barecat_digest_{event} {when} {clause} ON main.files "
            f"BEGIN {body} END"
        )


def stored(conn: sqlite3.Connection) -> str | None:
    """The stored digest (None when the archive has none)."""
    row = select(conn, "SELECT value_text FROM config WHERE key = ?", (DIGEST_KEY,)).fetchone()
    return None if row is None else row[0]


def covered_rows(conn: sqlite3.Connection) -> Iterator[tuple[object, object, object, object]]:
    """Every file row's covered columns, in no particular order."""
    yield from select(conn, f"SELECT {', '.join(COVERED)} FROM files")


__all__ = ["COVERED", "DIGEST_KEY", "REFUSAL", "Step", "covered_rows", "install", "stored"]
