"""Writing a Dask DataFrame into an archive: :func:`write_barecat`.

Rows have ``path`` and ``bytes``, optionally ``mtime_ns`` and ``mode``. Each partition's
task writes its rows into a part-archive of its own (``parts.py``, shared with the Ray
writer) in a hidden folder beside a local output (``.NAME.dask-PID-ID/``; workers on
other machines need that filesystem shared), or, for an output on object storage, in a
temporary folder of its own machine, uploaded under a hidden staging prefix beside the
output; the client joins the parts once, without copying a byte through it, when every
task is done: the output appears only when whole, in the partitions' order. A path in
two partitions is an error naming it. When the write fails (a partition that raises, a
duplicate path), the folder (or prefix) and every part in it are removed and no output
appears; on a ``distributed`` cluster the client first waits for every task to have
finished, so that none is still writing. Imports dask, pandas and pyarrow (the ``dask``
extra) and ``parts``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing(
    "barecat.integrations.dask needs Dask DataFrame", "dask"
):
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa
    from dask.base import compute, get_scheduler
    from dask.delayed import Delayed

from barecat.exceptions import BarecatError
from barecat.integrations.keywords import WriterKeywords, shows_keywords, writer_values
from barecat.integrations.parts import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    PartArchives,
    check_columns,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _write_partition(
    frame: pd.DataFrame, parts: PartArchives, partition_info: dict[str, Any] | None = None
) -> pd.Series:
    """A partition's task: its rows into a part-archive; the part (None: no rows)."""
    number = 0 if partition_info is None else int(partition_info["number"])
    kept = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in frame.columns]
    table = pa.Table.from_pandas(frame[kept], preserve_index=False)
    return pd.Series([parts.write_part([table], number)], dtype=object)


def _compute_all(tasks: Sequence[Delayed]) -> list[Any]:
    """Every task's result; when one fails, its error, once none is still running (on a
    ``distributed`` cluster: the local schedulers raise at the first error)."""
    scheduler = get_scheduler(collections=list(tasks))
    client = getattr(scheduler, "__self__", None)
    if client is None or type(client).__name__ != "Client":
        return list(compute(*tasks, scheduler=scheduler))
    from distributed import wait

    futures = client.compute(list(tasks))
    wait(futures)  # finished, failed or not
    results: list[Any] = client.gather(futures)
    return results


@shows_keywords(WriterKeywords)
def write_barecat(
    df: dd.DataFrame,
    path: str | os.PathLike[str],
    **keywords: Unpack[WriterKeywords],
) -> None:
    """Write a DataFrame's rows (``path``, ``bytes``; optionally ``mtime_ns``, ``mode``)
    as the files of a new archive at ``path``: a part-archive per partition, joined once
    (see the module doc). Runs the computation (on the current scheduler) and returns
    when the archive is whole.

    Args:
        df: the rows (``bytes`` as Python bytes or ``binary[pyarrow]``).
        path: the archive to create: on a filesystem every worker reaches, or a URL of
            object storage (``s3://...``; no shared filesystem needed).
        **keywords: how the output is made, and its key and options (``overwrite``,
            ``shard_size_limit``, ``compression``, ``compression_level``,
            ``passphrase``, ``storage_options``: see
            :class:`~barecat.integrations.keywords.WriterKeywords`; the client is the
            driver, the workers the write tasks).

    Raises:
        FileExistsBarecatError: an archive exists at ``path`` (without ``overwrite``),
            or a path is in the rows twice (named); then no archive appears.
        BarecatError: rows without ``path`` or ``bytes``; a ``bytes`` column of strings.
        RemoteStorageBarecatError: the store failed (a URL output; then no archive is
            there).
        Exception: what a partition's computation raised; then no archive appears.
    """
    location, settings = writer_values(path, keywords, "write_barecat")
    parts = PartArchives(location, "dask", settings)
    columns = [str(c) for c in df.columns]
    check_columns(columns)
    if isinstance(df.dtypes["bytes"], pd.StringDtype):
        raise BarecatError(
            f"write_barecat needs the bytes column binary, not {df.dtypes['bytes']} (Dask "
            "turns object columns into strings): make it pd.ArrowDtype(pa.binary())"
        )
    parts.start(columns)
    try:
        written = df.map_partitions(
            _write_partition, parts, meta=pd.Series([], dtype=object), align_dataframes=False
        )
        results = _compute_all(written.to_delayed())
        parts.join(p for series in results for p in series)
    except BaseException:
        parts.discard()
        raise


__all__ = ["write_barecat"]
