"""The kernels the tests compare: the pure-Python reference (``python.py`` and
``python_writes.py``) and the compiled core.

The compiled one is ``barecat.kernels._compiled`` as built in place, or, when
``BARECAT_KERNELS_SO`` names a built extension (``tools/asan_kernels.py`` sets it to its
AddressSanitizer build), that file, loaded under the same module name. Where no compiled
core is built, the tests that need it skip and say so.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from types import ModuleType

import pytest

from barecat.kernels import python as python_kernels
from barecat.kernels import python_writes

SO_VARIABLE = "BARECAT_KERNELS_SO"
NAME = "barecat.kernels._compiled"


def _load_compiled() -> ModuleType | None:
    """The compiled kernels: the file ``BARECAT_KERNELS_SO`` names, else the built one."""
    so = os.environ.get(SO_VARIABLE)
    if not so:
        try:
            return importlib.import_module(NAME)
        except ImportError:
            return None
    spec = importlib.util.spec_from_file_location(NAME, so)
    if spec is None or spec.loader is None:
        raise ImportError(f"{SO_VARIABLE}={so}: not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[NAME] = module
    return module


_COMPILED = _load_compiled()


@pytest.fixture(scope="session")
def compiled() -> ModuleType:
    """The compiled kernels (skips where none is built)."""
    if _COMPILED is None:
        pytest.skip("the compiled core is not built (python setup.py build_ext --inplace)")
    return _COMPILED


@pytest.fixture(scope="session")
def python() -> ModuleType:
    """The pure-Python reference kernels."""
    return python_kernels


def _twin(request: pytest.FixtureRequest, reference: ModuleType) -> ModuleType:
    """The Python ``reference`` or the compiled kernels, by the fixture's parameter."""
    if request.param == "python":
        return reference
    module: ModuleType = request.getfixturevalue("compiled")
    return module


@pytest.fixture(scope="session", params=["python", "compiled"])
def kernels(request: pytest.FixtureRequest) -> ModuleType:
    """Each kernel module in turn."""
    return _twin(request, python_kernels)


@pytest.fixture(scope="session", params=["python", "compiled"])
def writer(request: pytest.FixtureRequest) -> ModuleType:
    """Each twin of ``write_files`` in turn (``python_writes.py``, the compiled core)."""
    return _twin(request, python_writes)
