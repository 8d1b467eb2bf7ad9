"""Shared fixtures: archive factories over real files in a temporary directory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

import barecat


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
