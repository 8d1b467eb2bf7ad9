"""The real coldcrate 0.2.0 in its own interpreter."""

from __future__ import annotations

import os

import pytest

from helpers import REPO


def coldcrate_python() -> str:
    configured = os.environ.get("COLDCRATE_PYTHON")
    fallback = os.path.join(REPO, ".venv-coldcrate", "bin", "python")
    for candidate in (configured, fallback):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("coldcrate 0.2.0 interpreter not found (./run test creates .venv-coldcrate)")
