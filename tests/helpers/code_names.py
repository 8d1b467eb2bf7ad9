"""The code names a document cites, and whether each one names something of barecat.

A page that says ``Sharder.append`` writes the bytes must stop saying it once the method
is gone. This module reads ``src/barecat`` with :mod:`ast` (nothing is imported, so the
optional extras need not be installed) and decides, for the text of one code span
(backticks), whether it is a cited name and whether the package has it.

What counts as a cited name (the whole span, nothing else in it):

- **A dotted name** ``First.second[.more][()]``, whose first part is a module or package
  of the package (``layout.replace_archive``, ``barecat.core.index``, also written as a
  path: ``transfer/building.building_archive``) or a class defined in it
  (``Sharder.read_many``, ``Index.add_file``). After a module, the next part must be
  defined at the module's top level (a def, class, assignment or import, or a name of its
  ``__all__``), and a class there takes its next part as a class member. After a class,
  the next part must be a member of it or of one of its bases defined in the package (a
  def, an assignment in its body, or ``self.NAME = ...`` in one of its methods; failing
  that, the class imported from its module has the attribute, for members made at run
  time). Parts
  after that are attributes of a value whose type is not resolved, and are not checked.
  A dotted span whose first part is neither (``os.pread``, ``bc.index``) cites nothing
  of the package.
- **A call** ``name()``: a function or method of that name must be defined in the package.
- **A snake_case name** (lower case with an underscore: ``commit_interval``,
  ``group_by_stem``): the name must appear in the package's code (a definition, a
  parameter, an attribute, a name used, a string naming an attribute as ``getattr`` is
  given one, or a module's name).
- **A CamelCase name** (``ReadPool``, ``HttpBarecat``): a class, function or assigned
  name of that spelling must be defined in the package.

Anything else in backticks is not a cited name: file names and paths (a span ending in
``.py``, ``.sql``, ``.md`` ...), commands, options, literals, ``os.pread``.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path

_IDENT = r"[A-Za-z_]\w*"
_DOTTED = re.compile(rf"^(?:{_IDENT}/)*{_IDENT}(?:\.{_IDENT})+(?:\(\))?$")
_CALL = re.compile(rf"^{_IDENT}\(\)$")
_SNAKE = re.compile(r"^_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
_CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")
_FILE = re.compile(r"\.(py|sql|md|txt|toml|json|html|js|1)$")


@dataclass
class _Class:
    module: str
    members: set[str] = field(default_factory=set)
    bases: list[str] = field(default_factory=list)


@dataclass
class SourceNames:
    """What ``src/barecat`` defines, read with :mod:`ast`."""

    modules: dict[str, set[str]] = field(default_factory=dict)
    """Dotted module name (``barecat.shards.guard``) -> its top-level names."""
    classes: dict[str, list[_Class]] = field(default_factory=dict)
    """Class name -> every class of that name in the package."""
    functions: set[str] = field(default_factory=set)
    """Every function and method name."""
    defined: set[str] = field(default_factory=set)
    """Every class, function and assigned name."""
    used: set[str] = field(default_factory=set)
    """Every identifier in the code (names, attributes, parameters, keywords, strings
    spelled as identifiers, definitions, module names)."""

    @classmethod
    def of(cls, package: Path) -> SourceNames:
        """Read every module of ``package`` (a directory such as ``src/barecat``)."""
        names = cls()
        for source in sorted(package.rglob("*.py")):
            parts = source.relative_to(package.parent).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            names._read(module, ast.parse(source.read_text(encoding="utf-8")))
            names.used.add(parts[-1])
        names.used |= names.defined
        return names

    def _read(self, module: str, tree: ast.Module) -> None:
        top = self.modules.setdefault(module, set())
        for node in tree.body:
            top.update(_bound(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, []).append(_class(module, node))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.add(node.name)
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                self.defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                self.defined.update(_bound(node))
            self.used.update(_identifiers(node))
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                top.update(
                    c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                )  # fmt: skip

    # -- judging one code span -------------------------------------------------------

    def problem(self, span: str) -> str | None:
        """Why the code span ``span`` cites a name the package does not have, or None
        (it names something that exists, or is not a cited name)."""
        if _FILE.search(span):
            return None
        if _DOTTED.match(span):
            return self._dotted_problem(span.removesuffix("()"))
        if _CALL.match(span):
            name = span[:-2]
            return None if name in self.functions else f"no function or method {name}"
        if _SNAKE.match(span):
            return None if span in self.used else f"no name {span} in the code"
        if _CAMEL.match(span):
            return None if span in self.defined else f"no class or name {span} defined"
        return None

    def is_cited(self, span: str) -> bool:
        """Whether ``span`` is a cited name by the rules above (known to the package or
        not: a dotted name counts only when its first part is the package's)."""
        if _FILE.search(span):
            return False
        if _DOTTED.match(span):
            return self._module_prefix(span.removesuffix("()").split(".")) is not None or (
                span.replace("/", ".").split(".")[0] in self.classes
            )
        return bool(_CALL.match(span) or _SNAKE.match(span) or _CAMEL.match(span))

    def _module_prefix(self, parts: list[str]) -> tuple[str, int] | None:
        """The longest leading parts naming a module: (its dotted name, parts used)."""
        for n in range(len(parts), 0, -1):
            dotted = ".".join(parts[:n]).replace("/", ".")
            for candidate in (dotted, f"barecat.{dotted}"):
                if candidate in self.modules:
                    return candidate, n
        return None

    def _dotted_problem(self, name: str) -> str | None:
        parts = name.split(".")
        found = self._module_prefix(parts)
        if found is not None:
            module, used = found
            rest = parts[used:]
            if not rest:
                return None
            if rest[0] not in self.modules[module]:
                return f"{module} defines no {rest[0]}"
            if len(rest) > 1 and rest[0] in self.classes:
                return self._member_problem(rest[0], rest[1])
            return None
        if "/" not in parts[0] and parts[0] in self.classes:
            return self._member_problem(parts[0], parts[1])
        return None  # not the package's: os.pread, bc.index

    def _member_problem(self, cls: str, member: str) -> str | None:
        seen: set[str] = set()
        todo = [cls]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for found in self.classes.get(name, []):
                if member in found.members:
                    return None
                todo.extend(found.bases)
        if any(_has_attribute(found, cls, member) for found in self.classes.get(cls, [])):
            return None
        return f"class {cls} (and its bases) has no {member}"


def _has_attribute(found: _Class, cls: str, member: str) -> bool:
    """Whether the class ``cls`` of ``found.module``, imported, has ``member`` (False when
    the module cannot be imported here, e.g. an optional extra is missing)."""
    try:
        module = importlib.import_module(found.module)
    except ImportError:
        return False
    return hasattr(getattr(module, cls, None), member)


def code_spans(markdown: str) -> list[str]:
    """The text of every inline code span of ``markdown`` outside its fenced blocks."""
    text = re.sub(r"^(`{3,}).*?^\1\s*$", "", markdown, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", text)


def _bound(node: ast.stmt | ast.expr) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.If | ast.Try):  # (TYPE_CHECKING imports, fallbacks)
        inner = [*node.body, *node.orelse]
        if isinstance(node, ast.Try):
            inner += [s for h in node.handlers for s in h.body] + node.finalbody
        return {name for s in inner for name in _bound(s)}
    return set()


def _class(module: str, node: ast.ClassDef) -> _Class:
    found = _Class(module, bases=[b.id if isinstance(b, ast.Name) else "" for b in node.bases])
    for stmt in node.body:
        found.members.update(_bound(stmt))
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.ctx, ast.Store)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "self"
        ):
            found.members.add(inner.attr)
    return found


def _identifiers(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.arg):
        return {node.arg}
    if isinstance(node, ast.keyword) and node.arg:
        return {node.arg}
    if isinstance(node, ast.alias):
        return {node.asname or node.name.split(".")[-1]}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} if node.value.isidentifier() else set()
    return set()


__all__ = ["SourceNames", "code_spans"]
