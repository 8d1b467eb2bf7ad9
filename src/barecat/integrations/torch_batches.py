"""The path ``barecat.integrations.torch_batches`` of earlier versions: the batches of raw
bytes that leave DataLoader workers as one shared-memory tensor now live in
``torch/_batches.py`` (their public names on ``barecat.integrations.torch``); this module
only re-exports them. Imports torch (the ``torch`` extra)."""

from barecat.integrations.torch._batches import (
    LEASE,
    MAX_POOLED,
    BufferPool,
    FileBatch,
    collate_file_batch,
)

__all__ = ["LEASE", "MAX_POOLED", "BufferPool", "FileBatch", "collate_file_batch"]
