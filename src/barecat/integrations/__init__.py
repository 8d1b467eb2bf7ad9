"""Barecat inside other tools: PyTorch data loading (``barecat.integrations.torch``),
the fsspec filesystem ``barecat://`` (``barecat.integrations.fsspec``), Ray Data's
source and sink (``barecat.integrations.ray``, the ``ray`` extra), Dask DataFrames
read and written (``barecat.integrations.dask``, the ``dask`` extra) and Hugging Face
datasets (``barecat.integrations.hf``, the ``hf`` extra)."""
