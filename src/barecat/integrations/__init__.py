"""Barecat inside other tools: PyTorch data loading (``barecat.integrations.torch``),
the fsspec filesystem ``barecat://`` (``barecat.integrations.fsspec``) and Ray Data's
source and sink (``barecat.integrations.ray``, the ``ray`` extra)."""
