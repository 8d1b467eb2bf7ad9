"""What start-up loads: ``import barecat`` nothing but its face, ``barecat --version`` a
handful of modules, and reading a plain archive no sealing, codec, object-storage or
transfer code (listing it, not even crc32c).

Each check runs in a fresh interpreter and reads its ``sys.modules``, since this test
process has long imported everything.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import barecat
from barecat.cli.commands import COMMAND_MODULES, COMMANDS
from barecat.cli.main import build_parser
from barecat.cli.parsing import CommandParser

SRC = str(Path(barecat.__file__).resolve().parent.parent)

OPTIONAL_PARTS = (
    "barecat.sealing",
    "barecat.archive.index_digest",
    "barecat.codecs",
    "barecat.archive.auto_codec",
    "barecat.objectstore.objects",
    "barecat.objectstore.cache",
    "barecat.objectstore.block_cache",
    "barecat.archive.objectstore",
    "barecat.shards.objectstore",
    "barecat.web.server",
    "barecat.web.viewer",
    "barecat.mount",
    "barecat.cli.tui",
    "barecat.integrations",
    "barecat.transfer",
    "barecat.coldcrate",
    "barecat.ops",
    "cryptography",
    "zstandard",
    "lz4",
    "fsspec",
    "numpy",
    "torch",
    "httpx",
    "textual",
)
"""Modules (and packages with everything in them) that only some uses of an archive need."""


def loaded_after(code: str, *args: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``code`` (stdout is
    left for the result)."""
    probe = (
        "import io, contextlib, json, sys\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def optional_parts_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in OPTIONAL_PARTS)]


def barecat_modules(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "barecat" or m.startswith("barecat.")]


def test_import_barecat_loads_only_its_face() -> None:
    modules = loaded_after("import barecat")
    assert barecat_modules(modules) == ["barecat", "barecat.lazy_exports"]
    assert optional_parts_in(modules) == []


def test_public_names_load_what_they_need_and_no_more() -> None:
    modules = loaded_after(
        "import barecat\nbarecat.BarecatFileInfo\nbarecat.FileNotFoundBarecatError"
    )
    assert "barecat.archive" not in modules and "barecat.index" not in modules
    modules = loaded_after("from barecat import Barecat")
    assert "barecat.archive.facade" in modules
    assert optional_parts_in(modules) == []


@pytest.mark.parametrize(
    "args",
    [["--help"], [], ["--bogus"], ["lss"], ["--version"]],
    ids=["help", "nothing", "mistyped-option", "mistyped-command", "version"],
)
def test_a_run_that_names_no_command_loads_no_command_module(args: list[str]) -> None:
    code = f"from barecat.cli.main import main\nassert main({args!r}) in (0, 2)"
    modules = loaded_after(code)
    commands = {f"barecat.cli.{c.module}" for c in COMMANDS} - {"barecat.cli.main"}
    assert sorted(commands & set(modules)) == []
    assert not any(
        m.startswith(("barecat.archive", "barecat.index", "barecat.entries")) for m in modules
    )
    assert optional_parts_in(modules) == []


def test_the_command_list_without_the_modules_is_the_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    listed = build_parser((), list_the_rest=True)
    full = build_parser()
    assert listed.format_help() == full.format_help()
    one = build_parser(("listing",), list_the_rest=True)  # the rest listed around it
    assert one.format_help() == full.format_help()
    assert one.parse_args(["ls", "a.barecat"]).handler is not None
    assert getattr(listed.parse_args(["ls"]), "handler", None) is None  # listed only


def test_version_loads_a_handful_of_modules() -> None:
    modules = loaded_after("from barecat.cli.main import main\nassert main(['--version']) == 0")
    # (the kernels too, to say which run: the package, its twins and, for the Python
    # ones, the rule for holes they write by: 4 modules at most)
    kernels = [m for m in barecat_modules(modules) if m.startswith("barecat.kernels")]
    assert len(kernels) <= 4 and len(barecat_modules(modules)) - len(kernels) <= 12
    assert not any(m.startswith(("barecat.archive", "barecat.index")) for m in modules)
    assert optional_parts_in(modules) == []


@pytest.fixture
def plain_archive(tmp_path: Path) -> str:
    path = str(tmp_path / "plain.barecat")
    with barecat.Barecat(path, readonly=False) as bc:
        bc["dir/a.txt"] = b"alpha"
        bc["b.json"] = b"{}"
    return path


def test_listing_and_reading_a_plain_archive_load_no_optional_part(plain_archive: str) -> None:
    ls = "from barecat.cli.main import main\nassert main(['ls', '-l', sys.argv[1], 'dir']) == 0"
    listed = loaded_after(ls, plain_archive)
    assert optional_parts_in(listed) == []
    assert "crc32c" not in listed  # no checksum to take: not its 20-45 ms import either
    read = (
        "import barecat\n"
        "with barecat.Barecat(sys.argv[1]) as bc:\n"
        "    assert bc['dir/a.txt'] == b'alpha' and sorted(bc.listdir('')) == ['b.json', 'dir']\n"
    )
    modules = loaded_after(read, plain_archive)
    assert optional_parts_in(modules) == []
    # the read was checked by crc32c's C extension alone: not the package's slow __init__
    assert "crc32c._crc32c" in modules and "crc32c" not in modules
    catted = loaded_after(
        "from barecat.cli.main import main\n"
        "sys.stdout = io.TextIOWrapper(io.BytesIO())  # (cat writes bytes)\n"
        "assert main(['cat', sys.argv[1], 'dir/a.txt']) == 0",
        plain_archive,
    )
    assert "crc32c._crc32c" in catted and "crc32c" not in catted


def test_a_sealed_archive_loads_its_sealing_when_opened(tmp_path: Path) -> None:
    path = str(tmp_path / "sealed.barecat")
    with barecat.Barecat(path, readonly=False, compression="zstd") as bc:
        bc["a.txt"] = b"alpha" * 100
    read = "import barecat\nassert barecat.Barecat(sys.argv[1])['a.txt'] == b'alpha' * 100"
    modules = loaded_after(read, path)
    assert "barecat.sealing.blocks" in modules and "zstandard" in modules


def test_the_command_table_names_what_each_module_registers() -> None:
    for module, names in COMMAND_MODULES.items():
        sub = argparse.ArgumentParser().add_subparsers(parser_class=CommandParser)
        importlib.import_module(f"barecat.cli.{module}").register(sub)
        assert tuple(sub.choices) == names, module
    parser = build_parser()
    table = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(table.choices) == [n for names in COMMAND_MODULES.values() for n in names]
    listed = {a.dest: a.help for a in table._choices_actions}  # what --help lists
    assert listed == {c.name: c.help for c in COMMANDS if c.name != "__complete"}


LAZY_PACKAGES = [
    "barecat",
    "barecat.archive",
    "barecat.codecs",
    "barecat.coldcrate",
    "barecat.index",
    "barecat.mount",
    "barecat.ops",
    "barecat.objectstore",
    "barecat.sealing",
    "barecat.shards",
    "barecat.transfer",
    "barecat.web.viewer",
]


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_packages_export_their_names_and_no_submodule_hides_one(package: str) -> None:
    """Every name of ``__all__`` resolves, is in ``dir()``, star-imports, and stays the
    export after a submodule of the same name is imported (``barecat.transfer.ingest`` is
    the function, as when the package imported everything up front)."""
    code = (
        "import importlib, pkgutil, types\n"
        f"package = importlib.import_module({package!r})\n"
        "for found in pkgutil.iter_modules(package.__path__, package.__name__ + '.'):\n"
        "    if found.name.endswith('__main__'):\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(found.name)\n"
        "    except ImportError:  # an optional dependency this machine lacks\n"
        "        pass\n"
        "for name in package.__all__:\n"
        "    assert not isinstance(getattr(package, name), types.ModuleType), name\n"
        "assert set(package.__all__) <= set(dir(package))\n"
        f"exec('from {package} import *', {{}})\n"
    )
    loaded_after(code)


def test_the_checksum_is_crc32c_with_its_continuation() -> None:
    from barecat.checksum import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert crc32c(b"56789", crc32c(b"1234")) == crc32c(b"123456789")
    assert crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283
