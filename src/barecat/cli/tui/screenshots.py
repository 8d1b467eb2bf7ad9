"""``python -m barecat.cli.tui.screenshots [DIR]`` (``./run screenshots``): the pictures of
``barecat ncdu`` and ``barecat browse`` in the docs, taken from the applications
themselves on a sample archive and saved as SVG (``ncdu.svg``, ``browse.svg``; default
``DIR``: ``docs/images``).

The sample looks like a real dataset (splits, classes, labels, a model checkpoint) and holds
the names terminals get wrong: one in brackets, a Japanese directory, a very long file
name. Its contents are generated from a fixed seed, so every run draws the same pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
from collections.abc import Sequence

from textual.app import App

from barecat.archive import Barecat
from barecat.cli.tui.browse import BrowseApp
from barecat.cli.tui.ncdu import NcduApp

SIZE = (100, 26)
MTIME_NS = 1_700_000_000 * 10**9
README = b"""# Pets 2024

Photos of pets in three classes, split into train and val.
Labels are in labels.csv: one line per image, path,label.
"""


def make_sample(path: str, seed: int = 0) -> None:
    """Write the sample archive to ``path`` (replacing one there).

    Args:
        path: Where the archive goes.
        seed: The seed of the generated file sizes and bytes.
    """
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    for split, count in (("train", 40), ("val", 8)):
        for label, typical in (("dog", 24_000), ("cat", 20_000), ("bird", 12_000)):
            for i in range(count):
                size = rng.randint(typical // 2, typical * 2)
                files[f"{split}/{label}/{label}_{i:04d}.jpg"] = rng.randbytes(size)
    for i in range(6):
        files[f"写真 2024/IMG_{i:04d}.jpg"] = rng.randbytes(rng.randint(30_000, 60_000))
    files["models/checkpoint-epoch-0042.pt"] = rng.randbytes(900_000)
    files["models/checkpoint-epoch-0041.pt"] = rng.randbytes(900_000)
    long_name = "augmentation-config-random-resized-crop-0.08-1.0-colour-jitter-0.4.yaml"
    files[f"models/{long_name}"] = b"crop: [0.08, 1.0]\njitter: 0.4\n"
    files["[draft] results.md"] = b"| split | accuracy |\n|---|---|\n| val | 0.91 |\n"
    files["README.md"] = README
    labels = [f"{p},{p.split('/')[1]}" for p in files if p.startswith(("train/", "val/"))]
    files["labels.csv"] = ("path,label\n" + "\n".join(labels) + "\n").encode()
    with Barecat(path, readonly=False, overwrite=True) as bc:
        for name, data in files.items():
            bc.add(name, data=data, mode=0o644, mtime_ns=MTIME_NS)


async def _shoot(app: App[None], keys: Sequence[str], directory: str, name: str) -> None:
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*keys)
        await pilot.pause()
        app.save_screenshot(name, path=directory)


def take(directory: str) -> list[str]:
    """Draw ncdu (at the root) and browse (the README previewed) and save them as SVG.

    Args:
        directory: Where ``ncdu.svg`` and ``browse.svg`` are written.

    Returns:
        The paths written.
    """
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        archive = os.path.join(scratch, "pets.barecat")
        make_sample(archive)
        with Barecat(archive) as bc:
            asyncio.run(_shoot(NcduApp(bc), [], directory, "ncdu.svg"))
            # root: models/ train/ val/ 写真 2024/ README.md ...: the README is the fifth
            keys = ["down"] * 4
            asyncio.run(_shoot(BrowseApp(bc), keys, directory, "browse.svg"))
    return [os.path.join(directory, name) for name in ("ncdu.svg", "browse.svg")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", nargs="?", default=os.path.join("docs", "images"))
    args = parser.parse_args(argv)
    for path in take(args.directory):
        print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
