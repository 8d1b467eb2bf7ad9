"""Archives are interchangeable with the reference barecat 0.3.1, in both directions.

The reference runs as a black box in its own interpreter (``BARECAT_REFERENCE_PYTHON``,
else ``.venv-ref/bin/python`` next to the repository), driven through small snippets that
print JSON, and through its ``barecat`` command line. The same two helpers,
:func:`apply_ops` (edit an archive) and :func:`archive_view` (everything observable about
an archive, as JSON), run in both interpreters: their source is sent to the reference, so
both implementations are asked exactly the same questions. Answers are compared with each
other and with :class:`Model`, a plain-dict model of what the archive should contain.

``test_checked_in_reference_archive_*`` read archives the reference wrote earlier
(``tests/data``, see its README) and need no reference interpreter.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import random
import runpy
import shutil
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c
import pytest

import barecat
from barecat.layout import lookup_table_path
from helpers.globbing import python_glob
from helpers.reference import reference_python

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DATA = TESTS / "data"

Op = tuple[Any, ...]
"""An edit: ("add", path, bytes, meta|None), ("mkdir", path), ("remove", path),
("rename", old, new), ("rmtree", path)."""


# -- helpers that run in both interpreters (their source is sent to the reference) --------


def apply_ops(bcmod: Any, path: str, ops: list[list[Any]], shard_size_limit: Any) -> None:
    """Apply JSON-form edits (bytes as hex) with either implementation's public API."""
    kwargs = {} if shard_size_limit is None else {"shard_size_limit": shard_size_limit}
    with bcmod.Barecat(path, readonly=False, **kwargs) as bc:
        for op, *a in ops:
            if op == "add":
                p, data, meta = a[0], bytes.fromhex(a[1]), a[2]
                if meta is None:
                    bc[p] = data
                else:
                    bc.add(bcmod.BarecatFileInfo(path=p, **meta), data=data)
            elif op == "mkdir":
                bc.mkdir(a[0])
            elif op == "remove":
                bc.remove(a[0])
            elif op == "rename":
                bc.rename(a[0], a[1])
            elif op == "rmtree":
                bc.rmtree(a[0])
            else:
                raise ValueError(op)


def archive_view(
    bcmod: Any, path: str, dirs: list[str], patterns: list[list[Any]]
) -> dict[str, Any]:
    """Everything the tests compare about an archive, as JSON-able data."""
    with bcmod.Barecat(path) as bc:
        files = {}
        for f in bc.index.iter_all_fileinfos():
            files[f.path] = {
                "data": bc[f.path].hex(),
                "shard": f.shard,
                "offset": f.offset,
                "size": f.size,
                "crc32c": f.crc32c,
                "mode": f.mode,
                "uid": f.uid,
                "gid": f.gid,
                "mtime_ns": f.mtime_ns,
            }
        dir_stats = {}
        dir_meta = {}
        for d in bc.index.iter_all_dirinfos():
            dir_stats[d.path] = [d.num_subdirs, d.num_files, d.num_files_tree, d.size_tree]
            dir_meta[d.path] = [d.mode, d.uid, d.gid, d.mtime_ns]
        globs = {}
        for pattern, recursive, hidden in patterns:
            found = bc.glob(pattern, recursive=recursive, include_hidden=hidden)
            globs[f"{pattern} recursive={recursive} hidden={hidden}"] = sorted(found)
        return {
            "files": files,
            "dir_stats": dir_stats,
            "dir_meta": dir_meta,
            "listdir": {d: sorted(bc.listdir(d)) for d in dirs},
            "walk": sorted([p, sorted(ds), sorted(fs)] for p, ds, fs in bc.walk("")),
            "glob": globs,
            "counts": [bc.num_files, bc.num_dirs, bc.total_size],
            "kinds": {p: [bc.isfile(p), bc.isdir(p)] for p in [*dirs, *files]},
            "index_ok": bc.index.verify_integrity(),
            "crc_ok": bc.verify_integrity(),
        }


# -- driving the reference ----------------------------------------------------------------

_MARK = "@@barecat-reference-result@@"


@dataclass
class Reference:
    """The reference barecat 0.3.1, run in its own interpreter."""

    python: str

    def run(self, body: str, *helpers: Callable[..., Any], **args: Any) -> Any:
        """Run ``body`` (which sets ``result``) after ``helpers``; ``args`` is a dict there."""
        script = "\n".join(
            [
                "from __future__ import annotations",
                "import json, sys",
                "import barecat",
                "assert barecat.__version__ == '0.3.1', barecat.__version__",
                "args = json.loads(sys.stdin.read())",
                *(inspect.getsource(h) for h in helpers),
                textwrap.dedent(body),
                f"print({_MARK!r} + json.dumps(result))",
            ]
        )
        proc = subprocess.run(
            [self.python, "-I", "-c", script],
            input=json.dumps(args),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=120,
        )
        assert proc.returncode == 0, f"reference snippet failed:\n{proc.stderr}"
        results = [line for line in proc.stdout.splitlines() if line.startswith(_MARK)]
        return json.loads(results[-1][len(_MARK) :])

    def apply(self, path: str, ops: list[Op], shard_size_limit: int | None = None) -> None:
        self.run(
            "apply_ops(barecat, args['path'], args['ops'], args['limit'])\nresult = None",
            apply_ops,
            path=path,
            ops=ops_to_json(ops),
            limit=shard_size_limit,
        )

    def view(self, path: str, dirs: list[str]) -> dict[str, Any]:
        result: dict[str, Any] = self.run(
            "result = archive_view(barecat, args['path'], args['dirs'], args['patterns'])",
            archive_view,
            path=path,
            dirs=dirs,
            patterns=GLOB_PATTERNS,
        )
        return result

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        exe = Path(self.python).parent / "barecat"
        cmd = [str(exe)] if os.access(exe, os.X_OK) else [self.python, "-I", "-m", "barecat"]
        # No PYTHONPATH & co.: the console script must import the reference, never us.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return subprocess.run(
            [*cmd, *argv],
            env={**env, "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1"},
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=120,
        )

    def assert_verify_ok(self, path: str, num_files: int) -> None:
        proc = self.cli("verify", path)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert f"Verified {num_files} files" in out and "all checksums OK" in out, out


@pytest.fixture(scope="module")
def ref() -> Reference:
    return Reference(reference_python())


# -- our side -----------------------------------------------------------------------------


def ops_to_json(ops: list[Op]) -> list[list[Any]]:
    return [[o[0], o[1], o[2].hex(), o[3]] if o[0] == "add" else list(o) for o in ops]


def our_apply(path: str, ops: list[Op], shard_size_limit: int | None = None) -> None:
    apply_ops(barecat, path, ops_to_json(ops), shard_size_limit)


def our_view(path: str, dirs: list[str]) -> dict[str, Any]:
    view = archive_view(barecat, path, dirs, GLOB_PATTERNS)
    return json.loads(json.dumps(view))  # tuples -> lists, exactly as the reference's


def find_inconsistencies(path: str) -> list[str]:
    with barecat.Barecat(path) as bc:
        return bc.index.find_inconsistencies()


# -- the model: what an archive should hold after a list of edits -------------------------


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _ancestors(path: str) -> Iterator[str]:
    while path:
        path = _parent(path)
        yield path


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


@dataclass
class Model:
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {""})
    meta: dict[str, dict[str, int]] = field(default_factory=dict)

    def apply(self, ops: list[Op]) -> Model:
        for op in ops:
            kind, path = op[0], op[1]
            if kind == "add":
                self.files[path] = op[2]
                if op[3] is not None:
                    self.meta[path] = op[3]
                self.dirs.update(_ancestors(path))
            elif kind == "mkdir":
                self.dirs.add(path)
            elif kind == "remove":
                del self.files[path]
                self.meta.pop(path, None)
            elif kind == "rename" and path in self.files:
                self.files[op[2]] = self.files.pop(path)
                if path in self.meta:
                    self.meta[op[2]] = self.meta.pop(path)
            elif kind == "rename":
                old, new = path, op[2]

                def move(p: str, old: str = old, new: str = new) -> str:
                    return new + p[len(old) :] if _within(p, old) else p

                self.files = {move(p): d for p, d in self.files.items()}
                self.meta = {move(p): m for p, m in self.meta.items()}
                self.dirs = {move(p) for p in self.dirs}
                self.dirs.update(_ancestors(new))
            elif kind == "rmtree":
                self.files = {p: d for p, d in self.files.items() if not _within(p, path)}
                self.meta = {p: m for p, m in self.meta.items() if not _within(p, path)}
                self.dirs = {p for p in self.dirs if not _within(p, path)} | {""}
            else:
                raise ValueError(kind)
        return self

    def children(self, d: str) -> tuple[list[str], list[str]]:
        subdirs = sorted(p.rpartition("/")[2] for p in self.dirs if p and _parent(p) == d)
        files = sorted(p.rpartition("/")[2] for p in self.files if _parent(p) == d)
        return subdirs, files

    def dir_stats(self) -> dict[str, list[int]]:
        stats = {}
        for d in self.dirs:
            subdirs, files = self.children(d)
            tree = [data for p, data in self.files.items() if d == "" or _within(p, d)]
            stats[d] = [len(subdirs), len(files), len(tree), sum(map(len, tree))]
        return stats

    def walk(self) -> list[list[Any]]:
        return sorted([d or ".", *self.children(d)] for d in self.dirs)

    def listdir(self) -> dict[str, list[str]]:
        return {
            d: sorted([*subdirs, *files])
            for d in self.dirs
            for subdirs, files in [self.children(d)]
        }

    def materialize(self, root: Path) -> None:
        for d in self.dirs:
            (root / d).mkdir(parents=True, exist_ok=True)
        for p, data in self.files.items():
            (root / p).write_bytes(data)


def check_against_model(view: dict[str, Any], model: Model) -> None:
    """The view shows exactly the model's files, directories and metadata, all consistent."""
    assert {p: bytes.fromhex(f["data"]) for p, f in view["files"].items()} == model.files
    for p, f in view["files"].items():
        assert f["size"] == len(model.files[p]) and f["crc32c"] == crc32c.crc32c(model.files[p])
    for p, meta in model.meta.items():
        assert {k: view["files"][p][k] for k in meta} == meta, p
    assert view["dir_stats"] == model.dir_stats()
    assert view["listdir"] == model.listdir()
    assert view["walk"] == model.walk()
    total = sum(map(len, model.files.values()))
    assert view["counts"] == [len(model.files), len(model.dirs), total]
    assert all(view["kinds"][p] == [True, False] for p in model.files)
    assert all(view["kinds"][d] == [False, True] for d in model.dirs)
    assert view["index_ok"] is True and view["crc_ok"] is True


def check_same_view(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Both implementations see the same archive the same way (key by key for clear diffs)."""
    assert ours.keys() == theirs.keys()
    for key in ours:
        if key == "glob":
            assert ours[key].keys() == theirs[key].keys()
            for pattern, matches in ours[key].items():
                assert matches == theirs[key][pattern], pattern
        else:
            assert ours[key] == theirs[key], key


# -- the archive the tests build ----------------------------------------------------------


def _add(path: str, data: bytes | int, meta: dict[str, int] | None = None) -> Op:
    """An "add" edit; an int ``data`` means that many pseudo-random bytes seeded by path."""
    if isinstance(data, int):
        data = random.Random(f"{path}:{data}").randbytes(data)
    return ("add", path, data, meta)


SHARD_LIMIT = 256
META_RUN = {"mode": 0o100755, "uid": 1000, "gid": 100, "mtime_ns": 1_600_000_000_123_456_789}
META_RO = {"mode": 0o100444, "uid": 0, "gid": 0, "mtime_ns": 1_234_567_890_000_000_001}
JP_DIR = "ünïcødé/日本語"

BUILD_OPS: list[Op] = [
    _add("README.txt", b"top level readme\n"),
    _add("data/train/cat/0001.jpg", 150),
    _add("data/train/cat/0002.jpg", 90),
    _add("data/train/dog/0001.jpg", 120),
    _add("data/val/empty.bin", b""),
    _add("data/val/notes.txt", b"validation notes\n"),
    ("mkdir", "data/val/empty_sub"),
    _add("data/.hidden/secret.txt", b"s3cr3t"),
    _add(f"{JP_DIR}/ファイル.txt", "こんにちは世界".encode()),
    _add("ünïcødé/emoji_😀.bin", 40),
    _add("deep/a/b/c/d/e/f.txt", b"deep file"),
    _add("with space/file name.txt", b"spaces"),
    ("mkdir", "empty_dir"),
    ("mkdir", "empty_dir/nested_empty"),
    _add("empty_at_root", b""),
    _add("meta/run.sh", b"#!/bin/sh\necho hi\n", META_RUN),
    _add("meta/readonly.txt", 200, META_RO),
    _add("data/train/cat/0003.jpg", 250),
    _add("data/val/empty2.bin", b""),
]

GLOB_PATTERNS: list[list[Any]] = [
    ["*", False, False],
    ["**", True, False],
    ["**", True, True],
    ["data/**", True, False],
    ["data/**", True, True],
    ["**/*.txt", True, False],
    ["**/*.txt", True, True],
    ["**/0001.jpg", True, False],
    ["data/*/*", False, False],
    ["data/train/*/*.jpg", False, False],
    ["data/.*", False, False],
    ["*/*.txt", False, True],
    ["ünïcødé/**/*.txt", True, False],
    ["deep/**/f.txt", True, False],
    ["meta/*.sh", False, False],
    ["**/e*", True, False],
    ["data/train/cat/000[12].jpg", False, False],
    ["data/?al/*", False, False],
    ["nowhere/**", True, False],
]


def built_model() -> Model:
    return Model().apply(BUILD_OPS)


def check_glob_against_python(view: dict[str, Any], model: Model, tmp_path: Path) -> None:
    """Our matches are those of ``glob.glob`` on the extracted tree, spelled as it spells
    them ('d/' for 'd/**', '' for the root)."""
    root = tmp_path / "extracted"
    model.materialize(root)
    for pattern, recursive, hidden in GLOB_PATTERNS:
        expected = python_glob(root, pattern, recursive, hidden)
        got = view["glob"][f"{pattern} recursive={recursive} hidden={hidden}"]
        assert got == expected, pattern


# -- 1. the reference writes, we read -----------------------------------------------------


def test_reference_writes_we_read(ref: Reference, tmp_path: Path) -> None:
    path = str(tmp_path / "by_ref.barecat")
    ref.apply(path, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    model = built_model()
    dirs = sorted(model.dirs)

    ours = our_view(path, dirs)
    check_against_model(ours, model)
    check_same_view(ours, ref.view(path, dirs))
    check_glob_against_python(ours, model, tmp_path)
    assert find_inconsistencies(path) == []

    shards = {f["shard"] for f in ours["files"].values()}
    assert len(shards) >= 4 and shards == set(range(len(shards)))
    assert all(f["offset"] + f["size"] <= SHARD_LIMIT for f in ours["files"].values())
    assert os.path.exists(f"{path}-shard-{len(shards) - 1:05d}")
    assert ours["files"]["meta/run.sh"]["mode"] == 0o100755
    assert ours["dir_stats"]["empty_dir"] == [1, 0, 0, 0]
    with barecat.Barecat(path) as bc:
        assert bc.shard_size_limit == SHARD_LIMIT
        assert all(bc[p] == data for p, data in model.files.items())
        assert (
            bc.read("data/train/cat/0003.jpg", offset=10, size=5)
            == model.files["data/train/cat/0003.jpg"][10:15]
        )
        assert bc.listdir("empty_dir/nested_empty") == []
        assert bc.isdir("data/val/empty_sub") and bc["data/val/empty.bin"] == b""


# -- 2. we write, the reference reads -----------------------------------------------------


def test_we_write_reference_reads(ref: Reference, tmp_path: Path) -> None:
    path = str(tmp_path / "by_us.barecat")
    our_apply(path, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    model = built_model()
    dirs = sorted(model.dirs)

    theirs = ref.view(path, dirs)
    check_against_model(theirs, model)  # includes the reference's own verify_integrity()s
    check_same_view(our_view(path, dirs), theirs)
    assert len({f["shard"] for f in theirs["files"].values()}) >= 4
    ref.assert_verify_ok(path, len(model.files))
    index_ok = ref.run(
        "with barecat.Barecat(args['path']) as bc:\n"
        "    result = [bc.index.verify_integrity(), bc.shard_size_limit]",
        path=path,
    )
    assert index_ok == [True, SHARD_LIMIT]


def test_same_edits_give_the_same_bytes_on_disk(ref: Reference, tmp_path: Path) -> None:
    """Placement (shard rotation, offsets, empty files) follows the reference exactly."""
    ours, theirs = str(tmp_path / "ours.barecat"), str(tmp_path / "theirs.barecat")
    our_apply(ours, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    ref.apply(theirs, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    dirs = sorted(built_model().dirs)
    layout_keys = ("shard", "offset", "size", "crc32c", "mode", "uid", "gid", "mtime_ns")

    def layout(view: dict[str, Any]) -> dict[str, list[Any]]:
        return {p: [f[k] for k in layout_keys] for p, f in view["files"].items()}

    assert layout(our_view(ours, dirs)) == layout(our_view(theirs, dirs))
    shard_names = sorted(n for n in os.listdir(tmp_path) if n.startswith("ours.barecat-shard-"))
    assert shard_names == sorted(
        n.replace("theirs", "ours") for n in os.listdir(tmp_path) if "theirs.barecat-shard" in n
    )
    for name in shard_names:
        mine = (tmp_path / name).read_bytes()
        assert mine == (tmp_path / name.replace("ours", "theirs")).read_bytes(), name


# -- 3. mixed editing ---------------------------------------------------------------------

REF_EDITS: list[Op] = [
    _add("data/train/cat/0004.jpg", 100),
    _add("data/test/new.txt", b"made by the reference"),
    ("remove", "data/train/cat/0001.jpg"),
    ("rename", "README.txt", "meta/README.txt"),
    ("rename", "data/train", "data/training"),
    ("rename", JP_DIR, "deep/日本語"),
    ("rename", "meta/readonly.txt", "meta/ro.txt"),
    ("mkdir", "data/val/empty_sub/by_ref"),
    _add("data/val/empty_sub/by_ref/x.bin", 30),
]
OUR_EDITS_AFTER_REF: list[Op] = [
    _add("after/ours.bin", 60),
    _add("data/training/dog/0002.jpg", 200),
    ("remove", "data/test/new.txt"),
]


def test_reference_edits_our_archive(ref: Reference, tmp_path: Path) -> None:
    path = str(tmp_path / "ours_edited_by_ref.barecat")
    our_apply(path, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    assert os.path.exists(lookup_table_path(path))  # our writer left a lookup table ...
    ref.apply(path, REF_EDITS)
    model = built_model().apply(REF_EDITS)
    dirs = sorted(model.dirs)
    with barecat.Barecat(path) as bc:  # ... which no longer matches, so it is not used
        assert bc.index.lookup_table_size is None

    assert find_inconsistencies(path) == []
    ours = our_view(path, dirs)
    check_against_model(ours, model)
    check_same_view(ours, ref.view(path, dirs))
    assert ours["files"]["meta/ro.txt"]["mode"] == META_RO["mode"]  # rename keeps metadata
    assert ours["dir_stats"]["data/training"] == [2, 0, 4, 90 + 120 + 250 + 100]

    # ... and we carry on appending after the reference's bytes, which it then accepts.
    our_apply(path, OUR_EDITS_AFTER_REF)
    model.apply(OUR_EDITS_AFTER_REF)
    dirs = sorted(model.dirs)
    assert find_inconsistencies(path) == []
    theirs = ref.view(path, dirs)
    check_against_model(theirs, model)
    check_same_view(our_view(path, dirs), theirs)
    ref.assert_verify_ok(path, len(model.files))


OUR_EDITS: list[Op] = [
    _add("data/val/extra.bin", 130),
    ("remove", "data/val/notes.txt"),
    ("rename", "data", "dataset"),
    ("rmtree", "deep/a/b"),
    ("rmtree", "empty_dir"),
    ("rename", "meta/run.sh", "meta/run2.sh"),
    ("mkdir", "dataset/new_empty"),
    _add("dataset/train/cat/0005.jpg", 70),
    ("rmtree", "dataset/train/dog"),
]
REF_EDITS_AFTER_US: list[Op] = [
    _add("dataset/new_empty/by_ref.bin", 90),
    ("remove", "empty_at_root"),
    ("rename", "dataset/val", "dataset/validation"),
]


def test_we_edit_reference_archive(ref: Reference, tmp_path: Path) -> None:
    path = str(tmp_path / "ref_edited_by_us.barecat")
    ref.apply(path, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    our_apply(path, OUR_EDITS)
    model = built_model().apply(OUR_EDITS)
    dirs = sorted(model.dirs)

    assert find_inconsistencies(path) == []
    ref.assert_verify_ok(path, len(model.files))
    theirs = ref.view(path, dirs)  # includes the reference's index.verify_integrity()
    check_against_model(theirs, model)
    check_same_view(our_view(path, dirs), theirs)
    assert theirs["files"]["meta/run2.sh"]["mode"] == META_RUN["mode"]
    assert theirs["dir_stats"]["deep/a"] == [0, 0, 0, 0]
    assert "empty_dir" not in theirs["dir_stats"]

    # ... and the reference carries on after our bytes; we read its result.
    ref.apply(path, REF_EDITS_AFTER_US)
    model.apply(REF_EDITS_AFTER_US)
    dirs = sorted(model.dirs)
    assert find_inconsistencies(path) == []
    ours = our_view(path, dirs)
    check_against_model(ours, model)
    check_same_view(ours, ref.view(path, dirs))


# -- 4. old index naming (NAME-sqlite-index) ----------------------------------------------


def test_old_index_naming_survives_our_writes(ref: Reference, tmp_path: Path) -> None:
    base = str(tmp_path / "old")
    ref.apply(base, BUILD_OPS[:8], shard_size_limit=SHARD_LIMIT)
    os.rename(base, base + "-sqlite-index")
    model = Model().apply(BUILD_OPS[:8])
    dirs = sorted(model.dirs)
    check_against_model(our_view(base, dirs), model)
    check_against_model(our_view(base + "-sqlite-index", dirs), model)

    edits: list[Op] = [
        _add("data/new.bin", 100),
        ("remove", "README.txt"),
        ("rename", "data/train", "data/t"),
    ]
    our_apply(base, edits)
    model.apply(edits)
    dirs = sorted(model.dirs)
    on_disk = sorted(os.listdir(tmp_path))
    assert not os.path.exists(base)
    assert on_disk[-1] == "old-sqlite-index" and all(
        n.startswith("old-shard-0000") for n in on_disk[:-1]
    ), on_disk
    assert find_inconsistencies(base) == []

    theirs = ref.view(base, dirs)
    check_against_model(theirs, model)
    check_same_view(our_view(base, dirs), theirs)
    ref.assert_verify_ok(base, len(model.files))


# -- 4b. empty archives and empty files ---------------------------------------------------

# What the reference sees of an archive: its files and bytes, the CRC check, '**'.
REF_LOOK = """
with barecat.Barecat(args['path']) as bc:
    result = [
        {p: bc[p].hex() for p in sorted(bc.index.iter_all_filepaths())},
        bc.verify_integrity(),
        bc.glob('**', recursive=True),
    ]
"""

# The reference adds files (path -> hex) to an archive, creating it if missing.
REF_ADD = """
with barecat.Barecat(args['path'], readonly=False) as bc:
    for p, data in args['files'].items():
        bc[p] = bytes.fromhex(data)
result = None
"""


def our_look(path: str) -> list[Any]:
    with barecat.Barecat(path) as bc:
        files = {p: bc[p].hex() for p in sorted(bc.index.iter_all_filepaths())}
        return [files, bc.verify_integrity(), bc.glob("**", recursive=True)]


@pytest.mark.parametrize("old_naming", [False, True])
def test_empty_archive_made_by_us_opens_in_the_reference(
    ref: Reference, tmp_path: Path, old_naming: bool
) -> None:
    base = str(tmp_path / "empty")
    with barecat.Barecat(base, readonly=False):
        pass
    assert os.path.getsize(f"{base}-shard-00000") == 0  # made, as 0.3.1 makes it
    if old_naming:
        os.rename(base, base + "-sqlite-index")
    assert ref.run(REF_LOOK, path=base) == [{}, True, [""]]
    ref.run(REF_ADD, path=base, files={"a.txt": b"by ref".hex(), "empty": ""})
    expected = {"a.txt": b"by ref".hex(), "empty": ""}
    assert our_look(base) == [expected, True, ["", "a.txt", "empty"]]
    assert os.path.exists(base + "-sqlite-index") == old_naming


@pytest.mark.parametrize("old_naming", [False, True])
def test_empty_archive_made_by_the_reference_takes_our_empty_file(
    ref: Reference, tmp_path: Path, old_naming: bool
) -> None:
    base = str(tmp_path / "empty")
    ref.run(REF_ADD, path=base, files={})
    if old_naming:
        os.rename(base, base + "-sqlite-index")
    assert our_look(base) == [{}, True, [""]]
    with barecat.Barecat(base, readonly=False) as bc, bc.open("nothing.txt", "wb"):
        pass  # an empty file: no byte is written anywhere
    assert ref.run(REF_LOOK, path=base) == [{"nothing.txt": ""}, True, ["", "nothing.txt"]]
    assert our_look(base) == [{"nothing.txt": ""}, True, ["", "nothing.txt"]]
    assert ref.cli("verify", base).returncode == 0


def test_archive_made_by_the_reference_takes_our_empty_file(ref: Reference, tmp_path: Path) -> None:
    path = str(tmp_path / "by_ref.barecat")
    ref.apply(path, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    model = built_model()
    with barecat.Barecat(path, readonly=False) as bc:
        with bc.open("data/made_empty.txt", "wb"):
            pass
        with bc.open("README.txt", "wb"):
            pass  # truncated to nothing
        with bc.open("data/val/notes.txt", "r+b") as f:
            f.read()  # read, unchanged: stays where it is
    model.files["data/made_empty.txt"] = b""
    model.files["README.txt"] = b""
    theirs = ref.view(path, sorted(model.dirs))
    assert {p: bytes.fromhex(f["data"]) for p, f in theirs["files"].items()} == model.files
    ref.assert_verify_ok(path, len(model.files))


def test_archive_of_ours_without_a_first_shard(ref: Reference, tmp_path: Path) -> None:
    """Archives without bytes made before this version have no shard file: they read
    (an empty file needs no shard), and the next writer makes shard 0, so that the
    reference opens them too. A missing shard that files' bytes are in stays an error."""
    path = str(tmp_path / "old_empty.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc["e"] = b""
    os.remove(f"{path}-shard-00000")
    assert our_look(path) == [{"e": ""}, True, ["", "e"]]
    with barecat.Barecat(path) as bc, bc.open("e", "rb") as f:
        assert f.read() == b"" and bc.read("e") == b"" and bc.get_many(["e"]) == [b""]
    assert not os.path.exists(f"{path}-shard-00000")  # readers change nothing
    with barecat.Barecat(path, readonly=False):
        pass
    assert os.path.getsize(f"{path}-shard-00000") == 0
    assert ref.run(REF_LOOK, path=path) == [{"e": ""}, True, ["", "e"]]

    ref.run(REF_ADD, path=path, files={"x": b"bytes".hex()})
    os.remove(f"{path}-shard-00000")
    with barecat.Barecat(path) as bc:
        with pytest.raises(barecat.BarecatIntegrityError, match="shard-00000 is missing"):
            bc["x"]
        assert bc["e"] == b""
    with barecat.Barecat(path, readonly=False):
        pass
    assert not os.path.exists(f"{path}-shard-00000")  # not made to look like it was there


# -- 5. corruption ------------------------------------------------------------------------


def test_corruption_is_caught_by_both(ref: Reference, tmp_path: Path) -> None:
    path = str(tmp_path / "corrupt.barecat")
    our_apply(path, BUILD_OPS, shard_size_limit=SHARD_LIMIT)
    victim = "data/train/dog/0001.jpg"
    with barecat.Barecat(path) as bc:
        info = bc.index.lookup_file(victim)
    assert info.shard > 0 and info.size == 120
    with open(f"{path}-shard-{info.shard:05d}", "r+b") as f:
        f.seek(info.offset + 60)
        byte = f.read(1)
        f.seek(info.offset + 60)
        f.write(bytes([byte[0] ^ 0xFF]))

    model = built_model()
    with barecat.Barecat(path) as bc:
        with pytest.raises(barecat.BarecatIntegrityError):
            bc[victim]
        assert all(bc[p] == d for p, d in model.files.items() if p != victim)
        assert not bc.verify_integrity()

    proc = ref.cli("verify", path)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert victim in proc.stdout + proc.stderr
    seen = ref.run(
        """
        with barecat.Barecat(args['path']) as bc:
            try:
                bc[args['victim']]
                error = None
            except Exception as e:
                error = type(e).__name__
            result = [error, bc.verify_integrity()]
        """,
        path=path,
        victim=victim,
    )
    assert seen[0] is not None and seen[1] is False


# -- archives the reference wrote earlier (tests/data); no reference interpreter needed -----

_GEN: dict[str, Any] = runpy.run_path(str(DATA / "make_ref_archives.py"))


def _checked_in(name: str) -> tuple[str, Model, int | None]:
    g = _GEN
    if name == "small":
        model = Model().apply(
            [
                ("add", p, d, g["META"] if p == g["SMALL_META_PATH"] else None)
                for p, d in g["SMALL_FILES"].items()
            ]
            + [("mkdir", d) for d in g["SMALL_EMPTY_DIRS"]]
        )
        return "ref031-small.barecat", model, None
    if name == "sharded":
        model = Model().apply([("add", p, d, None) for p, d in g["SHARDED_ADDED"].items()])
        model.apply([("remove", g["SHARDED_REMOVED"]), ("rename", *g["SHARDED_RENAMED"])])
        assert model.files == g["sharded_final"]()
        return "ref031-sharded.barecat", model, g["SHARDED_LIMIT"]
    model = Model().apply([("add", p, d, None) for p, d in g["OLD_FILES"].items()])
    return "ref031-oldnaming", model, None


@pytest.mark.parametrize("name", ["small", "sharded", "oldnaming"])
def test_checked_in_reference_archive_reads(name: str) -> None:
    archive, model, limit = _checked_in(name)
    path = str(DATA / archive)
    view = our_view(path, sorted(model.dirs))
    check_against_model(view, model)
    assert find_inconsistencies(path) == []
    with barecat.Barecat(path) as bc:
        if limit is not None:
            assert bc.shard_size_limit == limit
    files = view["files"]
    if name == "small":
        assert files["meta/tool.sh"]["mode"] == 0o100750
        assert view["dir_stats"]["empty_dir"] == [1, 0, 0, 0]
        assert {f["shard"] for f in files.values()} == {0}
    elif name == "sharded":
        assert {f["shard"] for f in files.values()} == set(range(6))
        assert (files["s/0/f0.bin"]["offset"], files["s/0/f2.bin"]["offset"]) == (0, 23)  # hole
        assert all(f["offset"] + f["size"] <= 64 for f in files.values())
    else:
        assert os.path.isfile(path + "-sqlite-index") and not os.path.exists(path)


@pytest.mark.parametrize("name", ["small", "sharded", "oldnaming"])
def test_checked_in_reference_archive_accepts_our_edits(name: str, tmp_path: Path) -> None:
    archive, model, _ = _checked_in(name)
    for src in DATA.iterdir():
        if src.name.startswith(archive):
            shutil.copy(src, tmp_path / src.name)
    path = str(tmp_path / archive)
    first_dir = sorted(d for d in model.dirs if d)[0]
    edits: list[Op] = [
        _add("added/by/us.bin", 40),
        ("remove", sorted(model.files)[0]),
        ("rename", first_dir, first_dir + "_renamed"),
    ]
    our_apply(path, edits)
    model.apply(edits)
    assert find_inconsistencies(path) == []
    check_against_model(our_view(path, sorted(model.dirs)), model)
    before = {n for n in os.listdir(DATA) if n.startswith(archive)}
    after = set(os.listdir(tmp_path))
    assert before <= after
    assert all(n.startswith(archive + "-shard-") for n in after - before), after - before
    if name == "oldnaming":
        assert not os.path.exists(path)  # still only 'ref031-oldnaming-sqlite-index'


def _sample_tar(path: Path) -> dict[str, bytes]:
    files = {f"d{i % 3}/f{i:02d}.bin": os.urandom(100 + 997 * i) for i in range(12)}
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o640, 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return files


READ_ALL = (
    "with barecat.Barecat(args['path']) as bc:\n"
    "    result = {p: bc[p].hex() for p in bc.index.iter_all_filepaths()}"
)


def test_conversions_interchange(ref: Reference, tmp_path: Path) -> None:
    """A tar converted (or wrapped) by either implementation is read by the other."""
    files = _sample_tar(tmp_path / "in.tar")
    expected = {p: d.hex() for p, d in files.items()}
    proc = ref.cli("convert", str(tmp_path / "in.tar"), str(tmp_path / "by_ref.barecat"))
    assert proc.returncode == 0, proc.stderr
    with barecat.Barecat(str(tmp_path / "by_ref.barecat")) as bc:
        assert {p: bc[p].hex() for p in bc} == expected
    ours = str(tmp_path / "by_us.barecat")
    barecat.archive2barecat(str(tmp_path / "in.tar"), ours)
    assert ref.run(READ_ALL, path=ours) == expected
    ref.assert_verify_ok(ours, len(files))
    wrapped = str(tmp_path / "wrapped.barecat")
    barecat.transfer.wrap_archive(str(tmp_path / "in.tar"), wrapped)
    assert ref.run(READ_ALL, path=wrapped) == expected
    ref.assert_verify_ok(wrapped, len(files))
    proc = ref.cli("convert", ours, str(tmp_path / "by_ref.tar"))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(tmp_path / "by_ref.tar") as tar:
        assert {m.name: tar.extractfile(m).read().hex() for m in tar if m.isfile()} == expected  # type: ignore[union-attr]


# -- 6. one side's maintenance commands on the other side's archive -----------------------

HOLES: list[Op] = [("remove", "data/train/cat/0002.jpg"), ("remove", "meta/readonly.txt")]
"""Removals that leave holes in the shards, so defrag has work to do."""


def _our_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "barecat", *argv], capture_output=True, text=True, timeout=120
    )


# barecat 0.3.1's own `defrag --smart` never finishes on an archive with empty files, even
# one it made itself; so only we run --smart, on the archive the reference made.
@pytest.mark.parametrize(
    ("maker", "command"),
    [
        *(("ours", c) for c in ["defrag", "reshard", "subset", "merge"]),
        *(("reference", c) for c in ["defrag", "defrag --smart", "reshard", "subset", "merge"]),
    ],
)
@pytest.mark.slow
def test_maintenance_by_one_side_on_the_others_archive(
    ref: Reference, tmp_path: Path, maker: str, command: str
) -> None:
    """An archive with holes made by one implementation is defragmented, resharded, cut to
    a subset or merged by the other's command line; both then read every file and verify."""
    archive, other = str(tmp_path / "a.barecat"), str(tmp_path / "b.barecat")
    other_ops: list[Op] = [_add("other/x.bin", 200), _add("other/y.txt", b"why")]
    for path, ops in ((archive, [*BUILD_OPS, *HOLES]), (other, other_ops)):
        if maker == "ours":
            our_apply(path, ops, shard_size_limit=SHARD_LIMIT)
        else:
            ref.apply(path, ops, shard_size_limit=SHARD_LIMIT)
    expected = Model().apply([*BUILD_OPS, *HOLES]).files
    result = archive
    out = str(tmp_path / "out.barecat")
    argv = {
        "defrag": ["defrag", archive],
        "defrag --smart": ["defrag", "--smart", archive],
        "reshard": ["reshard", "-s", "1000", archive],
        "subset": ["subset", "-o", out, "--pattern", "data/**", archive],
        "merge": ["merge", "-o", out, archive, other],
    }[command]
    if command == "subset":
        result, expected = out, {p: d for p, d in expected.items() if p.startswith("data/")}
    elif command == "merge":
        result, expected = out, {**expected, **Model().apply(other_ops).files}
    proc = ref.cli(*argv) if maker == "ours" else _our_cli(*argv)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    hexed = {p: d.hex() for p, d in expected.items()}
    assert ref.run(READ_ALL, path=result) == hexed
    with barecat.Barecat(result) as bc:
        assert {p: bc[p].hex() for p in bc.index.iter_all_filepaths()} == hexed
        assert bc.verify_integrity() and bc.index.verify_integrity()
    ref.assert_verify_ok(result, len(expected))
    if command.startswith("defrag"):  # the holes are gone
        with barecat.Barecat(result) as bc:
            assert bc.total_physical_size_seek == sum(map(len, expected.values()))


CODEC_VALUES: dict[str, Any] = {
    "a.json": {"k": [1, 2], "s": "ž"},
    "b.json.gz": [1, "x", None],
    "c.pkl.xz": {"t": [1, 2], "f": 0.5},
    "d.json.bz2": "just a string",
    "e.pickle.gz": [True, False],
}

REF_WRITES_CODECS = """
from barecat import DecodedView
with barecat.Barecat(args['path'], readonly=False) as bc:
    dec = DecodedView(bc)
    for name, value in args['values'].items():
        dec[name] = value
result = None
"""

REF_READS_CODECS = """
from barecat import DecodedView
with barecat.Barecat(args['path']) as bc:
    dec = DecodedView(bc)
    result = {name: dec[name] for name in args['names']}
"""


def test_decoded_view_files_interchange(ref: Reference, tmp_path: Path) -> None:
    """JSON, pickle and the compression layers written through either DecodedView read
    back through the other."""
    ours = str(tmp_path / "ours.barecat")
    with barecat.Barecat(ours, readonly=False) as bc:
        dec = barecat.DecodedView(bc)
        for name, value in CODEC_VALUES.items():
            dec[name] = value
    assert ref.run(REF_READS_CODECS, path=ours, names=list(CODEC_VALUES)) == CODEC_VALUES
    theirs = str(tmp_path / "theirs.barecat")
    ref.run(REF_WRITES_CODECS, path=theirs, values=CODEC_VALUES)
    with barecat.Barecat(theirs) as bc:
        dec = barecat.DecodedView(bc, allow_pickle=True)
        assert {name: dec[name] for name in CODEC_VALUES} == CODEC_VALUES


NUMPY_CODECS = """
import numpy as np
from barecat import DecodedView
if args['write']:
    with barecat.Barecat(args['path'], readonly=False) as bc:
        dec = DecodedView(bc)
        dec['a.msgpack'] = {'x': np.arange(6, dtype=np.int16).reshape(2, 3),
                            's': np.float32(2.5), 'l': [1, 'a']}
        dec['b.npy.gz'] = np.eye(3, dtype=np.float32)
        dec['c.npz'] = {'k': np.arange(4, dtype=np.uint8)}
    result = None
else:
    with barecat.Barecat(args['path']) as bc:
        dec = DecodedView(bc)
        m = dec['a.msgpack']
        result = [m['x'].tolist(), str(m['x'].dtype), float(m['s']), str(type(m['s']).__name__),
                  m['l'], dec['b.npy.gz'].tolist(), dec['c.npz']['k'].tolist()]
"""


def _numpy_view(path: str) -> list[Any]:
    import numpy as np

    with barecat.Barecat(path) as bc:
        dec = barecat.DecodedView(bc)
        m = dec["a.msgpack"]
        assert isinstance(m["x"], np.ndarray)
        return [m["x"].tolist(), str(m["x"].dtype), float(m["s"]), type(m["s"]).__name__,
                m["l"], dec["b.npy.gz"].tolist(), dec["c.npz"]["k"].tolist()]  # fmt: skip


def test_numpy_codec_files_interchange(ref: Reference, tmp_path: Path) -> None:
    """.msgpack with NumPy inside (msgpack-numpy's layout), .npy and .npz written by
    either DecodedView read back identically through the other."""
    np = pytest.importorskip("numpy")
    expected = [[[0, 1, 2], [3, 4, 5]], "int16", 2.5, "float32", [1, "a"],
                np.eye(3).tolist(), [0, 1, 2, 3]]  # fmt: skip
    theirs = str(tmp_path / "theirs.barecat")
    ref.run(NUMPY_CODECS, path=theirs, write=True)
    assert _numpy_view(theirs) == expected
    ours = str(tmp_path / "ours.barecat")
    with barecat.Barecat(ours, readonly=False) as bc:
        dec = barecat.DecodedView(bc)
        dec["a.msgpack"] = {"x": np.arange(6, dtype=np.int16).reshape(2, 3),
                            "s": np.float32(2.5), "l": [1, "a"]}  # fmt: skip
        dec["b.npy.gz"] = np.eye(3, dtype=np.float32)
        dec["c.npz"] = {"k": np.arange(4, dtype=np.uint8)}
    assert ref.run(NUMPY_CODECS, path=ours, write=False) == expected
