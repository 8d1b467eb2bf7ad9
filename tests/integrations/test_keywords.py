"""The keywords the engines' functions share, declared once
(``integrations/keywords.py``): each engine function's signature still shows every one
written out, with the values' defaults, and a keyword none of them takes is Python's
``TypeError``. Real archives; each engine's part is skipped without its extra."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from helpers.engines import build

pytest.importorskip("pyarrow", reason="pyarrow is not installed (the ray, dask or hf extra)")

from barecat.integrations.keywords import (
    ReaderKeywords,
    WriterKeywords,
    reader_values,
    writer_values,
)
from barecat.integrations.parts import OutputSettings
from barecat.integrations.selection import ArchiveLocation, FileSelection

READERS = [
    ("ray", "read_barecat"),
    ("ray", "BarecatDatasource"),
    ("dask", "read_barecat"),
    ("hf", "plan_shards"),
    ("hf", "iterable_dataset"),
    ("hf", "to_dataset"),
]
WRITERS = [("ray", "write_barecat"), ("ray", "BarecatDatasink"), ("dask", "write_barecat")]
EXTRA = {"ray": "ray.data", "dask": "dask.dataframe", "hf": "datasets"}


def engine_function(engine: str, name: str) -> Any:
    pytest.importorskip(EXTRA[engine], reason=f"the {engine} extra is not installed")
    return getattr(importlib.import_module(f"barecat.integrations.{engine}"), name)


@pytest.mark.parametrize(("engine", "name"), READERS + WRITERS)
def test_every_shared_keyword_is_written_out_in_the_signature(engine: str, name: str) -> None:
    function = engine_function(engine, name)
    parameters = inspect.signature(function).parameters
    shared = ReaderKeywords if (engine, name) in READERS else WriterKeywords
    assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    for key in shared.__annotations__:
        assert parameters[key].kind is inspect.Parameter.KEYWORD_ONLY
    defaults = {k: parameters[k].default for k in shared.__annotations__}
    if shared is ReaderKeywords:
        assert FileSelection() == FileSelection.of(
            *(defaults[k] for k in ("pattern", "where", "params", "columns", "group_by_stem"))
        )
        assert (defaults["passphrase"], defaults["storage_options"]) == (None, None)
    else:
        made = [defaults[k] for k in ("overwrite", "shard_size_limit", "compression")]
        assert OutputSettings(*made, defaults["compression_level"]) == OutputSettings()


@pytest.mark.parametrize(("engine", "name"), READERS)
def test_a_keyword_no_reader_takes_is_a_type_error(engine: str, name: str, tmp_path: Path) -> None:
    function = engine_function(engine, name)
    path = str(tmp_path / "a.barecat")
    build(path, {"a/x": b"x"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'patern'"):
        function(path, patern="a/*")


def test_the_values_made_of_the_keywords(tmp_path: Path) -> None:
    location, selection = reader_values(
        tmp_path, {"pattern": "a/**", "params": [1], "columns": ["path"], "cache_dir": "c"}, "f"
    )
    assert location == ArchiveLocation(str(tmp_path), cache_dir="c")
    assert selection == FileSelection("a/**", None, (1,), ("path",), False)
    location, settings = writer_values("s3://b/o", {"overwrite": True, "passphrase": "p"}, "w")
    assert location == ArchiveLocation("s3://b/o", passphrase="p")
    assert settings == OutputSettings(overwrite=True)
    with pytest.raises(TypeError, match=r"^w\(\) got an unexpected keyword argument 'cache_dir'"):
        writer_values("o", {"cache_dir": "c"}, "w")  # a reader's, not a writer's
