"""Builds barecat's one compiled module, ``barecat.kernels._compiled``, where a C compiler
is found; everything else is in pyproject.toml.

The extension is optional: without a compiler (or where it fails to build) the install
goes on with the pure-Python kernels, and says so in one line on stderr (``pip install
-v`` shows it; ``barecat.kernels.describe()`` says it after the install). On Python 3.11
and later it is built on the stable ABI (the buffer protocol joined it in 3.11), so one
wheel (``cp311-abi3``) serves every later Python; on 3.10 it is built for 3.10 alone. The
wheel holds the built module, not its C source (``_compiled.c`` and the header it includes,
``crc32c.h``: the sdist holds those).
"""

from __future__ import annotations

import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

LIMITED = sys.version_info >= (3, 11)


class OptionalBuildExt(build_ext):
    """build_ext that says in one line which path the install took, and goes on without
    the module where it does not build (leaving no module of an earlier build behind)."""

    def run(self) -> None:
        self._failure: str | None = None
        try:
            super().run()
        except Exception as e:  # before any extension: e.g. no compiler could be set up
            self._failure = self._reason(e)
        if self._failure is None:
            self._say("compiled core built (barecat.kernels._compiled)")
            return
        for ext in self.extensions:  # what an earlier build left would contradict the line
            stale = self.get_ext_fullpath(ext.name)
            if os.path.exists(stale):
                os.remove(stale)
        self._say(f"no compiled core ({self._failure}); barecat installs its pure-Python kernels")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # the compiler is missing, or failed on this platform
            self._failure = self._reason(e)

    @staticmethod
    def _reason(e: Exception) -> str:
        """Why the build failed, in a few words (the compiler printed its own errors)."""
        cause = e.args[0] if e.args and isinstance(e.args[0], Exception) else e
        if isinstance(cause, subprocess.CalledProcessError):  # (a CompileError wraps it)
            cmd = cause.cmd if isinstance(cause.cmd, (list, tuple)) else str(cause.cmd).split()
            return f"{cmd[0]} exited with status {cause.returncode}"
        return " ".join(str(cause).split()) or type(cause).__name__

    @staticmethod
    def _say(line: str) -> None:
        print(f"barecat: {line}", file=sys.stderr)


setup(
    ext_modules=[
        Extension(
            "barecat.kernels._compiled",
            ["src/barecat/kernels/_compiled.c"],
            depends=["src/barecat/kernels/crc32c.h"],  # (rebuilt when it changes; in the sdist)
            py_limited_api=LIMITED,
            define_macros=[("Py_LIMITED_API", "0x030B0000")] if LIMITED else [],
            extra_compile_args=["-O2"] if sys.platform != "win32" else [],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
    exclude_package_data={"barecat.kernels": ["*.c", "*.h"]},
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED else {},
)
