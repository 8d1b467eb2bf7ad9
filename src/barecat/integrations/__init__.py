"""Barecat inside other tools: PyTorch data loading (``barecat.integrations.torch``) and
the fsspec filesystem ``barecat://`` (``barecat.integrations.fsspec``)."""
