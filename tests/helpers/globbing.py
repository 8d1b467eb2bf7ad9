"""What the standard library's glob says a pattern matches: the model archives' globs follow."""

from __future__ import annotations

import glob
import os
import sys

import pytest


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
