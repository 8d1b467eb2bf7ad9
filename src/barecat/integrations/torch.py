"""PyTorch data loading from archives: a map-style ``Dataset`` and a distributed sampler.

``BarecatDataset`` holds only the archive's path and the list of file paths; each process
(DataLoader workers, fork or spawn, persistent or not) opens the archive itself on first
use, so nothing is shared across a fork and the dataset pickles small. Items are
``(path, bytes)``, or what ``decode`` makes of them (``decode=True``: the codecs of
``DecodedView`` by extension), then ``transform``.

``BarecatSampler`` gives each of ``num_replicas`` ranks a disjoint share of every epoch;
together the shares cover the epoch exactly (padded by wrapping round to equal length, as
``DistributedSampler`` does, unless ``drop_last``). The order depends only on ``seed`` and
the epoch (``set_epoch``), so it is reproducible and resumable: ``state_dict()`` records
the epoch and how many indices this rank has yielded, ``load_state_dict`` continues from
there. ``locality=N`` shuffles blocks of N files neighbouring in storage, then the files
within each block: nearly as random for training, far fewer seeks on HDD, NFS or object
storage. An archive on object storage (``s3://...`` with ``storage_options``) works the
same; the workers share its local block cache. Imports torch (the ``torch`` extra) and the
archive layer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler

from barecat.archive import Barecat
from barecat.codecs import DecodedView
from barecat.entries import Order


class BarecatDataset(Dataset[Any]):
    """Files of an archive as a map-style dataset (see the module doc).

    ``paths``: the files, in this order (default: all, in storage order, which is what a
    sequential or ``locality`` sampler reads fastest); ``pattern``: a glob choosing them.
    """

    def __init__(
        self,
        archive: str | os.PathLike[str],
        paths: Sequence[str] | None = None,
        *,
        pattern: str | None = None,
        decode: bool | Callable[[str, bytes], Any] = False,
        transform: Callable[[Any], Any] | None = None,
        passphrase: str | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.archive = os.fspath(archive)
        self.storage_options = storage_options
        self.cache_dir = cache_dir
        self.decode = decode
        self.transform = transform
        self.passphrase = passphrase
        self._bc: Barecat | None = None
        self._view: DecodedView | None = None
        self._pid = -1
        if paths is None:
            with self._open() as bc:
                if pattern is None:
                    paths = [f.path for f in bc.iter_fileinfos(Order.ADDRESS)]
                else:
                    paths = sorted(bc.globfiles(pattern, True, True))
        self.paths = list(paths)

    def __len__(self) -> int:
        return len(self.paths)

    def _open(self) -> Barecat:
        return Barecat(self.archive, passphrase=self.passphrase,
                       storage_options=self.storage_options, cache_dir=self.cache_dir)  # fmt: skip

    def _archive(self) -> Barecat:
        if self._bc is None or self._pid != os.getpid():  # opened in this process only
            self._bc = self._open()
            self._pid = os.getpid()
            self._view = None
        return self._bc

    def __getitem__(self, index: int) -> Any:
        path = self.paths[index]
        return self._item(path, self._archive()[path])

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A whole batch with one ``get_many`` (DataLoader calls this when it exists):
        neighbours in storage are read together, which on object storage means one
        request for many files."""
        paths = [self.paths[i] for i in indices]
        return [
            self._item(p, data)
            for p, data in zip(paths, self._archive().get_many(paths), strict=True)
        ]

    def _item(self, path: str, data: bytes) -> Any:
        item: Any
        if self.decode is True:
            if self._view is None:
                self._view = DecodedView(self._archive())
            item = self._view.decode(path, data)
        elif callable(self.decode):
            item = self.decode(path, data)
        else:
            item = (path, data)
        return self.transform(item) if self.transform is not None else item

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_bc"], state["_pid"], state["_view"] = None, -1, None  # each worker opens its own
        return state


class BarecatSampler(Sampler[int]):
    """A distributed, deterministic, resumable sampler (see the module doc).

    ``num_replicas`` and ``rank`` default to the initialized process group's, else 1 and 0.
    """

    def __init__(
        self,
        dataset_or_size: Any,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        locality: int | None = None,
    ) -> None:
        size = dataset_or_size if isinstance(dataset_or_size, int) else len(dataset_or_size)
        dist = torch.distributed
        joined = dist.is_available() and dist.is_initialized()
        self.num_replicas = num_replicas or (dist.get_world_size() if joined else 1)
        self.rank = rank if rank is not None else (dist.get_rank() if joined else 0)
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank {self.rank} is not below num_replicas {self.num_replicas}")
        if locality is not None and locality < 1:
            raise ValueError("locality is a number of neighbouring files, at least 1")
        self.size = size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.locality = locality
        self.epoch = 0
        self.yielded = 0
        self._resume_at = 0
        if drop_last:
            self.per_rank = size // self.num_replicas
        else:
            self.per_rank = -(-size // self.num_replicas)

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self._resume_at = 0
        self.epoch = epoch

    def epoch_order(self) -> list[int]:
        """Every index of this epoch, in the order all ranks share before splitting."""
        if not self.shuffle:
            return list(range(self.size))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        if self.locality is None:
            return torch.randperm(self.size, generator=generator).tolist()
        blocks = -(-self.size // self.locality)
        order = []
        for block in torch.randperm(blocks, generator=generator).tolist():
            start = block * self.locality
            count = min(self.locality, self.size - start)
            order += [start + i for i in torch.randperm(count, generator=generator).tolist()]
        return order

    def _my_share(self) -> list[int]:
        order = self.epoch_order()
        total = self.per_rank * self.num_replicas
        if total > len(order):  # pad by wrapping round (every index at least once)
            order += (order * (-(-total // max(1, len(order)))))[: total - len(order)]
        return order[self.rank : total : self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        share = self._my_share()
        self.yielded = self._resume_at
        for index in share[self._resume_at :]:
            self.yielded += 1
            yield index
        self._resume_at = 0

    def __len__(self) -> int:
        return self.per_rank - self._resume_at

    def state_dict(self, consumed: int | None = None) -> dict[str, int]:
        """Where this rank stands: the epoch and how many indices it has used. With
        DataLoader workers prefetching, pass ``consumed`` (the samples the training loop
        has actually taken) instead of the count yielded so far."""
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "position": self.yielded if consumed is None else consumed,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("seed", self.seed) != self.seed:
            raise ValueError("the saved state was made with another seed")
        self.epoch = int(state["epoch"])
        self._resume_at = int(state["position"])


__all__ = ["BarecatDataset", "BarecatSampler"]
