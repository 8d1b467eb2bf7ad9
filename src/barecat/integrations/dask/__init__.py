"""Dask and barecat archives (the ``dask`` extra): read an archive into a Dask
DataFrame and write a DataFrame as an archive.

- :func:`read_barecat` (``dask/_reading.py``): ``dd.from_map`` over contiguous runs of
  the index in storage order, planned once from the index, each partition's task
  carrying its files' addresses, so no worker opens or downloads the index; column
  selections, a glob and an SQL ``where`` pushed down; plain, sealed and
  object-storage archives; ``group_by_stem`` for samples.
- :func:`write_barecat` (``dask/_writing.py``): a part-archive per partition, joined
  without copying when all are done; the output appears only whole, and a failed write
  leaves nothing.

The planning and the parts are shared with the Ray integration (``read_plans.py``,
``parts.py``). Tested with Dask and distributed 2026.8 (``dask[dataframe]>=2026.8``).
"""

from barecat.integrations.dask._reading import read_barecat
from barecat.integrations.dask._writing import write_barecat
from barecat.integrations.read_plans import sample_key

__all__ = ["read_barecat", "sample_key", "write_barecat"]
