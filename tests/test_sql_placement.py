"""SQL lives in ``index/`` only: no other module of barecat writes a statement or a
condition for SQLite, nor runs one (``execute``), nor holds a ``.sql`` file.

A module elsewhere that wants rows asks the index (its listing, lookups or edits), so a
change of the schema or of a query's shape touches ``index/`` alone. The source is read
with ``ast``: every string the code holds (f-strings' literal parts too, docstrings
left out) is matched against SQL's keywords as the index writes them (upper case), and
every call of a method named ``execute``, ``executemany`` or ``executescript`` counts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import barecat

PACKAGE = Path(barecat.__file__).resolve().parent
SQL_HOME = PACKAGE / "index"

SQL_WORDS = re.compile(
    r"\b(SELECT|INSERT (OR \w+ )?INTO|UPDATE \w+ SET|DELETE FROM|REPLACE INTO|"
    r"CREATE (TEMP )?(TABLE|INDEX|TRIGGER|VIEW)|DROP (TABLE|INDEX|TRIGGER|VIEW)|"
    r"ALTER TABLE|PRAGMA|WHERE|ORDER BY|GROUP BY|BETWEEN|IS (NOT )?NULL|typeof)\b"
)
"""What makes a string SQL: a statement's or a condition's keywords, as written in SQL
(HTTP's ``DELETE`` alone is no statement)."""
RUNS_SQL = {"execute", "executemany", "executescript"}


def modules_outside_index() -> list[Path]:
    """Every module of barecat but those under ``index/``."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if SQL_HOME not in p.parents]


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (of modules, classes, functions)
    or bare strings (an attribute's docstring)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                found.add(id(stmt.value))
    return found


def sql_in(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each SQL string or SQL call in a module's source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in prose and SQL_WORDS.search(node.value):
                yield node.lineno, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RUNS_SQL
        ):
            yield node.lineno, f".{node.func.attr}(...)"


def test_no_sql_outside_the_index() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:70]!r}"
        for path in modules_outside_index()
        for line, text in sql_in(path)
    ]
    assert not found, "SQL outside barecat/index/:\n" + "\n".join(found)


def test_sql_files_are_the_index_s() -> None:
    stray = [p for p in PACKAGE.rglob("*.sql") if SQL_HOME not in p.parents]
    assert not stray


def test_the_scan_sees_sql_where_it_is() -> None:
    """The index's own modules are found holding SQL (the scan is not blind)."""
    listing = SQL_HOME / "listing.py"
    assert any("FROM files" in text for _, text in sql_in(listing))
