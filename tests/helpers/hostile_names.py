"""File names a terminal would act on, for the tests that hold barecat's escaping of
names against what a GNU tool prints for the same names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import strategies as st

NAME_ALPHABET = [chr(c) for c in range(1, 0x80) if chr(c) != "/"]
NAME_ALPHABET += ["\x85", "\x9b", "é", "名", "\u2028", "\u0378", "\u200b", "\u00a0", "\U0001f600"]
"""Every ASCII character a name may hold, C1 controls, and Unicode's odd cases."""

NAME_SETS = st.sets(st.text(st.sampled_from(NAME_ALPHABET), min_size=1, max_size=8), max_size=30)
"""Sets of names drawn from :data:`NAME_ALPHABET`."""

C_LOCALE = {"LC_ALL": "C.UTF-8", "PATH": os.environ.get("PATH", "")}
"""The environment the GNU tool runs in (its quoting depends on the locale)."""


def folder_of(factory: pytest.TempPathFactory, names: set[str]) -> tuple[Path, set[str]]:
    """A new folder holding an empty file of each name (``.`` and ``..`` left out);
    returns it and the names made."""
    folder = factory.mktemp("names")
    made = names - {".", ".."}
    for name in made:
        (folder / name).touch()
    return folder, made
