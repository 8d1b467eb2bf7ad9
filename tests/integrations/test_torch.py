"""PyTorch data loading with real torch: DataLoader workers, samplers, a 2-process DDP run."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import barecat

torch = pytest.importorskip("torch", reason="torch is not installed (./run test installs 2.13.0)")

from torch.utils.data import DataLoader  # noqa: E402

from barecat.integrations.torch import BarecatDataset, BarecatSampler  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, bytes]]:
    path = str(tmp_path_factory.mktemp("torch") / "ds.barecat")
    files = {f"train/{i % 5}/{i:04d}.bin": os.urandom(64 + i) for i in range(203)}
    with barecat.Barecat(path, readonly=False) as bc:
        bc.add_many(files.items())
        bc["meta/labels.json"] = json.dumps({"classes": 5}).encode()
    return path, files


def as_list(batch: list[object]) -> list[object]:
    """A collate function that keeps the items as they are (picklable, for spawn)."""
    return batch


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_read_every_file(
    archive: tuple[str, dict[str, bytes]], context: str
) -> None:
    path, files = archive
    dataset = BarecatDataset(path, pattern="train/**")
    assert len(dataset) == len(files)
    loader = DataLoader(
        dataset,
        batch_size=16,
        num_workers=2,
        persistent_workers=True,
        multiprocessing_context=context,
        collate_fn=as_list,
    )
    for _ in range(2):  # two epochs through the same (persistent) workers
        seen = {p: data for batch in loader for p, data in batch}
        assert seen == files


class DecodedItems(torch.utils.data.Dataset):  # type: ignore[misc]
    """Values through a mapping that decodes (pickled whole into spawned workers)."""

    def __init__(self, values: Mapping[str, Any], paths: list[str]) -> None:
        self.values = values
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[str, Any]:
        return self.paths[i], self.values[self.paths[i]]


@pytest.mark.parametrize("through", ["DecodedView", "auto_codec"])
def test_spawned_workers_decode_through_a_view(tmp_path: Path, through: str) -> None:
    path = str(tmp_path / "decoded.barecat")
    values: dict[str, Any] = {f"m/{i:02d}.json": {"i": i} for i in range(10)}
    values.update({f"a/{i:02d}.npy.gz": np.arange(i) for i in range(10)})
    values.update({f"i/{i:02d}.png": np.full((3, 4, 3), i, np.uint8) for i in range(10)})
    with barecat.Barecat(path, readonly=False) as bc:
        writer = barecat.DecodedView(bc)
        for name, value in values.items():
            writer[name] = value
    if through == "DecodedView":
        decoded: Mapping[str, Any] = barecat.DecodedView(barecat.Barecat(path, threadsafe=True))
    else:
        with pytest.warns(DeprecationWarning, match="auto_codec"):
            decoded = barecat.Barecat(path, threadsafe=True, auto_codec=True)
        # what users see: still a Barecat, decoding in this process as in the workers
        assert isinstance(decoded, barecat.Barecat) and repr(decoded).startswith("Barecat(")
        assert decoded["m/03.json"] == {"i": 3}
    loader = DataLoader(
        DecodedItems(decoded, sorted(values)),
        batch_size=4,
        num_workers=2,
        multiprocessing_context="spawn",
        collate_fn=as_list,
    )
    seen = {name: value for batch in loader for name, value in batch}
    assert seen.keys() == values.keys()
    for name, value in values.items():
        np.testing.assert_array_equal(seen[name], value)


def test_decoding_and_transforms(archive: tuple[str, dict[str, bytes]]) -> None:
    path, files = archive
    decoded = BarecatDataset(path, ["meta/labels.json"], decode=True)
    assert decoded[0] == {"classes": 5}
    sizes = BarecatDataset(path, sorted(files)[:3], transform=lambda item: len(item[1]))
    assert [sizes[i] for i in range(3)] == [len(files[p]) for p in sorted(files)[:3]]
    custom = BarecatDataset(path, ["train/0/0000.bin"], decode=lambda p, data: data[:4])
    assert custom[0] == files["train/0/0000.bin"][:4]


CLASSES = ("bird", "cat", "dog")


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An ImageFolder-like archive: train/CLASS/NNN.png, each image filled with NNN, of
    every PNG kind (grey, grey+alpha, palette, RGB, RGBA), plus files beside them."""
    from PIL import Image

    path = str(tmp_path_factory.mktemp("folder") / "images.barecat")
    modes = ("L", "LA", "P", "RGB", "RGBA")
    with barecat.Barecat(path, readonly=False) as bc:
        for i in range(60):
            image = Image.fromarray(np.full((6, 5, 3), i, np.uint8))
            mode = modes[i % 5]
            image = image.quantize(4) if mode == "P" else image.convert(mode)
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            bc[f"train/{CLASSES[i % 3]}/{i:03d}.png"] = buf.getvalue()
        bc["train/labels.json"] = b"{}"
    return path


def warnings_are_errors(worker_id: int) -> None:
    """A DataLoader worker's start: a warning (torch.from_numpy's on a read-only array,
    say) becomes an error that reaches the main process."""
    warnings.simplefilter("error")


def to_rgb_tensor(image: np.ndarray) -> Any:
    """1, 3 or 4 channels (the decoded layouts) to a (3, H, W) tensor, as a transform."""
    tensor = torch.from_numpy(image)
    if tensor.ndim == 2:
        tensor = tensor.unsqueeze(-1).expand(-1, -1, 3)
    return tensor[:, :, :3].permute(2, 0, 1)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_image_folder_batches_through_a_dataloader(image_folder: str, num_workers: int) -> None:
    dataset = BarecatDataset(
        image_folder, pattern="train/*/*.png", decode=True, target_fn="parent",
        transform=to_rgb_tensor,
    )  # fmt: skip
    assert len(dataset) == 60
    assert dataset.classes == list(CLASSES)
    assert dataset.class_to_idx == {"bird": 0, "cat": 1, "dog": 2}
    assert dataset.targets == [dataset.class_to_idx[p.split("/")[1]] for p in dataset.paths]
    image, label = dataset[dataset.paths.index("train/cat/007.png")]
    assert (image.shape, label, int(image[0, 0, 0])) == ((3, 6, 5), 1, 7)
    loader = DataLoader(
        dataset, batch_size=8, shuffle=True, num_workers=num_workers,
        worker_init_fn=warnings_are_errors if num_workers else None,
    )  # fmt: skip
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for images, labels in loader:
            assert images.dtype == torch.uint8 and images.shape[1:] == (3, 6, 5)
            assert labels.dtype == torch.int64 and len(labels) == len(images)
            for image, label in zip(images, labels, strict=True):
                number = int(image[0, 0, 0])  # the file's NNN (grey is the same number)
                assert int(label) == number % 3  # its folder's class
                seen.append(number)
    assert not [str(w.message) for w in caught]
    assert sorted(seen) == list(range(60))


def test_decoded_images_go_to_torch_without_warnings(image_folder: str) -> None:
    dataset = BarecatDataset(image_folder, pattern="train/*/00[0-4].png", decode=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.from_numpy warns on read-only arrays
        shapes = {dataset.paths[i]: torch.from_numpy(dataset[i]).shape for i in range(5)}
    assert shapes == {  # L, LA, P, RGB, RGBA: grey, then RGBA for grey+alpha
        "train/bird/000.png": (6, 5),
        "train/cat/001.png": (6, 5, 4),
        "train/dog/002.png": (6, 5, 3),
        "train/bird/003.png": (6, 5, 3),
        "train/cat/004.png": (6, 5, 4),
    }


def test_paths_and_targets_of_your_own(image_folder: str) -> None:
    paths = ["train/cat/001.png", "train/labels.json", "train/dog/002.png"]
    number = BarecatDataset(
        image_folder, paths, decode=True, with_path=True, target_fn=len,
        target_transform=lambda n: n * 10, transform=lambda v: type(v).__name__,
    )  # fmt: skip
    assert [number[i] for i in range(3)] == [
        ("train/cat/001.png", "ndarray", 170),
        ("train/labels.json", "dict", 170),
        ("train/dog/002.png", "ndarray", 170),
    ]
    raw = BarecatDataset(image_folder, paths[:1], with_path=False, target_fn="parent")
    data, label = raw[0]
    assert data[:4] == b"\x89PNG" and label == 0 and raw.classes == ["cat"]
    paired = BarecatDataset(image_folder, paths[:1], decode=True, with_path=True)
    assert paired[0][0] == paths[0] and paired[0][1].shape == (6, 5, 4)
    with pytest.raises(ValueError, match="inside a folder"):
        BarecatDataset(image_folder, ["top.png"], target_fn="parent")


def test_samples_grouped_by_stem(tmp_path: Path) -> None:
    path = str(tmp_path / "samples.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        view = barecat.DecodedView(bc)
        for i in range(24):
            view[f"shard{i % 2}/{i:04d}.npy"] = np.full((2, 3), i, np.float32)
            view[f"shard{i % 2}/{i:04d}.json"] = {"label": i % 4}
            if i % 3 == 0:
                bc[f"shard{i % 2}/{i:04d}.seg.bin"] = bytes([i])
    dataset = BarecatDataset(
        path, decode=lambda p, b: b if p.endswith(".bin") else view.decode(p, b),
        group_by_stem=True, target_fn=lambda key: int(key[-4:]) % 4,
    )  # fmt: skip
    assert len(dataset) == 24 and len(dataset.paths) == 56
    sample, target = dataset[dataset.keys.index("shard1/0003")]
    assert sample.keys() == {"__key__", "npy", "json", "seg.bin"}
    assert sample["__key__"] == "shard1/0003" and sample["json"] == {"label": 3} == {
        "label": target
    }
    assert sample["seg.bin"] == b"\x03"
    np.testing.assert_array_equal(sample["npy"], np.full((2, 3), 3, np.float32))
    plain = BarecatDataset(path, pattern="*/*.[nj]*", decode=True, group_by_stem=True)
    loader = DataLoader(plain, batch_size=5, num_workers=2, worker_init_fn=warnings_are_errors)
    keys, labels = [], []
    for batch in loader:  # torch's default collate: a dict of batched values
        assert batch["npy"].shape == (len(batch["__key__"]), 2, 3)
        assert torch.equal(batch["npy"][:, 0, 0].long() % 4, batch["json"]["label"])
        keys += batch["__key__"]
        labels += batch["json"]["label"].tolist()
    assert sorted(keys) == sorted(dataset.keys) and len(labels) == 24
    with barecat.Barecat(path, readonly=False) as bc:
        bc["shard0/README"] = b"no extension"
    with pytest.raises(barecat.BarecatError, match=r"README.*extension"):
        BarecatDataset(path, group_by_stem=True)


def test_the_sampler_splits_each_epoch_exactly(archive: tuple[str, dict[str, bytes]]) -> None:
    size = 101
    for replicas, drop_last in ((3, False), (3, True), (4, False)):
        samplers = [
            BarecatSampler(size, num_replicas=replicas, rank=r, seed=7, drop_last=drop_last)
            for r in range(replicas)
        ]
        for epoch in range(3):
            shares = []
            for sampler in samplers:
                sampler.set_epoch(epoch)
                shares.append(list(sampler))
            assert len({len(s) for s in shares}) == 1  # equal length on every rank
            together = [i for share in shares for i in share]
            if drop_last:
                assert len(set(together)) == len(together) == size - size % replicas
            else:
                assert set(together) == set(range(size))  # complete
                assert len(together) - len(set(together)) == (-size) % replicas  # padding
        again = BarecatSampler(size, num_replicas=replicas, rank=0, seed=7, drop_last=drop_last)
        again.set_epoch(2)
        assert list(again) == shares[0]  # deterministic
    first, second = BarecatSampler(size, seed=1), BarecatSampler(size, seed=1)
    second.set_epoch(1)
    assert list(first) != list(second) and sorted(first) == sorted(second)


def test_resuming_mid_epoch(archive: tuple[str, dict[str, bytes]]) -> None:
    sampler = BarecatSampler(150, num_replicas=2, rank=1, seed=3)
    sampler.set_epoch(4)
    everything = list(sampler)
    sampler.set_epoch(4)
    taken = []
    for index in sampler:
        taken.append(index)
        if len(taken) == 31:
            break
    state = sampler.state_dict()
    assert state == {"epoch": 4, "seed": 3, "position": 31}
    resumed = BarecatSampler(150, num_replicas=2, rank=1, seed=3)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert len(resumed) == len(everything) - 31
    assert taken + list(resumed) == everything
    assert list(resumed) == everything  # the next epoch pass starts from the beginning
    with pytest.raises(ValueError, match="another seed"):
        BarecatSampler(150, seed=4).load_state_dict(state)


def test_locality_shuffles_blocks_of_neighbours() -> None:
    sampler = BarecatSampler(1000, seed=5, locality=50)
    order = list(sampler)
    assert sorted(order) == list(range(1000)) and order != sorted(order)
    runs = [order[i : i + 50] for i in range(0, 1000, 50)]
    assert all(max(run) - min(run) == 49 and min(run) % 50 == 0 for run in runs)
    assert [min(run) for run in runs] != sorted(min(run) for run in runs)  # blocks shuffled


DDP_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    from torch.utils.data import DataLoader
    from barecat.integrations.torch import BarecatDataset, BarecatSampler

    def names(batch):
        return [p for p, _ in batch]

    def run(rank, archive, port, out):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=2)
        dataset = BarecatDataset(archive, pattern="train/**")
        sampler = BarecatSampler(dataset, seed=11)
        loader = DataLoader(dataset, batch_size=8, sampler=sampler, num_workers=2,
                            collate_fn=names)
        epochs = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            mine = [p for batch in loader for p in batch]
            gathered = [None, None]
            dist.all_gather_object(gathered, mine)
            epochs.append(gathered)
        if rank == 0:
            with open(out, "w") as f:
                json.dump(epochs, f)
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(run, args=(sys.argv[1], int(sys.argv[2]), sys.argv[3]), nprocs=2)
    """
)


def test_ddp_ranks_see_disjoint_complete_shards(
    archive: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    path, files = archive
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    out = tmp_path / "epochs.json"
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [sys.executable, str(script), path, str(port), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    epochs = json.loads(out.read_text())
    assert len(epochs) == 2
    for rank0, rank1 in epochs:
        assert len(rank0) == len(rank1) == 102  # 203 files: one rank pads by one
        assert set(rank0) | set(rank1) == set(files)
        assert len(set(rank0) & set(rank1)) <= 1  # only the padding repeats
    assert epochs[0][0] != epochs[1][0]  # set_epoch reshuffles
