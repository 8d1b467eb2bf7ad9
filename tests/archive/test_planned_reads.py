"""The engine-independent planning of archive/planned_reads.py: runs of planned files,
runs dealt into groups, files grouped into samples (the engines' own tests read real
archives through them: tests/integrations/)."""

from __future__ import annotations

import pytest

import barecat
from barecat.archive.planned_reads import contiguous_groups, cut_runs, group_samples, sample_key
from barecat.entries import BarecatFileInfo


def info(path: str, size: int, offset: int = 0) -> BarecatFileInfo:
    return BarecatFileInfo(path=path, shard=0, offset=offset, size=size, crc32c=0)


def test_runs_keep_order_and_limits() -> None:
    files = [info(f"f{i}", 10, 10 * i) for i in range(10)] + [info("big", 100, 100)]
    runs = list(cut_runs(files, max_bytes=30, max_files=2))
    assert [f for run in runs for f in run] == files
    assert all(len(run) <= 2 and sum(f.size or 0 for f in run) <= 30 for run in runs[:-1])
    assert [f.path for f in runs[-1]] == ["big"], "a file bigger than the limit is alone"
    assert list(cut_runs([], 10)) == []


def test_runs_never_split_a_sample() -> None:
    files = [info(f"s/{i // 3:03d}.{ext}", 10) for i, ext in enumerate(["a", "b", "c"] * 4)]
    runs = list(cut_runs(files, max_bytes=20, group_by_stem=True))
    assert [len(run) for run in runs] == [3, 3, 3, 3]
    assert all(len({sample_key(f.path)[0] for f in run}) == 1 for run in runs)
    with pytest.raises(barecat.BarecatError, match=r"s/README.*extension"):
        list(cut_runs([info("s/README", 1)], group_by_stem=True))


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 50])
def test_groups_are_contiguous_balanced_and_exactly_parts(parts: int) -> None:
    weights = [5, 1, 1, 8, 3, 3, 3, 2, 9, 1, 4, 4]
    runs = list(range(len(weights)))
    groups = contiguous_groups(runs, weights, parts)
    assert len(groups) == parts
    assert [r for g in groups for r in g] == runs
    if parts <= 3:
        share = sum(weights) / parts
        assert all(abs(sum(weights[r] for r in g) - share) <= max(weights) for g in groups)
    assert contiguous_groups(["a", "b", "c", "d"], [0, 0, 0, 0], 2) == [["a", "b"], ["c", "d"]]
    with pytest.raises(ValueError, match="at least 1"):
        contiguous_groups(runs, weights, 0)


def test_samples_keep_the_order_keys_first_appear() -> None:
    paths = ["x/2.jpg", "x/1.json", "x/2.json", "x/1.seg.png", "x/.h.txt"]
    samples = group_samples(paths, [1, 2, 3, 4, 5])
    assert samples == {
        "x/2": {"jpg": 1, "json": 3},
        "x/1": {"json": 2, "seg.png": 4},
        "x/.h": {"txt": 5},
    }
