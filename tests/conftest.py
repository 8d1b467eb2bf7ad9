"""Shared fixtures: archive factories over real files in a temporary directory."""

from __future__ import annotations

import glob
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import barecat
from barecat.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reference_python() -> str:
    """The interpreter that has the reference barecat 0.3.1 (skips the test if none)."""
    configured = os.environ.get("BARECAT_REFERENCE_PYTHON")
    if configured:
        if not os.access(configured, os.X_OK):
            pytest.fail(f"BARECAT_REFERENCE_PYTHON={configured!r} is not an executable")
        return configured
    fallback = os.path.join(REPO, ".venv-ref", "bin", "python")
    if os.access(fallback, os.X_OK):
        return fallback
    pytest.skip(
        "reference barecat 0.3.1 interpreter not found: BARECAT_REFERENCE_PYTHON is unset "
        f"and {fallback} does not exist (./run test creates it)"
    )


def reference_env() -> dict[str, str]:
    """The environment for the reference's console scripts: without PYTHONPATH & co.,
    which would make them import this package instead of barecat 0.3.1."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def made_by_reference(archive: str, files: dict[str, bytes]) -> None:
    """Store ``files`` into ``archive`` with the reference barecat 0.3.1 (which stores
    paths such as '../x' verbatim, as no archive of ours has them)."""
    snippet = (
        "import barecat, sys\n"
        "with barecat.Barecat(sys.argv[1], readonly=False) as bc:\n"
        f"    for path, data in {files!r}.items():\n"
        "        bc[path] = data\n"
    )
    made = subprocess.run([reference_python(), "-I", "-c", snippet, archive], capture_output=True)
    assert made.returncode == 0, made.stderr


def python_glob(
    root: str | os.PathLike[str], pattern: str, recursive: bool, include_hidden: bool = False
) -> list[str]:
    """What an archive's glob of ``pattern`` must return for a tree extracted to ``root``:
    ``glob.glob(root + '/' + pattern)`` with ``root + '/'`` removed (so ``'d/'`` for a
    directory matched as one, ``''`` for the root), sorted, each once.

    A match CPython spells with a trailing '/' although no such directory exists
    ('f/**' for a file or missing f, python/cpython#79382) is left out.
    """
    top = os.fspath(root).rstrip("/") + "/"
    kwargs: dict[str, bool] = {"recursive": recursive}
    if include_hidden:
        if sys.version_info < (3, 11):
            pytest.skip("glob.glob has include_hidden from Python 3.11")
        kwargs["include_hidden"] = True
    found = set()
    for match in glob.glob(glob.escape(top) + pattern, **kwargs):
        assert match.startswith(top), match
        rel = match[len(top) :]
        if rel.endswith("/") and not os.path.isdir(top + rel):
            continue
        found.add(rel)
    return sorted(found)


@pytest.fixture
def archive_path(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(os.fspath(tmp_path), "test.barecat")


@pytest.fixture
def writable(archive_path: str) -> Iterator[barecat.Barecat]:
    with barecat.Barecat(archive_path, readonly=False) as bc:
        yield bc


@pytest.fixture
def make_archive(tmp_path: os.PathLike[str]) -> Callable[..., str]:
    """Build an archive from ``{path: bytes}`` and return its path."""
    counter = iter(range(10**6))

    def build(files: dict[str, bytes], **kwargs: object) -> str:
        path = os.path.join(os.fspath(tmp_path), f"made{next(counter)}.barecat")
        with barecat.Barecat(path, readonly=False, **kwargs) as bc:  # type: ignore[arg-type]
            for p, data in files.items():
                bc[p] = data
        return path

    return build


Run = Callable[..., tuple[int, str, str]]

PASSPHRASE = "sealed test passphrase"
"""The passphrase of the encrypted archives tests make (``pw_file`` holds it)."""


@pytest.fixture
def pw_file(tmp_path: Path) -> str:
    """A ``--passphrase-file`` holding :data:`PASSPHRASE`."""
    path = tmp_path / "pw.txt"
    path.write_text(PASSPHRASE + "\n")
    return str(path)


@pytest.fixture
def run(capfdbinary: pytest.CaptureFixture[bytes]) -> Run:
    """Run ``barecat ARGV`` in-process; returns (exit code, stdout, stderr)."""

    def call(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        capfdbinary.readouterr()
        old_stdin = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        try:
            code = main(list(argv))
        finally:
            sys.stdin = old_stdin
        out, err = capfdbinary.readouterr()
        return code, out.decode("utf-8", "surrogateescape"), err.decode()

    return call


def damage(archive: str, path: str, at: int = 0) -> None:
    """Flip one stored byte of ``path``, ``at`` bytes into it: its CRC32C no longer matches."""
    with barecat.Barecat(archive, lookup_table=False) as bc:
        info = bc.index.lookup_file(path)
    with open(f"{archive}-shard-{info.shard:05d}", "r+b") as shard:
        shard.seek((info.offset or 0) + at)
        byte = shard.read(1)
        shard.seek((info.offset or 0) + at)
        shard.write(bytes([byte[0] ^ 0xFF]))


def make_numbered_tree(root: Path, dirs: int, per_dir: int) -> dict[str, bytes]:
    """``dNN/III`` files of distinct, size-varying bytes; returns {relative path: bytes}."""
    expected = {}
    for d in range(dirs):
        (root / f"d{d:02}").mkdir(parents=True)
        for i in range(per_dir):
            data = b"%d/%d;" % (d, i) * (i % 50 + 1)
            (root / f"d{d:02}/{i:03}").write_bytes(data)
            expected[f"d{d:02}/{i:03}"] = data
    return expected


def make_tree(root: Path) -> Path:
    """A small tree with everything create/extract must keep: modes, mtimes, empty and
    private directories, file and directory links, a dangling link, odd names."""
    (root / "a/b").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "private").mkdir(mode=0o700)
    (root / "a/x.txt").write_bytes(b"hello\n")
    (root / "a/b/big.bin").write_bytes(os.urandom(3 << 20))
    (root / "a/b/zero").write_bytes(b"")
    (root / "name with spaces ü.txt").write_bytes(b"spaces")
    (root / ".hidden").write_bytes(b"h")
    (root / "private/secret").write_bytes(b"s")
    os.chmod(root / "private/secret", 0o600)
    os.chmod(root / "a/x.txt", 0o640)
    os.symlink("../name with spaces ü.txt", root / "a/link_to_file")
    os.symlink("a/b", root / "link_to_dir")
    os.symlink("does-not-exist", root / "dangling")
    for i, p in enumerate(sorted(root.rglob("*"), reverse=True)):
        os.utime(p, ns=(1_500_000_000_000_000_000 + i, 1_500_000_000_000_000_000 + i),
                 follow_symlinks=False)  # fmt: skip
    return root
