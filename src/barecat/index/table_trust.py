"""Who vouches for a saved lookup table, and saving one so that the next reader may trust
it.

A table file's header (the index's identity) can be copied from the index by anyone who
can write beside it, so what makes a reader use a saved table is its contents, hashed
(``LookupTable.verify``), and a voucher for that hash that only a writer of the index or
the holder of the archive's key can make:

- A plain (or compressed-only) archive: the index's ``lookup_table`` config row, the
  hash and the change counter of the commit that wrote it. A writer writes it in a
  transaction of its own, holding SQLite's write lock, and saves the table only if that
  commit moved the counter by exactly one (no other writer came between).
  :meth:`TableTrust.commit_and_save`. A reader cannot write the index, so the tables it
  builds serve it alone.
- An encrypted archive: a tag under a key derived from the data key (``tagger``, given
  by the archive once the key is known), over the header (identity, sizes, hash) and the
  index digest's stored text. Readers holding the key make and check it; without the
  key, no saved table is used. The config row alone would not do: it is outside what the
  digest authenticates, and a writer without the key could write it.

Imports only this package's ``connection``, ``file_digest`` and ``lookup_table``, and
``layout``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable

from barecat.index import file_digest
from barecat.index.connection import select
from barecat.index.lookup_table import CONFIG_KEY, LookupTable, change_counter, identity_now
from barecat.layout import lookup_table_path

Tagger = Callable[[bytes], bytes]
"""Bytes -> their 32-byte tag under the archive's key."""
CHECK_MIN_LOOKUPS = 1_000
"""Lookups a reader makes before it checks a saved table: enough that a one-off read
(``barecat cat``) never pays for hashing it, nor for importing ``hashlib`` (3 ms)."""
CHECK_BYTES_PER_LOOKUP = 4096
"""And one lookup for every 4 KiB of the table: hashing it (about 1 ns a byte) then costs
about what the lookups SQLite answered meanwhile did (about 5 us more each)."""

_ENCRYPTED = ("sealing_kdf", file_digest.DIGEST_KEY)
"""Config rows of an encrypted archive: either one makes a table need a tag."""


class TableTrust:
    """The vouchers of the tables saved beside one index (see the module doc)."""

    def __init__(self, index_path: str) -> None:
        self.file = lookup_table_path(index_path)
        """The table file, ``INDEX-lookup``."""
        self.tagger: Tagger | None = None
        """An encrypted archive's, once the archive knows the key."""
        self.saved = False
        """A saved table is to be checked (:meth:`due`)."""
        self._waiting: LookupTable | None = None  # (checked, waiting for the key)
        self._needs_tag: bool | None = None

    def take_up(self) -> int | None:
        """A reader's first lookup: is there a saved table? (It is mapped and checked
        only when it is due: a one-off read pays a ``stat``.)

        Returns:
            The lookups to make before it is checked; None if there is none.
        """
        try:
            size = os.stat(self.file).st_size
        except OSError:
            return None
        self.saved = True
        return max(CHECK_MIN_LOOKUPS, size // CHECK_BYTES_PER_LOOKUP)

    def due(self, conn: sqlite3.Connection, index_fd: int) -> LookupTable | bool:
        """Map the saved table if it says it is current, and check it (:meth:`adopt`):
        the table if it may answer; True if it waits for the key (it stays due); False
        if it may not (forgotten).

        Args:
            conn: a connection to the index.
            index_fd: the index file, open.

        Returns:
            As above.
        """
        table = self._waiting or LookupTable.load(self.file, index_fd)
        self._waiting = None
        adopted = None if table is None else self.adopt(conn, table)
        if table is not None and adopted is None:
            self._waiting = table
            return True
        self.saved = False
        return table if table is not None and adopted else False

    def forget(self) -> None:
        """No saved table is due any more (the reader closed, or built its own)."""
        self.saved = False
        self._waiting = None

    def needs_tag(self, conn: sqlite3.Connection) -> bool:
        """Whether the archive is encrypted: its tables need the key's tag.

        Args:
            conn: a connection to the index.

        Returns:
            True for an encrypted archive.
        """
        if self._needs_tag is None:
            sql = "SELECT 1 FROM config WHERE key IN (?, ?) LIMIT 1"
            self._needs_tag = select(conn, sql, _ENCRYPTED).fetchone() is not None
        return self._needs_tag

    def adopt(self, conn: sqlite3.Connection, table: LookupTable) -> bool | None:
        """Whether a saved table (its identity found current) may answer: vouched for,
        then its contents hashed (about 1 ns a byte) and found to have an empty slot.

        Args:
            conn: a connection to the index.
            table: the table, as loaded.

        Returns:
            True if it may; False if not (forged, damaged, full, or vouched for by nothing);
            None if only the key can tell, and it is not known yet.
        """
        vouched = self._vouched(conn, table)
        return vouched and table.verify() and table.has_empty_slot()

    def _vouched(self, conn: sqlite3.Connection, table: LookupTable) -> bool | None:
        if self.needs_tag(conn):
            if self.tagger is None:
                return None
            import hmac  # (hashlib with it: an encrypted archive has loaded both)

            return hmac.compare_digest(self._tag(conn, table.tagged_header()), table.tag)
        sql = "SELECT value_text, value_int FROM config WHERE key = ?"
        row = select(conn, sql, (CONFIG_KEY,)).fetchone()
        counter = int.from_bytes(table.counter, "big")
        return table.content is not None and row == (table.content.hex(), counter)

    def _tag(self, conn: sqlite3.Connection, header: bytes) -> bytes:
        assert self.tagger is not None
        digest = file_digest.stored(conn)
        return self.tagger(header + str(digest or "").encode("utf-8", "surrogateescape"))

    def save(self, conn: sqlite3.Connection, table: LookupTable) -> bool:
        """Save a table built from the index for the next reader, if it can be vouched for
        without writing the index: an encrypted archive's, with the key.

        Args:
            conn: the connection the table was built from.
            table: the table.

        Returns:
            Whether it was saved.
        """
        if not self.needs_tag(conn) or self.tagger is None:
            return False
        content = table.content_hash()
        return table.save(self.file, content, self._tag(conn, table.tagged_header(content)))

    def commit_and_save(
        self,
        conn: sqlite3.Connection,
        index_fd: int,
        before_commit: Callable[[sqlite3.Connection], None],
    ) -> bool:
        """For a writer, its changes committed: build the table of the index as it is and
        save it with its voucher (the config row, in a transaction of its own, for a plain
        archive; the key's tag for an encrypted one, if the key is known).

        Args:
            conn: the writer's connection, outside a transaction.
            index_fd: the index file, open.
            before_commit: called in the row's transaction, before its commit (the
                schema check, SQLite's statistics).

        Returns:
            Whether a table was saved (False: WAL, no key, another writer came between,
            or the file could not be written).
        """
        if self.needs_tag(conn):
            table = LookupTable.build(conn, index_fd)
            return table is not None and self.save(conn, table)
        conn.execute("BEGIN IMMEDIATE")  # (no other writer until the commit)
        try:
            before = change_counter(index_fd)
            table = LookupTable.build(conn, index_fd)
            if before is None or table is None:
                conn.rollback()
                return False
            content = table.content_hash()
            after = (int.from_bytes(before, "big") + 1) & 0xFFFFFFFF
            conn.execute(
                "INSERT OR REPLACE INTO config (key, value_text, value_int) VALUES (?, ?, ?)",
                (CONFIG_KEY, content.hex(), after),
            )
            before_commit(conn)
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        identity = identity_now(index_fd)
        if identity is None or int.from_bytes(identity[3], "big") != after:
            return False  # another writer committed since: the row vouches for nothing
        table.set_identity(identity)
        return table.save(self.file, content)
