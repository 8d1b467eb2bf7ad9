"""Which files of an archive, as one frozen value: :class:`FileSelection` (a glob
``pattern``, an SQL ``where`` on the index's columns and its ``params``, the ``columns``
of the rows made from them and ``group_by_stem``).

Every reader that chooses files takes it: the index's plan of the chosen files
(``index/listing.py``: ``IndexListing.planned``), the subsets of ``ops/subset.py``
(``selected_entries``; ``select_entries`` and ``Barecat.select_entries`` make one
of their pattern) and the engines of ``integrations/``
(Ray, Dask, Hugging Face, the PyTorch dataset), which also keep it at its old place,
``barecat.integrations.selection``. A pure module: it imports nothing of barecat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FileSelection:
    """Which files of an archive, and which columns of their rows.

    Attributes:
        pattern: a glob over paths (``**`` recursive, hidden names included); None: all.
        where: an SQL condition on the index's ``files`` columns (``size``, ``mtime_ns``,
            ``mode``, ``path``, ...; in a sealed archive ``size`` is the sealed length and
            ``logical_size`` the file's own), ``?`` placeholders filled from ``params``.
        params: values for ``where``'s placeholders.
        columns: the columns to produce, None: all (checked against the plan's).
        group_by_stem: one row per sample: ``__key__`` (the path up to the first dot of
            the file name) and a column per extension; files planned in path order.
    """

    pattern: str | None = None
    where: str | None = None
    params: tuple[object, ...] = ()
    columns: tuple[str, ...] | None = None
    group_by_stem: bool = False

    @classmethod
    def of(
        cls,
        pattern: str | None,
        where: str | None,
        params: Sequence[object],
        columns: Sequence[str] | None,
        group_by_stem: bool,
    ) -> FileSelection:
        """The selection a reader's keyword arguments make (sequences kept as tuples)."""
        chosen = None if columns is None else tuple(columns)
        return cls(pattern, where, tuple(params), chosen, group_by_stem)


__all__ = ["FileSelection"]
