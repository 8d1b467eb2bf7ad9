"""Run barecat 0.3.1's own test suite against this package: the drop-in gate.

``./run compat`` (and ``./run test``) call ``python tests/reference_suite.py``. It

1. downloads the barecat 0.3.1 source distribution with pip, pinned by its sha256, into
   ``.cache/compat/`` (once);
2. copies the sdist's ``tests/`` folder to a fresh temporary directory outside our tree,
   leaving out the files listed in ``tests/compat/out_of_scope.txt`` (they import the
   reference's private modules);
3. runs them with pytest in this interpreter, so ``import barecat`` and the ``barecat``
   commands on ``PATH`` are ours;
4. compares each test's outcome with ``tests/compat/expected_failures.txt``: the gate
   fails if a test fails that is not listed, or a listed test passes or no longer exists
   (the list must stay true). It prints one summary line per category and each listed
   deviation with its reason; pytest's own output only when the gate fails.

Nothing here changes what a reference test asserts: the suite runs as shipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path

VERSION = "0.3.1"
SDIST_SHA256 = "39ac7e9571a3f3781ae596344d28682b984a5c3e936bb3375ce00c5777fb204c"
SDIST_NAME = f"barecat-{VERSION}.tar.gz"

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
COMPAT = HERE / "compat"
EXPECTED_FAILURES = COMPAT / "expected_failures.txt"
OUT_OF_SCOPE = COMPAT / "out_of_scope.txt"
CACHE = PROJECT / ".cache" / "compat"

# Which part of the contract each test file checks (files not named here: the public API).
CATEGORY_OF_FILE = {
    "test_cli.py": "CLI",
    "test_shell.py": "shell",
    "test_rsync.py": "rsync",
}
PUBLIC_API = "public API"
CATEGORIES = (PUBLIC_API, "CLI", "shell", "rsync")

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One reference test's result.

    Attributes:
        test_id: pytest's node id relative to the suite (``test_cli.py::test_x``).
        result: ``passed``, ``failed`` (failures and errors alike) or ``skipped``.
        message: the failure or skip message's first line ('' when passed).
    """

    test_id: str
    result: str
    message: str = ""


@dataclasses.dataclass
class Verdict:
    """The gate's judgement of one run against the expected-failure list.

    Attributes:
        unexpected: tests that failed but are not listed.
        stale: listed tests that passed (the deviation is gone: unlist it).
        missing: listed tests that did not run at all (renamed, or their file left out).
    """

    unexpected: list[Outcome] = dataclasses.field(default_factory=list)
    stale: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the gate passes."""
        return not (self.unexpected or self.stale or self.missing)


def read_listing(path: Path) -> dict[str, str]:
    """Read a ``test id | reason`` list (``#`` comments and blank lines ignored).

    Args:
        path: the list file.

    Returns:
        Each listed id (a test id or a file name) with its reason.

    Raises:
        ValueError: a line without a reason, or an id listed twice.
    """
    listing: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        test_id, sep, reason = (part.strip() for part in line.partition("|"))
        if not sep or not test_id or not reason:
            raise ValueError(f"{path}:{number}: expected 'test id | reason', got {raw!r}")
        if test_id in listing:
            raise ValueError(f"{path}:{number}: {test_id} is listed twice")
        listing[test_id] = reason
    return listing


def category(test_id: str) -> str:
    """The part of the contract a reference test checks, by its file.

    Args:
        test_id: a node id such as ``test_cli.py::test_x``.

    Returns:
        One of ``CATEGORIES``.
    """
    return CATEGORY_OF_FILE.get(test_id.partition("::")[0], PUBLIC_API)


def judge(
    outcomes: Iterable[Outcome], expected_failures: Mapping[str, str], *, whole: bool = True
) -> Verdict:
    """Compare a run's outcomes with the deviations we document.

    Args:
        outcomes: every test's result.
        expected_failures: listed test ids and why each fails.
        whole: whether the whole suite ran (else listed tests that did not run are fine).

    Returns:
        What the gate objects to (nothing when the run matches the list).
    """
    verdict = Verdict()
    seen: set[str] = set()
    for outcome in outcomes:
        seen.add(outcome.test_id)
        listed = outcome.test_id in expected_failures
        if outcome.result == FAILED and not listed:
            verdict.unexpected.append(outcome)
        elif outcome.result == PASSED and listed:
            verdict.stale.append(outcome.test_id)
    if whole:
        verdict.missing = sorted(set(expected_failures) - seen)
    return verdict


def summary_lines(outcomes: Iterable[Outcome], expected_failures: Mapping[str, str]) -> list[str]:
    """One line per category: how many tests ran, passed, failed as listed, were skipped.

    Args:
        outcomes: every test's result.
        expected_failures: the listed deviations.

    Returns:
        The lines, in ``CATEGORIES`` order (categories with no tests left out).
    """
    counts = {
        name: {"tests": 0, PASSED: 0, "deviations": 0, FAILED: 0, SKIPPED: 0} for name in CATEGORIES
    }
    for outcome in outcomes:
        count = counts[category(outcome.test_id)]
        count["tests"] += 1
        if outcome.result == FAILED and outcome.test_id in expected_failures:
            count["deviations"] += 1
        else:
            count[outcome.result] += 1
    lines = []
    for name in CATEGORIES:
        count = counts[name]
        if count["tests"]:
            lines.append(
                f"{name + ':':12} {count[PASSED]:4d} of {count['tests']:4d} passed, "
                f"{count['deviations']} listed deviations, {count[FAILED]} unexpected failures, "
                f"{count[SKIPPED]} skipped"
            )
    return lines


def read_junit(path: Path) -> list[Outcome]:
    """The outcomes in a pytest ``--junitxml`` report.

    Args:
        path: the report.

    Returns:
        One outcome per test case; a case that failed in setup and teardown counts once. A
        file that could not be collected is one failed outcome named after the file.
    """
    outcomes: dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        module, _, klass = (classname or name).partition(".")
        if not classname:  # a collection error: the file as a whole
            name = ""
        test_id = "::".join(part for part in (f"{module}.py", klass, name) if part)
        result, message = PASSED, ""
        for child in case:
            if child.tag in ("failure", "error"):
                result, message = FAILED, child.get("message", "")
            elif child.tag == "skipped" and result != FAILED:
                result, message = SKIPPED, child.get("message", "")
        previous = outcomes.get(test_id)
        if previous is None or previous.result != FAILED:
            outcomes[test_id] = Outcome(test_id, result, message.splitlines()[0] if message else "")
    return list(outcomes.values())


def fetch_sdist() -> Path:
    """The reference's sdist, downloaded once with pip and checked against its pin.

    Returns:
        The path of the verified ``.tar.gz``.

    Raises:
        RuntimeError: pip failed, or the file's sha256 is not the pinned one.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    sdist = CACHE / SDIST_NAME
    if not sdist.is_file() or _sha256(sdist) != SDIST_SHA256:
        requirement = CACHE / "requirement.txt"
        requirement.write_text(
            f"barecat=={VERSION} --hash=sha256:{SDIST_SHA256}\n", encoding="utf-8"
        )
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
        ]
        command += ["--require-hashes", "-r", str(requirement), "-d", str(CACHE)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not sdist.is_file():
            raise RuntimeError(f"pip could not download {SDIST_NAME}: {done.stderr.strip()}")
    if _sha256(sdist) != SDIST_SHA256:
        raise RuntimeError(f"{sdist}: sha256 is not the pinned {SDIST_SHA256}")
    return sdist


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unpack_tests(sdist: Path, target: Path, leave_out: Iterable[str]) -> None:
    """Copy the sdist's ``tests/`` folder (minus some files) into ``target``.

    Args:
        sdist: the source distribution.
        target: an empty directory outside our tree.
        leave_out: file names not to copy.
    """
    prefix = f"barecat-{VERSION}/tests/"
    skipped = set(leave_out)
    with tarfile.open(sdist) as tar:
        members = [
            member
            for member in tar.getmembers()
            if member.isfile()
            and member.name.startswith(prefix)
            and Path(member.name).name not in skipped
        ]
        for member in members:
            member.name = member.name[len(prefix) :]
        tar.extractall(target, members=members, filter="data")
    # pin pytest's rootdir here, so no configuration above the folder applies
    (target / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")


def run_suite(folder: Path, pytest_args: list[str]) -> tuple[list[Outcome], str]:
    """Run the copied suite with pytest in this interpreter and read its outcomes.

    pytest's own output is kept, not shown: it counts the listed deviations as failures
    (they are), which the gate's report says better.

    Args:
        folder: where the suite was unpacked.
        pytest_args: extra pytest arguments (``-k``, ``-x``, a file...).

    Returns:
        Every test's outcome, and what pytest printed.
    """
    report = folder / "report.xml"
    env = dict(os.environ)
    # the suite runs `barecat-create`, `barecat` ... : ours, from this interpreter's scripts
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
    ]
    command.append(f"--junitxml={report}")
    done = subprocess.run(
        command + pytest_args,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    return read_junit(report), done.stdout


def report_lines(
    outcomes: list[Outcome],
    expected_failures: Mapping[str, str],
    out_of_scope: Mapping[str, str],
    verdict: Verdict,
    pytest_output: str,
) -> list[str]:
    """What the gate prints after a run: the summary, each listed deviation with its
    reason, whatever the gate objects to and, only then, pytest's own output.

    Args:
        outcomes: every test's result.
        expected_failures: the listed deviations.
        out_of_scope: the files not run, with their reasons.
        verdict: the gate's judgement of ``outcomes``.
        pytest_output: what pytest printed.

    Returns:
        The lines, the verdict last.
    """
    lines = [f"barecat {VERSION}'s own test suite, run against this package:"]
    lines += ["  " + line for line in summary_lines(outcomes, expected_failures)]
    listed_where = OUT_OF_SCOPE.relative_to(PROJECT)
    lines.append(f"  {'out of scope:':12} {len(out_of_scope)} files not run (see {listed_where})")
    deviations = [o for o in outcomes if o.result == FAILED and o.test_id in expected_failures]
    if deviations:
        lines.append("listed deviations (they fail on purpose; docs/compatibility.md):")
        lines += [f"  {o.test_id}: {expected_failures[o.test_id]}" for o in deviations]
    lines += [f"UNEXPECTED FAILURE {o.test_id}: {o.message}" for o in verdict.unexpected]
    name = EXPECTED_FAILURES.name
    lines += [f"LISTED BUT PASSES  {t}: remove it from {name}" for t in verdict.stale]
    lines += [f"LISTED BUT NOT RUN {t}: remove or rename it in {name}" for t in verdict.missing]
    if not verdict.ok:
        lines += ["pytest's output (listed deviations fail in it too):", pytest_output.rstrip()]
    lines.append("compat gate: " + ("passed" if verdict.ok else "FAILED"))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the gate; print the summary and whatever it objects to.

    Args:
        argv: ``[--keep] [-- pytest args]``.

    Returns:
        0 when every outcome matches the expected-failure list, else 1.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--keep", action="store_true", help="keep the unpacked suite and print where"
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    expected = read_listing(EXPECTED_FAILURES)
    out_of_scope = read_listing(OUT_OF_SCOPE)
    folder = Path(tempfile.mkdtemp(prefix="barecat-reference-suite-"))
    print(f"running barecat {VERSION}'s own test suite against this package...", flush=True)
    try:
        unpack_tests(fetch_sdist(), folder, out_of_scope)
        outcomes, pytest_output = run_suite(folder, args.pytest_args)
    finally:
        if args.keep:
            print(f"the suite is in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    verdict = judge(outcomes, expected, whole=not args.pytest_args)
    print("\n".join(report_lines(outcomes, expected, out_of_scope, verdict, pytest_output)))
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
