"""barecat 0.3.1 and an archive whose files share bytes (hard links stored once).

The real 0.3.1 (``BARECAT_REFERENCE_PYTHON``) reads such an archive, verifies it and
merges it into an archive of its own, all right. Its writers take each byte range for one
file's own: unguarded, its ``defrag`` copied a shared range once per row over the next
file's bytes (4 of 6 files of a fresh ``create`` lost) and its ``remove`` of one name cut
the shard under the other. The archive keeps a guard shard (``barecat.shards.guard``), so
0.3.1's defrag (command line, in every mode, and the Python API) and remove stop with its
own error before a byte or a row changes, and every file still reads back right, in both
implementations; our own defrag then packs it, the names still sharing their bytes. An
archive 0.3.1's merge makes from it shares bytes without a guard: our repair adds one.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import barecat
from barecat.entries import Order
from barecat.layout import shard_path
from barecat.transfer import ingest, plan_tree
from helpers.reference import reference_env, reference_python

_READ_ALL = """
import barecat, json, sys
with barecat.Barecat(sys.argv[1]) as bc:
    files = {p: bc[p].hex() for p in bc.index.iter_all_filepaths()}
    print(json.dumps({"files": files, "verified": bc.verify_integrity()}))
"""


def reference_reads(archive: Path) -> dict[str, object]:
    done = subprocess.run(
        [reference_python(), "-I", "-c", _READ_ALL, str(archive)],
        capture_output=True,
        text=True,
        env=reference_env(),
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def reference_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    exe = Path(reference_python()).parent / "barecat"
    return subprocess.run(
        [str(exe), *argv], capture_output=True, text=True, env=reference_env(), timeout=120
    )


def reference_python_call(archive: Path, code: str) -> subprocess.CompletedProcess[str]:
    snippet = (
        "import barecat, sys\n"
        "with barecat.Barecat(sys.argv[1], readonly=False) as bc:\n"
        f"    {code}\n"
    )
    return subprocess.run(
        [reference_python(), "-I", "-c", snippet, str(archive)],
        capture_output=True,
        text=True,
        env=reference_env(),
    )


def linked_archive(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An archive made by create from a tree with hard links (and files between them),
    with holes left by removals: what 0.3.1's defrag would act on."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "a").write_bytes(b"A" * 5000)
    os.link(src / "a", src / "d" / "a2")
    (src / "c").write_bytes(b"C" * 3000)
    (src / "gone").write_bytes(b"G" * 9000)
    (src / "e").write_bytes(os.urandom(7000))
    os.link(src / "e", src / "d" / "e2")
    os.link(src / "e", src / "d" / "e3")
    (src / "z").write_bytes(b"Z" * 10)
    archive = tmp_path / "linked.barecat"
    with barecat.Barecat(str(archive), readonly=False) as bc:
        result = ingest(bc, plan_tree(str(src)))
        assert result.shared == 3
        bc.remove("gone")
    files = {
        str(p.relative_to(src)): p.read_bytes().hex()
        for p in sorted(src.rglob("*"))
        if p.is_file() and p.name != "gone"
    }
    return archive, files


def ours(archive: Path) -> dict[str, object]:
    with barecat.Barecat(str(archive)) as bc:
        files = {f.path: bc[f.path].hex() for f in bc.iter_fileinfos(Order.PATH)}
        return {"files": files, "verified": bc.verify().ok}


def shared(archive: Path) -> bool:
    with barecat.Barecat(str(archive)) as bc:
        return bc.lookup_file("a").address == bc.lookup_file("d/a2").address


def test_reference_reads_and_verifies_an_archive_with_shared_bytes(tmp_path: Path) -> None:
    archive, files = linked_archive(tmp_path)
    assert os.readlink(shard_path(str(archive), 1)) == os.devnull  # the guard
    assert reference_reads(archive) == {"files": files, "verified": True}
    proc = reference_cli("verify", str(archive))
    assert proc.returncode == 0 and "all checksums OK" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "how",
    [
        ["defrag"],
        ["defrag", "--quick"],
        ["defrag", "--smart"],
        "bc.defrag()",
        "bc.defrag(quick=True)",
        "bc.remove('d/e3')",
        "bc.remove('a')",
        "bc['new'] = b'appended'",
    ],
)
def test_reference_writers_stop_before_changing_anything(
    tmp_path: Path, how: list[str] | str
) -> None:
    archive, files = linked_archive(tmp_path)
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path) if "-shard-0000" in n}
    before = {n: b for n, b in before.items() if not os.path.islink(tmp_path / n)}
    if isinstance(how, list):
        proc = reference_cli(*how, str(archive))
    else:
        proc = reference_python_call(archive, how)
    assert proc.returncode != 0
    assert "Writing symlinked shards was disabled" in proc.stderr
    assert {n: (tmp_path / n).read_bytes() for n in before} == before
    assert reference_reads(archive) == {"files": files, "verified": True}
    assert ours(archive) == {"files": files, "verified": True}
    with barecat.Barecat(str(archive), readonly=False) as bc:  # ours packs it, still shared
        bc.defrag()
    assert shared(archive)
    assert reference_reads(archive) == {"files": files, "verified": True}


def test_reference_merges_an_archive_with_shared_bytes(tmp_path: Path) -> None:
    archive, files = linked_archive(tmp_path)
    other = tmp_path / "other.barecat"
    with barecat.Barecat(str(other), readonly=False) as bc:
        bc["other.txt"] = b"other"
    out = tmp_path / "merged.barecat"
    proc = reference_cli("merge", "-o", str(out), str(archive), str(other))
    assert proc.returncode == 0, proc.stderr
    expected = {**files, "other.txt": b"other".hex()}
    assert reference_reads(out) == {"files": expected, "verified": True}
    assert ours(out) == {"files": expected, "verified": True}
    # 0.3.1's merge kept the shared rows but made no guard: our repair adds one
    with barecat.Barecat(str(out), readonly=False) as bc:
        assert shared(out) and not bc.sharder.guarded
        assert bc.repair().guarded
        assert not bc.repair().changed  # (once is enough)
    proc = reference_python_call(out, "bc.defrag()")
    assert "Writing symlinked shards was disabled" in proc.stderr
    assert reference_reads(out) == {"files": expected, "verified": True}


def test_the_guard_survives_defrag_and_reshard_and_follows_a_merge(tmp_path: Path) -> None:
    archive, files = linked_archive(tmp_path)
    with barecat.Barecat(str(archive), readonly=False) as bc:
        bc.shard_size_limit = 20_000
        for k in range(4):  # new shards go past the guard
            bc[f"more/{k}"] = bytes([k]) * 9000
        for k in range(3):
            bc.remove(f"more/{k}")
        bc.defrag()
        assert bc.sharder.guarded and bc.sharder.is_guard(bc.sharder.num_shards - 1)
        bc.reshard(30_000)
        assert bc.sharder.guarded
    files["more/3"] = (bytes([3]) * 9000).hex()
    assert shared(archive)
    assert reference_reads(archive) == {"files": files, "verified": True}
    merged = tmp_path / "ours-merged.barecat"
    with barecat.Barecat(str(merged), readonly=False) as bc:
        bc["first"] = b"1"
        bc.merge_from_other_barecat(str(archive))
        assert bc.sharder.guarded
    assert shared(merged)
    proc = reference_python_call(merged, "bc.defrag()")
    assert "Writing symlinked shards was disabled" in proc.stderr
    assert reference_reads(merged) == {"files": {"first": "31", **files}, "verified": True}
