"""Glob patterns with the semantics of Python's ``glob`` module, compiled for an index.

A pattern is split into a literal directory prefix (answered by one B-tree range or
parent lookup in the index) and the remaining components, each matched against one path
component with ``fnmatch``'s own translation — so ``*``, ``?``, ``[seq]``, ``[!seq]``
behave exactly as ``glob.glob`` on an extracted tree, including its rules for hidden
names and ``**``. Pure: imports only ``paths``.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ParamSpec

_P = ParamSpec("_P")

_MAGIC = re.compile(r"[*?[]")


def has_magic(text: str) -> bool:
    """True if ``text`` contains a glob wildcard."""
    return _MAGIC.search(text) is not None


def directory_pattern(pattern: str) -> str:
    """A pattern ending in '/' selects everything below that directory: ``thumbs/``
    becomes ``thumbs/**`` (and ``/`` becomes ``/**``); any other pattern is returned as is.

    Args:
        pattern: A glob pattern as a user typed it.

    Returns:
        The pattern to match archive paths with.
    """
    return pattern + "**" if pattern.endswith("/") else pattern


def entries_of(matches: Iterable[str]) -> list[str]:
    """The entries a glob's ``matches`` name, as archive paths: sorted, each once, without
    a trailing '/', and without the root (which only ``**`` reaches).

    Args:
        matches: paths as ``glob.glob`` spells them on the extracted tree.

    Returns:
        The entries' paths.
    """
    return sorted({p.rstrip("/") for p in matches} - {""})


def matching_entries(glob: Callable[_P, list[str]]) -> Callable[_P, list[str]]:
    """The glob that answers :func:`entries_of` of what ``glob`` matches, with the same
    arguments: for callers that act on entries (listing, subsets, fsspec) rather than
    mirror ``glob.glob``'s spelling.

    Args:
        glob: a ``glob.glob``-like query.

    Returns:
        The query of entries.
    """

    @functools.wraps(glob)  # (its signature, for help() and inspect)
    def glob_entries(*args: _P.args, **kwargs: _P.kwargs) -> list[str]:
        return entries_of(glob(*args, **kwargs))

    glob_entries.__name__ = "glob_entries"
    glob_entries.__qualname__ = glob.__qualname__.replace(glob.__name__, "glob_entries")
    glob_entries.__doc__ = (
        "The entries :meth:`glob` matches (same arguments), as archive paths: sorted, each "
        "once, without a trailing '/', and without the root (which only ``**`` reaches)."
    )
    return glob_entries


def _is_hidden(name: str) -> bool:
    return name[:1] == "."


@dataclass(frozen=True, slots=True)
class _Component:
    """One pattern component; ``regex is None`` marks a recursive ``**``."""

    regex: re.Pattern[str] | None
    hidden_ok: bool
    text: str


@dataclass(frozen=True, slots=True)
class GlobPattern:
    """A compiled glob: literal ``base`` directory plus per-component matchers."""

    base: str
    components: tuple[_Component, ...]
    dirs_only: bool
    include_hidden: bool

    @property
    def is_literal(self) -> bool:
        """True if the pattern has no wildcard: it names one path (``base``)."""
        return not self.components

    @property
    def depth(self) -> int | None:
        """Fixed number of components below ``base`` that a match has; None with ``**``."""
        if any(c.regex is None for c in self.components):
            return None
        return len(self.components)

    @property
    def includes_base(self) -> bool:
        """True if ``base`` itself matches, as ``base/`` (only ``**`` below it, as
        ``glob('a/**')`` gives ``'a/'``; the root comes back as ``''``)."""
        return bool(self.components) and all(c.regex is None for c in self.components)

    @property
    def ends_recursive(self) -> bool:
        """True if the last component is ``**``: a directory it reaches with no name left
        over is matched as ``'dir/'``, as ``glob.glob`` gives it."""
        return bool(self.components) and self.components[-1].regex is None

    def shown(self, path: str, as_directory: bool) -> str:
        """A match as ``glob.glob`` spells it: ``path`` itself, or ``path/`` when matched
        as a directory (the pattern ends in '/', or its trailing ``**`` matched no name);
        the root so matched is ``''`` (``glob(root + '/**')`` yields ``root + '/'``)."""
        return f"{path}/" if as_directory and path else path

    def sql_glob_prefilter(self) -> str | None:
        """A SQLite GLOB that every matching path also satisfies, or None.

        SQLite's GLOB lets ``*`` cross '/' but otherwise means what fnmatch means for a
        single name, so the whole pattern (fixed depth) or ``'*' + last_component`` (with
        ``**``) is a superset of the matches. It lets SQLite drop most rows in C, using the
        path index for a literal prefix, before Python applies the exact rules. Character
        classes are left to Python (SQLite negates with '^', fnmatch with '!').
        """
        if not self.components or any("[" in c.text for c in self.components):
            return None
        if self.depth is not None:
            prefix = f"{self.base}/" if self.base else ""
            return prefix + "/".join(c.text for c in self.components)
        last = self.components[-1]
        if last.regex is None:
            return None
        return "*" + last.text

    def sql_conditions(self) -> tuple[list[str], list[object], bool]:
        """SQL conditions on ``path`` below ``base``, and whether they are exact.

        For a fixed-depth pattern without character classes, GLOB is exact once the rows
        also have :attr:`required_slashes` slashes (checked by the caller). Hidden names
        are excluded by one more condition unless the pattern itself names hidden
        components (then Python applies the per-component rule). Otherwise the conditions
        only narrow the rows and Python decides (``matches_relative``).
        """
        recursive_tail = self._recursive_tail_conditions()
        if recursive_tail is not None:
            return recursive_tail
        last_name = self._last_name_conditions()
        if last_name is not None:
            return last_name
        prefilter = self.sql_glob_prefilter()
        if prefilter is None:
            return [], [], False
        conditions: list[str] = ["path GLOB ?"]
        args: list[object] = [prefilter]
        if self.depth is None:
            return conditions, args, False
        return self._with_hidden_rule(conditions, args)

    def _last_name_conditions(self) -> tuple[list[str], list[object], bool] | None:
        """For a ``**`` pattern ending in a name pattern NAME (``**/1*.jpg``), that the
        path's last component matches NAME under SQLite's GLOB: the path is ``NAME`` (at
        the root) or ends in ``/NAME``. A superset (GLOB's ``*`` crosses '/'), but far
        narrower than ``*NAME``, which lets any path holding NAME's first character
        anywhere through to Python (``**/1*.jpg``: every path with a '1' in it)."""
        if self.depth is not None or any("[" in c.text for c in self.components):
            return None
        last = self.components[-1]
        if last.regex is None:
            return None
        below = "*/" + last.text
        if self.base:  # every row is below base: the path has a '/' before its last name
            return ["path GLOB ?"], [below], False
        return ["(path GLOB ? OR path GLOB ?)"], [last.text, below], False

    @property
    def required_slashes(self) -> int | None:
        """For a fixed-depth pattern, how many '/' a matching path has.

        With every '/' of the GLOB pinned to a literal one, the GLOB plus this count is
        exact (``*`` and ``?`` cannot cross components). The count is checked in Python:
        ``str.count`` on the rows SQLite returns costs less than SQLite's
        ``length(replace(...))`` on every row it scans.
        """
        prefilter = self.sql_glob_prefilter()
        if self.depth is None or prefilter is None:
            return None
        return prefilter.count("/")

    def _with_hidden_rule(
        self, conditions: list[str], args: list[object]
    ) -> tuple[list[str], list[object], bool]:
        if self.include_hidden:
            return conditions, args, True
        if any(c.text.startswith(".") for c in self.components):
            return conditions, args, False
        if not self.base:  # no component below the root may start with '.'
            conditions.append("instr(path, '/.') = 0 AND substr(path, 1, 1) != '.'")
        elif not self.base.startswith(".") and "/." not in self.base:
            conditions.append("instr(path, '/.') = 0")  # the base has no hidden part itself
        else:
            conditions.append("('/' || substr(path, ?)) NOT GLOB '*/.*'")
            args.append(len(self.base) + 2)
        return conditions, args, True

    def _recursive_tail_conditions(self) -> tuple[list[str], list[object], bool] | None:
        """Exact conditions for ``base/**`` (everything strictly below ``base``) and for
        ``base/**/*SUFFIX`` (a last name ending in a literal SUFFIX: the same as the whole
        path ending in it, which one GLOB tests in C; the common ``**/*.jpg``)."""
        comps = self.components
        if len(comps) == 1 and comps[0].regex is None:
            return self._with_hidden_rule(["path != ''"], [])
        if len(comps) == 2 and comps[0].regex is None and comps[1].regex is not None:
            name = comps[1].text
            if name.startswith("*") and len(name) > 1 and not has_magic(name[1:]):
                return self._with_hidden_rule(["path GLOB ?"], ["*" + name[1:]])
        return None

    def tail_matcher(self) -> Callable[[str], bool] | None:
        """For ``base/**/NAME``, a cheap exact test of a path below ``base``, else None.

        Any depth is allowed there, so only the last component is matched, plus the
        hidden-name rule over the whole relative path.
        """
        comps = self.components
        if len(comps) != 2 or comps[0].regex is not None or comps[1].regex is None:
            return None
        match = comps[1].regex.match
        skip = len(self.base) + 1 if self.base else 0
        check_hidden = not self.include_hidden
        if check_hidden and comps[1].text.startswith("."):
            return None

        def matches(path: str) -> bool:
            if not path or match(path[path.rfind("/") + 1 :]) is None:
                return False  # (the root itself is never a match)
            return not check_hidden or "/." not in "/" + path[skip:]

        return matches

    def matches_relative(self, names: list[str], is_dir: bool = True) -> bool:
        """True if the components below ``base`` (``names``) match the pattern in any
        of the two ways :meth:`match_forms` tells apart."""
        return any(self.match_forms(names, is_dir))

    def match_forms(self, names: list[str], is_dir: bool) -> tuple[bool, bool]:
        """How the entry whose components below ``base`` are ``names`` matches: (as
        itself, as a directory), the second spelled ``'path/'`` by ``glob.glob``.

        The base itself (no components: ``[]``, or ``['']`` from splitting the empty
        relative path of the root) never matches here: :attr:`includes_base` decides it.
        A trailing ``**`` that matches no name stands for ``X/`` (``glob('*/**')``
        yields ``'d/'``), which only a directory satisfies; matching at least one name it
        yields the entry itself. A directory may match both ways (``'**/**'`` yields both
        ``'d/'`` and ``'d'``). A pattern ending in '/' matches directories only, each
        as a directory.
        """
        if not names or not all(names):
            return False, False
        comps = self.components
        itself = self._match(0, names, 0, len(comps), nonempty_tail=True)
        bare = is_dir and self.ends_recursive and self._match(0, names, 0, len(comps) - 1)
        if self.dirs_only:
            return False, is_dir and (itself or bare)
        return itself, bare

    def _match(
        self, i: int, names: list[str], j: int, stop: int, nonempty_tail: bool = False
    ) -> bool:
        """True if ``components[i:stop]`` match ``names[j:]``; with ``nonempty_tail``, a
        ``**`` at ``stop - 1`` must match at least one name."""
        comps = self.components
        while i < stop:
            comp = comps[i]
            if comp.regex is None:
                first = j + 1 if nonempty_tail and i == stop - 1 else j
                for k in range(j, len(names) + 1):
                    if k >= first and self._match(i + 1, names, k, stop, nonempty_tail):
                        return True
                    if k < len(names) and _is_hidden(names[k]) and not comp.hidden_ok:
                        return False
                return False
            if j == len(names):
                return False
            name = names[j]
            if (_is_hidden(name) and not comp.hidden_ok) or comp.regex.match(name) is None:
                return False
            i += 1
            j += 1
        return j == len(names)


def compile_glob(
    pattern: str, recursive: bool = False, include_hidden: bool = False
) -> GlobPattern:
    """Compile ``pattern`` (archive-relative; a leading '/' is ignored)."""
    dirs_only = pattern.endswith("/")
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    base_parts: list[str] = []
    while parts and not has_magic(parts[0]):
        base_parts.append(parts.pop(0))
    components: list[_Component] = []
    for part in parts:
        if recursive and part == "**":
            components.append(_Component(None, include_hidden, part))
        else:
            hidden_ok = include_hidden or part.startswith(".") or not has_magic(part)
            components.append(_Component(re.compile(fnmatch.translate(part)), hidden_ok, part))
    return GlobPattern("/".join(base_parts), tuple(components), dirs_only, include_hidden)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One include/exclude pattern: matched against the basename unless it contains '/'."""

    anchored: GlobPattern | None
    name_regex: re.Pattern[str] | None
    dirs_only: bool

    @classmethod
    def parse(cls, pattern: str) -> _Rule:
        dirs_only = pattern.endswith("/")
        body = pattern.strip("/")
        if not body:
            raise ValueError(f"Empty path pattern: {pattern!r}")
        if "/" in body:
            return cls(compile_glob(body, recursive=True, include_hidden=True), None, dirs_only)
        return cls(None, re.compile(fnmatch.translate(body)), dirs_only)

    def matches(self, path: str, is_dir: bool) -> bool:
        if self.dirs_only and not is_dir:
            return False
        if self.name_regex is not None:
            return self.name_regex.match(path[path.rfind("/") + 1 :]) is not None
        assert self.anchored is not None
        glob = self.anchored
        if glob.is_literal:
            return path == glob.base
        if glob.base:
            if not path.startswith(glob.base + "/"):
                return False
            path = path[len(glob.base) + 1 :]
        # as in rsync, a trailing '**' stands for at least one name, for a directory too:
        # 'data/**' and '*/**' match what is inside a directory, not the directory itself
        return glob.matches_relative(path.split("/"), is_dir=False)


@dataclass(frozen=True, slots=True)
class PathFilter:
    """Include/exclude rules over archive paths, with the conventions of tar and rsync.

    A pattern without '/' matches the last component at any depth (``*.tmp``); one with '/'
    matches the whole path, ``**`` spanning directories (``train/**/*.jpg``); a trailing
    '/' restricts it to directories. A rule that matches a directory covers everything
    below it, so excluding ``cache`` drops the subtree and including ``train`` takes all of
    it.

    The rules apply in order: the first one that covers a path decides whether it is
    selected, and a path no rule covers gets ``default``. :meth:`from_rules` keeps the
    order given (rsync's first match wins; what no rule covers is selected);
    :meth:`from_patterns` is tar's convention (exclusion wins over inclusion, and with
    include rules only what they cover is selected).
    """

    rules: tuple[tuple[bool, _Rule], ...] = ()
    """(True for include, the rule), in the order they are tried."""
    default: bool = True
    """Whether a path that no rule covers is selected."""

    @classmethod
    def from_patterns(cls, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> PathFilter:
        """Tar's convention: excludes first, then includes; with includes, nothing else.

        Raises:
            ValueError: an empty pattern.
        """
        includes = tuple((True, _Rule.parse(p)) for p in include)
        excludes = tuple((False, _Rule.parse(p)) for p in exclude)
        return cls(excludes + includes, default=not includes)

    @classmethod
    def from_rules(cls, rules: Iterable[tuple[str, str]]) -> PathFilter:
        """Rsync's convention: ``('+', pattern)`` includes and ``('-', pattern)`` excludes,
        tried in the order given; the first that covers a path decides, and a path no rule
        covers is selected (so includes after the last exclude change nothing).

        Raises:
            ValueError: a sign other than '+' or '-', or an empty pattern.
        """
        parsed = []
        for sign, pattern in rules:
            if sign not in ("+", "-"):
                raise ValueError(f"A filter rule's sign is '+' or '-', not {sign!r}")
            parsed.append((sign == "+", _Rule.parse(pattern)))
        return cls(tuple(parsed), default=True)

    @property
    def include(self) -> tuple[_Rule, ...]:
        return tuple(rule for inc, rule in self.rules if inc)

    @property
    def exclude(self) -> tuple[_Rule, ...]:
        return tuple(rule for inc, rule in self.rules if not inc)

    @property
    def selects_everything(self) -> bool:
        return self.default and all(inc for inc, _ in self.rules)

    @property
    def ignored_includes(self) -> int:
        """How many include rules can change nothing: those after the last exclude when
        unmatched paths are selected anyway."""
        if not self.default:
            return 0
        count = 0
        for inc, _ in reversed(self.rules):
            if not inc:
                break
            count += 1
        return count

    def is_excluded(self, path: str, is_dir: bool) -> bool:
        """True if an exclude rule matches ``path`` itself (for walks with tar's rules,
        which prune below it)."""
        return any(rule.matches(path, is_dir) for rule in self.exclude)

    def is_included(self, path: str, is_dir: bool) -> bool:
        """True if an include rule matches ``path`` or one of its ancestor directories."""
        if not self.include:
            return True
        return any(rule.matches(path, is_dir) for rule in self.include) or any(
            rule.matches(ancestor, True) for ancestor in _ancestors(path) for rule in self.include
        )

    def prunes(self, path: str, is_dir: bool) -> bool:
        """True if ``path`` and everything below it are left out: an exclude rule covers it
        and no include rule comes before that one."""
        i = self.first_cover(path, is_dir)
        return i < len(self.rules) and not any(inc for inc, _ in self.rules[: i + 1])

    def selects(self, path: str, is_dir: bool) -> bool:
        """Full decision for one path, ancestors included (for paths not found by a walk)."""
        i = self.first_cover(path, is_dir)
        return self.rules[i][0] if i < len(self.rules) else self.default

    def first_cover(self, path: str, is_dir: bool, memo: dict[str, int] | None = None) -> int:
        """The index of the first rule that matches ``path`` or one of its directories
        (``len(rules)`` if none). ``memo`` keeps directories' answers between calls, so
        deciding many paths tries each rule once per directory."""
        names = path.split("/")
        limit, done = len(self.rules), 0
        if memo:
            for k in range(len(names) - 1, 0, -1):
                known = memo.get("/".join(names[:k]))
                if known is not None:
                    limit, done = known, k
                    break
        for k in range(done + 1, len(names) + 1):
            sub = "/".join(names[:k])
            sub_is_dir = is_dir or k < len(names)
            for i in range(limit):
                if self.rules[i][1].matches(sub, sub_is_dir):
                    limit = i
                    break
            if memo is not None and sub_is_dir:
                memo[sub] = limit
        return limit

    def selector(self) -> Callable[[str, bool], bool]:
        """:meth:`selects` for many paths, remembering directories' answers."""
        memo: dict[str, int] = {}
        rules, default = self.rules, self.default

        def selects(path: str, is_dir: bool) -> bool:
            i = self.first_cover(path, is_dir, memo)
            return rules[i][0] if i < len(rules) else default

        return selects


def _ancestors(path: str) -> Iterator[str]:
    """Proper ancestors of a relative path, nearest last; the root is not one."""
    end = path.find("/")
    while end != -1:
        yield path[:end]
        end = path.find("/", end + 1)
