"""The README's quick start on a fresh checkout: ``./run demo`` sets up only what the demo
needs, says what it installs, and leaves a virtual environment whose ``barecat`` starts
from compiled modules; and every install line of the documents installs this project.

The checkout is a copy of this one's files (what git tracks, and new files git does not
ignore) in a temporary directory, with no virtual environment: as a clone is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = {"barecat", "crc32c", "tqdm", "xxhash", "zstandard"}
"""The distributions ``./run demo`` installs: the project and its dependencies."""
TOOLING = {"pip", "setuptools"}
"""What ``python -m venv`` puts in every environment."""


def fresh_checkout(target: Path) -> Path:
    """Copy this checkout's files, as a clone would have them, into ``target``."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout to know which files a clone has")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if source.is_file():  # a file deleted and not yet committed is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def clean_environment() -> dict[str, str]:
    """This process's environment without its virtual environment, and with
    ``PYTHONDONTWRITEBYTECODE`` set (as on machines where nothing writes bytecode)."""
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    base = getattr(sys, "_base_executable", sys.executable)
    return {**env, "PATH": os.pathsep.join(path), "PYTHON": base, "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.mark.slow
def test_the_demo_installs_only_the_core_says_so_and_starts_compiled(tmp_path: Path) -> None:
    checkout = fresh_checkout(tmp_path / "barecat")
    env = clean_environment()
    first = subprocess.run(
        ["./run", "demo", "--files", "40"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr
    assert "mismatches     0" in first.stdout
    said = [line for line in first.stderr.splitlines() if line.startswith("installing")]
    assert len(said) == 1 and "crc32c, tqdm, xxhash, zstandard" in said[0], first.stderr

    python = checkout / ".venv" / "bin" / "python"
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format", "json"], capture_output=True, check=True
    )
    installed = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert installed == CORE | TOOLING

    # every module of the package has its bytecode, so no start-up compiles (with
    # PYTHONDONTWRITEBYTECODE set, a missing one would be compiled at every start)
    sources = list((checkout / "src" / "barecat").rglob("*.py"))
    assert len(sources) > 100
    stale = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).exists()]
    assert stale == []
    where = subprocess.run(
        [python, "-c", "import barecat; print(barecat.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(checkout / "src")  # the checkout, editable

    again = subprocess.run(
        ["./run", "demo", "--files", "10"], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0 and "installing" not in again.stderr, again.stderr


def install_lines() -> list[tuple[str, str]]:
    """Every ``pip install ...`` a reader can copy from README.md and docs/, with where."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            for command in re.findall(r"pip install [^`#\n]*", line):
                found.append((f"{page.relative_to(REPO)}:{number}", command.strip()))
    return found


def test_every_install_line_of_the_documents_names_this_project() -> None:
    lines = install_lines()
    assert len(lines) > 10
    for where, command in lines:
        targets = [a for a in shlex.split(command)[2:] if not a.startswith("-")]
        assert targets, f"{where}: {command!r} installs nothing"
        for target in targets:  # a path (this checkout), never a name the index resolves
            assert target.startswith("."), f"{where}: {command!r} installs from the index"


@pytest.mark.slow
def test_the_readme_install_lines_resolve_to_this_project(tmp_path: Path) -> None:
    checkout = fresh_checkout(tmp_path / "barecat")
    readme = [c for w, c in install_lines() if w.startswith("README.md")]
    assert "pip install ." in readme and "pip install '.[all]'" in readme
    for command in readme:
        report = tmp_path / "report.json"
        argv = shlex.split(command)[2:]
        pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "-q"]
        subprocess.run(
            [*pip, "--report", str(report), *argv],
            cwd=checkout,
            check=True,
            capture_output=True,
        )
        [item] = json.loads(report.read_text())["install"]
        assert item["metadata"]["name"] == "barecat"
        assert item["metadata"]["version"] != "0.3.1"
        assert item["download_info"]["url"] == checkout.as_uri(), command
