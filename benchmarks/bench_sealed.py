"""Sealed archives: plain vs compressed vs encrypted vs both, next to the real coldcrate.

Writes the same N files (``--blob`` bytes each, default 4 KiB, half of each compressible
text and half random) into a barecat archive in each sealing mode — plain, zstd, lz4,
AES-256-GCM, zstd + AES-256-GCM — until closed (durable), then reads every file back by
path in random order (``bc[path]``: CRC-checked, authenticated, decompressed). The real
coldcrate 0.2.0 (from ``.venv-coldcrate``) writes the same bytes as rows of a chunk in
its modes (none, zstd, AES-256-XTS, zstd + XTS) and reads them back with ``read_at`` from
a dict of offsets (it has no index by name, so it is handed the offsets for free). Then
a JSON-labels dataset (small, similar files) is stored with zstd, with and without a
trained dictionary, to show the ratio gain. Medians of ``--repeats`` runs; figures only,
no assertions. Each implementation runs in its own interpreter.

    python benchmarks/bench_sealed.py [--files N] [--blob BYTES] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_coldcrate import coldcrate_python, parse_arguments

REPO = Path(__file__).resolve().parent.parent

DATA = r"""
import json, os, random, sys, time
mode, files, blob_size, repeats, folder = sys.argv[1:6]
files, blob_size, repeats = int(files), int(blob_size), int(repeats)
rng = random.Random(0)
half = blob_size // 2
names = [f"images/{i // 1000:03d}/{i:07d}.bin" for i in range(files)]
blobs = [(b"label: cat; box: [1, 2, 3, 4]\n" * (half // 30 + 1))[:half]
         + rng.randbytes(blob_size - half) for _ in range(files)]
order = list(range(files))
random.Random(1).shuffle(order)
def labels(count):
    r = random.Random(2)
    kinds = ["cat", "dog", "car", "person", "bicycle", "bus", "tree", "boat"]
    return [json.dumps({"image_id": i, "file_name": f"train/{i:08d}.jpg",
        "width": r.choice([640, 800, 1024]), "height": r.choice([480, 600, 768]),
        "annotations": [{"category": r.choice(kinds), "iscrowd": 0,
                         "bbox": [round(r.uniform(0, 600), 1) for _ in range(4)],
                         "area": round(r.uniform(100, 50000), 2)}
                        for _ in range(r.randint(1, 4))]}).encode() for i in range(count)]
"""

OURS = r"""
import barecat
from barecat.layout import remove_archive
from barecat.sealing import train_dictionary
out = {}
for name, options in [
    ("plain", {}), ("zstd", {"compression": "zstd"}), ("lz4", {"compression": "lz4"}),
    ("gcm", {"compression": "none", "passphrase": "pw"}),
    ("zstd+gcm", {"compression": "zstd", "passphrase": "pw"}),
]:
    samples = {"write": [], "read": []}
    for r in range(repeats):
        path = os.path.join(folder, f"{name}-{r}.barecat")
        t = time.perf_counter()
        with barecat.Barecat(path, readonly=False, **options) as bc:
            bc.add_many(zip(names, blobs))
        samples["write"].append(time.perf_counter() - t)
        with barecat.Barecat(path, passphrase=options.get("passphrase")) as bc:
            bc[names[0]]
            t = time.perf_counter()
            for i in order:
                bc[names[i]]
            samples["read"].append(time.perf_counter() - t)
        stored = os.path.getsize(path + "-shard-00000")
        remove_archive(path)
    out[name] = {"samples": samples, "stored": stored}
texts = labels(files)
text_names = [f"labels/{i:08d}.json" for i in range(files)]
dictionary = train_dictionary(texts[::max(1, files // 5000)])
with_dictionary = {"compression_dictionary": dictionary}
for name, options in [("labels zstd", {}), ("labels zstd+dict", with_dictionary)]:
    path = os.path.join(folder, "labels.barecat")
    with barecat.Barecat(path, readonly=False, overwrite=True, compression="zstd", **options) as bc:
        bc.add_many(zip(text_names, texts))
    with barecat.Barecat(path) as bc:
        t = time.perf_counter()
        for i in order:
            bc[text_names[i]]
        read = time.perf_counter() - t
    out[name] = {"samples": {"read": [read]}, "stored": os.path.getsize(path + "-shard-00000"),
                 "logical": sum(map(len, texts)), "dictionary": len(options and dictionary or b"")}
print(json.dumps(out))
"""

THEIRS = r"""
import coldcrate as cc
schema = cc.Schema([cc.Field("data", "bytes")])
out = {}
for name, options in [
    ("plain", {}), ("zstd", {"compression": "zstd"}), ("lz4", {"compression": "lz4"}),
    ("gcm", {"encryption": "aes-256-xts", "passphrase": "pw"}),
    ("zstd+gcm", {"compression": "zstd", "encryption": "aes-256-xts", "passphrase": "pw"}),
]:
    samples = {"write": [], "read": []}
    for r in range(repeats):
        path = os.path.join(folder, f"cc-{name}-{r}.cc")
        t = time.perf_counter()
        with cc.ChunkWriter.create(path, schema, **options) as w:
            offsets = {n: w.append(n.encode(), {"data": b}).offset for n, b in zip(names, blobs)}
            w.flush(sync=True)
        samples["write"].append(time.perf_counter() - t)
        with cc.ChunkReader.open(path, passphrase=options.get("passphrase")) as reader:
            t = time.perf_counter()
            for i in order:
                reader.read_at(offsets[names[i]]).fields["data"]
            samples["read"].append(time.perf_counter() - t)
        stored = os.path.getsize(path)
        os.remove(path)
    out[name] = {"samples": samples, "stored": stored}
print(json.dumps(out))
"""


def run(kernel: str, python: str, args: argparse.Namespace, folder: str) -> dict[str, dict]:  # type: ignore[type-arg]
    argv = [str(args.files), str(args.blob), str(args.repeats), folder]
    done = subprocess.run(
        [python, "-c", DATA + kernel, "x", *argv], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    result: dict[str, dict] = json.loads(done.stdout)  # type: ignore[type-arg]
    return result


def main() -> int:
    args = parse_arguments(__doc__, "files")
    theirs_python = coldcrate_python()
    if theirs_python is None:
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-sealed-", dir=REPO) as folder:
        ours = run(OURS, sys.executable, args, folder)
        theirs = run(THEIRS, theirs_python, args, folder)
    n, mb = args.files, args.files * args.blob / 1e6
    print(f"{n:,} files of {args.blob:,} bytes (half compressible), medians of {args.repeats}")
    print("write: until closed (durable); read: every file by name, random order")
    print(
        f"{'mode':<14} {'barecat write':>20} {'read':>8} {'stored':>7} "
        f"{'coldcrate write':>20} {'read_at':>8} {'stored':>7}"
    )
    rows = {}
    for name, mine in ours.items():
        if name.startswith("labels"):
            continue
        other = theirs[name]
        w, r = (statistics.median(mine["samples"][k]) for k in ("write", "read"))
        w2, r2 = (statistics.median(other["samples"][k]) for k in ("write", "read"))
        label = name.replace("gcm", "encrypted")
        print(
            f"{label:<14} {mb / w:7,.0f} MB/s {w * 1e6 / n:6.1f}µs {r * 1e6 / n:6.1f}µs "
            f"{mine['stored'] / (n * args.blob):6.1%} "
            f"{mb / w2:7,.0f} MB/s {w2 * 1e6 / n:6.1f}µs {r2 * 1e6 / n:6.1f}µs "
            f"{other['stored'] / (n * args.blob):6.1%}"
        )
        rows[label] = {"write_s": w, "read_s": r, "coldcrate_write_s": w2, "coldcrate_read_s": r2}
    print("(coldcrate's encryption is AES-256-XTS, unauthenticated; ours AES-256-GCM)")
    plain, with_dict = ours["labels zstd"], ours["labels zstd+dict"]
    logical = plain["logical"]
    print(
        f"JSON labels ({n:,} files, {logical / n:.0f} bytes each): zstd stores "
        f"{plain['stored'] / logical:.1%}, zstd with a {with_dict['dictionary'] // 1024} KiB "
        f"trained dictionary {with_dict['stored'] / logical:.1%} "
        f"({plain['stored'] / with_dict['stored']:.2f}x smaller); reads "
        f"{plain['samples']['read'][0] * 1e6 / n:.1f} vs "
        f"{with_dict['samples']['read'][0] * 1e6 / n:.1f} µs/file"
    )
    os.makedirs(REPO / "bench-results", exist_ok=True)
    with open(REPO / "bench-results" / "sealed.json", "w") as f:
        json.dump({"args": vars(args), "barecat": ours, "coldcrate": theirs}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
