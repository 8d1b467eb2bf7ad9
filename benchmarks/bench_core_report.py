"""Tables of the core benchmark: its rows, their figures and ratios, and the printed report.

``bench_core`` measures and hands the whole result (``raw`` samples per store, dataset,
machine, environments) to :func:`summarize`, which makes one record per table row (medians,
per-round figures, ratios to barecat 0.3.1 and to the floor, cross-check counts), and to
:func:`render`, which prints them with the run's conditions and the notes under the tables.
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PATTERNS = {"glob": "train/*/*.jpg", "rglob": "**/*.jpg"}
BARECATS = ("ours", "ref")
# stores whose close does real work
CLOSE_NOTED = (*BARECATS, "zip", "sqlite", "lmdb", "arrayrecord", "lance")


MB = {"amount": "bytes", "scale": 1e-6}
SAME_RATIO = {"ratio": False}  # same ratios as the row above: left out of the ratio tables


def _row(
    key: str, label: str, unit: str, path: tuple[str, ...] = (), **opts: Any
) -> dict[str, Any]:
    return {"key": key, "label": label, "unit": unit, "path": path, **opts}


# Each row: key, label, unit, where each store's measurement is in ``raw`` (``path``), and
# how to turn it into a figure: rates are amount / median(samples) * scale, times are
# median(samples) / amount * scale, with amount = ``items`` (or ``bytes``; 1 if not
# ``per_item``). ``value`` rows are computed from the footprints instead (lower is better).
ROWS: list[dict[str, Any]] = [
    _row("ingest_tree_files", "ingest from tree", "files/s", ("ingest_tree",), rate=True),
    _row(
        "ingest_tree_mb",
        "ingest from tree",
        "MB/s",
        ("ingest_tree",),
        rate=True,
        **MB,
        **SAME_RATIO,
    ),
    _row("ingest_memory_files", "ingest from memory", "files/s", ("ingest_memory",), rate=True),
    _row(
        "ingest_memory_mb",
        "ingest from memory",
        "MB/s",
        ("ingest_memory",),
        rate=True,
        **MB,
        **SAME_RATIO,
    ),
    _row(
        "ingest_tree_sync",
        "ingest from tree, until synced",
        "files/s",
        ("ingest_tree",),
        rate=True,
        samples="synced_samples",
    ),
    _row(
        "ingest_memory_sync",
        "ingest from memory, until synced",
        "files/s",
        ("ingest_memory",),
        rate=True,
        samples="synced_samples",
    ),
    _row("ingest_cli", "create from tree, command line", "files/s", ("ingest_cli",), rate=True),
    _row(
        "ingest_cli_sync",
        "create from tree, command line, until synced",
        "files/s",
        ("ingest_cli",),
        rate=True,
        samples="synced_samples",
    ),
    _row("read", "random read (usual)", "µs/file", ("read_random", "read"), scale=1e6),
    _row("read_epoch", "random read after an epoch", "µs/file", ("read_epoch",), scale=1e6),
    _row(
        "read_indexed",
        "random read, SQLite index only",
        "µs/file",
        ("read_random", "indexed"),
        scale=1e6,
    ),
    _row("read_raw", "random read, no checksum", "µs/file", ("read_random", "raw"), scale=1e6),
    _row("read_open", "random read, open().read()", "µs/file", ("read_random", "open"), scale=1e6),
    _row("batch", "batch read, one call per batch", "µs/file", ("read_random", "batch"), scale=1e6),
    _row(
        "batch_loop",
        "batch as a loop of reads",
        "µs/file",
        ("read_random", "batch_loop"),
        scale=1e6,
    ),
    _row("read_mp", "random read, 2 processes", "files/s", ("read_mp",), rate=True),
    _row("seq_mb", "sequential read, all files", "MB/s", ("read_seq",), rate=True, **MB),
    _row(
        "seq_files", "sequential read, all files", "files/s", ("read_seq",), rate=True, **SAME_RATIO
    ),
    _row("open", "open + first read", "ms", ("open",), scale=1e3),
    _row("listdir", "listdir (each class dir)", "µs/dir", ("list", "listdir"), scale=1e6),
    _row("walk", "walk (whole tree)", "ms", ("list", "walk"), scale=1e3, per_item=False),
    _row("glob", f"glob {PATTERNS['glob']}", "ms", ("list", "glob"), scale=1e3, per_item=False),
    _row(
        "rglob",
        f"glob {PATTERNS['rglob']} recursive",
        "ms",
        ("list", "rglob"),
        scale=1e3,
        per_item=False,
    ),
    _row("index_bytes", "index bytes per file", "B/file", value="index"),
    _row("lookup_bytes", "lookup table bytes per file", "B/file", value="lookup"),
    _row("disk_overhead", "disk bytes over payload", "B/file", value="overhead"),
]


def _lookup(raw: dict[str, Any], impl: str, path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = raw.get(impl, {})
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if not isinstance(node, dict) or "samples" not in node:
        return None  # missing, or reported unavailable
    return node


def figure(row: dict[str, Any], m: dict[str, Any]) -> float:
    med = statistics.median(m[row.get("samples", "samples")])
    amount = m.get(row.get("amount", "items"), 1) if row.get("per_item", True) else 1
    if row.get("rate"):
        return float(amount / med * row.get("scale", 1.0))
    return float(med / amount * row.get("scale", 1.0))


def footprint_figure(row: dict[str, Any], result: dict[str, Any], impl: str) -> float | None:
    fp = result["raw"][impl].get("footprint")
    n, payload = result["dataset"]["num_files"], result["dataset"]["total_bytes"]
    if not fp or n == 0:
        return None
    if row["value"] in ("index", "lookup"):
        amount = fp.get(f"{row['value']}_bytes")
        return None if amount is None else amount / n
    return float((fp["disk_bytes"] - payload) / n)


def better_ratio(row: dict[str, Any], a: float, b: float) -> float | None:
    """How many times better ``a`` is than ``b``: faster, or fewer bytes (>1: ``a`` wins)."""
    if row.get("rate"):
        return a / b if b > 0 else None
    return b / a if a > 0 else None


def summarize(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per table row: figures, ratios to the reference and the floor, checks."""
    rows = []
    for row in ROWS:
        figures: dict[str, float] = {}
        spread: dict[str, list[float]] = {}
        checks: dict[str, Any] = {}
        for impl in result["impls"]:
            if "value" in row:
                value = footprint_figure(row, result, impl)
                if value is not None:
                    figures[impl] = value
                continue
            m = _lookup(result["raw"], impl, row["path"])
            if m is None:
                continue
            figures[impl] = figure(row, m)
            key = row.get("samples", "samples")
            spread[impl] = [figure(row, {**m, key: [s]}) for s in m[key]]
            checks[impl] = m.get("result")
        ratios: dict[str, dict[str, float]] = {}
        for base in ("ref", "floor"):
            if base in figures:
                ratios[base] = {
                    impl: r
                    for impl, value in figures.items()
                    if (r := better_ratio(row, value, figures[base])) is not None
                }
        rows.append(
            {
                "key": row["key"],
                "label": row["label"],
                "unit": row["unit"],
                "higher_is_better": bool(row.get("rate")),
                "in_ratio_tables": bool(row.get("ratio", True)),
                "median": figures,
                "per_sample": spread,
                "ratio_to": ratios,
                "check": checks,
            }
        )
    return rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _fmt_ratio(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 0.1 or value <= 0:
        return f"{value:.2f}x"
    inverse = 1 / value  # small ratios as fractions: 1/2,400x rather than 0.000x
    return f"1/{inverse:,.0f}x" if inverse >= 10 else f"1/{inverse:.1f}x"


def _table(
    impls: list[str], rows: list[dict[str, Any]], cell: Any, title: str, unit: bool = True
) -> list[str]:
    w = max(10, *(len(impl) + 1 for impl in impls))
    header = f"{'measurement':<32} {'unit' if unit else '':<8}" + "".join(
        f"{impl:>{w}}" for impl in impls
    )
    lines = [title, header, "-" * len(header)]
    for r in rows:
        cells = "".join(f"{cell(r, impl):>{w}}" for impl in impls)
        lines.append(f"{r['label']:<32} {r['unit'] if unit else '':<8}{cells}")
    return lines


def render(result: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    ds, mach, rep = result["dataset"], result["machine"], result["repeats"]
    envs, impls = result["environments"], result["impls"]
    lines = [
        f"barecat core benchmark  {result['timestamp']}",
        f"machine: {mach['cpu_count']} CPUs ({mach['usable_cpus']} usable), {mach['cpu_model']}, "
        f"{mach['memory']}",
        f"platform: {mach['platform']}",
        f"python: ours {envs['ours']['python']} (sqlite {envs['ours']['sqlite']}, barecat "
        f"{envs['ours'].get('barecat_dist_version')}, lmdb {envs['ours'].get('lmdb')}, "
        f"array_record {envs['ours'].get('array_record')}, pylance {envs['ours'].get('pylance')})"
        + (
            f"; ref {envs['ref']['python']} (sqlite {envs['ref']['sqlite']}, barecat "
            f"{envs['ref'].get('barecat_dist_version')})"
            if "ref" in envs
            else "; ref not run"
        ),
        f"dataset: {ds['num_files']:,} files, {ds['total_bytes'] / 1e6:,.1f} MB, "
        f"{ds['class_dirs']} class dirs; random reads: {ds['read_paths']:,} shuffled paths; "
        f"batches: {ds['batches']} x {ds['batch_size']:,} random paths",
        f"ingest from memory: {ds['memory_ingest_files']:,} files evenly spread over the tree, "
        f"{ds['memory_ingest_bytes'] / 1e6:,.1f} MB, loaded before timing",
        f"rounds: ingest from tree {rep['ingest_tree']}, from memory {rep['ingest_memory']}, "
        f"reads and listings {rep['reads_and_listings']}, sequential {rep['sequential']}; "
        "stores interleaved; medians shown",
        f"load average (1/5/15 min): {mach['load_average_start']} at start, "
        f"{mach['load_average_end']} at end; phases (s): {result['phase_seconds']}",
        "",
    ]
    lines += _table(
        impls, rows, lambda r, i: _fmt(r["median"].get(i)), "Figures (medians over the rounds)"
    )
    for base, name in (("ref", "barecat 0.3.1"), ("floor", "the floor")):
        if base not in impls:
            continue
        shown = [  # one row per measure, and only where some store has a ratio
            r for r in rows if r["in_ratio_tables"] and len(r["ratio_to"].get(base, {})) > 1
        ]
        lines.append("")
        lines += _table(
            impls,
            shown,
            lambda r, i, base=base: _fmt_ratio(r["ratio_to"].get(base, {}).get(i)),
            f"Relative to {name}: how many times faster (or fewer bytes); >1 beats it",
            unit=False,
        )
    lines += [
        "",
        "ours/ref = this barecat / barecat 0.3.1; floor = concatenated bytes + dict + os.pread;",
        "plain = the tree (ingest: makedirs + copyfile or write per file); zip = zipfile STORED;",
        "tar = tarfile + {name: TarInfo} (usual read extractfile, no-checksum read pread);",
        "sqlite = blob table by path; lmdb = key path bytes; arrayrecord = one ArrayRecord",
        "file (group_size:1, uncompressed) and lance = a Lance dataset of one binary column,",
        "both found through a saved {path: index} dict (read([i]) / take([i]); batch:",
        "read(indices) / take(indices)). Usual read: ours/ref bc[path]",
        "(CRC32C; ours finds paths in the lookup table its writer saved beside the index),",
        "zip ZipFile.read (CRC-32); the others check nothing. After an epoch: the usual read",
        "by a reader that has already served one read per file. SQLite index only: ours",
        "bc[path] with lookup_table=False. No checksum: ours/ref index.lookup_file +",
        "sharder.read_from_address (SQLite). Batch, one call: ours get_many; sqlite",
        "IN (...); lmdb getmulti; arrayrecord read(indices); lance take(indices); floor,",
        "tar (pread) and zip read in storage order; plain a loop. Durability: ours fsyncs",
        "shards before index commits (and starts writeback early); lmdb commits (fsync)",
        "every 1,000 files; sqlite commits once at the end; ref, zip, tar, floor, plain,",
        'arrayrecord and lance write without fsync. "Until synced" adds the os.sync()',
        "that follows each ingest, so that all stores pay for getting their bytes on disk.",
    ]
    lines += notes(result, rows)
    return "\n".join(lines)


def notes(result: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Diagnostics under the tables, and warnings when a cross-check fails."""
    out = []
    raw, envs = result["raw"], result["environments"]
    for name, what in (("ingest_tree", "from the tree"), ("ingest_memory", "from memory")):
        parts = []
        for impl in result["impls"]:
            m = raw[impl].get(name)
            if m and impl in CLOSE_NOTED:
                close = statistics.median(m["close_samples"])
                total = statistics.median(m["samples"])
                parts.append(f"{impl} {close * 1e3:,.0f}/{total * 1e3:,.0f}")
        if parts:
            out.append(f"ingest {what}, ms closing/total: " + ", ".join(parts))
    read_row = next(r for r in ROWS if r["key"] == "read")
    for impl in BARECATS:
        m = raw.get(impl, {}).get("sql_floor_read")
        if m:
            where = "ours' interpreter" if impl == "ours" else "the ref's interpreter"
            out.append(
                f"hand-written SELECT + pread + CRC32C on the {impl} archive, in {where}: "
                f"{figure(read_row, m):.2f} µs/file"
            )
            if m.get("crc_mismatches"):
                out.append(
                    f"WARNING: {m['crc_mismatches']} CRC32C mismatches in the {impl} archive"
                )
    for impl in BARECATS:
        batch = raw.get(impl, {}).get("read_random", {}).get("batch", {})
        if "unavailable" in batch:
            out.append(f"{impl}: no get_many in this barecat, batch read n/a")
    for r in rows:
        values = {json.dumps(v) for v in r["check"].values()}
        if len(values) > 1:
            out.append(f"WARNING: {r['label']}: stores disagree on counts {r['check']}")
    ours_file = envs["ours"].get("barecat_file") or ""
    if not os.path.abspath(ours_file).startswith(os.path.join(REPO, "src") + os.sep):
        out.append(f"WARNING: 'ours' imported barecat from {ours_file}, not from {REPO}/src")
    if "ref" in envs and envs["ref"].get("barecat_dist_version") != "0.3.1":
        out.append(f"WARNING: the reference is barecat {envs['ref'].get('barecat_dist_version')}")
    if result["git"] != result["git_end"]:
        out.append(
            f"note: the checkout changed during the run (HEAD {result['git']['commit']} at the "
            f"start, {result['git_end']['commit']} at the end); ours ran the code of the start"
        )
    if result["git"].get("src_dirty"):
        out.append(f"note: src/ has uncommitted changes (HEAD {result['git']['commit']})")
    return ["", *out] if out else []
