"""Imports point one way: no module of barecat imports itself through others (every
import counted: at the top, inside a function, under ``if TYPE_CHECKING:``), and nothing
but the CLI (and ``python -m barecat``, its entry point) imports ``barecat.cli``.

The graph is read from the source with ``ast``, so an import made late to dodge a circle
counts as the circle it is; import-linter's layers cannot see a circle between two
modules of one layer, nor the package's own ``__init__``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import barecat

PACKAGE = Path(barecat.__file__).resolve().parent

Graph = dict[str, dict[str, int]]
"""Module -> the modules it imports -> the line of the first such import."""


def modules_of(package: Path) -> dict[str, Path]:
    """Every module of ``package`` (a directory), by dotted name; a package by its name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """The dotted names ``module`` imports anywhere in its source (``from A import b``
    gives ``A.b``, which may be a module or a name in ``A``), with their lines."""
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                yield f"{source}.{alias.name}", node.lineno


def import_graph(package: Path) -> Graph:
    """Which modules of ``package`` each of its modules imports."""
    modules = modules_of(package)
    graph: Graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for name, line in imported_names(module, path):
            while name and name not in modules:  # a name in a module: that module
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.setdefault(name, line)
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    without recursion): each is a set of modules that import one another in a circle."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in order:
            continue
        work = [(start, iter(graph[start]))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in order:
                    order[succ] = low[succ] = len(order)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], order[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def described(graph: Graph, component: list[str]) -> str:
    """A circle's imports, one per line: ``module:line -> module``."""
    return "\n".join(
        f"  {a}:{line} -> {b}"
        for a in component
        for b, line in sorted(graph[a].items())
        if b in component
    )


@functools.cache
def barecat_graph() -> Graph:
    """barecat's own import graph (read once)."""
    return import_graph(PACKAGE)


def test_no_module_imports_itself_through_others() -> None:
    graph = barecat_graph()
    found = circles(graph)
    report = "\n".join(described(graph, c) for c in found)
    assert not found, f"import circles (give the shared piece one owner below):\n{report}"


def test_only_the_cli_imports_the_cli() -> None:
    graph = barecat_graph()
    upward = [
        f"{module}:{line}"
        for module, edges in graph.items()
        if not (module == "barecat.cli" or module.startswith("barecat.cli."))
        and module != "barecat.__main__"
        for target, line in edges.items()
        if target == "barecat.cli" or target.startswith("barecat.cli.")
    ]
    assert not upward, f"imports of barecat.cli from outside it: {upward}"


def test_the_graph_sees_late_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .a import A\n")
    (package / "sub" / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..sub.c import C\n"
    )
    (package / "sub" / "c.py").write_text("from pkg.sub.a import f\nimport pkg\n")
    graph = import_graph(package)
    assert graph["pkg.sub"] == {"pkg.sub.a": 1}
    assert graph["pkg.sub.c"] == {"pkg.sub.a": 1, "pkg": 2}
    assert circles(graph) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.c"]]
