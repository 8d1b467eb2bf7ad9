"""The documents cannot drift: README.md and docs/ run, link and match ``--help``.

- Every code block marked runnable (a ``<!-- runnable -->`` line right before its
  ```` ```python ```` or ```` ```bash ```` fence) runs as a user who copies it would run
  it: alone, in a fresh empty directory, so it must make whatever it reads. A block marked
  ``<!-- runnable: continues -->`` (a tutorial's next step) runs in the directory of the
  page's block before it instead. Python blocks run with this interpreter, bash blocks
  with ``bash -euo pipefail`` and the real ``barecat`` command (and this ``python``) first
  on ``PATH``. A block fails the test when it exits non-zero, except for an optional
  package that is not installed here (``ray``, ``torch``, ``dask``, ``datasets``...): a
  Python block whose import lines name one is not run, nor is a block that continues it,
  and a block whose last error line is ``No module named 'X'`` for such an X is not
  failed; the page's test is then skipped, naming each of those blocks and the missing
  package, once its other blocks ran and passed.
- ``docs/cli.md`` is what ``barecat.cli.reference_page`` writes, and each of its sections
  is what the real ``barecat COMMAND --help`` prints.
- Every relative link of README.md and docs/ names a file of this repository (and, for a
  Markdown file, a heading in it when it has a ``#fragment``).
- docs/architecture.md names only what exists: the paths of its "Where is X" table, and
  every code name it cites in backticks (``Sharder.read_many``, ``layout.replace_archive``,
  ``settled_conn()``, ``commit_interval``, ``ReadPool``), by the rule written in
  ``tests/helpers/code_names.py``.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from barecat.cli.main import build_parser
from barecat.cli.manpage import documented_commands
from barecat.cli.reference_page import WIDTH, render
from helpers import Run
from helpers.code_names import SourceNames, code_spans

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
CLI_PAGE = REPO / "docs" / "cli.md"
BIN = Path(sys.executable).parent
MARKER = "<!-- runnable -->"
CONTINUES = "<!-- runnable: continues -->"


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    runnable: bool
    continues: bool  # runs in the directory of the page's runnable block before it


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(`{3,})(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1)))
        marker = lines[i - 1].strip() if i > 0 else ""
        code = "\n".join(lines[i + 1 : end]) + "\n"
        runnable = marker in (MARKER, CONTINUES)
        found.append(Block(page, i + 1, fence.group(2), code, runnable, marker == CONTINUES))
        i = end + 1
    return found


ENGINES = {"ray", "dask", "datasets"}
"""Modules that start a distributed engine: a page whose runnable blocks import one runs
in the slow tier, with the engines' own tests (10-20 s a page, most of it the engine's
start-up)."""


def runnable_pages() -> list[Path]:
    return [page for page in PAGES if any(b.runnable for b in blocks(page))]


def runnable_page_params() -> list[object]:
    """:func:`runnable_pages`, a page that starts an engine marked ``slow``."""
    return [
        pytest.param(page, marks=pytest.mark.slow) if starts_engine(page) else page
        for page in runnable_pages()
    ]


def starts_engine(page: Path) -> bool:
    """Whether a runnable block of ``page`` imports an engine (:data:`ENGINES`)."""
    runnable = [b for b in blocks(page) if b.runnable]
    return any(ENGINES.intersection(imported_modules(b)) for b in runnable)


def test_markers_are_found_and_only_on_blocks_that_can_run() -> None:
    readme = [b for b in blocks(REPO / "README.md") if b.runnable]
    assert {b.language for b in readme} == {"python", "bash"}, "the quick starts are runnable"
    for page in PAGES:
        text = page.read_text(encoding="utf-8").split("\n")
        markers = [i for i, line in enumerate(text) if line.strip() in (MARKER, CONTINUES)]
        runnable = [b for b in blocks(page) if b.runnable]
        assert len(markers) == len(runnable), f"{page.name}: a marker not right before a fence"
        for b in runnable:
            assert b.language in ("python", "bash"), f"{page.name}:{b.line}: {b.language}"
        assert not (runnable and runnable[0].continues), f"{page.name}: continues nothing"


def missing_imports(block: Block) -> list[str]:
    """The top-level modules ``block``'s import statements name that this interpreter
    cannot find (its optional extras not installed), in order. ``barecat`` is never
    missing: without it every block must fail."""
    return [name for name in imported_modules(block) if _not_installed(name)]


def imported_modules(block: Block) -> list[str]:
    """The top-level modules of a Python block's ``import X`` and ``from X import ...``
    anywhere in it but inside a ``try`` (which handles a missing module itself), in
    order, each once. A bash block has no import lines: none."""
    if block.language != "python":
        return []
    tree = ast.parse(block.code)
    guarded = {
        id(inner) for node in ast.walk(tree) if isinstance(node, ast.Try)
        for inner in ast.walk(node)
    }  # fmt: skip
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
    return list(dict.fromkeys(names))


def _not_installed(module: str) -> bool:
    if module == "barecat":
        return False
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # (a finder that refuses it)
        return True


def missing_at_run(stderr: str) -> str | None:
    """The module a failed block's last error line says is missing (``No module named
    'X'``, from Python or from barecat's ``MissingDependencyBarecatError`` on a
    command's stderr) when it is an optional package not installed here, else None."""
    lines = stderr.strip().split("\n")
    found = re.search(r"No module named '([\w.]+)'", lines[-1])
    if found is None:
        return None
    top = found.group(1).split(".")[0]
    return top if _not_installed(top) else None


def run_blocks(page: Path, tmp_path: Path) -> list[str]:
    """Run the runnable blocks of ``page`` in turn; returns why each one skipped was
    skipped (a missing optional package, or continuing a skipped block).

    Raises:
        AssertionError: a block exited non-zero for any other reason.
    """
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "BARECAT_CACHE_DIR": str(tmp_path / ".cache"),
        "COLUMNS": str(WIDTH),
    }
    here = tmp_path
    skipped: list[str] = []
    skipping = False  # the page's last block that did not continue was skipped
    for block in blocks(page):
        if not block.runnable:
            continue
        where = f"{page.relative_to(REPO) if page.is_relative_to(REPO) else page}:{block.line}"
        if block.continues and skipping:
            skipped.append(f"{where} continues a skipped block")
            continue
        missing = missing_imports(block)
        skipping = bool(missing)
        if missing:
            skipped.append(f"{where} imports {', '.join(missing)}, not installed")
            continue
        if not block.continues:  # as a user who copies this block alone runs it
            here = tmp_path / f"block-{block.line}"
            here.mkdir()
        if block.language == "python":
            script = tmp_path / f"block-{block.line}.py"
            script.write_text(block.code, encoding="utf-8")
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", block.code]
        done = subprocess.run(argv, cwd=here, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 and (module := missing_at_run(done.stderr)):
            skipping = True
            skipped.append(f"{where} needs {module}, not installed")
            continue
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stderr}"
    return skipped


@pytest.mark.parametrize("page", runnable_page_params(), ids=lambda p: p.name)
def test_runnable_blocks_run(page: Path, tmp_path: Path) -> None:
    skipped = run_blocks(page, tmp_path)
    if skipped:  # (every other block ran and passed)
        pytest.skip("; ".join(skipped))


def _page(tmp_path: Path, *blocks: tuple[str, str, str]) -> Path:
    """A page of (marker, language, code) blocks."""
    page = tmp_path / "page.md"
    text = "".join(f"{marker}\n```{lang}\n{code}\n```\n\n" for marker, lang, code in blocks)
    page.write_text(text, encoding="utf-8")
    return page


def test_a_page_whose_runnable_block_starts_an_engine_is_in_the_slow_tier(tmp_path: Path) -> None:
    engine = _page(tmp_path, (MARKER, "python", "import barecat\nfrom ray import data"))
    assert starts_engine(engine)
    tried = _page(
        tmp_path, (MARKER, "python", "try:\n    import dask\nexcept ImportError:\n    pass")
    )
    assert not starts_engine(tried)  # (a guarded import starts nothing by itself)
    shown = _page(tmp_path, ("", "python", "import dask"), (MARKER, "bash", "barecat ls x"))
    assert not starts_engine(shown)  # (only runnable blocks count)
    slow = {p.values[0] for p in runnable_page_params() if hasattr(p, "marks")}
    assert slow == {p for p in runnable_pages() if starts_engine(p)} and slow


def test_missing_imports_are_the_block_s_import_lines_not_installed() -> None:
    code = """\
import os, no_such_extra_a.sub
from no_such_extra_b import thing
from barecat.no_such_module import x
from . import sibling
import barecat
try:
    import no_such_extra_c
except ImportError:
    no_such_extra_c = None


def main() -> None:
    import no_such_extra_d.deep
    from no_such_extra_a import again
"""
    block = Block(Path("page.md"), 1, "python", code, True, False)
    assert missing_imports(block) == ["no_such_extra_a", "no_such_extra_b", "no_such_extra_d"]
    assert missing_imports(Block(Path("page.md"), 1, "bash", "import x\n", True, False)) == []


def test_a_block_needing_a_package_not_installed_is_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    page = _page(
        tmp_path,
        (MARKER, "python", "open('made', 'w').close()"),
        (MARKER, "python", "import no_such_extra_pkg\nraise SystemExit(3)"),
        (CONTINUES, "bash", "exit 4"),  # (would fail: it continues the skipped block)
        (MARKER, "python", "import importlib\nimportlib.import_module('no_such_extra_two')"),
        (MARKER, "bash", "test -d ."),
    )
    first, second, third, fourth, last = (block.line for block in blocks(page))
    assert run_blocks(page, tmp_path) == [
        f"{page}:{second} imports no_such_extra_pkg, not installed",
        f"{page}:{third} continues a skipped block",
        f"{page}:{fourth} needs no_such_extra_two, not installed",
    ]
    assert (tmp_path / f"block-{first}" / "made").exists(), "the blocks before ran"
    assert (tmp_path / f"block-{last}").is_dir(), "the blocks after ran"


class _NotInstalled(importlib.abc.MetaPathFinder):
    """Makes ``blocked`` top-level packages unimportable here, as if never installed."""

    def __init__(self, *blocked: str) -> None:
        self.blocked = set(blocked)

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.mark.parametrize(
    ("name", "extra"),
    [("ray.md", "ray"), ("dask.md", "dask"), ("hf.md", "datasets"),
     ("pytorch-and-engines.md", "torch")],
)  # fmt: skip
def test_a_page_whose_extra_is_missing_is_skipped_naming_it(
    name: str, extra: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = REPO / "docs" / name
    monkeypatch.setattr(sys, "meta_path", [_NotInstalled(extra), *sys.meta_path])
    for module in [m for m in sys.modules if m.split(".")[0] == extra]:
        monkeypatch.delitem(sys.modules, module)
    (line,) = [block.line for block in blocks(page) if block.runnable]
    assert run_blocks(page, tmp_path) == [f"docs/{name}:{line} imports {extra}, not installed"]


@pytest.mark.parametrize(
    "code",
    [
        "import os\nraise SystemExit(2)",  # any other failure
        "import barecat.no_such_module",  # barecat's own modules are never an extra
        "raise ModuleNotFoundError(\"No module named 'os'\")",  # installed: a real failure
    ],
)
def test_every_other_failure_of_a_block_fails(tmp_path: Path, code: str) -> None:
    page = _page(tmp_path, (MARKER, "python", code))
    with pytest.raises(AssertionError, match=rf"{re.escape(str(page))}:2 exited"):
        run_blocks(page, tmp_path)


# -- the command reference ---------------------------------------------------------------


def test_the_cli_reference_is_the_generated_one() -> None:
    assert CLI_PAGE.read_text(encoding="utf-8") == render(build_parser()), (
        "run './run docs' and commit docs/cli.md"
    )


def _sections(page: Path) -> dict[str, str]:
    """Each ``## `barecat ...` `` heading's text block (the help it shows)."""
    sections: dict[str, str] = {}
    heading = None
    text = page.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(text):
        if line.startswith("## `barecat"):
            heading = line[4:-1]
        elif line == "```text" and heading is not None:
            end = text.index("```", i + 1)
            sections[heading] = "\n".join(text[i + 1 : end]) + "\n"
            heading = None
    return sections


def test_the_cli_reference_says_what_help_prints(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    sections = _sections(CLI_PAGE)
    commands = [name for name, _, _ in documented_commands(build_parser())]
    assert list(sections) == ["barecat", *(f"barecat {name}" for name in commands)]
    monkeypatch.setenv("COLUMNS", str(WIDTH))  # the terminal's width, as argparse reads it
    done = subprocess.run([str(BIN / "barecat"), "--help"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, sections.pop("barecat")), done.stderr
    for heading, shown in sections.items():
        code, out, err = run(*heading.split()[1:], "--help")
        assert (code, err) == (0, "")
        assert out == shown, f"docs/cli.md's section '{heading}' is not its --help"


# -- links -------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"<[^>]+>", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _without_code_blocks(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return re.sub(r"^(`{3,}).*?^\1\s*$", "", text, flags=re.S | re.M)


def _prose(page: Path) -> str:
    """The page without its code blocks and code spans (they hold no links)."""
    return re.sub(r"`[^`\n]*`", "", _without_code_blocks(page))


def test_every_relative_link_resolves_inside_the_repository() -> None:
    checked = 0
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page)):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path, _, fragment = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}: ({target})"
            assert resolved.is_relative_to(REPO), f"{where} points outside the repository"
            assert resolved.exists(), f"{where} does not exist"
            if fragment and resolved.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", _without_code_blocks(resolved), flags=re.M)
                assert fragment in {_slug(h) for h in headings}, f"{where}: no such heading"
            checked += 1
    assert checked > 30


def test_the_architecture_stands_alone() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "shared/" not in text and "ARCHITECTURE.md" not in text


def test_every_path_the_architecture_names_exists() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where is X", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.split("\n") if line.startswith("|"))
    named = [
        word
        for word in re.findall(r"`([^`\s]+)`", table)
        if word.endswith((".py", "/")) or "/*" in word
    ]
    assert len(named) > 30
    for word in named:
        base = REPO if word.startswith("tests/") else REPO / "src" / "barecat"
        assert list(base.glob(word.rstrip("/"))), f"architecture.md names {word}, which is gone"


@pytest.fixture(scope="module")
def source_names() -> SourceNames:
    return SourceNames.of(REPO / "src" / "barecat")


def test_every_code_name_the_architecture_cites_exists(source_names: SourceNames) -> None:
    spans = code_spans((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    cited = [span for span in spans if source_names.is_cited(span)]
    assert len(cited) > 50, "the rule finds the page's names"
    stale = [f"`{span}`: {why}" for span in cited if (why := source_names.problem(span))]
    assert not stale, "architecture.md cites names that are gone:\n" + "\n".join(stale)


@pytest.mark.parametrize(
    ("span", "problem"),
    [
        ("Sharder.read_many", None),  # a method
        ("Sharder.shard_size_limit", None),  # an attribute set in __init__
        ("Sharder.get_shard_path", None),  # inherited from ShardReader
        ("OpenArchive.writes.sharder", None),  # what follows the member is not resolved
        ("layout.replace_archive", None),  # a module's function
        ("transfer/building.building_archive", None),  # the module written as a path
        ("barecat.core.index", None),  # a module
        ("barecat.Index", None),  # a lazily exported name (__all__)
        ("settled_conn()", None),
        ("commit_interval", None),  # a parameter
        ("ReadPool", None),
        ("Sharder.append", "class Sharder (and its bases) has no append"),
        ("WriteSession.rollback", "class WriteSession (and its bases) has no rollback"),
        ("layout.replace_everything", "barecat.layout defines no replace_everything"),
        ("barecat.shards.guard.make_fence", "barecat.shards.guard defines no make_fence"),
        ("rollback_append", "no name rollback_append in the code"),
        ("commit_append()", "no function or method commit_append"),
        ("ShardAppender", "no class or name ShardAppender defined"),
        ("os.pread", None),  # not the package's: not cited
        ("shards/sharder.py", None),  # a path (the table's test checks those)
    ],
)
def test_the_cited_name_rule(source_names: SourceNames, span: str, problem: str | None) -> None:
    assert source_names.problem(span) == problem


def test_what_counts_as_a_cited_name(source_names: SourceNames) -> None:
    page = "`Sharder.add` and `os.pread`, `bc[path]`, `cli/main.py`, `-f`\n```\n`Gone.x`\n```\n"
    assert code_spans(page) == ["Sharder.add", "os.pread", "bc[path]", "cli/main.py", "-f"]
    assert [source_names.is_cited(span) for span in code_spans(page)] == [
        True, False, False, False, False,
    ]  # fmt: skip
