"""Where new bytes go (``barecat.shards.placement``): the write session and
``Sharder.add`` (0.3.1's append, for callers with their own index) place every file
alike, on real index and shard files: the same shard and offset, the same roll to a new
shard at the size limit, the same refusal of a file over it, the same skip past a shard
linked from elsewhere. Either one deciding on its own shows up here as a difference.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from barecat.entries import Address, BarecatFileInfo
from barecat.exceptions import FileTooLargeBarecatError
from barecat.index import Index
from barecat.ops.writing import WriteSession
from barecat.shards import Sharder

LIMIT = 16

Step = tuple[str, int]
"""("data" | "stream", size) adds a file of that many bytes; ("link", 0) links a shard."""


def by_sharder_add(base: str, target: str, steps: list[Step]) -> list[Address | str]:
    """Each step through ``Sharder.add`` (no index): its address, or the error's name."""
    out: list[Address | str] = []
    with Sharder(base, shard_size_limit=LIMIT, readonly=False) as sharder:
        for kind, size in steps:
            data = os.urandom(size)
            try:
                if kind == "link":
                    out.append(f"link {sharder.link_shard(target)}")
                elif kind == "stream":
                    out.append(sharder.add(size=size, fileobj=io.BytesIO(data)))
                else:
                    out.append(sharder.add(data=data))
            except FileTooLargeBarecatError:
                out.append("too large")
    return out


def by_write_session(base: str, target: str, steps: list[Step]) -> list[Address | str]:
    """Each step through an archive's write session, rows in a real index. ``Sharder.add``
    knows only what is on disk, so the session is placed from what is on record before
    each file (``resync``, as when a writer opens the archive): a live session that
    has not reached a shard linked after it goes on filling its own shard first."""
    out: list[Address | str] = []
    index = Index(base, shard_size_limit=LIMIT, readonly=False)
    sharder = Sharder(base, shard_size_limit=LIMIT, readonly=False)
    session = WriteSession(index, sharder)

    def row(k: int) -> Callable[[Address], None]:
        def record(a: Address) -> None:
            index.add_file(BarecatFileInfo(f"f{k}", shard=a.shard, offset=a.offset,
                                           size=a.size, crc32c=a.crc32c))  # fmt: skip

        return record

    try:
        for k, (kind, size) in enumerate(steps):
            data = os.urandom(size)
            session.resync()
            try:
                if kind == "link":
                    out.append(f"link {session.link_shard(target)}")
                elif kind == "stream":
                    out.append(session.store(row(k), fileobj=io.BytesIO(data), size_hint=size))
                else:
                    out.append(session.store(row(k), data))
            except FileTooLargeBarecatError:
                out.append("too large")
    finally:
        sharder.close()
        index.close()
    return out


def both(directory: str, steps: list[Step]) -> tuple[list[Address | str], list[Address | str]]:
    target = os.path.join(directory, "elsewhere-shard")
    with open(target, "wb") as f:
        f.write(b"elsewhere")  # (shorter than the limit: room to write into it)
    return (
        by_sharder_add(os.path.join(directory, "added.barecat"), target, steps),
        by_write_session(os.path.join(directory, "session.barecat"), target, steps),
    )


def shape(results: list[Address | str]) -> list[tuple[int, int, int] | str]:
    """Where each file went (the CRCs differ: the bytes are random)."""
    return [r if isinstance(r, str) else (r.shard, r.offset, r.size) for r in results]


def test_both_place_files_as_the_rule_says(tmp_path: Path) -> None:
    steps: list[Step] = [("data", 10), ("data", 6), ("data", 1), ("stream", 16), ("data", 0),
                         ("data", 17), ("stream", 5), ("link", 0), ("data", 3),
                         ("data", 14)]  # fmt: skip
    added, stored = both(str(tmp_path), steps)
    expected = [
        (0, 0, 10),
        (0, 10, 6),  # fills shard 0 exactly
        (1, 0, 1),  # one byte more rolls
        (2, 0, 16),  # a whole shard's worth
        (2, 16, 0),  # an empty file fits at a full shard's end
        "too large",  # nothing written
        (3, 0, 5),
        "link 4",
        (5, 0, 3),  # never into the linked shard
        (6, 0, 14),
    ]
    assert shape(added) == expected
    assert shape(stored) == expected


steps_strategy = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["data", "stream"]), st.integers(0, LIMIT + 2)),
        st.just(("link", 0)),
    ),
    max_size=14,
)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(steps=steps_strategy)
def test_the_write_session_and_sharder_add_never_disagree(steps: list[Step]) -> None:
    with tempfile.TemporaryDirectory(prefix="placement-") as directory:
        added, stored = both(directory, steps)
    assert shape(added) == shape(stored)
