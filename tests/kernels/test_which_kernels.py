"""Which kernels run (compiled or the pure-Python reference), how a user forces or
learns it, and that ``bc[path]`` goes through the kernel's whole get, with every case it
does not answer left to the careful path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
import barecat.kernels
from barecat.exceptions import BarecatIntegrityError
from barecat.layout import shard_path

SRC = Path(barecat.__file__).resolve().parent.parent


def kernels_in(env: dict[str, str], src: Path = SRC) -> list[str]:
    """IMPLEMENTATION, WHY and what ``--version`` says, in a fresh interpreter."""
    code = (
        "import barecat.kernels as k\nfrom barecat.cli.main import main\n"
        "print(k.IMPLEMENTATION)\nprint(k.WHY)\nmain(['--version'])"
    )
    env = {**os.environ, **env, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_kernels_this_run_expects_are_the_ones_running() -> None:
    expected = os.environ.get("BARECAT_EXPECT_KERNELS")
    if expected is None:
        pytest.skip("BARECAT_EXPECT_KERNELS is set by ./run test (compiled, then python)")
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if expected == "compiled" and expected != barecat.kernels.IMPLEMENTATION and not compiler:
        pytest.skip(f"no C compiler here, so no compiled core: {barecat.kernels.WHY}")
    assert expected == barecat.kernels.IMPLEMENTATION, barecat.kernels.WHY


def test_barecat_purepython_forces_the_reference_and_says_so() -> None:
    implementation, why, _, version = kernels_in({"BARECAT_PUREPYTHON": "1"})
    assert (implementation, why) == ("python", "BARECAT_PUREPYTHON is set")
    assert version == "pure Python (BARECAT_PUREPYTHON is set)"
    implementation, *_ = kernels_in({"BARECAT_PUREPYTHON": "0"})  # (0: not forced)
    compiled = list((SRC / "barecat" / "kernels").glob("_compiled*.so"))
    assert implementation == ("compiled" if compiled else "python")


def test_a_package_without_the_compiled_module_runs_the_reference_and_says_why(
    tmp_path: Path,
) -> None:
    # (the package as an install without a compiler leaves it: no _compiled module)
    shutil.copytree(SRC / "barecat", tmp_path / "barecat",
                    ignore=shutil.ignore_patterns("_compiled*.so", "__pycache__"))  # fmt: skip
    implementation, why, _, version = kernels_in({"BARECAT_PUREPYTHON": ""}, tmp_path)
    assert implementation == "python"
    assert why == "the compiled core is not installed (No module named 'barecat.kernels._compiled')"
    assert version == f"pure Python ({why})"


@pytest.fixture
def tabled(make_archive) -> tuple[str, dict[str, bytes]]:  # type: ignore[no-untyped-def]
    files = {f"d{i % 3}/f{i}.bin": os.urandom(10 + i) for i in range(60)}
    files["é/ü.txt"] = b"not ascii"
    return make_archive(files), files


def test_bc_path_is_one_kernel_call_once_the_table_is_up(tabled) -> None:  # type: ignore[no-untyped-def]
    path, files = tabled
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc.index.lookup_table_size == len(files)
        assert bc["d0/f3.bin"] == files["d0/f3.bin"]  # (the careful path opens the shard)
        calls: list[str] = []

        def profile(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "call":
                calls.append(frame.f_code.co_name)

        sys.setprofile(profile)
        try:
            got = bc["d1/f4.bin"]
        finally:
            sys.setprofile(None)
        assert got == files["d1/f4.bin"]
        assert "lookup_address" not in calls and "read_from_address" not in calls, calls


def test_what_the_kernel_does_not_answer_the_careful_path_does(tabled) -> None:  # type: ignore[no-untyped-def]
    path, files = tabled
    with barecat.Barecat(path, lookup_table=True) as bc:
        for asked in ("d1/f4.bin", "./d1/f4.bin", "/d1/f4.bin", "d1//f4.bin", "d1/./f4.bin"):
            assert bc[asked] == files["d1/f4.bin"], asked  # not surely normal: normalized
        assert bc["é/ü.txt"] == b"not ascii"
        with pytest.raises(KeyError):
            bc["d1/missing"]
        assert "d1/f4.bin" in bc and bc.get("nope", 7) == 7


def test_damage_read_through_the_kernel_is_raised_naming_the_file(tabled) -> None:  # type: ignore[no-untyped-def]
    path, files = tabled
    with barecat.Barecat(path) as bc:
        shard, offset, *_ = bc.index.lookup_file("d2/f5.bin").address
    with open(shard_path(path, shard), "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 1]))
    with barecat.Barecat(path, lookup_table=True) as bc:
        assert bc["d1/f4.bin"] == files["d1/f4.bin"]  # (the table up, the shard open)
        with pytest.raises(BarecatIntegrityError, match=r"d2/f5\.bin"):
            bc["d2/f5.bin"]
        with pytest.raises(BarecatIntegrityError, match=r"d2/f5\.bin"):
            bc.get_many(["d1/f4.bin", "d2/f5.bin"])
