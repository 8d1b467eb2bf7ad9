"""An encrypted archive's index digest, as its readers and writers keep and check it.

The arithmetic is ``sealing/digest.py``'s and the triggers ``index/file_digest.py``'s;
this module decides when each applies. Whether an archive keeps a digest is bound into
its wrapped key (``sealing/keys.py``), so it is known once the key is: archives
encrypted before digests existed keep none until ``reset`` (or a rekey) gives them one.

- A writer without the key refuses the edits the digest covers (it could not follow
  them); once it has the key, every edit updates the digest in the same statement.
- When the key becomes known the stored digest is checked cheaply: it must
  authenticate, for this archive's sealing choices, and count as many files as the
  index has. A digest that fails makes every read of file contents fail, naming why.
- ``verify`` sums every row and compares; ``pin`` gives a value to write down.
- A copy that takes every row of an encrypted archive (merge, subset, convert, rsync)
  checks that archive's rows first, when the key is at hand, so a row put back there is
  refused rather than laundered into an output whose fresh digest would vouch for it.

Imports ``index`` and ``sealing``.
"""

from __future__ import annotations

from collections.abc import Callable

from barecat.exceptions import BarecatIntegrityError
from barecat.index.file_digest import DIGEST_KEY
from barecat.index.index import ReadOnlyIndex, writable
from barecat.sealing import SealingSettings
from barecat.sealing.digest import IndexDigest, lookup_table_tagger


class DigestKeeper:
    """The digest of one encrypted archive's file rows (see the module doc)."""

    def __init__(self, index: ReadOnlyIndex, settings: SealingSettings, where: str) -> None:
        self._index = index
        self._settings = settings
        self._where = where
        self.digest: IndexDigest | None = None
        """The digest arithmetic, once the key is known and the archive keeps one."""
        self.problem: str | None = None
        """Why the stored digest cannot be trusted (reads of contents then fail)."""
        self.guarded = (
            not index.connection.readonly and index.connection.stored_file_digest() is not None
        )
        """Whether edits of the file list wait for the key (a writer, a digest to keep)."""
        if self.guarded:
            writable(index).edits.keep_file_digest(None)  # refused until the key is known

    def unlocked(self, data_key: bytes, keeps_digest: bool) -> None:
        """The key is known: check the stored digest cheaply, and (writers) keep it; the
        saved lookup tables' tags are made and checked with it from now on."""
        self._index.lookups.trust_lookup_tables_with(lookup_table_tagger(data_key))
        if not keeps_digest:
            return
        self.digest = IndexDigest(data_key, self._settings.binding())
        self.problem = self._cheap_check(self.digest)
        if self.problem is None and not self._index.connection.readonly:
            writable(self._index).edits.keep_file_digest(self.digest.step)

    def _cheap_check(self, digest: IndexDigest) -> str | None:
        try:
            _, count = digest.open(self._index.connection.stored_file_digest())
        except BarecatIntegrityError as e:
            return str(e)
        files = self._index.lookups.num_files
        if count != files:
            return f"the index digest counts {count} files, the index has {files}"
        return None

    def require_trusted(self, path: str) -> None:
        """Raise before reading ``path``'s contents if the digest failed its check.

        Raises:
            BarecatIntegrityError: naming the path and the reason.
        """
        if self.problem is not None:
            raise BarecatIntegrityError(
                f"{path}: not read, the archive's index failed its digest check ({self.problem})"
            )

    def require_keepable(self) -> None:
        """Raise before an edit of the file list if the stored digest failed its check
        (the key is known by then).

        Raises:
            BarecatIntegrityError: saying why, and how to trust the rows again.
        """
        if self.problem is not None:
            raise BarecatIntegrityError(
                f"{self._where}: files cannot be added, removed or renamed: the index failed "
                f"its digest check ({self.problem}); 'barecat verify' tells more, and "
                "'barecat digest --reset' trusts the rows as they are"
            )

    def verify(self) -> tuple[str | None, str | None]:
        """Sum every file row and compare with the stored digest: (problem or None, the
        pinnable digest of the rows as they are). (None, None) when the archive keeps no
        digest."""
        if self.digest is None:
            return None, None
        return rows_against_digest(self._index, self.digest)

    def reset_records(self, data_key: bytes) -> dict[str, str | int]:
        """The config row that makes the digest the one of the rows as they are now
        (trusting them): for an archive without a digest, or one whose rows a user has
        checked otherwise."""
        digest = IndexDigest(data_key, self._settings.binding())
        return {DIGEST_KEY: digest.seal(*digest.of_rows(self._index.connection.file_digest_rows()))}


def rows_against_digest(index: ReadOnlyIndex, digest: IndexDigest) -> tuple[str | None, str]:
    """Sum every file row of ``index`` and compare with its stored digest: (problem or
    None, the pinnable digest of the rows as they are)."""
    total, count = digest.of_rows(index.connection.file_digest_rows())
    pin = digest.pin(total, count)
    try:
        stored = digest.open(index.connection.stored_file_digest())
    except BarecatIntegrityError as e:
        return str(e), pin
    if stored != (total, count):
        return (
            f"the file rows do not match the index digest ({count} rows, {stored[1]} "
            "recorded): rows were changed, put back or removed without the key",
            pin,
        )
    return None, pin


def check_source_rows(
    index: ReadOnlyIndex,
    settings: SealingSettings,
    data_key: bytes | None,
    passphrase: Callable[[], str | bytes] | str | bytes | None,
) -> None:
    """Check the file rows of an encrypted archive whose files are about to be copied
    (merge, subset: rows and sealed bytes as they are, which the target's digest then
    vouches for) against that archive's own index digest, when the key is at hand:
    ``data_key`` (the target's, the same key) or ``passphrase`` (which unwraps the
    source's). Whether the source must keep a digest is bound into its wrapped key, so
    one whose digest row was deleted is told from one encrypted before digests existed.
    With neither at hand, nothing is checked (nor can the copy keep a digest).

    Raises:
        BarecatIntegrityError: naming the source and what is wrong.
        WrongPassphraseBarecatError: ``passphrase`` does not unwrap the source's key.
    """
    keeps = index.connection.stored_file_digest() is not None
    if data_key is None or not keeps:
        supplied = passphrase() if callable(passphrase) else passphrase
        if not supplied:
            return
        data_key, keeps = settings.unlock(supplied)
    if keeps:
        problem, _ = rows_against_digest(index, IndexDigest(data_key, settings.binding()))
        if problem is not None:
            raise source_refused(index.connection.path, problem)


def source_refused(where: str, problem: str) -> BarecatIntegrityError:
    """The error of a copy refused because its source failed its digest check."""
    return BarecatIntegrityError(
        f"{where}: {problem}; nothing was copied from it ('barecat verify' with the "
        "passphrase tells more)"
    )


def new_archive_records(data_key: bytes, settings: SealingSettings) -> dict[str, str | int]:
    """The digest row of a new, empty encrypted archive."""
    return {DIGEST_KEY: IndexDigest(data_key, settings.binding()).seal(0, 0)}


__all__ = [
    "DigestKeeper",
    "check_source_rows",
    "new_archive_records",
    "rows_against_digest",
    "source_refused",
]
