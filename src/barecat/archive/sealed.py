"""The sealing side of a :class:`~barecat.archive.Barecat`: its settings, its key, and
the sealers that turn file bytes into what the shards hold and back.

The passphrase may be given as text (checked at open, so a wrong one fails at once) or as
a callable, asked only when a file's bytes are first needed: so listing, verifying CRCs
or moving bytes of an encrypted archive never prompt. Adding, removing or renaming files
of an encrypted archive does need it: its index digest (``index_digest.py``) follows
every such edit. A passphrase given says the archive is encrypted: an existing archive
that is not refuses it at open, so the owner's key never reads files it did not seal
(someone without the key who removes an archive's encryption gets an error, not a
reader of their files); :class:`IfEncrypted` is the source that claims nothing. Imports
``archive.index_digest``, ``index``, ``sealing``, ``shards`` and
``exceptions``, the first and ``sealing`` only once an archive is sealed (a plain archive
loads no sealing code).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from barecat.exceptions import BarecatError

if TYPE_CHECKING:  # the sealing code is imported when an archive is sealed, not before
    from barecat.index.index import ReadOnlyIndex
    from barecat.index.schema import ConfigValue
    from barecat.sealing import Sealer, SealingSettings

_PROBE = 4096
"""Bytes a new sealed archive seals (and drops) before it is made, to prove its choices."""

Passphrase = str | bytes | Callable[[], str | bytes]
"""A passphrase, or a function that supplies one when it is needed."""


class IfEncrypted:
    """A passphrase source that claims nothing: asked only if the archive is encrypted
    (or, empty, takes an encrypted archive's files: merge, subset), and for any other
    archive no passphrase at all. Any other passphrase given (text, or a function) says
    the archive is encrypted: an existing archive that is not refuses it, and one being
    created is made encrypted. This is for callers that do not know, such as a command
    line that would prompt on a terminal, or the output of a merge.

    Args:
        source: gives the passphrase when it is needed.
    """

    __slots__ = ("_source",)

    def __init__(self, source: Callable[[], str | bytes]) -> None:
        self._source = source

    def __call__(self) -> str | bytes:
        return self._source()

    @staticmethod
    def of(passphrase: Passphrase | None) -> IfEncrypted | None:
        """``passphrase`` (text, or a function) as a source that claims nothing."""
        if passphrase is None or isinstance(passphrase, IfEncrypted):
            return passphrase
        if callable(passphrase):
            return IfEncrypted(passphrase)
        text = passphrase
        return IfEncrypted(lambda: text)


def key_given(passphrase: Passphrase | None) -> bool:
    """Whether ``passphrase`` says the archive is encrypted (see :class:`IfEncrypted`)."""
    return passphrase is not None and not isinstance(passphrase, IfEncrypted)


def not_encrypted(where: str) -> BarecatError:
    """The error of a passphrase given for an archive that is not encrypted."""
    return BarecatError(
        f"passphrase given but {where} is not encrypted: open it without one (if it should "
        "be encrypted, its encryption was removed or the archive replaced)"
    )


class ArchiveSealing:
    """Seals and unseals the files of one sealed archive (see the module doc).

    ``codec`` and ``level`` override, for the files this writer adds, the compression the
    archive was created with; every sealed file names its own codec.
    """

    def __init__(
        self,
        where: str,
        index: ReadOnlyIndex,
        settings: SealingSettings,
        passphrase: Passphrase | None,
        codec: str | None = None,
        level: int | None = None,
        data_key: bytes | None = None,
        keeps_digest: bool = True,
    ) -> None:
        from barecat.archive.index_digest import DigestKeeper
        from barecat.sealing.settings import DEFAULT_LEVELS

        self.where = where
        self.settings = settings
        self._passphrase = passphrase
        self._codec = codec or settings.codec
        if self._codec not in DEFAULT_LEVELS:
            known = ", ".join(DEFAULT_LEVELS)
            raise BarecatError(f"Unknown compression {self._codec!r}; known: {known}")
        if level is None:
            level = settings.level if self._codec == settings.codec else DEFAULT_LEVELS[self._codec]
        self._level = level
        self.unlocked_key: bytes | None = None
        """The data key once known (None before the passphrase was needed)."""
        self.keeps_digest = False
        """Whether the archive keeps an index digest (known with the key)."""
        self._sealers: dict[bool, Sealer] = {}
        self.digest = DigestKeeper(index, settings, where) if settings.encrypted else None
        """The index digest of an encrypted archive (``index_digest.py``)."""
        if data_key is not None:  # a new archive, or a reader in a worker process
            self.use_key(data_key, keeps_digest)
        elif settings.encrypted and isinstance(passphrase, str | bytes):
            self.data_key()  # a wrong passphrase fails at open

    @property
    def encrypted(self) -> bool:
        return self.settings.encrypted

    @property
    def data_key_known(self) -> bool:
        return not self.settings.encrypted or self.unlocked_key is not None

    def data_key(self) -> bytes | None:
        """The archive's data key (None when not encrypted), asking for the passphrase
        the first time."""
        if not self.settings.encrypted:
            return None
        if self.unlocked_key is None:
            self.use_key(*self.settings.unlock(self._supplied_passphrase()))
        return self.unlocked_key

    def use_key(self, data_key: bytes, keeps_digest: bool) -> None:
        """Take the data key (unwrapped here, or by the process this reader was pickled
        in), checking the index digest if the archive keeps one."""
        if self.digest is not None:
            self.digest.unlocked(data_key, keeps_digest)
        self.keeps_digest = keeps_digest
        self.unlocked_key = data_key

    def before_file_list_edit(self) -> None:
        """Get the key before an edit that the index digest follows (a writer without it
        refuses such edits), and refuse one if the digest failed its check."""
        if self.digest is not None and self.digest.guarded:
            self.data_key()
            self.digest.require_keepable()

    def _supplied_passphrase(self) -> str | bytes:
        supplied = self._passphrase() if callable(self._passphrase) else self._passphrase
        if not supplied:
            raise BarecatError(
                f"{self.where} is encrypted: open it with its passphrase to read or "
                "write file contents"
            )
        return supplied

    def sealer(self, compress: bool = True) -> Sealer:
        """The sealer for new files (``compress=False``: blocks stored uncompressed), or,
        for reading, any of them (each sealed file says how it was sealed)."""
        found = self._sealers.get(compress)
        if found is None:
            from barecat.sealing import Sealer

            codec = self._codec if compress else "none"
            level = self._level if compress else 0
            found = Sealer(
                codec,
                level,
                self.settings.block_size,
                self.data_key(),
                self.settings.dictionary or None,
            )
            self._sealers[compress] = found
        return found

    def seal(self, path: str, data: bytes | bytearray | memoryview, compress: bool = True) -> bytes:
        return self.sealer(compress).seal(path, data)

    def unseal(self, path: str, stored: bytes) -> bytes:
        sealer = self.sealer()
        if self.digest is not None:
            self.digest.require_trusted(path)
        return sealer.unseal(path, stored)

    def rekeyed(
        self, new_passphrase: str | bytes | None = None, reset_digest: bool = False
    ) -> dict[str, ConfigValue]:
        """The config rows that wrap the data key under ``new_passphrase`` (None: the
        one the archive was opened with), giving an archive encrypted before index
        digests a digest of its rows as they are (and any archive, with
        ``reset_digest``); the digest is kept from then on once they are written."""
        key = self.data_key()
        if key is None or self.digest is None:
            raise BarecatError(f"{self.where} is not encrypted: it has no passphrase to change")
        passphrase = self._supplied_passphrase() if new_passphrase is None else new_passphrase
        self.settings = self.settings.with_passphrase(key, passphrase)
        records = self.settings.to_config()
        if reset_digest or self.digest.digest is None:
            records.update(self.digest.reset_records(key))
        return records

    def rekey_written(self) -> None:
        """The rows of :meth:`rekeyed` are committed: check and keep the digest anew."""
        assert self.digest is not None and self.unlocked_key is not None
        self.digest.unlocked(self.unlocked_key, keeps_digest=True)


def open_sealing(
    index: ReadOnlyIndex,
    where: str,
    codec: str | None,
    level: int | None,
    passphrase: Passphrase | None,
    dictionary: bytes | None,
) -> ArchiveSealing | None:
    """The sealing of the archive whose index is ``index`` (None: plain). An empty writable
    archive becomes sealed when given a compression or a trained zstd ``dictionary``; a
    plain archive with files cannot. A passphrase (text, or a function, asked now) makes
    an archive this open creates encrypted, and is refused by any other archive that is
    not encrypted.

    Raises:
        BarecatError: a passphrase given (not :class:`IfEncrypted`) for an existing
            archive that is not encrypted, before anything is read from it.
    """
    if index.connection.sealed:
        from barecat.sealing import SealingSettings

        if dictionary:
            raise BarecatError(
                f"{where} exists: a compression dictionary is given when an archive is created"
            )
        settings = SealingSettings.from_config(index.connection.sealing_config())
        if not settings.encrypted and key_given(passphrase):
            raise not_encrypted(where)
        return ArchiveSealing(where, index, settings, passphrase, codec, level)
    if key_given(passphrase) and not index.connection.created:
        raise not_encrypted(where)
    key_text = passphrase if isinstance(passphrase, str | bytes) else None
    if callable(passphrase) and key_given(passphrase):
        key_text = passphrase()
        if not key_text:
            raise BarecatError(f"{where}: an empty passphrase cannot encrypt an archive")
    if codec is None and level is None and key_text is None and not dictionary:
        return None
    if index.connection.readonly or index.lookups.num_files:
        raise BarecatError(
            f"{where} is a plain archive: compression and encryption are chosen when an "
            "archive is created (copy its files into a new one: barecat convert "
            "--compress/--encrypt)"
        )
    from barecat.archive.index_digest import new_archive_records
    from barecat.index.index import writable
    from barecat.sealing import Sealer, SealingSettings

    settings, key = SealingSettings.new(
        codec or "zstd", level, passphrase=key_text, dictionary=dictionary or b""
    )
    # a level out of range or a missing codec package fails the create now, before the
    # archive is made sealed, not at its first file (after directories were stored)
    Sealer(settings.codec, settings.level, settings.block_size, key, dictionary).seal(
        "", bytes(_PROBE)
    )
    records = settings.to_config()
    if key is not None:
        records.update(new_archive_records(key, settings))
    writable(index).edits.enable_sealing(records)
    return ArchiveSealing(where, index, settings, passphrase, data_key=key)


def take_sealing(
    index: ReadOnlyIndex, where: str, settings: SealingSettings, passphrase: Passphrase | None
) -> ArchiveSealing:
    """Make the empty plain archive of ``index`` sealed like one whose files it is about to
    take as they are (``settings``: that one's, its wrapped key included). An encrypted
    one's index digest starts empty here and follows the files as they come, so its
    passphrase is needed (the same: the key is the same).

    Raises:
        BarecatError: no passphrase; ``WrongPassphraseBarecatError``: the wrong one.
    """
    from barecat.index.index import writable

    records = settings.to_config()
    key, keeps_digest = None, False
    if settings.encrypted:
        supplied = passphrase() if callable(passphrase) else passphrase
        if not supplied:
            raise BarecatError(
                f"{where}: taking encrypted files needs their passphrase (the archive "
                "authenticates its list of files)"
            )
        key, keeps_digest = settings.unlock(supplied)
        if keeps_digest:
            from barecat.archive.index_digest import new_archive_records

            records.update(new_archive_records(key, settings))
    writable(index).edits.enable_sealing(records)
    return ArchiveSealing(
        where, index, settings, passphrase, data_key=key, keeps_digest=keeps_digest
    )


def check_source_rows(
    sealing: ArchiveSealing | None,
    passphrase: Passphrase | None,
    src_index: ReadOnlyIndex,
    settings: SealingSettings,
) -> None:
    """Before an archive (``sealing``: its own, None when plain) takes an encrypted
    archive's files as they are (merge, subset), check that archive's file rows against
    its index digest with the key at hand: this one's, when it is the same, or the one
    ``passphrase`` unwraps (``index_digest.check_source_rows``).

    Raises:
        BarecatIntegrityError: naming the source and what is wrong.
        WrongPassphraseBarecatError: ``passphrase`` does not open the source.
    """
    from barecat.archive.index_digest import check_source_rows as check

    key = None
    if sealing is not None and sealing.settings.key_id == settings.key_id:
        key = sealing.unlocked_key
    check(src_index, settings, key, passphrase)


class SealedFileWriter(io.BytesIO):
    """A file being written into a sealed archive: collected in memory and handed to
    ``store`` when closed (a sealed file is sealed whole, its block table first).

    With ``store_unchanged=False`` (a stored file opened with its content), closing
    before any write or truncate hands ``store`` None: there is nothing to store.
    ``lock`` (the archive's, when threads share it) is held by each change and the close,
    so a close from another thread stores every write that returned.
    """

    def __init__(
        self,
        initial: bytes,
        store: Callable[[bytes | None], None],
        store_unchanged: bool = True,
        lock: contextlib.AbstractContextManager[object] | None = None,
    ) -> None:
        super().__init__(initial)
        self._store = store
        self._changed = store_unchanged
        self._lock = contextlib.nullcontext() if lock is None else lock

    def write(self, data: Any) -> int:
        with self._lock:
            self._changed = True
            return super().write(data)

    def writelines(self, lines: Any) -> None:
        with self._lock:
            self._changed = True
            super().writelines(lines)

    def truncate(self, size: int | None = None) -> int:
        with self._lock:
            self._changed = True
            return super().truncate(size)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                data = self.getvalue()
                super().close()
                self._store(data if self._changed else None)


__all__ = [
    "ArchiveSealing",
    "IfEncrypted",
    "Passphrase",
    "SealedFileWriter",
    "check_source_rows",
    "key_given",
    "not_encrypted",
    "open_sealing",
    "take_sealing",
]
