"""Ray Data and barecat archives (the ``ray`` extra): read an archive into a ``Dataset``
and write a ``Dataset`` as an archive.

- :func:`read_barecat` / :class:`BarecatDatasource` (``ray/_reading.py``): read tasks
  planned once from the index, in storage order, each carrying its files' addresses, so
  no worker opens or downloads the index; projection, a glob and an SQL ``where`` pushed
  down; plain, sealed and object-storage archives; ``group_by_stem`` for samples.
- :func:`write_barecat` / :class:`BarecatDatasink` (``ray/_writing.py``): a part-archive
  per write task, joined without copying when all are done; the output appears only
  whole, and a failed write leaves nothing.

Tested with Ray 2.60 (``ray[data]>=2.60``).
"""

from barecat.integrations.ray._reading import BarecatDatasource, read_barecat, sample_key
from barecat.integrations.ray._writing import BarecatDatasink, write_barecat

__all__ = ["BarecatDatasink", "BarecatDatasource", "read_barecat", "sample_key", "write_barecat"]
