"""The drop-in gate's own logic: outcomes read from a real pytest run, judged against a list.

The gate itself (barecat 0.3.1's suite against this package) runs as a step of ``./run test``
(``./run compat``); these tests check that it reports what it should.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from reference_suite import (
    EXPECTED_FAILURES,
    FAILED,
    OUT_OF_SCOPE,
    PASSED,
    PROJECT,
    SKIPPED,
    Outcome,
    judge,
    read_junit,
    read_listing,
    report_lines,
    summary_lines,
)

TINY_SUITE = {
    "test_api.py": """
import pytest

def test_passes():
    assert 1 + 1 == 2

def test_fails():
    assert [] == ['']

class TestGroup:
    def test_skips(self):
        pytest.skip('needs ncdu')

    @pytest.fixture
    def broken(self):
        raise RuntimeError('setup broke')

    def test_errors(self, broken):
        pass
""",
    "test_cli.py": "def test_cli_passes():\n    pass\n",
    "test_rsync.py": "import no_such_module_anywhere\n",
}


@pytest.fixture(scope="module")
def tiny_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    folder = tmp_path_factory.mktemp("tiny-suite")
    for name, text in TINY_SUITE.items():
        (folder / name).write_text(text)
    (folder / "pytest.ini").write_text("[pytest]\n")
    report = folder / "report.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["--continue-on-collection-errors", f"--junitxml={report}"]
    subprocess.run(command, cwd=folder, capture_output=True)
    return {outcome.test_id: outcome for outcome in read_junit(report)}


def test_outcomes_are_read_per_test_with_node_ids(tiny_outcomes: dict[str, Outcome]) -> None:
    results = {test_id: outcome.result for test_id, outcome in tiny_outcomes.items()}
    assert results == {
        "test_api.py::test_passes": PASSED,
        "test_api.py::test_fails": FAILED,
        "test_api.py::TestGroup::test_skips": SKIPPED,
        "test_api.py::TestGroup::test_errors": FAILED,
        "test_cli.py::test_cli_passes": PASSED,
        "test_rsync.py": FAILED,
    }
    assert "setup broke" in tiny_outcomes["test_api.py::TestGroup::test_errors"].message
    assert "needs ncdu" in tiny_outcomes["test_api.py::TestGroup::test_skips"].message


def test_the_gate_objects_to_unlisted_failures_listed_passes_and_vanished_entries(
    tiny_outcomes: dict[str, Outcome],
) -> None:
    expected = {
        "test_api.py::test_fails": "a deviation",
        "test_api.py::test_passes": "fixed since",
        "test_api.py::test_renamed": "gone",
    }
    verdict = judge(tiny_outcomes.values(), expected)
    assert not verdict.ok
    assert sorted(o.test_id for o in verdict.unexpected) == [
        "test_api.py::TestGroup::test_errors",
        "test_rsync.py",
    ]
    assert verdict.stale == ["test_api.py::test_passes"]
    assert verdict.missing == ["test_api.py::test_renamed"]
    # a partial run (pytest arguments given) does not report listed tests it did not run
    assert judge(tiny_outcomes.values(), expected, whole=False).missing == []


def test_a_run_matching_the_list_passes(tiny_outcomes: dict[str, Outcome]) -> None:
    expected = {test_id: "why" for test_id, o in tiny_outcomes.items() if o.result == FAILED}
    assert judge(tiny_outcomes.values(), expected).ok


def test_the_summary_has_one_line_per_category(tiny_outcomes: dict[str, Outcome]) -> None:
    lines = summary_lines(tiny_outcomes.values(), {"test_api.py::test_fails": "a deviation"})
    assert [line.split(":")[0] for line in lines] == ["public API", "CLI", "rsync"]
    assert re.search(
        r"1 of\s+4 passed, 1 listed deviations, 1 unexpected failures, 1 skipped", lines[0]
    )
    assert re.search(r"1 of\s+1 passed, 0 listed deviations, 0 unexpected failures", lines[1])


def test_the_report_shows_listed_deviations_as_such_and_failures_with_their_output(
    tiny_outcomes: dict[str, Outcome],
) -> None:
    failed = sorted(t for t, o in tiny_outcomes.items() if o.result == FAILED)
    expected = {test_id: f"why {test_id} differs" for test_id in failed}
    outcomes = list(tiny_outcomes.values())
    output = "=== FAILURES ===\nthe traceback pytest printed\n3 failed, 2 passed"
    lines = report_lines(outcomes, expected, {}, judge(outcomes, expected), output)
    text = "\n".join(lines)
    assert "listed deviations (they fail on purpose; docs/compatibility.md):" in lines
    for test_id in failed:
        assert f"  {test_id}: why {test_id} differs" in lines
    # what pytest printed, its failure count and tracebacks, stays out of a passing gate
    assert "traceback" not in text and "3 failed" not in text
    assert lines[-1] == "compat gate: passed"

    del expected["test_rsync.py"]  # now an unexpected failure: its output is shown
    lines = report_lines(outcomes, expected, {}, judge(outcomes, expected), output)
    assert any(line.startswith("UNEXPECTED FAILURE test_rsync.py: ") for line in lines)
    assert output in lines and lines[-1] == "compat gate: FAILED"


def test_listing_lines_need_a_reason(tmp_path: Path) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text("# comment\n\ntest_a.py::test_x | why it differs\n")
    assert read_listing(listing) == {"test_a.py::test_x": "why it differs"}
    listing.write_text("test_a.py::test_x\n")
    with pytest.raises(ValueError, match=re.escape("expected 'test id | reason'")):
        read_listing(listing)
    listing.write_text("a | one\na | two\n")
    with pytest.raises(ValueError, match="listed twice"):
        read_listing(listing)


def test_every_listed_deviation_is_documented() -> None:
    documented = (PROJECT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    for test_id in [*read_listing(EXPECTED_FAILURES), *read_listing(OUT_OF_SCOPE)]:
        assert test_id in documented, (
            f"{test_id} is listed but docs/compatibility.md does not name it"
        )
