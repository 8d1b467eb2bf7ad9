"""Run the kernel tests against an AddressSanitizer + UndefinedBehaviorSanitizer build of
``barecat.kernels._compiled``, failing on any report.

It compiles ``src/barecat/kernels/_compiled.c`` with ``-fsanitize=address,undefined
-fno-sanitize-recover=all -fno-omit-frame-pointer -g`` (the same defines as
``setup.py``: the stable ABI from Python 3.11) into a temporary folder, then runs
``pytest tests/kernels`` in a child process with ``LD_PRELOAD`` set to the compiler's
``libasan.so`` (the interpreter is not instrumented, so the runtime must load first),
``ASAN_OPTIONS=detect_leaks=0`` (the interpreter keeps memory by design),
``PYTHONMALLOC=malloc`` (so that every buffer is a block of its own, not a piece of
pymalloc's arenas whose bounds ASan cannot see) and
``BARECAT_KERNELS_SO`` naming the build: ``tests/kernels/conftest.py`` loads that file as
the compiled kernels, and ``test_the_build_under_test`` checks that the module under
test is that file, instrumented, with the sanitizer's runtime in the process
(``BARECAT_KERNELS_ASAN=1``). ``BARECAT_PUREPYTHON=1`` keeps the uninstrumented in-place
build out of the process. The run fails if pytest fails or a sanitizer reports anything
(its reports go to files, shown at the end: pytest captures a test's stderr).
Arguments go to pytest. ``./run fuzz`` runs it with ``BARECAT_FUZZ=1`` (many examples
a fuzz test), skipped where no compiler with ASan is found (``--if-available``)::

    .venv/bin/python tools/asan_kernels.py [--if-available] [pytest args]
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "src", "barecat", "kernels", "_compiled.c")
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
FLAGS = [*SANITIZE, "-fno-omit-frame-pointer", "-g", "-O1", "-Wall", "-Wextra", "-Werror"]
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "SUMMARY: AddressSanitizer",
           "SUMMARY: UndefinedBehaviorSanitizer")  # fmt: skip


def compiler() -> str:
    return os.environ.get("CC", "gcc")


def build(folder: str) -> str:
    """Compile the extension with the sanitizers into ``folder``.

    Returns:
        The path of the built extension module.

    Raises:
        subprocess.CalledProcessError: the compiler failed.
    """
    limited = sys.version_info >= (3, 11)
    suffix = ".abi3.so" if limited else str(sysconfig.get_config_var("EXT_SUFFIX"))
    target = os.path.join(folder, "_compiled" + suffix)
    defines = ["-DPy_LIMITED_API=0x030B0000"] if limited else []
    include = sysconfig.get_paths()["include"]
    command = [compiler(), "-shared", "-fPIC", *FLAGS, *defines, f"-I{include}", SOURCE,
               "-o", target]  # fmt: skip
    subprocess.run(command, check=True)
    return target


def runtime() -> str | None:
    """The compiler's AddressSanitizer runtime library (for LD_PRELOAD), or None where
    there is no such compiler or it has none."""
    try:
        path = subprocess.run([compiler(), "-print-file-name=libasan.so"], check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return path if os.path.isabs(path) and os.path.exists(path) else None


def run_tests(so: str, asan: str, pytest_args: list[str], folder: str) -> int:
    """pytest of tests/kernels against ``so`` under the sanitizers: 0 if it passed and
    no sanitizer said anything. The sanitizers write their reports to files in
    ``folder`` (pytest captures the test's stderr, and a process a sanitizer stops
    never shows it), shown here."""
    logs = os.path.join(folder, "report")
    env = {
        **os.environ,
        "LD_PRELOAD": asan,
        "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:log_path={logs}",
        "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:log_path={logs}",
        "BARECAT_KERNELS_SO": so,
        "BARECAT_KERNELS_ASAN": "1",
        "BARECAT_PUREPYTHON": "1",
        "PYTHONMALLOC": "malloc",  # (each object its own block, whose ends ASan sees)
        "PYTHONPATH": os.pathsep.join(
            [os.path.join(ROOT, "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               os.path.join(ROOT, "tests", "kernels"), *pytest_args]  # fmt: skip
    child = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
    assert child.stdout is not None
    reported = False
    for line in child.stdout:
        sys.stdout.write(line)
        reported = reported or any(mark in line for mark in REPORTS)
    code = child.wait()
    for name in sorted(os.listdir(folder)):
        if name.startswith("report"):
            with open(os.path.join(folder, name), errors="replace") as f:
                sys.stdout.write(f.read())
            reported = True
    if reported:
        print("asan_kernels: a sanitizer reported an error (above)", file=sys.stderr)
        return code or 1
    if code:
        print(f"asan_kernels: the tests failed under the sanitizers (exit {code})", file=sys.stderr)
    return code


def main(argv: list[str]) -> int:
    """Build, then run the tests; ``--if-available`` first: where the compiler or its
    ASan runtime is missing, say so and succeed (else that fails the run)."""
    optional = argv[:1] == ["--if-available"]
    asan = runtime()
    if asan is None:
        print(f"asan_kernels: no {compiler()} with libasan.so here: the sanitizer run "
              f"{'is skipped' if optional else 'cannot be done'}", file=sys.stderr)  # fmt: skip
        return 0 if optional else 2
    with tempfile.TemporaryDirectory(prefix="barecat-asan-") as folder:
        so = build(folder)
        print(f"asan_kernels: built {so}", flush=True)
        return run_tests(so, asan, argv[1:] if optional else argv, folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
