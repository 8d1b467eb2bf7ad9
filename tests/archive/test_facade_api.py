"""The facade's face: the constructor takes barecat 0.3.1's parameters in 0.3.1's order
(checked against the reference's own signature, in its interpreter) and every newer one
by keyword only; the methods ``Barecat`` offers from its parts are its own to callers,
``help`` and ``inspect``, bound to each archive's own parts, and a subclass may override
them and call the original through ``super()``.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
from typing import Any

import pytest

import barecat
from barecat.archive.parts import PartMethod
from helpers.reference import reference_python

_SIGNATURE_OF_THE_REFERENCE = """
import inspect, json, barecat
assert barecat.__version__ == "0.3.1", barecat.__version__
print(json.dumps([[p.name, p.kind.name, repr(p.default)]
                  for p in inspect.signature(barecat.Barecat).parameters.values()]))
"""


def _reference_parameters() -> list[list[str]]:
    done = subprocess.run(
        [reference_python(), "-I", "-c", _SIGNATURE_OF_THE_REFERENCE],
        capture_output=True,
        text=True,
        check=True,
    )
    parameters: list[list[str]] = json.loads(done.stdout)
    return parameters


def test_the_constructor_takes_the_reference_parameters_in_its_order_and_newer_by_keyword() -> None:
    reference = _reference_parameters()
    ours = list(inspect.signature(barecat.Barecat).parameters.values())
    assert len(reference) > 2
    assert [[p.name, p.kind.name, repr(p.default)] for p in ours[: len(reference)]] == reference
    newer = ours[len(reference) :]
    assert newer, "the facade takes parameters 0.3.1 does not"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in newer), [
        p.name for p in newer if p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]


def test_the_reference_positional_call_opens_as_it_says(tmp_path: Any) -> None:
    path = str(tmp_path / "positional.barecat")
    # shard_size_limit, readonly, overwrite, auto_codec, exist_ok, append_only, threadsafe,
    # allow_writing_symlinked_shard, wal, readonly_is_immutable
    as_031 = (4096, False, False, False, True, False, True, False, False, False)
    with barecat.Barecat(path, *as_031) as bc:
        assert (bc.readonly, bc.threadsafe, bc.shard_size_limit) == (False, True, 4096)
        bc["a.txt"] = b"x" * 3000
        bc["b.txt"] = b"y" * 3000  # past the limit: a second shard
        assert bc.sharder.num_shards == 2
    with barecat.Barecat(path, None, True, False, False, True, True) as bc:
        assert (bc.readonly, bc.append_only, bc["b.txt"]) == (True, True, b"y" * 3000)
    with pytest.raises(TypeError):
        barecat.Barecat(path, *(None, True, False, False, True), *[False] * 5, 1.0)  # type: ignore[call-arg]


def _offered() -> dict[str, PartMethod[Any, Any, Any]]:
    return {
        name: value
        for klass in reversed(barecat.Barecat.__mro__)
        for name, value in vars(klass).items()
        if isinstance(value, PartMethod)
    }


def test_the_methods_of_the_parts_are_the_archives_own(tmp_path: Any) -> None:
    offered = _offered()
    assert {"read", "add", "commit", "verify", "defragment", "open", "move"} <= set(offered)
    with (
        barecat.Barecat(str(tmp_path / "one"), readonly=False) as one,
        barecat.Barecat(str(tmp_path / "two"), readonly=False) as two,
    ):
        for name, part_method in offered.items():
            on_class = getattr(barecat.Barecat, name)
            assert on_class is part_method.method
            bound = getattr(one, name)
            assert inspect.getdoc(bound) == inspect.getdoc(on_class) is not None, name
            parameters = list(inspect.signature(on_class).parameters.values())[1:]
            assert inspect.signature(bound) == inspect.signature(on_class).replace(
                parameters=parameters
            ), name
            assert bound.__self__ is getattr(one, part_method.part)
            assert getattr(two, name).__self__ is getattr(two, part_method.part)
        one["f"] = b"one"
        two["f"] = b"two"
        assert (one.read("f"), two.read("f")) == (b"one", b"two")


class _Counting(barecat.Barecat):
    """Overrides a part's method and calls the original through ``super()``."""

    reads = 0

    def read(self, item: Any, offset: int = 0, size: int = -1) -> bytes:
        type(self).reads += 1
        return super().read(item, offset, size)


def test_a_subclass_overrides_a_parts_method_and_reaches_it_through_super(
    tmp_path: Any,
) -> None:
    path = os.path.join(tmp_path, "sub.barecat")
    with _Counting(path, readonly=False) as bc:
        bc["f"] = b"data"
        assert [bc.read("f"), bc.read("f", 1, 2)] == [b"data", b"at"]
        assert _Counting.reads == 2
        assert "read" not in vars(bc)  # what super() found is not kept over the override
