"""The reference barecat 0.3.1 in its own interpreter: finding it, running its code."""

from __future__ import annotations

import os
import subprocess

import pytest

from helpers import REPO


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
