"""The ``barecat(1)`` manual page: written from the parser, rendered by the real ``man``
(or groff), shipped in the wheel; and the wheel's ``all`` extra."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from barecat.cli.main import build_parser
from barecat.cli.manpage import documented_commands, render

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "man" / "barecat.1"


def test_the_checked_in_page_is_the_generated_one() -> None:
    assert PAGE.read_text() == render(build_parser()), "run './run man' and commit man/barecat.1"


def _rendered() -> str:
    env = {**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    if shutil.which("man"):
        argv = ["man", "-l", str(PAGE)]
    elif shutil.which("groff"):
        argv = ["groff", "-man", "-Tutf8", str(PAGE)]
    else:
        pytest.skip("neither man nor groff is installed (apt install man-db groff-base)")
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_man_renders_every_command_without_warnings() -> None:
    if shutil.which("groff"):  # -ww: all warnings, -z: no output, only the diagnostics
        checked = subprocess.run(["groff", "-man", "-ww", "-z", str(PAGE)], capture_output=True)
        assert checked.returncode == 0 and checked.stderr == b"", checked.stderr
    text = _rendered()
    commands = documented_commands(build_parser())
    assert len(commands) > 25
    for name, aliases, _ in commands:
        heading = name + (f" ({', '.join(aliases)})" if aliases else "")
        assert f"\n   {heading}\n" in text, name
        assert f"barecat {name} [" in text or f"barecat {name}\n" in text, name
    assert "__complete" not in text and "SUPPRESS" not in text
    assert "-o, --options OPTIONS" in text and "--shard-size-limit" in text  # options too
    assert "barecat mount --unmount /mnt/photos" in text  # and the examples


def test_the_wheel_ships_the_page_and_an_all_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    if done.returncode != 0 and "No module named" in done.stderr:
        pytest.skip(f"cannot build a wheel here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("barecat-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (page,) = [n for n in zf.namelist() if n.endswith(".data/data/share/man/man1/barecat.1")]
        assert zf.read(page) == PAGE.read_bytes()
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(zf.read(meta).decode())
    assert "all" in metadata.get_all("Provides-Extra", [])
    requires = metadata.get_all("Requires-Dist", [])
    wanted = "codecs,fsspec,mount,remote,sealing,server,tui,viewer"
    assert any(r.startswith("barecat[") and 'extra == "all"' in r for r in requires), requires
    everything = next(r for r in requires if 'extra == "all"' in r)
    extras = everything[everything.index("[") + 1 : everything.index("]")]
    assert ",".join(sorted(extras.split(","))) == wanted
    provided = set(metadata.get_all("Provides-Extra", [])) - {"all", "dev", "bench"}
    # every feature but torch, which users install for their platform (CPU, CUDA, ROCm),
    # and the engines (ray, dask, hf), each a large install of its own
    engines = {"torch", "ray", "dask", "hf"}
    assert provided - {"browser-tests", "browser_tests"} == {*wanted.split(","), *engines}
