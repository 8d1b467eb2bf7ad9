"""The guard (``barecat.shards.guard``): a shard linked to ``/dev/null`` that an archive
whose files share bytes keeps past its last shard, so barecat 0.3.1 never writes it; the
Sharder makes it once, reads it as an empty shard, and never writes through it: bytes for
its number first put a new guard past the last shard, then turn it into a file of the
archive's own. Real files and links in a temporary directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from barecat.shards import Sharder
from barecat.shards.guard import (
    GUARD_TARGET,
    is_guard,
    make_guard,
    replace_guard_with_file,
    replace_with_guard,
)


def test_the_file_level_steps(tmp_path: Path) -> None:
    path = str(tmp_path / "shard")
    assert not is_guard(path)  # not there
    Path(path).write_bytes(b"bytes")
    assert not is_guard(path)  # a file
    replace_with_guard(path)
    assert is_guard(path) and os.readlink(path) == GUARD_TARGET
    replace_guard_with_file(path)
    assert not os.path.islink(path) and Path(path).read_bytes() == b""
    os.remove(path)
    make_guard(path)
    assert is_guard(path)
    other = tmp_path / "link"
    other.symlink_to(tmp_path / "target")
    assert not is_guard(str(other))  # a link, but not to the null device
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "shard"]  # no temporaries


def test_the_guard_is_made_once_past_the_last_shard(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, readonly=False) as sh:
        sh.add(data=b"one")
        assert not sh.guarded
        sh.add_guard()
        sh.add_guard()  # (nothing: there is one)
        assert sh.num_shards == 2 and sh.is_guard(1) and sh.guarded
        assert sh.is_foreign(1)
    with Sharder(base, readonly=False, allow_writing_symlinked_shard=True) as sh:
        sh.add_guard()  # (found on disk)
        assert sh.num_shards == 2
        assert sh.is_foreign(1), "a guard is foreign even where links may be written"
        assert sh.read_from_address(1, 0, 0) == b""
        assert sh.pread(1, 0, 10) == b""  # 0.3.1 sees an empty shard


def test_bytes_for_the_guard_s_number_move_the_guard_past_them(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    null_before = os.stat(os.devnull)
    with Sharder(base, readonly=False) as sh:
        sh.add(data=b"zero")
        sh.add_guard()
        sh.open_for_writing(1)  # the write session rolls into shard 1
        assert not sh.is_guard(1) and not os.path.islink(sh.get_shard_path(1))
        assert sh.is_guard(2) and sh.num_shards == 3
        sh.write_at(1, 0, b"new bytes")
        assert sh.read_from_address(1, 0, 9) == b"new bytes"
    assert Path(f"{base}-shard-00001").read_bytes() == b"new bytes"
    assert os.stat(os.devnull).st_rdev == null_before.st_rdev  # (the device is untouched)


def test_place_guard_replaces_an_unused_shard(tmp_path: Path) -> None:
    base = str(tmp_path / "raw")
    with Sharder(base, readonly=False) as sh:
        sh.add(data=b"zero")
        sh.add_empty_shard()
        sh.place_guard(1)
        assert sh.is_guard(1)
        sh.place_guard(3)  # past the last shard
        assert sh.num_shards == 4 and sh.is_guard(3)
        sh.remove_shards_from(1)
        assert sh.num_shards == 1 and not sh.guarded
        sh.add_guard()  # (made again: removing shards forgets the one seen)
        assert sh.is_guard(1)
