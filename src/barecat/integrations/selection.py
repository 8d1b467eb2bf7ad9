"""The two values every engine reader and writer is built from: :class:`FileSelection`
("which files": a glob ``pattern``, an SQL ``where`` and its ``params``, the ``columns``
and ``group_by_stem``; defined in ``barecat/selection.py``, below the layers that choose
files, and offered here at its old place) and :class:`ArchiveLocation` ("which archive,
where, with which key": a path or fsspec URL, the ``passphrase``, fsspec's
``storage_options`` and the ``cache_dir`` of a remote archive's index copy).

The engines' public functions (Ray's and Dask's ``read_barecat``, Hugging Face's
``iterable_dataset`` and ``to_dataset``, the PyTorch dataset, the Ray and Dask writers)
keep their keyword arguments; they build these values at their top and hand them down,
so that the planning (``read_plans.py``), the parts of a write (``parts.py``) and the
opening of the archive take one value each, not the block of keywords. Imports only the
archive layer and ``selection`` (no engine, no pyarrow).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from barecat.archive import Barecat, Passphrase
from barecat.archive.lazy_remote import resolve_mode
from barecat.selection import FileSelection

ENGINE_MODE = "hydrate"
"""The reader mode of a remote archive for the engines and the PyTorch dataset, which
list every file and then read many: start at once, be local soon."""


@dataclass(frozen=True)
class ArchiveLocation:
    """Which archive, where, and with which key (never shown by ``repr``).

    Attributes:
        path: the archive: a local path, or ``s3://...`` and other fsspec URLs.
        passphrase: an encrypted archive's passphrase (or a function giving it).
        storage_options: fsspec's options for a URL (credentials, endpoint).
        cache_dir: where a remote archive's index copy is kept.
        remote_mode: how a remote archive's index is read (``Barecat``'s
            ``remote_mode``); None: ``$BARECAT_REMOTE_MODE``, else ``"hydrate"`` (a
            published archive is read at once while its index downloads in the
            background, then locally; an unpublished one is downloaded first).
    """

    path: str
    passphrase: Passphrase | None = field(default=None, repr=False)
    storage_options: dict[str, Any] | None = None
    cache_dir: str | None = None
    remote_mode: str | None = None

    @classmethod
    def of(
        cls,
        path: str | os.PathLike[str] | ArchiveLocation,
        passphrase: Passphrase | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        remote_mode: str | None = None,
    ) -> ArchiveLocation:
        """The location a function's arguments make (a location given stays as it is)."""
        if isinstance(path, ArchiveLocation):
            return path
        return cls(os.fspath(path), passphrase, storage_options, cache_dir, remote_mode)

    def open(self, *, lookup_table: bool | None = None) -> Barecat:
        """The archive, opened read-only with this location's key and options.

        Args:
            lookup_table: as for :class:`~barecat.archive.Barecat` (False: a plan that
                lists every file once needs none).

        Returns:
            The open archive (the caller closes it).

        Raises:
            FileNotFoundBarecatError: no archive there.
            BarecatError: an encrypted archive without its passphrase.
            WrongPassphraseBarecatError: a wrong passphrase.
        """
        return Barecat(
            self.path,
            passphrase=self.passphrase,
            storage_options=self.storage_options,
            cache_dir=self.cache_dir,
            lookup_table=lookup_table,
            remote_mode=resolve_mode(self.remote_mode, ENGINE_MODE),
        )


__all__ = ["ArchiveLocation", "FileSelection"]
