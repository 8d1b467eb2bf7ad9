"""Installing barecat as users do: real pip, real venvs, real compilers (or none).

The rules of issue 37 held here: ``pip wheel .`` makes one wheel per platform and Python
(``cp311-abi3`` from 3.11, ``cp310-cp310`` for 3.10) holding the compiled core and no C
source, which installs into a fresh venv of another Python with no compiler anywhere; where
the compiler is missing, an install from source still works, with the pure-Python kernels,
and says so in exactly one line; the sdist holds the C source and builds it. Every build
runs on a copy of the source tree under tmp_path (pip builds a directory in place, and a
test must not leave ``build/`` in the checkout), with pip's default build isolation and
cache, so the dependencies and setuptools come from the registry once and are reused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="the no-compiler setup is POSIX's"),
]

BUILT = "barecat: compiled core built"
NOT_BUILT = "barecat: no compiled core"
LIMITED = sys.version_info >= (3, 11)
"""Whether this Python builds the stable-ABI wheel (cp311-abi3), as setup.py decides."""
COMPILERS = ("gcc", "cc", "clang", "c99", "tcc")

PROBE = r"""
import json, os, sys
import barecat, barecat.kernels as k
from barecat.exceptions import BarecatIntegrityError

files = {f"d/{i}.bin": bytes((i * 7 + j) % 251 for j in range(n))
         for i, n in enumerate([0, 1, 100, 4096, 70000])}
with barecat.Barecat("a.barecat", readonly=False) as bc:
    for path, data in files.items():
        bc[path] = data
with barecat.Barecat("a.barecat") as bc:
    each = all(bc[path] == data for path, data in files.items())
    many = bc.get_many(list(files)) == list(files.values())
with open("a.barecat-shard-00000", "r+b") as shard:  # the last file's last byte
    shard.seek(-1, os.SEEK_END)
    last = shard.read(1)
    shard.seek(-1, os.SEEK_END)
    shard.write(bytes([last[0] ^ 1]))
with barecat.Barecat("a.barecat") as bc:
    try:
        bc["d/4.bin"]
        damage = "read"
    except BarecatIntegrityError as e:
        damage = type(e).__name__
print(json.dumps({"implementation": k.IMPLEMENTATION, "why": k.WHY,
                  "module": barecat.__file__, "crc": k.crc32c(b"123456789"),
                  "each": each, "many": many, "damage": damage}))
"""
"""Run in a venv: a round trip of a few files, then a flipped byte, in a fresh directory."""


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    """Run ``cmd``; its stdout and stderr together, or fail the test showing them."""
    done = subprocess.run(
        cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-6000:]}")
    return done.stdout


def _env(*, compiler: bool, bin_dir: Path) -> dict[str, str]:
    """The environment of a user's shell: this one without PYTHONPATH (the venv must import
    what pip installed), and without a compiler: CC and CXX failing, none on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.pop("BARECAT_PUREPYTHON", None)
    if not compiler:
        false = shutil.which("false")
        assert false is not None
        env.update(CC=false, CXX=false, PATH=str(bin_dir))
        assert not [c for c in COMPILERS if shutil.which(c, path=str(bin_dir))]
    return env


def _lines(log: str, start: str) -> list[str]:
    """The lines of a pip log saying ``start`` (pip -v indents the backend's output)."""
    return [line.strip() for line in log.splitlines() if line.strip().startswith(start)]


def _source_copy(dest: Path) -> Path:
    """The files of the checkout (tracked, and new ones not ignored) copied to ``dest``:
    what a user's clone holds, with no build output of earlier runs."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): all but builds
        skipped = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__")
        shutil.copytree(REPO, dest, ignore=skipped)
        return dest
    for name in listed.stdout.decode().split("\0"):
        if name and os.path.isfile(os.path.join(REPO, name)):  # (deleted, not yet staged)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(REPO, name), dest / name)
    return dest


def _python_version(python: str) -> tuple[int, int] | None:
    """``python``'s (major, minor) where it can make venvs with pip, else None."""
    done = subprocess.run(
        [python, "-c", "import ensurepip, venv, sys; print(*sys.version_info[:2])"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if done.returncode != 0:
        return None
    major, minor = done.stdout.split()
    return int(major), int(minor)


def _pythons() -> dict[tuple[int, int], str]:
    """The CPython interpreters found here (on PATH, and pyenv's), by version."""
    found: dict[tuple[int, int], str] = {}
    pyenv = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser() / "versions"
    candidates = sorted(str(p) for p in pyenv.glob("3.*/bin/python3"))
    candidates += [p for m in range(10, 16) if (p := shutil.which(f"python3.{m}"))]
    for python in candidates:
        version = _python_version(python)
        if version is not None and version >= (3, 10):
            found.setdefault(version, python)
    return found


def _another_python(at_least: tuple[int, int]) -> str:
    """A Python at least ``at_least`` other than this one; skips the test where none is."""
    this = sys.version_info[:2]
    others = {v: p for v, p in _pythons().items() if v >= at_least and v != this}
    if not others:
        pytest.skip(f"no Python >= {at_least[0]}.{at_least[1]} other than this one found")
    return others[max(others)]


def _venv(python: str, where: Path) -> Path:
    """A fresh venv of ``python`` at ``where``; its bin directory."""
    _run([python, "-m", "venv", str(where)], env=_env(compiler=True, bin_dir=where))
    return where / "bin"


def _probe(bin_dir: Path, cwd: Path) -> dict[str, object]:
    """What :data:`PROBE` finds in the venv of ``bin_dir`` (run without a compiler)."""
    cwd.mkdir()
    out = _run([str(bin_dir / "python"), "-c", PROBE], _env(compiler=False, bin_dir=bin_dir), cwd)
    found: dict[str, object] = json.loads(out.splitlines()[-1])
    assert str(found["module"]).startswith(str(bin_dir.parent)), found  # not the checkout
    assert found["crc"] == 0xE3069283  # the CRC32C check value of "123456789"
    assert found["each"] and found["many"], found
    assert found["damage"] != "read", found  # a BarecatIntegrityError, not wrong bytes
    return found


def _pip_wheel(python: str, source: Path, out: Path, *, compiler: bool) -> tuple[Path, str]:
    """``pip wheel source`` by ``python`` into ``out``: the one wheel made, and pip's log."""
    env = _env(compiler=compiler, bin_dir=Path(python).parent)
    log = _run([python, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(source)], env)
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], log


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, Path]]:
    """The wheel this Python builds from a copy of the checkout with its compiler, pip's
    log, and the copy (holding pip's build/ directory)."""
    root = tmp_path_factory.mktemp("built")
    source = _source_copy(root / "source")
    started = time.monotonic()
    wheel, log = _pip_wheel(sys.executable, source, root / "wheels", compiler=True)
    print(f"pip wheel: {time.monotonic() - started:.1f} s")
    yield wheel, log, source


def test_pip_wheel_makes_one_wheel_for_this_abi(built: tuple[Path, str, Path]) -> None:
    """One wheel, tagged for the stable ABI from 3.11 (for this Python alone on 3.10),
    holding the compiled core and py.typed, not the C source; pip says once that it built."""
    wheel, log, _ = built
    impl, abi, platform = wheel.name.removesuffix(".whl").split("-")[-3:]
    expected = ("cp311", "abi3") if LIMITED else (f"cp3{sys.version_info[1]}",) * 2
    assert (impl, abi, platform) == (*expected, _platform_tag())
    suffix = ".abi3.so" if LIMITED else sysconfig.get_config_var("EXT_SUFFIX")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"barecat/kernels/_compiled{suffix}", "barecat/py.typed"} <= names
    assert not [n for n in names if n.endswith((".c", ".h"))]
    assert len(_lines(log, BUILT)) == 1 and not _lines(log, NOT_BUILT), log


@pytest.mark.skipif(not LIMITED, reason="the stable-ABI wheel is built by Python >= 3.11")
def test_wheel_installs_into_another_python_without_a_compiler(
    built: tuple[Path, str, Path], tmp_path: Path
) -> None:
    """The cp311-abi3 wheel in a fresh venv of another Python, with no compiler anywhere
    (dependencies from the registry as wheels): the compiled core runs, bytes round trip
    with their CRC checked, and a flipped byte is caught."""
    bin_dir = _venv(_another_python((3, 11)), tmp_path / "venv")
    no_cc = _env(compiler=False, bin_dir=bin_dir)
    _run([str(bin_dir / "python"), "-m", "pip", "install", str(built[0])], no_cc)
    found = _probe(bin_dir, tmp_path / "work")
    assert found["implementation"] == "compiled", found
    verify = [str(bin_dir / "barecat"), "verify", "a.barecat"]  # the console script, too
    done = subprocess.run(verify, env=no_cc, cwd=tmp_path / "work", capture_output=True, text=True)
    assert done.returncode != 0 and "d/4.bin" in done.stdout + done.stderr, done


def test_source_install_without_a_compiler_is_pure_python(tmp_path: Path) -> None:
    """``pip install <checkout>`` with no compiler works, with the pure-Python kernels,
    whose WHY names the missing module; pip's log says so in exactly one line."""
    source = _source_copy(tmp_path / "source")
    bin_dir = _venv(sys.executable, tmp_path / "venv")
    no_cc = _env(compiler=False, bin_dir=bin_dir)
    log = _run([str(bin_dir / "python"), "-m", "pip", "install", "-v", str(source)], no_cc)
    false = shutil.which("false")
    said = f"{NOT_BUILT} ({false} exited with status 1); barecat installs its pure-Python kernels"
    assert _lines(log, NOT_BUILT) == [said] and not _lines(log, BUILT), log
    found = _probe(bin_dir, tmp_path / "work")
    assert found["implementation"] == "python", found
    assert "No module named 'barecat.kernels._compiled'" in str(found["why"]), found


def test_sdist_holds_the_c_source_and_builds_it(tmp_path: Path) -> None:
    """The sdist (setuptools' PEP 517 hook, as ``python -m build --sdist`` calls it) holds
    the C source and setup.py; ``pip install -v`` of it with a compiler builds the core."""
    source = _source_copy(tmp_path / "source")
    hook = "from setuptools import build_meta as b; print(b.build_sdist('dist'))"
    env = _env(compiler=True, bin_dir=Path(sys.executable).parent)
    name = _run([sys.executable, "-c", hook], env, source).splitlines()[-1]
    sdist = source / "dist" / name
    top = name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    kernels = "src/barecat/kernels"
    for needed in ("setup.py", "pyproject.toml", f"{kernels}/_compiled.c", f"{kernels}/crc32c.h"):
        assert f"{top}/{needed}" in names
    bin_dir = _venv(sys.executable, tmp_path / "venv")
    log = _run([str(bin_dir / "python"), "-m", "pip", "install", "-v", str(sdist)], env)
    assert len(_lines(log, BUILT)) == 1 and not _lines(log, NOT_BUILT), log
    assert _probe(bin_dir, tmp_path / "work")["implementation"] == "compiled"


def test_a_failed_build_ships_no_module_of_an_earlier_one(
    built: tuple[Path, str, Path], tmp_path: Path
) -> None:
    """A checkout built once with a compiler, its C source changed since, rebuilt where the
    compiler is gone: the wheel holds no compiled module (the earlier build's would be stale
    and contradict the line), and pip's log says once that there is none."""
    _, _, source = built
    c_source = source / "src/barecat/kernels/_compiled.c"
    later = time.time() + 60
    os.utime(c_source, (later, later))
    wheel, log = _pip_wheel(sys.executable, source, tmp_path / "wheels", compiler=False)
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".pyd"))]
    assert len(_lines(log, NOT_BUILT)) == 1 and not _lines(log, BUILT), log


def test_python310_gets_its_own_wheel(tmp_path: Path) -> None:
    """Python 3.10 (before the buffer protocol joined the stable ABI) builds a cp310-cp310
    wheel whose compiled core runs there."""
    python = _pythons().get((3, 10))
    if python is None:
        pytest.skip("no Python 3.10 found")
    source = _source_copy(tmp_path / "source")
    wheel, log = _pip_wheel(python, source, tmp_path / "wheels", compiler=True)
    assert wheel.name.endswith(f"-cp310-cp310-{_platform_tag()}.whl"), wheel.name
    assert len(_lines(log, BUILT)) == 1, log
    bin_dir = _venv(python, tmp_path / "venv")
    no_cc = _env(compiler=False, bin_dir=bin_dir)
    _run([str(bin_dir / "python"), "-m", "pip", "install", str(wheel)], no_cc)
    assert _probe(bin_dir, tmp_path / "work")["implementation"] == "compiled"
