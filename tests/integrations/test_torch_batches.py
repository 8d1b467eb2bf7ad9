"""``BarecatDataset(file_batches=True)``: whole batches in one shared-memory tensor, through
real DataLoader workers."""

from __future__ import annotations

import copy
import gc
import os
import pickle
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import BarecatIntegrityError
from helpers.damaging import damage

torch = pytest.importorskip("torch", reason="torch is not installed (./run test installs 2.13.0)")

from torch.utils.data import DataLoader  # noqa: E402

from barecat.integrations.torch import (  # noqa: E402
    BarecatDataset,
    BarecatSampler,
    FileBatch,
    collate_file_batch,
)
from barecat.integrations.torch_batches import MAX_POOLED  # noqa: E402


def make(path: str, count: int = 150, **options: str) -> dict[str, bytes]:
    files = {f"train/c{i % 3}/{i:04d}.bin": os.urandom(1 + (i * 977) % 5000) for i in range(count)}
    with barecat.Barecat(path, readonly=False, **options) as bc:  # type: ignore[arg-type]
        bc.add_many(files.items())
    return files


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, bytes]]:
    path = str(tmp_path_factory.mktemp("batches") / "ds.barecat")
    return path, make(path)


def loader(dataset: BarecatDataset, **options: object) -> DataLoader[FileBatch]:
    settings: dict[str, object] = {
        "batch_size": 16,
        "multiprocessing_context": "fork",
        **options,
    }
    return DataLoader(
        dataset,
        num_workers=2,
        collate_fn=collate_file_batch,
        **settings,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "context",
    ["fork", pytest.param("spawn", marks=pytest.mark.slow)],  # (spawn: ~10 s)
)
def test_two_workers_give_each_file_as_bc_gives_it_in_the_samplers_order(
    archive: tuple[str, dict[str, bytes]], context: str
) -> None:
    path, files = archive
    dataset = BarecatDataset(path, file_batches=True, target_fn="parent")
    sampler = BarecatSampler(dataset, seed=3)
    batches = loader(
        dataset, sampler=sampler, persistent_workers=True, multiprocessing_context=context
    )
    with barecat.Barecat(path) as bc:
        for epoch in range(2):  # two epochs through the same (persistent) workers
            sampler.set_epoch(epoch)
            order = [dataset.paths[i] for i in sampler.epoch_order()]
            seen: list[str] = []
            for batch in batches:
                assert isinstance(batch, FileBatch) and len(batch) == len(batch.paths)
                assert batch.tolist() == [bc[p] for p in batch.paths]
                assert [bytes(view) for view in batch] == [files[p] for p in batch.paths]
                assert batch.targets == [int(p.split("/")[1][1]) for p in batch.paths]
                first = batch.tensor(0)
                assert first.dtype == torch.uint8 and bytes(first.numpy()) == files[batch.paths[0]]
                offset, size = batch.places[-1]
                assert bytes(batch.data[offset : offset + size].numpy()) == files[batch.paths[-1]]
                seen += [p for p, view in batch.items() if bytes(view) == files[p]]
            assert seen == order


def test_batches_kept_stay_intact_while_later_ones_are_read(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    """A buffer is reused only once its batch and every view of it are gone, in the
    worker's process as in the main one."""
    path, files = archive
    dataset = BarecatDataset(path, file_batches=True)
    kept = list(loader(dataset, batch_size=4))  # far more batches than buffers a worker keeps
    assert len(kept) > 2 * MAX_POOLED
    assert [bytes(v) for b in kept for v in b] == [files[p] for p in dataset.paths]

    views = [(p, b[i], b.tensor(i)) for b in kept for i, p in enumerate(b.paths)]
    del kept  # only the views hold the buffers now
    for _ in loader(dataset, batch_size=4):
        pass
    for p, view, tensor in views:
        assert bytes(view) == files[p] and bytes(tensor.numpy()) == files[p]


def test_a_buffer_is_reused_once_its_batch_is_gone(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    dataset = BarecatDataset(path, file_batches=True)
    first = dataset.__getitems__([0, 1, 2])
    assert isinstance(first, FileBatch)
    where = first.data.data_ptr()
    view = first[0]
    del first
    assert dataset.__getitems__([3]).data.data_ptr() != where  # a view still holds it
    assert bytes(view) == files[dataset.paths[0]]
    del view
    assert dataset.__getitems__([4, 5]).data.data_ptr() == where
    single = dataset[7]
    assert isinstance(single, FileBatch) and single.tolist() == [files[dataset.paths[7]]]


def test_copies_neither_share_nor_release_the_lease(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    dataset = BarecatDataset(path, file_batches=True)
    first = dataset.__getitems__([0, 1, 2])
    shallow, deep = copy.copy(first), copy.deepcopy(first)
    assert deep.tolist() == first.tolist() == [files[dataset.paths[i]] for i in range(3)]
    assert deep.data.data_ptr() != first.data.data_ptr()
    view = first[0]
    del first, shallow, deep  # only the view holds the buffer: it must not be reused
    assert dataset.__getitems__([3]).tolist() == [files[dataset.paths[3]]]
    assert bytes(view) == files[dataset.paths[0]]


def test_a_pickle_is_a_batch_of_its_own_and_leaves_the_lease(
    archive: tuple[str, dict[str, bytes]],
) -> None:
    """Only multiprocessing's pickler (a DataLoader's queues) sends the lease along; any
    other pickle holds its own bytes, so the buffer is reused once the batch is gone."""
    path, files = archive
    dataset = BarecatDataset(path, file_batches=True, target_fn="parent")
    first = dataset.__getitems__([0, 1, 2])
    where = first.data.data_ptr()
    pickled = pickle.dumps(first)
    twice = [pickle.loads(pickled), pickle.loads(pickled)]
    wanted = [files[dataset.paths[i]] for i in range(3)]
    assert [b.tolist() for b in twice] == [wanted, wanted]
    assert [b.paths for b in twice] == [first.paths] * 2 and twice[0].targets == first.targets
    assert all(b.data.data_ptr() != where for b in twice)
    del first  # its lease is released: the buffer is reused at once
    again = dataset.__getitems__([3, 4])
    assert again.data.data_ptr() == where
    assert [b.tolist() for b in twice] == [wanted, wanted]  # untouched by the reuse
    # multiprocessing's pickler shares only a worker's buffers (the DataLoader tests):
    # a batch made here goes as a batch of its own too
    sent = ForkingPickler.loads(ForkingPickler.dumps(again))
    assert sent.tolist() == again.tolist() and sent.data.data_ptr() != where
    del again
    assert dataset.__getitems__([5]).data.data_ptr() == where
    assert sent.tolist() == [files[dataset.paths[i]] for i in (3, 4)]


@pytest.mark.slow  # (torch's shutdown of workers after one raised takes 10 s)
def test_a_damaged_file_raises_naming_it_through_a_worker(tmp_path: Path) -> None:
    path = str(tmp_path / "damaged.barecat")
    files = make(path, 40)
    victim = sorted(files)[25]
    damage(path, victim, at=0)
    batches = loader(BarecatDataset(path, file_batches=True))
    with pytest.raises(BarecatIntegrityError, match=victim):
        for _ in batches:
            pass
    gc.collect()  # (the workers shut down here, not in the next test)


@pytest.mark.parametrize(
    "sealing",
    [{"compression": "zstd"}, {"passphrase": "correct horse"}],
)
def test_sealed_archives(tmp_path: Path, sealing: dict[str, str]) -> None:
    pytest.importorskip("cryptography", reason="the sealing extra is not installed")
    pytest.importorskip("zstandard", reason="the sealing extra is not installed")
    path = str(tmp_path / "sealed.barecat")
    files = make(path, 60, **sealing)
    dataset = BarecatDataset(path, file_batches=True, passphrase=sealing.get("passphrase"))
    seen = {p: bytes(v) for batch in loader(dataset) for p, v in batch.items()}
    assert seen == files


def test_options_that_do_not_fit(archive: tuple[str, dict[str, bytes]]) -> None:
    path, _ = archive
    for option in ({"decode": True}, {"transform": bytes}, {"group_by_stem": True}):
        with pytest.raises(ValueError, match="file_batches"):
            BarecatDataset(path, file_batches=True, **option)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="file_batches=True"):
        collate_file_batch([(b"a", b"b")])  # type: ignore[arg-type]
