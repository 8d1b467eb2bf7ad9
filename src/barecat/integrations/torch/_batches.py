"""Batches of raw files that leave DataLoader workers through shared memory.

A :class:`FileBatch` is a batch's files back to back in ONE uint8 tensor, with each
file's (offset, size), its path and, if asked, its target. A worker reads the files
straight into that tensor (``readinto_many``: each file CRC-checked, as ``bc[path]``
checks it, and no copy of its own); when the DataLoader pickles the batch to the main
process, torch sends the tensor's shared memory (a file descriptor), not its bytes, so the
main process neither drains megabytes from a pipe nor unpickles them. A file comes out as
a zero-copy ``memoryview`` (``batch[i]``) or uint8 tensor (``batch.tensor(i)``).

The buffers are recycled (:class:`BufferPool`, one per process): a buffer starts with a
lease byte, set while a batch made in it is alive in this process or in the one it was
sent to, and cleared when the last view of that batch is gone (the batch, the memoryviews
and tensors it gave: they all hold the array :attr:`FileBatch._root`, whose finalizer
clears the lease). A worker thus writes into memory already faulted in: new shared memory
for every batch would cost about 8 page faults a file of 32 KiB, more than the read.

The lease travels only where the memory does: a worker's batch sent to another process
by ``multiprocessing`` (a DataLoader's queues: its ``ForkingPickler``, which shares the
tensor) takes the lease with it, and the receiving process releases it. Any other pickle
or copy (``pickle.dumps``, ``copy.deepcopy``, a batch of the main process sent on) is a
batch in memory of its own, with no lease, and leaves the original's alone.
Imports torch (the ``torch`` extra), NumPy (torch's) and the archive layer.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

from barecat.exceptions import FileTooLargeBarecatError, MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing(
    "barecat.integrations.torch needs PyTorch", "torch"
):
    import torch
    from torch.utils.data import get_worker_info
# (torch does not require NumPy; the torch extra installs it)
with MissingDependencyBarecatError.when_missing("barecat.integrations.torch needs NumPy", "torch"):
    import numpy as np

from barecat.archive import Barecat

LEASE = 64
"""Bytes in front of a pooled buffer's data; the first is the lease (1: in use)."""

MIN_CAPACITY = 32 << 20
"""A new buffer's room at least (virtual memory: only pages written take memory)."""

MAX_POOLED = 8
"""Buffers a process keeps for reuse; past that (a consumer holding many batches), new
buffers are made and dropped."""


class BufferPool:
    """A process's buffers for batches, each a uint8 tensor with its lease in front: in
    shared memory in a DataLoader worker, ordinary memory in the main process."""

    def __init__(self) -> None:
        self.buffers: list[tuple[torch.Tensor, np.ndarray]] = []

    def take(self, room: int) -> tuple[torch.Tensor, np.ndarray]:
        """A free buffer with at least ``room`` bytes after its lease, leased.

        Args:
            room: the bytes of data it must hold.

        Returns:
            The buffer as a tensor and as a NumPy array (the same memory).
        """
        for k, (tensor, array) in enumerate(self.buffers):
            if array[0] == 0:
                if len(array) - LEASE < room:
                    tensor, array = _new_buffer(room)
                    self.buffers[k] = tensor, array
                array[0] = 1
                return tensor, array
        tensor, array = _new_buffer(room)
        if len(self.buffers) < MAX_POOLED:
            self.buffers.append((tensor, array))
        array[0] = 1
        return tensor, array

    def read(self, bc: Barecat, paths: list[str]) -> tuple[torch.Tensor, list[tuple[int, int]]]:
        """The files ``paths`` read into a leased buffer (grown while they do not fit).

        Args:
            bc: the archive.
            paths: the files, in the batch's order.

        Returns:
            The buffer (lease in front) and each file's (offset after the lease, size).

        Raises:
            KeyError: a path is not a file.
            BarecatIntegrityError: a file's bytes do not match their CRC32C (naming it).
        """
        room = MIN_CAPACITY
        while True:
            tensor, array = self.take(room)
            try:
                return tensor, bc.readinto_many(paths, array[LEASE:].data)
            except FileTooLargeBarecatError:  # (nothing was read) a bigger buffer
                room = 2 * (len(array) - LEASE)
                array[0] = 0
            except BaseException:
                array[0] = 0
                raise


def _new_buffer(room: int) -> tuple[torch.Tensor, np.ndarray]:
    size = LEASE + max(room, MIN_CAPACITY)
    size = -(-size // (1 << 20)) << 20  # whole MiB
    if get_worker_info() is None:
        tensor = torch.empty(size, dtype=torch.uint8)  # (pages taken as written)
    else:  # shared memory: the batch crosses to the main process as a file descriptor
        tensor = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(size))  # type: ignore[no-untyped-call]
    return tensor, tensor.numpy()


def _release(lease: np.ndarray) -> None:
    lease[0] = 0


class FileBatch:
    """A batch of files' bytes in one uint8 tensor (see the module doc).

    ``len(batch)``, ``batch[i]`` (a read-only ``memoryview`` of file ``i``, no copy),
    iteration (the memoryviews, in order), ``batch.tensor(i)`` (a uint8 tensor, no copy),
    ``batch.tolist()`` (``bytes`` copies), ``batch.items()`` (``(path, memoryview)``).
    The views stay valid as long as they are referenced, even after the batch is dropped.

    Attributes:
        paths: each file's path, in order.
        places: each file's (offset in :attr:`data`, size).
        targets: each file's target (``target_fn``), else None.
    """

    def __init__(
        self,
        buffer: torch.Tensor,
        places: list[tuple[int, int]],
        paths: list[str],
        targets: list[Any] | None = None,
        *,
        leased: bool = False,
    ) -> None:
        """Args:
        buffer: a 1-D uint8 tensor holding the files (after a lease of :data:`LEASE`
            bytes when ``leased``, released when the batch and its views are gone).
        places: each file's (offset, size), offsets counted after the lease.
        paths: each file's path.
        targets: each file's target, if any.
        leased: whether ``buffer`` starts with a lease (a :class:`BufferPool`'s).
        """
        self.places = places
        self.paths = paths
        self.targets = targets
        self._buffer = buffer
        self._leased = leased
        start = LEASE if leased else 0
        end = start + (places[-1][0] + places[-1][1] if places else 0)
        self._root: np.ndarray = buffer[start:end].numpy()
        self._data: torch.Tensor | None = None
        self._finalizer = None
        if leased:
            self._finalizer = weakref.finalize(self._root, _release, buffer[:1].numpy())

    @property
    def data(self) -> torch.Tensor:
        """All the files back to back: a 1-D uint8 tensor (no copy)."""
        if self._data is None:
            self._data = torch.from_numpy(self._root)  # (holds the root: keeps the lease)
        return self._data

    def __len__(self) -> int:
        return len(self.places)

    def __getitem__(self, index: int) -> memoryview:
        offset, size = self.places[index]
        return self._root[offset : offset + size].data.toreadonly()

    def __iter__(self) -> Iterator[memoryview]:
        view = self._root.data.toreadonly()
        return (view[offset : offset + size] for offset, size in self.places)

    def tensor(self, index: int) -> torch.Tensor:
        """File ``index`` as a 1-D uint8 tensor (no copy; e.g. for ``decode_jpeg``)."""
        offset, size = self.places[index]
        return self.data[offset : offset + size]

    def tolist(self) -> list[bytes]:
        """Each file's bytes as ``bytes`` (copies)."""
        view = self._root.data
        return [bytes(view[offset : offset + size]) for offset, size in self.places]

    def items(self) -> Iterator[tuple[str, memoryview]]:
        """``(path, memoryview)`` of each file, in order."""
        return zip(self.paths, self, strict=True)

    def __copy__(self) -> FileBatch:
        return self  # (nothing in a batch changes: a copy is the batch)

    def __reduce__(self) -> tuple[Any, ...]:
        # a pickle or a deep copy: the files' bytes in memory of its own, no lease
        return FileBatch, (self.data.clone(), self.places, self.paths, self.targets)

    def _reduce_shared(self) -> tuple[Any, ...]:
        """How ``multiprocessing`` sends the batch: a buffer in shared memory (a worker's)
        goes as it is, its lease with it (the receiving process releases it); one in
        ordinary memory as a batch of its own (torch would move the buffer itself into
        shared memory, under the NumPy views of it that the pool and the batch hold)."""
        if not self._buffer.is_shared():  # type: ignore[no-untyped-call]
            return self.__reduce__()
        if self._finalizer is not None:
            self._finalizer.detach()
        return _rebuilt, (self._buffer, self.places, self.paths, self.targets, self._leased)

    def __repr__(self) -> str:
        return f"<FileBatch of {len(self)} files, {len(self._root):,} bytes>"


def _rebuilt(
    buffer: torch.Tensor,
    places: list[tuple[int, int]],
    paths: list[str],
    targets: list[Any] | None,
    leased: bool,
) -> FileBatch:
    return FileBatch(buffer, places, paths, targets, leased=leased)


ForkingPickler.register(FileBatch, FileBatch._reduce_shared)


def collate_file_batch(batch: FileBatch) -> FileBatch:
    """The DataLoader ``collate_fn`` for ``BarecatDataset(..., file_batches=True)``:
    the batch as the dataset made it.

    Args:
        batch: what the dataset's ``__getitems__`` returned.

    Returns:
        ``batch``.

    Raises:
        TypeError: ``batch`` is not a :class:`FileBatch` (the dataset was made without
            ``file_batches=True``).
    """
    if not isinstance(batch, FileBatch):
        raise TypeError(
            "collate_file_batch takes the FileBatch of BarecatDataset(..., file_batches=True), "
            f"not {type(batch).__name__}"
        )
    return batch


__all__ = ["LEASE", "BufferPool", "FileBatch", "collate_file_batch"]
