"""PyTorch data loading from archives: a map-style ``Dataset`` and a distributed sampler.

``BarecatDataset`` holds only the archive's path and the list of file paths; each process
(DataLoader workers, fork or spawn, persistent or not) opens the archive itself on first
use, so nothing is shared across a fork and the dataset pickles small. An item is what a
training loop takes, as torchvision's ``ImageFolder`` gives it: the value (the file's
bytes, or ``decode``'s value of them), ``(value, target)`` with ``target_fn`` (``"parent"``:
the index of the file's folder name in ``classes``, as ``ImageFolder``), and the path in
front with ``with_path=True``. ``group_by_stem=True`` makes an item of each sample, as
WebDataset and LitData group files (``0001.jpg`` + ``0001.json``, grouped by
:mod:`barecat.samples`, as Ray Data's source groups them): a dict of ``__key__`` and a
value per extension. Without any of these options an item is ``(path, bytes)``, as in
earlier versions (and ``transform`` gets the pair). ``file_batches=True`` makes a whole
batch one :class:`FileBatch`, the files' bytes in one tensor that a DataLoader worker
fills in shared memory: the way to take raw bytes through workers
(:mod:`barecat.integrations.torch._batches`).

``BarecatSampler`` gives each of ``num_replicas`` ranks a disjoint share of every epoch;
together the shares cover the epoch exactly (padded by wrapping round to equal length, as
``DistributedSampler`` does, unless ``drop_last``). The order depends only on ``seed`` and
the epoch (``set_epoch``), so it is reproducible and resumable: ``state_dict()`` records
the epoch and how many indices this rank has yielded, ``load_state_dict`` continues from
there. ``locality=N`` shuffles blocks of N files neighbouring in storage, then the files
within each block: nearly as random for training, far fewer seeks on HDD, NFS or object
storage. An archive on object storage (``s3://...`` with ``storage_options``) works the
same; the workers share its local block cache. Imports torch (the ``torch`` extra), the
archive layer, the codecs, ``samples`` and ``torch/_batches.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing(
    "barecat.integrations.torch needs PyTorch", "torch"
):
    import torch
    from torch.utils.data import Dataset, Sampler

from barecat.archive import Barecat
from barecat.codecs import DecodedView
from barecat.entries import Order
from barecat.integrations.selection import ArchiveLocation
from barecat.integrations.torch._batches import BufferPool, FileBatch
from barecat.samples import group_by_stem as samples_of

KEY = "__key__"
"""A sample's key in the dict ``group_by_stem`` items are (WebDataset's name)."""

TargetFn = Callable[[str], Any]
"""A target from an item's path (its sample key with ``group_by_stem``)."""


@dataclass(frozen=True)
class ItemForm:
    """What a dataset's item is made of: the options that shape it (see
    :class:`BarecatDataset`'s table).

    Attributes:
        decode: False: the bytes; True: decoded by extension; a function
            ``(path, bytes) -> value``.
        transform: applied to each value (or to the ``(path, bytes)`` pair).
        target_fn: ``"parent"``, a function of the key, or None (no target).
        target_transform: applied to each target.
        with_path: the path (the sample key) first in each item.
        pair: the ``(path, bytes)`` items of earlier versions (no option given).
    """

    decode: bool | Callable[[str, bytes], Any] = False
    transform: Callable[[Any], Any] | None = None
    target_fn: Literal["parent"] | TargetFn | None = None
    target_transform: Callable[[Any], Any] | None = None
    with_path: bool = True
    pair: bool = True

    @classmethod
    def of(
        cls,
        decode: bool | Callable[[str, bytes], Any],
        transform: Callable[[Any], Any] | None,
        target_fn: Literal["parent"] | TargetFn | None,
        target_transform: Callable[[Any], Any] | None,
        with_path: bool | None,
        group_by_stem: bool,
    ) -> ItemForm:
        """The form the dataset's arguments give (``with_path`` None: only in the pair
        form of earlier versions, which no option at all gives)."""
        pair = (with_path, decode, target_fn, group_by_stem) == (None, False, None, False)
        shown = pair if with_path is None else with_path
        return cls(decode, transform, target_fn, target_transform, shown, pair)


class BarecatDataset(Dataset[Any]):
    """Files (or samples) of an archive as a map-style dataset (see the module doc).

    Items, by the options given:

    ================================  =========================================
    options                           item
    ================================  =========================================
    ``decode=True`` (or a function)   ``value``
    ... and ``target_fn``             ``(value, target)``
    ... and ``with_path=True``        ``(path, value)``, ``(path, value, target)``
    ``group_by_stem=True``            ``value`` is ``{"__key__": key, ext: value}``
    none of them (earlier versions)   ``(path, bytes)``
    ``file_batches=True``             a whole batch is one :class:`FileBatch`
    ================================  =========================================

    With DataLoader workers, ``file_batches=True`` (and
    ``collate_fn=collate_file_batch``) is THE way to load raw bytes: each batch is read
    in the worker into one shared-memory tensor and reaches the main process without
    being pickled (see :mod:`barecat.integrations.torch._batches`); the other forms send
    every file's bytes through a pipe, which costs the main process more than reading
    them itself. Decoding in the workers (``decode=True``) keeps the other forms.

    Args:
        archive: the archive (a local path, or ``s3://...`` with ``storage_options``).
        paths: the files, in this order (default: all, in storage order, which is what a
            sequential or ``locality`` sampler reads fastest).
        pattern: a glob choosing the files instead (``**`` recursive), in path order.
        decode: False: the bytes; True: decoded by extension with ``DecodedView``'s
            codecs (images as writable ``(H, W)``, ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA
            arrays, see :mod:`barecat.codecs.images`; JSON, NumPy, ...); a function
            ``(path, bytes) -> value``.
        transform: applied to each value (to each sample dict with ``group_by_stem``;
            to the ``(path, bytes)`` pair when no option is given, as before).
        target_fn: ``"parent"``: the index in :attr:`classes` of the name of the
            file's folder (``train/cat/1.jpg`` -> ``class_to_idx["cat"]``), as
            ``ImageFolder``; a function of the path (the sample key with
            ``group_by_stem``) returning the target.
        target_transform: applied to each target.
        with_path: put the path (the sample key) first in each item. Default: only in
            the ``(path, bytes)`` form of earlier versions.
        group_by_stem: an item per sample: the files sharing the path up to the first
            dot of their name (``train/0001.jpg`` and ``train/0001.json``), in the
            order the samples' first files come.
        passphrase: an encrypted archive's passphrase.
        storage_options: fsspec options for a URL.
        cache_dir: where a remote archive's index is copied.
        remote_mode: how a remote archive's index is read (default: ``"hydrate"``, see
            :class:`~barecat.integrations.selection.ArchiveLocation`).
        file_batches: ``__getitems__`` (a DataLoader batch) returns a :class:`FileBatch`:
            the files' bytes, CRC-checked, in one uint8 tensor (shared memory in a
            worker), with ``paths`` and ``targets`` (with ``target_fn``); pass
            ``collate_fn=collate_file_batch``. ``dataset[i]`` is a batch of one file.
            Not with ``decode``, ``transform`` or ``group_by_stem``.

    Attributes:
        location: the archive, its key and options (each process opens it with them).
        form: what an item is made of (the options ``decode`` to ``with_path``).
        paths: the files read, in order (with ``group_by_stem``, all the samples' files).
        keys: what each item is known by: its path, or its sample key.
        classes: with ``target_fn="parent"``, the folder names, sorted (else None).
        class_to_idx: with ``target_fn="parent"``, each class's index (else None).
        targets: with ``target_fn="parent"``, each item's target (else None).

    Raises:
        FileNotFoundBarecatError: no archive there.
        BarecatError: a file name without an extension with ``group_by_stem``.
        ValueError: a file at the archive's root with ``target_fn="parent"``;
            ``file_batches`` with ``decode``, ``transform`` or ``group_by_stem``.
    """

    def __init__(
        self,
        archive: str | os.PathLike[str],
        paths: Sequence[str] | None = None,
        *,
        pattern: str | None = None,
        decode: bool | Callable[[str, bytes], Any] = False,
        transform: Callable[[Any], Any] | None = None,
        target_fn: Literal["parent"] | TargetFn | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        with_path: bool | None = None,
        group_by_stem: bool = False,
        passphrase: str | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        file_batches: bool = False,
        remote_mode: str | None = None,
    ) -> None:
        if file_batches and (decode is not False or transform is not None or group_by_stem):
            raise ValueError(
                "file_batches gives the files' bytes: decode them from the batch, or drop "
                "file_batches to decode in the workers"
            )
        self.location = ArchiveLocation.of(
            archive, passphrase, storage_options, cache_dir, remote_mode
        )
        self.file_batches = file_batches
        self.group_by_stem = group_by_stem
        self.form = ItemForm.of(
            decode, transform, target_fn, target_transform, with_path, group_by_stem
        )
        self._bc: Barecat | None = None
        self._view: DecodedView | None = None
        self._pool: BufferPool | None = None
        self._pid = -1
        if paths is None:
            with self.location.open() as bc:
                if pattern is None:
                    paths = [f.path for f in bc.iter_fileinfos(Order.ADDRESS)]
                else:
                    paths = sorted(bc.globfiles(pattern, True, True))
        self.paths = list(paths)
        self._members: list[list[tuple[str, int]]] | None = None  # (ext, position in paths)
        self.keys = self.paths
        if group_by_stem:
            samples = samples_of(self.paths)
            self.keys = list(samples)
            self._members = [list(files.items()) for files in samples.values()]
        self.classes: list[str] | None = None
        self.class_to_idx: dict[str, int] | None = None
        self.targets: list[int] | None = None
        if target_fn == "parent":
            folders = [_folder_name(key) for key in self.keys]
            self.classes = sorted(set(folders))
            self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
            self.targets = [self.class_to_idx[name] for name in folders]

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def archive(self) -> str:
        """The archive's path or URL."""
        return self.location.path

    def _archive(self) -> Barecat:
        if self._bc is None or self._pid != os.getpid():  # opened in this process only
            self._bc = self.location.open()
            self._pid = os.getpid()
            self._view = None
            self._pool = None
        return self._bc

    def _files(self, index: int) -> list[str]:
        if self._members is None:
            return [self.paths[index]]
        return [self.paths[position] for _, position in self._members[index]]

    def __getitem__(self, index: int) -> Any:
        if self.file_batches:
            return self.__getitems__([index])
        if self._members is None:
            return self._item(index, [self._archive()[self.paths[index]]])
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any] | FileBatch:
        """A whole batch with one ``get_many`` (DataLoader calls this when it exists):
        neighbours in storage are read together, which on object storage means one
        request for many files. With ``file_batches``, a :class:`FileBatch`."""
        if self.file_batches:
            return self._file_batch(indices)
        files = [self._files(i) for i in indices]
        contents = iter(self._archive().get_many([p for f in files for p in f]))
        return [
            self._item(i, [next(contents) for _ in f]) for i, f in zip(indices, files, strict=True)
        ]

    def _file_batch(self, indices: Sequence[int]) -> FileBatch:
        bc = self._archive()
        if self._pool is None:
            self._pool = BufferPool()
        paths = [self.paths[i] for i in indices]
        buffer, places = self._pool.read(bc, paths)
        targets = [self._target(i) for i in indices] if self.form.target_fn is not None else None
        return FileBatch(buffer, places, paths, targets, leased=True)

    def _item(self, index: int, contents: list[bytes]) -> Any:
        key = self.keys[index]
        value: Any
        if self._members is None:
            value = self._decoded(key, contents[0])
        else:
            value = {KEY: key}
            for (ext, position), data in zip(self._members[index], contents, strict=True):
                value[ext] = self._decoded(self.paths[position], data)
        form = self.form
        if form.pair:
            pair = (key, value)
            return form.transform(pair) if form.transform is not None else pair
        if form.transform is not None:
            value = form.transform(value)
        item: list[Any] = [key, value] if form.with_path else [value]
        if form.target_fn is not None:
            item.append(self._target(index))
        return item[0] if len(item) == 1 else tuple(item)

    def _decoded(self, path: str, data: bytes) -> Any:
        decode = self.form.decode
        if decode is True:
            if self._view is None:
                self._view = DecodedView(self._archive())
            return self._view.decode(path, data)
        if callable(decode):
            return decode(path, data)
        return data

    def _target(self, index: int) -> Any:
        target: Any
        form = self.form
        if self.targets is not None:
            target = self.targets[index]
        else:
            assert callable(form.target_fn)
            target = form.target_fn(self.keys[index])
        return form.target_transform(target) if form.target_transform is not None else target

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_bc"], state["_pid"], state["_view"] = None, -1, None  # each worker opens its own
        state["_pool"] = None
        return state


def _folder_name(path: str) -> str:
    """The name of the folder ``path`` is in (its class, for ``target_fn="parent"``)."""
    parts = path.rsplit("/", 2)
    if len(parts) < 2:
        raise ValueError(f"{path}: target_fn='parent' needs every file inside a folder")
    return parts[-2]


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
