"""Property tests: paths, glob and walk against the standard library, and a stateful model.

Every reference here is independent of the implementation: path normalization is checked
against a small stack model (and ``posixpath.normpath``), ``glob``/``walk`` against
Python's own ``glob.glob`` and ``os.walk`` on the same tree extracted to disk, and the
read/write API against a plain ``{path: bytes}`` dict plus a set of directories.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

import barecat
from barecat import (
    DirectoryNotEmptyBarecatError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    PathTypeBarecatError,
)
from barecat.index import deferred_stats
from barecat.paths import normalize, normalize_many
from helpers.globbing import python_glob

pytestmark = pytest.mark.slow

HAS_INCLUDE_HIDDEN = sys.version_info >= (3, 11)

# A tree maps a name to bytes (a file) or to another tree (a directory, maybe empty).
Tree = dict[str, Any]


@contextlib.contextmanager
def _tempdir() -> Iterator[str]:
    """A fresh directory per Hypothesis example (function-scoped fixtures are shared)."""
    path = tempfile.mkdtemp(prefix="barecat-prop-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _ancestors(path: str) -> list[str]:
    """Proper ancestors of a normalized path, root '' included (model side, no barecat)."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts) - 1, -1, -1)]


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _within(path: str, directory: str) -> bool:
    return directory == "" or path == directory or path.startswith(directory + "/")


# ---------------------------------------------------------------------------------------
# 1. Path normalization
# ---------------------------------------------------------------------------------------


def _model_normalize(path: str) -> str | None:
    """Expected canonical form, or None when the path must be refused."""
    if "\x00" in path or any("\ud800" <= c <= "\udfff" for c in path):
        return None  # NUL, or a name that is not UTF-8 (os.fsdecode's surrogates)
    stack: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return None  # climbs above the archive root
            stack.pop()
        else:
            stack.append(part)
    return "/".join(stack)


_PATH_PARTS = st.sampled_from(
    ["", ".", "..", "a", ".h", "...", "..a", "a..", "b.", "a\x00", "caf\u00e9", "b\udcff"]
)
_RAW_PATHS = st.builds(
    lambda parts, lead, trail: ("/" if lead else "") + "/".join(parts) + ("/" if trail else ""),
    st.lists(_PATH_PARTS, max_size=7),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=1500, deadline=None)
@given(_RAW_PATHS)
def test_normalize_matches_model(path: str) -> None:
    expected = _model_normalize(path)
    if expected is None:
        if "\x00" not in path and "\udcff" not in path:  # the model agrees with posixpath
            assert posixpath.normpath(path.lstrip("/")).split("/")[0] == ".."
        with pytest.raises(InvalidPathBarecatError):
            normalize(path)
        with pytest.raises(PathTypeBarecatError):
            normalize(path.encode("utf-8", "surrogateescape"))
        return
    got = normalize(path)
    assert got == expected
    # Cross-check the model against posixpath for paths that do not climb.
    norm = posixpath.normpath("/" + path).strip("/")
    assert got == ("" if norm == "." else norm)
    assert not got.startswith("/") and not got.endswith("/")
    assert all(part not in ("", ".", "..") for part in got.split("/")) or got == ""
    assert normalize(got) == got  # idempotent, including the fast path
    with pytest.raises(PathTypeBarecatError):  # bytes are not paths (as in the reference)
        normalize(path.encode())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.sampled_from(["\udc80", "\udcff", "\ud800"]), st.text(max_size=20))
def test_text_with_lone_surrogates_is_never_a_path(before: str, lone: str, after: str) -> None:
    path = before + lone + after  # what os.fsdecode makes of bytes that are not UTF-8
    with pytest.raises(InvalidPathBarecatError):
        normalize(path)
    with pytest.raises(InvalidPathBarecatError):
        normalize_many(["fine", path])


_BATCH_PARTS = st.sampled_from(["a", ".h", "b.", "..a", "x\ny", "\n", ".", "..", "", "\udcff"])
_BATCH_PATHS = st.lists(
    st.builds(lambda parts: "/".join(parts), st.lists(_BATCH_PARTS, min_size=1, max_size=4)),
    max_size=6,
)


@settings(max_examples=800, deadline=None)
@given(_BATCH_PATHS)
def test_normalize_many_matches_normalize(paths: list[str]) -> None:
    """The batch form's shortcut (substring tests over the joined batch, where a newline
    in a name could confuse line-based checks) gives exactly what one-by-one does."""
    try:
        expected = [normalize(p) for p in paths]
    except InvalidPathBarecatError:
        with pytest.raises(InvalidPathBarecatError):
            normalize_many(paths)
        return
    got = normalize_many(paths)
    assert got == expected
    if got is paths:  # the shortcut may only be taken when nothing needed work
        assert all(p == normalize(p) and p for p in paths)


def test_normalize_examples() -> None:
    assert normalize("/x//y/./z/") == "x/y/z"
    assert normalize("a/..") == ""
    assert normalize("...") == "..."
    assert normalize("a/..b") == "a/..b"
    for bad in ["..", "/..", "a/../..", "./../a", "a/\x00"]:
        with pytest.raises(InvalidPathBarecatError):
            normalize(bad)


# ---------------------------------------------------------------------------------------
# Trees materialized both on disk and in an archive
# ---------------------------------------------------------------------------------------

NAMES = ["a", "b", "ab", "a.txt", "b.txt", ".x", ".a.txt"]

_nodes = st.recursive(
    st.binary(max_size=4),
    lambda children: st.dictionaries(st.sampled_from(NAMES), children, max_size=4),
    max_leaves=14,
)
TREES = st.dictionaries(st.sampled_from(NAMES), _nodes, max_size=5)


def _flatten(tree: Tree, prefix: str = "") -> tuple[dict[str, bytes], set[str]]:
    """(files {path: bytes}, directories) of a tree; the root '' is not listed."""
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for name, node in tree.items():
        path = f"{prefix}{name}"
        if isinstance(node, bytes):
            files[path] = node
        else:
            dirs.add(path)
            sub_files, sub_dirs = _flatten(node, path + "/")
            files.update(sub_files)
            dirs |= sub_dirs
    return files, dirs


@contextlib.contextmanager
def _materialized(tree: Tree) -> Iterator[tuple[str, barecat.Barecat, dict[str, bytes], set[str]]]:
    """Yield (disk root, read-only archive, files, dirs) holding the same tree."""
    files, dirs = _flatten(tree)
    with _tempdir() as tmp:
        root = os.path.join(tmp, "tree")
        os.mkdir(root)
        for d in sorted(dirs):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        for p, data in files.items():
            with open(os.path.join(root, p), "wb") as f:
                f.write(data)
        archive = os.path.join(tmp, "t.barecat")
        with barecat.Barecat(archive, readonly=False) as bc:
            # Files first, so most directories come into being implicitly; then every
            # directory is declared with makedirs(exist_ok=True), which adds the empty ones.
            for p, data in sorted(files.items()):
                bc[p] = data
            for d in sorted(dirs):
                bc.makedirs(d, exist_ok=True)
        with barecat.Barecat(archive) as bc:
            assert set(bc.files()) == set(files)
            assert set(bc.dirs()) == dirs | {""}
            yield root, bc, files, dirs


# ---------------------------------------------------------------------------------------
# 2. glob against glob.glob
# ---------------------------------------------------------------------------------------

PATTERN_PARTS = [*NAMES, "*", "?", "*.txt", "[ab]", "[!a]*", ".*", "**", "a*", "*b", "zz"]

_patterns = st.builds(
    lambda parts, trail: "/".join(parts) + ("/" if trail else ""),
    st.lists(st.sampled_from(PATTERN_PARTS), min_size=1, max_size=4).filter(
        lambda parts: parts.count("**") <= 2
    ),
    st.booleans(),
)


_FLAG_COMBOS = [(r, h) for r in (False, True) for h in (False, True) if HAS_INCLUDE_HIDDEN or not h]


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(TREES, st.lists(_patterns, min_size=1, max_size=8, unique=True))
def test_glob_matches_python_glob(tree: Tree, patterns: list[str]) -> None:
    with _materialized(tree) as (root, bc, files, _dirs):
        for pattern in patterns:
            for recursive, include_hidden in _FLAG_COMBOS:
                expected = python_glob(root, pattern, recursive, include_hidden)
                got = bc.glob(pattern, recursive=recursive, include_hidden=include_hidden)
                where = (pattern, recursive, include_hidden)
                assert got == expected, where  # sorted, each once, spelled as glob.glob does
                assert list(bc.iglob(pattern, recursive, include_hidden)) == expected, where
                got_files = bc.globfiles(
                    pattern, recursive=recursive, include_hidden=include_hidden
                )
                assert got_files == [p for p in expected if p in files], where
                entries = bc.index.listing.glob_entries(pattern, recursive, include_hidden)
                assert entries == sorted({p.rstrip("/") for p in expected} - {""}), where


def test_recursive_glob_of_a_name_pattern() -> None:
    """``**/NAME`` and ``base/**/NAME`` (SQL keeps paths ending in NAME or '/NAME'; the
    last name is settled in Python): NAME's characters elsewhere in the path, '/' inside
    what SQLite's '*' spans, hidden directories and names, matches at the root."""
    tree: Tree = {
        "1a.jpg": b"",
        "x1.jpg": b"",
        "d1": {"1b.jpg": b"", "21.jpg": b"", "1c": {"x.jpg": b"", "1d.jpg": b""}},
        ".h": {"1e.jpg": b"", "1h": {"1i.jpg": b""}},
        "e": {".1f.jpg": b"", "1g.jpg": {"1j.jpg": b""}},
    }
    patterns = ["**/1*.jpg", "d1/**/1*.jpg", "e/**/1*", "**/1?.jpg", "**/1*/", "**/.1*", "**/1c"]
    with _materialized(tree) as (root, bc, files, _dirs):
        for pattern in patterns:
            for recursive, include_hidden in _FLAG_COMBOS:
                expected = python_glob(root, pattern, recursive, include_hidden)
                got = bc.glob(pattern, recursive=recursive, include_hidden=include_hidden)
                assert got == expected, (pattern, recursive, include_hidden)
                got_files = bc.globfiles(pattern, recursive, include_hidden)
                assert got_files == [p for p in expected if p in files]
        assert bc.glob("**/1*.jpg", recursive=True) == [
            "1a.jpg", "d1/1b.jpg", "d1/1c/1d.jpg", "e/1g.jpg", "e/1g.jpg/1j.jpg"
        ]  # fmt: skip


def test_glob_examples() -> None:
    """A few hand-picked cases that the property covers, spelled out for readability."""
    tree: Tree = {"a": {".x": b"1", "b.txt": b"2", "ab": {}}, ".x": {"a": b""}, "a.txt": b""}
    with _materialized(tree) as (root, bc, _files, _dirs):
        for pattern in ["**", "**/", "a/**", "*/*", ".*/*", "a/.x", "**/a", "a.txt/**", "*.txt"]:
            for recursive, include_hidden in _FLAG_COMBOS:
                expected = python_glob(root, pattern, recursive, include_hidden)
                got = bc.glob(pattern, recursive=recursive, include_hidden=include_hidden)
                assert got == expected, (pattern, recursive, include_hidden)
        # The root first, as glob.glob(root + '/**') yields root + '/'.
        assert bc.glob("**", recursive=True) == ["", "a", "a.txt", "a/ab", "a/b.txt"]
        assert bc.glob("**/", recursive=True) == ["", "a/", "a/ab/"]
        # A directory reached with nothing left for the trailing '**' is spelled 'd/'.
        assert bc.glob("a/**", recursive=True) == ["a/", "a/ab", "a/b.txt"]
        assert bc.glob("*/**", recursive=True) == ["a/", "a/ab", "a/b.txt"]
        assert bc.glob("**/**", recursive=True) == [
            "",
            "a",
            "a.txt",
            "a/",
            "a/ab",
            "a/ab/",
            "a/b.txt",
        ]
        assert bc.glob("*/", recursive=True) == bc.glob("a/") == ["a/"]
        assert bc.glob("a.txt/**", recursive=True) == []  # not ['a.txt/'] (CPython quirk)
        assert bc.globfiles("**", recursive=True) == ["a.txt", "a/b.txt"]
        assert bc.index.listing.glob_entries("**", recursive=True) == [
            "a",
            "a.txt",
            "a/ab",
            "a/b.txt",
        ]
        assert bc.index.listing.glob_entries("**/**", recursive=True) == [
            "a",
            "a.txt",
            "a/ab",
            "a/b.txt",
        ]
        assert bc.index.listing.glob_entries("a/**", recursive=True) == ["a", "a/ab", "a/b.txt"]
        assert [i.path for i in bc.index.iterglob_infos("a/**", recursive=True)] == [
            "a",
            "a/ab",
            "a/b.txt",
        ]


def test_glob_of_an_empty_archive(tmp_path: Path) -> None:
    """The root is there in an archive with nothing else; '**' matches it, '*' nothing."""
    with barecat.Barecat(str(tmp_path / "empty.barecat"), readonly=False) as bc:
        assert bc.glob("**", recursive=True) == [""]
        assert bc.glob("**/", recursive=True) == [""]
        assert bc.glob("*") == [] and bc.glob("**") == []  # ('**' is '*' unless recursive)
        assert bc.globfiles("**", recursive=True) == []
        assert bc.glob("missing/**", recursive=True) == []
        assert bc.index.listing.glob_entries("**", recursive=True) == []


# ---------------------------------------------------------------------------------------
# 3. walk against os.walk
# ---------------------------------------------------------------------------------------

WalkResult = list[tuple[str, list[str], list[str]]]


def _run_walk(
    steps: Iterator[tuple[str, list[str], list[str]]],
    relative: Callable[[str], str],
    pruned: set[str],
    prune_style: int,
) -> WalkResult:
    """Consume a walk, pruning subdirectories listed in ``pruned`` in place."""
    out = []
    for dirpath, dirnames, filenames in steps:
        rel = relative(dirpath)
        prefix = "" if rel == "." else rel + "/"
        out.append((rel, sorted(dirnames), sorted(filenames)))
        doomed = [n for n in dirnames if prefix + n in pruned]
        if prune_style == 0:
            dirnames[:] = [n for n in dirnames if n not in doomed]
        elif prune_style == 1:
            for n in doomed:
                dirnames.remove(n)
        else:
            for i in reversed(range(len(dirnames))):
                if dirnames[i] in doomed:
                    del dirnames[i]
            dirnames.sort(reverse=True)  # reordering must not matter
    return out


def _check_top_down(result: WalkResult, top_rel: str) -> None:
    seen: set[str] = set()
    for i, (dirpath, _, _) in enumerate(result):
        assert dirpath not in seen, f"{dirpath!r} visited twice"
        if i == 0:
            assert dirpath == top_rel
        else:
            par = _parent(dirpath) or "."
            assert par in seen, f"{dirpath!r} visited before its parent"
        seen.add(dirpath)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.data())
def test_walk_matches_os_walk(tree: Tree, data: st.DataObject) -> None:
    with _materialized(tree) as (root, bc, _files, dirs):
        top = data.draw(st.sampled_from(sorted(dirs | {""})), label="top")
        pruned = data.draw(st.sets(st.sampled_from(sorted(dirs))) if dirs else st.just(set()))
        style = data.draw(st.integers(0, 2), label="prune_style")
        top_rel = top or "."

        expected = _run_walk(
            os.walk(os.path.join(root, top)),
            lambda p: os.path.relpath(p, root),
            pruned,
            style,
        )
        got = _run_walk(bc.walk(top), lambda p: p, pruned, style)
        _check_top_down(got, top_rel)
        assert sorted(got) == sorted(expected)

        # The same walk, spelled with a non-normalized top, without pruning.
        spelled = "/" + top + "/" if top else "./"
        unpruned = _run_walk(bc.walk(spelled), lambda p: p, set(), 0)
        assert sorted(unpruned) == sorted(
            _run_walk(
                os.walk(os.path.join(root, top)), lambda p: os.path.relpath(p, root), set(), 0
            )
        )


# ---------------------------------------------------------------------------------------
# 4. Stateful: the archive against a dict model
# ---------------------------------------------------------------------------------------

SM_NAMES = ["a", "b", ".c"]
SM_PATHS = st.lists(st.sampled_from(SM_NAMES), min_size=1, max_size=3).map("/".join)
SM_DATA = st.binary(max_size=6)


def _spell(path: str, variant: int) -> str:
    """An equivalent, non-normalized spelling of a normalized non-root path."""
    if variant == 1:
        return "/" + path
    if variant == 2:
        return "./" + path.replace("/", "//")
    if variant == 3:
        return "zz/../" + path.replace("/", "/./")
    return path


class ArchiveModel(RuleBasedStateMachine):
    """A writable Barecat against {path: bytes} plus the set of directories ('' = root)."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="barecat-sm-")
        self.path = os.path.join(self.tmp, "sm.barecat")
        self.bc = barecat.Barecat(self.path, readonly=False)
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {""}

    def teardown(self) -> None:
        try:
            if getattr(self.bc, "index", None) is not None:
                self.bc.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- model helpers ---------------------------------------------------------------

    def _file_ancestor(self, path: str) -> bool:
        return any(a in self.files for a in _ancestors(path))

    def _missing_error(self, path: str) -> tuple[type[Exception], ...]:
        # As os: ENOTDIR when a parent is a file, ENOENT otherwise.
        if self._file_ancestor(path):
            return (NotADirectoryBarecatError,)
        return (FileNotFoundBarecatError,)

    def _add_dirs(self, path: str) -> None:
        self.dirs.add(path)
        self.dirs.update(_ancestors(path))

    def _draw_path(self, data: st.DataObject, pool: set[str] | dict[str, bytes]) -> str:
        existing = sorted(p for p in pool if p)
        if existing:
            return data.draw(st.one_of(st.sampled_from(existing), SM_PATHS))
        return data.draw(SM_PATHS)

    @staticmethod
    def _expect(
        what: str, errors: tuple[type[Exception], ...] | None, action: Callable[[], object]
    ) -> bool:
        """Run ``action``; if ``errors`` is given it must raise one of them. True on success."""
        if errors is None:
            action()
            event(f"{what}: ok")
            return True
        with pytest.raises(errors) as caught:
            action()
        event(f"{what}: {caught.type.__name__}")
        return False

    # -- rules -----------------------------------------------------------------------

    @rule(path=SM_PATHS, data=SM_DATA, variant=st.integers(0, 3), use_add=st.booleans())
    def add_file(self, path: str, data: bytes, variant: int, use_add: bool) -> None:
        errors: tuple[type[Exception], ...] | None = None
        if path in self.dirs:
            errors = (IsADirectoryBarecatError,)
        elif self._file_ancestor(path):
            errors = (NotADirectoryBarecatError,)
        elif path in self.files:
            errors = (FileExistsBarecatError,)
        spelled = _spell(path, variant)

        def action() -> None:
            if use_add:
                self.bc.add(spelled, data=data)
            else:
                self.bc[spelled] = data

        if self._expect("add_file", errors, action):
            self.files[path] = data
            self._add_dirs(_parent(path))

    @rule(batch=st.lists(st.tuples(SM_PATHS, SM_DATA), min_size=2, max_size=6))
    def add_files_in_a_row(self, batch: list[tuple[str, bytes]]) -> None:
        """Files added one by one with nothing read in between, so the writer owes the
        statistics of several rows at once (deferring from the first add here, not after
        a few): every add still fails or succeeds at once, as it would alone (the
        invariants then check the statistics it applied)."""
        usual = deferred_stats.ADDS_BEFORE_DEFERRING
        deferred_stats.ADDS_BEFORE_DEFERRING = 0
        try:
            for path, data in batch:
                self.add_file(path, data, variant=0, use_add=False)
        finally:
            deferred_stats.ADDS_BEFORE_DEFERRING = usual

    @rule(batch=st.lists(st.tuples(SM_PATHS, SM_DATA), min_size=1, max_size=4))
    def add_many(self, batch: list[tuple[str, bytes]]) -> None:
        """A batch goes in whole, or (on any conflict) not at all."""
        paths = [p for p, _ in batch]
        ancestors_needed = {a for p in paths for a in _ancestors(p)} - {""}
        conflict = (
            len(set(paths)) < len(paths)
            or any(p in self.dirs or p in self.files or self._file_ancestor(p) for p in paths)
            or any(p in ancestors_needed for p in paths)
        )
        errors = (FileExistsBarecatError, NotADirectoryBarecatError, IsADirectoryBarecatError)
        if self._expect("add_many", errors if conflict else None, lambda: self.bc.add_many(batch)):
            for p, d in batch:
                self.files[p] = d
                self._add_dirs(_parent(p))

    @rule(data=st.data())
    def get_many(self, data: st.DataObject) -> None:
        wanted = [self._draw_path(data, self.files) for _ in range(data.draw(st.integers(1, 5)))]
        if all(p in self.files for p in wanted):
            assert self.bc.get_many(wanted) == [self.files[p] for p in wanted]
        else:
            with pytest.raises(KeyError):
                self.bc.get_many(wanted)

    @rule(data=st.data(), overwrite=SM_DATA, append=st.booleans())
    @precondition(lambda self: self.files)
    def write_via_open(self, data: st.DataObject, overwrite: bytes, append: bool) -> None:
        path = data.draw(st.sampled_from(sorted(self.files)))
        with self.bc.open(path, "ab" if append else "wb") as f:
            f.write(overwrite)
        self.files[path] = (self.files[path] if append else b"") + overwrite

    @rule(data=st.data(), use_del=st.booleans())
    def remove_file(self, data: st.DataObject, use_del: bool) -> None:
        path = self._draw_path(data, self.files)
        if path in self.files:
            errors = None
        elif use_del:
            errors = (KeyError,)
        elif path in self.dirs:
            errors = (IsADirectoryBarecatError,)
        else:
            errors = self._missing_error(path)

        def action() -> None:
            if use_del:
                del self.bc[path]
            else:
                self.bc.remove(path)

        if self._expect("remove_file", errors, action):
            del self.files[path]  # its directory stays

    @rule(data=st.data(), dst=SM_PATHS, variant=st.integers(0, 3))
    def rename_file(self, data: st.DataObject, dst: str, variant: int) -> None:
        src = self._draw_path(data, self.files)
        if src in self.dirs:
            return  # a directory; rename_dir covers it
        errors: tuple[type[Exception], ...] | None = None
        if src not in self.files:
            errors = self._missing_error(src)
        elif src == dst:
            errors = None
        elif dst in self.dirs:
            errors = (IsADirectoryBarecatError,)
        elif dst in self.files:
            errors = (FileExistsBarecatError,)
        elif self._file_ancestor(dst):
            errors = (NotADirectoryBarecatError,)
        if (
            self._expect("rename_file", errors, lambda: self.bc.rename(src, _spell(dst, variant)))
            and src != dst
        ):
            self.files[dst] = self.files.pop(src)
            self._add_dirs(_parent(dst))

    @rule(data=st.data(), dst=SM_PATHS, variant=st.integers(0, 3))
    @precondition(lambda self: len(self.dirs) > 1)
    def rename_dir(self, data: st.DataObject, dst: str, variant: int) -> None:
        src = data.draw(st.sampled_from(sorted(self.dirs - {""})))
        errors: tuple[type[Exception], ...] | None = None
        if src == dst:
            errors = None
        elif _within(dst, src):
            errors = (InvalidPathBarecatError,)
        elif dst in self.dirs:
            errors = (FileExistsBarecatError,)
        elif dst in self.files or self._file_ancestor(dst):
            errors = (NotADirectoryBarecatError,)
        if (
            self._expect("rename_dir", errors, lambda: self.bc.rename(_spell(src, variant), dst))
            and src != dst
        ):

            def moved(p: str) -> str:
                return dst + p[len(src) :] if _within(p, src) else p

            self.files = {moved(p): d for p, d in self.files.items()}
            self.dirs = {moved(p) for p in self.dirs}
            self._add_dirs(dst)

    @rule(data=st.data(), pick_root=st.integers(0, 19))
    def rmtree(self, data: st.DataObject, pick_root: int) -> None:
        # The root is emptied but stays; rarely chosen so that trees get a chance to grow.
        path = "" if pick_root == 0 else self._draw_path(data, self.dirs)
        errors: tuple[type[Exception], ...] | None = None
        if path in self.files:
            errors = (NotADirectoryBarecatError,)
        elif path not in self.dirs:
            errors = self._missing_error(path)
        if self._expect("rmtree", errors, lambda: self.bc.rmtree(path)):
            self.files = {p: d for p, d in self.files.items() if not _within(p, path)}
            self.dirs = {p for p in self.dirs if not _within(p, path)} | {""}
            if path:
                self.dirs.update(_ancestors(path))

    @rule(data=st.data())
    def rmdir(self, data: st.DataObject) -> None:
        path = self._draw_path(data, self.dirs)
        errors: tuple[type[Exception], ...] | None = None
        if path in self.files:
            errors = (NotADirectoryBarecatError,)
        elif path not in self.dirs:
            errors = self._missing_error(path)
        elif any(_parent(p) == path for p in [*self.files, *self.dirs] if p):
            errors = (DirectoryNotEmptyBarecatError,)
        if self._expect("rmdir", errors, lambda: self.bc.rmdir(path)):
            self.dirs.discard(path)

    def _mkdir_errors(
        self, path: str, exist_ok: bool, parents: bool
    ) -> tuple[type[Exception], ...] | None:
        if path in self.dirs:
            return None if exist_ok else (FileExistsBarecatError,)
        if path in self.files:
            return (FileExistsBarecatError,)  # as os.mkdir / os.makedirs
        if parents:
            return (NotADirectoryBarecatError,) if self._file_ancestor(path) else None
        if _parent(path) not in self.dirs:
            return self._missing_error(path)
        return None

    @rule(path=SM_PATHS, exist_ok=st.booleans(), parents=st.booleans(), variant=st.integers(0, 3))
    def mkdir(self, path: str, exist_ok: bool, parents: bool, variant: int) -> None:
        errors = self._mkdir_errors(path, exist_ok, parents)
        make = self.bc.makedirs if parents else self.bc.mkdir
        if self._expect(
            make.__name__, errors, lambda: make(_spell(path, variant), exist_ok=exist_ok)
        ):
            self._add_dirs(path)

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        path = self._draw_path(data, self.files)
        if path in self.files:
            assert self.bc[path] == self.files[path]
            assert self.bc.read(path) == self.files[path]
            assert path in self.bc
            assert self.bc.isfile(path) and not self.bc.isdir(path)
            return
        assert path not in self.bc
        with pytest.raises(KeyError):
            self.bc[path]
        assert self.bc.get(path) is None
        if path in self.dirs:
            assert self.bc.isdir(path) and not self.bc.isfile(path)
            with pytest.raises(IsADirectoryBarecatError):
                self.bc.read(path)
        else:
            assert not self.bc.exists(path)

    @rule(check_readonly=st.booleans())
    def reopen(self, check_readonly: bool) -> None:
        self.bc.close()
        if check_readonly:
            with barecat.Barecat(self.path) as ro:
                self._check_contents(ro)
                assert ro.index.find_inconsistencies() == []
        self.bc = barecat.Barecat(self.path, readonly=False)

    # -- invariants ------------------------------------------------------------------

    def _check_contents(self, bc: barecat.Barecat) -> None:
        assert sorted(bc.files()) == sorted(self.files)
        assert {p: bc[p] for p in self.files} == self.files
        assert set(bc.dirs()) == self.dirs
        assert len(bc) == bc.num_files == len(self.files)
        assert bc.total_size == sum(map(len, self.files.values()))

    @invariant()
    def contents_match(self) -> None:
        self._check_contents(self.bc)

    @invariant()
    def statistics_match(self) -> None:
        assert self.bc.index.find_inconsistencies() == []
        for d in self.dirs:
            info = self.bc.index.lookup_dir(d)
            below = [p for p in self.files if _within(p, d)]
            child_files = sorted(p for p in self.files if _parent(p) == d)
            child_dirs = sorted(p for p in self.dirs if p and _parent(p) == d)
            assert info.num_files == len(child_files), d
            assert info.num_subdirs == len(child_dirs), d
            assert info.num_files_tree == len(below), d
            assert info.size_tree == sum(len(self.files[p]) for p in below), d
            names = sorted(posixpath.basename(p) for p in child_files + child_dirs)
            assert sorted(self.bc.listdir(d)) == names, d


ArchiveModel.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_archive_matches_model = ArchiveModel.TestCase


# ---------------------------------------------------------------------------------------
# Error class of mkdir over a file, spelled out (the stateful model checks it too)
# ---------------------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(path=SM_PATHS, parents=st.booleans(), exist_ok=st.booleans())
def test_mkdir_over_existing_file_raises_file_exists(
    path: str, parents: bool, exist_ok: bool
) -> None:
    """As os.mkdir / os.makedirs(exist_ok=...): a file at the path is FileExistsError."""
    with _tempdir() as tmp, barecat.Barecat(os.path.join(tmp, "m"), readonly=False) as bc:
        bc[path] = b"file"
        with pytest.raises(FileExistsError):
            if parents:
                bc.makedirs(path, exist_ok=exist_ok)
            else:
                bc.mkdir(path, exist_ok=exist_ok)
        assert bc[path] == b"file" and not bc.isdir(path)
        assert bc.index.find_inconsistencies() == []
