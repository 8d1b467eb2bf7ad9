"""Fixtures of the engine tests: a local S3 server (moto's, a process of its own) and
new buckets on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from helpers.s3 import Bucket, S3Server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """A local S3 server for the module (skips without s3fs or moto's server)."""
    pytest.importorskip("s3fs", reason="the remote extra (fsspec + s3fs) is not installed")
    pytest.importorskip("moto.server", reason="moto[server] (a local S3 server) is not installed")
    server = S3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def bucket(s3: S3Server) -> Bucket:
    """A new, empty bucket on the module's server."""
    return Bucket(s3, f"test-{uuid.uuid4().hex[:12]}")
