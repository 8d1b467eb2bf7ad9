"""ColdCrate chunks: barecat.coldcrate next to the real coldcrate 0.2.0 on the same data.

For each of plain, zstd, AES-256-XTS and zstd + AES-256-XTS, writes a chunk of N rows
(a small JSON-like label row plus a blob; ``--blob`` bytes, default 4 KiB, half of it
compressible), then scans it and reads every entry by offset in random order; each
implementation in its own interpreter (ours in this one, coldcrate's from
``.venv-coldcrate``), medians of ``--repeats`` runs. Prints MB/s and µs per entry and
the ratio ours / theirs. Figures only, no assertions.

    python benchmarks/bench_coldcrate.py [--rows N] [--blob BYTES] [--repeats R]
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

REPO = Path(__file__).resolve().parent.parent

KERNEL = r"""
import json, os, random, sys, time
mode, rows, blob_size, repeats, folder = sys.argv[1:6]
rows, blob_size, repeats = int(rows), int(blob_size), int(repeats)
if mode == "ours":
    from barecat import coldcrate as cc
else:
    import coldcrate as cc
schema = cc.Schema([cc.Field("label", "utf8"), cc.Field("box", cc.FixedArray("f32", 4)),
                    cc.Field("score", "f64"), cc.Field("blob", "bytes")])
rng = random.Random(0)
half = blob_size // 2
data = [(f"img-{i:07d}".encode(), {
    "label": ["cat", "dog", "bird"][i % 3], "box": [0.1, 0.2, 0.3, 0.4], "score": i / rows,
    "blob": (b"label: cat; box: [1, 2, 3, 4]\n" * (half // 30 + 1))[:half]
            + rng.randbytes(blob_size - half),
}) for i in range(rows)]
payload = rows * blob_size
out = {}
for name, options in [
    ("plain", {}), ("zstd", {"compression": "zstd"}),
    ("xts", {"encryption": "aes-256-xts", "passphrase": "pw", "kdf": (14, 8, 1)}),
    ("zstd+xts", {"compression": "zstd", "encryption": "aes-256-xts", "passphrase": "pw",
                  "kdf": (14, 8, 1)}),
]:
    samples = {"write": [], "scan": [], "read_at": []}
    for r in range(repeats):
        path = os.path.join(folder, f"{mode}-{name}-{r}.cc")
        t = time.perf_counter()
        with cc.ChunkWriter.create(path, schema, **options) as w:
            offsets = [w.append(rid, row).offset for rid, row in data]
        samples["write"].append(time.perf_counter() - t)
        key = options.get("passphrase")
        with cc.ChunkReader.open(path, passphrase=key) as reader:
            t = time.perf_counter()
            n = sum(1 for _ in reader.scan())
            samples["scan"].append(time.perf_counter() - t)
            order = offsets[:]
            random.Random(1).shuffle(order)
            t = time.perf_counter()
            for off in order:
                reader.read_at(off)
            samples["read_at"].append(time.perf_counter() - t)
        assert n == rows
        size = os.path.getsize(path)
        os.remove(path)
    out[name] = {"samples": samples, "bytes": payload, "rows": rows, "file_bytes": size}
print(json.dumps(out))
"""


def run(mode: str, python: str, args: argparse.Namespace, folder: str) -> dict[str, object]:
    done = subprocess.run(
        [python, "-c", KERNEL, mode, str(args.rows), str(args.blob), str(args.repeats), folder],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")} if mode == "ours" else None,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout)
    return result


def parse_arguments(doc: str | None, count: str) -> argparse.Namespace:
    """``--COUNT`` items (default 20,000) of ``--blob`` bytes, ``--repeats`` rounds."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument(f"--{count}", type=int, default=20_000)
    parser.add_argument("--blob", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


def coldcrate_python() -> str | None:
    """The interpreter with coldcrate 0.2.0 (``COLDCRATE_PYTHON`` or ``.venv-coldcrate``);
    None, saying so, if there is none."""
    python = os.environ.get("COLDCRATE_PYTHON") or str(REPO / ".venv-coldcrate/bin/python")
    if not os.access(python, os.X_OK):
        print(f"coldcrate 0.2.0 not found at {python} (./run test creates it)")
        return None
    return python


def main() -> int:
    args = parse_arguments(__doc__, "rows")
    theirs_python = coldcrate_python()
    if theirs_python is None:
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-coldcrate-") as folder:
        ours = run("ours", sys.executable, args, folder)
        theirs = run("theirs", theirs_python, args, folder)
    print(f"{args.rows:,} rows of a {args.blob:,}-byte blob plus a label row; medians")
    print(f"{'pipeline':<10} {'step':<8} {'ours':>16} {'coldcrate':>16} {'ratio':>7}")
    for name, mine in ours.items():
        other = theirs[name]
        assert isinstance(mine, dict) and isinstance(other, dict)
        for step in ("write", "scan", "read_at"):
            a = statistics.median(mine["samples"][step])
            b = statistics.median(other["samples"][step])
            mb = mine["bytes"] / 1e6
            print(f"{name:<10} {step:<8} {mb / a:8,.0f} MB/s {a * 1e6 / args.rows:5.1f}µs "
                  f"{mb / b:7,.0f} MB/s {b * 1e6 / args.rows:5.1f}µs {b / a:6.2f}x")  # fmt: skip
        print(f"{'':<10} {'size':<8} {mine['file_bytes']:>16,} {other['file_bytes']:>16,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
