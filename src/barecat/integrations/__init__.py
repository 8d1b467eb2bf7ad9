"""Barecat inside other tools: PyTorch data loading (``barecat.integrations.torch``)."""
