"""A feature whose optional package is not installed says what needs it, what could not
be imported and the exact line that installs the extra bringing it (the form this
project installs in, from a checkout: the package index's ``barecat[EXTRA]`` is the older 0.3.1).

Each case runs in a fresh interpreter where the package cannot be found, as when it was
never installed: a finder ahead of all others answers "No module named ..." for it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import barecat
from barecat.exceptions import MissingDependencyBarecatError

BLOCKING = """
import importlib.abc, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
try:
{code}
except ImportError as e:
    print(type(e).__name__, e, sep=": ")
"""

RAISED = "MissingDependencyBarecatError: "
CASES = [  # (blocked, code, what needs it, extra, how it is said)
    ("torch", "import barecat.integrations.torch",
     "barecat.integrations.torch needs PyTorch", "torch", RAISED),
    ("numpy", "import barecat.integrations.torch",
     "barecat.integrations.torch needs NumPy", "torch", RAISED),
    ("fsspec", "import barecat.integrations.fsspec",
     "barecat.integrations.fsspec needs fsspec", "fsspec", RAISED),
    ("ray", "import barecat.integrations.ray",
     "barecat.integrations.ray needs Ray Data", "ray", RAISED),
    ("dask", "import barecat.integrations.dask",
     "barecat.integrations.dask needs Dask DataFrame", "dask", RAISED),
    ("datasets", "import barecat.integrations.hf",
     "barecat.integrations.hf needs Hugging Face datasets", "hf", RAISED),
    ("mfusepy", "import barecat.mount; barecat.mount.check_fuse()",
     "Mounting needs mfusepy", "mount", RAISED),
    ("starlette", "from barecat.web.viewer import serve_viewer",
     "The image viewer needs Starlette and uvicorn", "viewer", RAISED),
    ("uvicorn", "from barecat.web.server.serving import serve_archives",
     "Serving archives needs Starlette and uvicorn", "server", RAISED),
    ("httpx", "from barecat import HttpBarecat",
     "HttpBarecat needs httpx", "server", RAISED),
    ("cryptography", "import barecat; barecat.Barecat('SEALED', passphrase='pw')['f']",
     "Encrypted archives need cryptography", "sealing", RAISED),
    # the command line says it as every error, on stderr, exit status 1
    ("textual", "from barecat.cli.main import main; sys.exit(main(['ncdu', 'ARCHIVE']))",
     "The terminal interfaces need Textual", "tui", "barecat ncdu: "),
    ("starlette", "from barecat.cli.main import main; sys.exit(main(['view', 'ARCHIVE']))",
     "The image viewer needs Starlette and uvicorn", "viewer", "barecat view: "),
    ("uvicorn", "from barecat.cli.main import main; sys.exit(main(['serve', 'ARCHIVE']))",
     "Serving archives needs Starlette and uvicorn", "server", "barecat serve: "),
]  # fmt: skip


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("extras")
    made = {"ARCHIVE": str(folder / "plain.barecat"), "SEALED": str(folder / "sealed.barecat")}
    with barecat.Barecat(made["ARCHIVE"], readonly=False) as bc:
        bc["f"] = b"data"
    with barecat.Barecat(made["SEALED"], readonly=False, passphrase="pw") as bc:
        bc["f"] = b"data"
    return made


IDS = [f"{case[0]}-{'raised' if case[4] == RAISED else 'cli'}" for case in CASES]


@pytest.mark.parametrize(("blocked", "code", "needs", "extra", "said"), CASES, ids=IDS)
def test_a_missing_optional_package_names_its_extra(
    archives: dict[str, str], blocked: str, code: str, needs: str, extra: str, said: str
) -> None:
    for name, path in archives.items():
        code = code.replace(name, path)
    script = BLOCKING.format(blocked=(blocked,), code=textwrap.indent(code, "    "))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    line = (
        f"{said}{needs} (No module named {blocked!r}): "
        f"pip install '.[{extra}]' in a checkout of barecat (the {extra!r} extra)\n"
    )
    if said == RAISED:
        assert (done.returncode, done.stdout) == (0, line), done.stderr
    else:
        assert (done.returncode, done.stdout, done.stderr) == (1, "", line)


def test_every_extra_named_is_one_of_the_project() -> None:
    """The extras the messages name exist in this project's pyproject.toml."""
    import tomllib

    pyproject = Path(barecat.__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert {case[3] for case in CASES} <= set(extras)


def test_the_block_of_an_extras_imports_turns_only_a_failed_import_into_the_error() -> None:
    guard = MissingDependencyBarecatError.when_missing
    with (
        pytest.raises(MissingDependencyBarecatError, match="x needs y") as raised,
        guard("x needs y", "torch"),
    ):
        import barecat_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert raised.value.name == "barecat_no_such_module" and raised.value.extra == "torch"
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)
    with pytest.raises(ValueError, match="other"), guard("x needs y", "torch"):
        raise ValueError("other")
    with guard("x needs y", "torch"):
        import json  # noqa: F401  (found: nothing raised)
