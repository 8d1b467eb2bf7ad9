"""PyTorch data loading from archives (the ``torch`` extra): :class:`BarecatDataset`, a
map-style dataset of an archive's files or samples, and :class:`BarecatSampler`, a
distributed, deterministic, resumable sampler (``torch/_dataset.py``); batches of raw
bytes that leave DataLoader workers as one shared-memory tensor, :class:`FileBatch` and
:func:`collate_file_batch` (``torch/_batches.py``).
"""

from barecat.integrations.torch._batches import FileBatch, collate_file_batch
from barecat.integrations.torch._dataset import KEY, BarecatDataset, BarecatSampler, TargetFn

__all__ = [
    "KEY",
    "BarecatDataset",
    "BarecatSampler",
    "FileBatch",
    "TargetFn",
    "collate_file_batch",
]
