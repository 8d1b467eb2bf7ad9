"""Include/exclude rules (``barecat.glob.PathFilter``) checked against a plain model.

The model below is written from the documented rules, not from the implementation: a
pattern without '/' matches a path's last name (``fnmatch``); one with '/' matches the
whole path name by name, ``**`` standing for any number of names; a trailing '/' means
directories only; a rule covers a path if it matches the path or one of its directories.
Rsync's order (:meth:`PathFilter.from_rules`): the first covering rule decides, and a
path no rule covers is selected. Tar's (:meth:`PathFilter.from_patterns`): any covering
exclude leaves a path out; with includes, only what they cover is selected.
"""

from __future__ import annotations

import fnmatch
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barecat.glob import PathFilter

NAMES = ["a", "b", "a.t", ".h", "c.t"]
PIECES = ["a", "b", "*", "?", "*.t", ".h*", "**", "[ab]"]


def _names_match(pattern: list[str], names: list[str]) -> bool:
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        least = 1 if not rest else 0  # a trailing '**' stands for at least one name
        return any(_names_match(rest, names[k:]) for k in range(least, len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], head) and _names_match(rest, names[1:])


def model_matches(pattern: str, path: str, is_dir: bool) -> bool:
    if pattern.endswith("/") and not is_dir:
        return False
    body = pattern.strip("/")
    names = path.split("/")
    if "/" not in body:
        return fnmatch.fnmatchcase(names[-1], body)
    return _names_match([p for p in body.split("/") if p not in ("", ".")], names)


def model_covers(pattern: str, path: str) -> bool:
    """The rule matches the file ``path`` or one of its directories."""
    names = path.split("/")
    chain = ["/".join(names[:k]) for k in range(1, len(names))]
    return model_matches(pattern, path, False) or any(
        model_matches(pattern, d, True) for d in chain
    )


def model_rsync(rules: list[tuple[str, str]], path: str) -> bool:
    for sign, pattern in rules:
        if model_covers(pattern, path):
            return sign == "+"
    return True


def model_tar(include: list[str], exclude: list[str], path: str) -> bool:
    if any(model_covers(p, path) for p in exclude):
        return False
    return not include or any(model_covers(p, path) for p in include)


patterns = st.builds(
    lambda pieces, slash: "/".join(pieces) + ("/" if slash else ""),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=3),
    st.booleans(),
)
rule_lists = st.lists(st.tuples(st.sampled_from("+-"), patterns), max_size=5)
file_paths = st.lists(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join),
    min_size=1,
    max_size=12,
    unique=True,
)


def _dirs_of(paths: list[str]) -> list[str]:
    return sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p})


@settings(max_examples=600, deadline=None)
@given(rule_lists, file_paths, st.randoms(use_true_random=False))
def test_first_covering_rule_decides_as_the_model_says(
    rules: list[tuple[str, str]], paths: list[str], rnd: random.Random
) -> None:
    path_filter = PathFilter.from_rules(rules)
    selects = path_filter.selector()
    entries = [(p, False) for p in paths] + [(d, True) for d in _dirs_of(paths)]
    rnd.shuffle(entries)  # the selector's memory must not depend on the order asked
    for path, is_dir in entries:
        assert selects(path, is_dir) == path_filter.selects(path, is_dir)
        if not is_dir:
            assert path_filter.selects(path, False) == model_rsync(rules, path), (rules, path)


@settings(max_examples=400, deadline=None)
@given(st.lists(patterns, max_size=3), st.lists(patterns, max_size=3), file_paths)
def test_tar_convention_is_kept_for_create_and_extract(
    include: list[str], exclude: list[str], paths: list[str]
) -> None:
    path_filter = PathFilter.from_patterns(include, exclude)
    for path in paths:
        assert path_filter.selects(path, False) == model_tar(include, exclude, path)


@settings(max_examples=400, deadline=None)
@given(rule_lists, file_paths)
def test_a_pruned_directory_has_nothing_selected_below_it(
    rules: list[tuple[str, str]], paths: list[str]
) -> None:
    """Walks skip what ``prunes`` says; that must never lose a file that is selected."""
    for path_filter in (
        PathFilter.from_rules(rules),
        PathFilter.from_patterns(
            [p for s, p in rules if s == "+"], [p for s, p in rules if s == "-"]
        ),
    ):
        for d in _dirs_of(paths):
            if path_filter.prunes(d, True):
                below = [p for p in paths if p.startswith(d + "/")]
                assert not any(path_filter.selects(p, False) for p in below)


def test_rule_order_examples() -> None:
    first_txt = PathFilter.from_rules([("+", "**/*.txt"), ("-", "data/**")])
    assert first_txt.selects("data/file.txt", False)
    assert not first_txt.selects("data/file.log", False)
    first_data = PathFilter.from_rules([("-", "data/**"), ("+", "**/*.txt")])
    assert not first_data.selects("data/file.txt", False)
    assert first_data.selects("other.txt", False)
    # a directory rule covers everything in it, at any depth for a rule without '/'
    keep = PathFilter.from_rules([("+", "keep/"), ("-", "**")])
    assert keep.selects("keep/a/b.txt", False) and keep.selects("x/keep/c", False)
    assert not keep.selects("drop/c.txt", False) and not keep.selects("keep", False)
    assert not PathFilter.from_rules([("-", "cache")]).selects("a/cache/x/y", False)


def test_includes_after_the_last_exclude_are_counted_as_changing_nothing() -> None:
    assert PathFilter.from_rules([("+", "*.jpg")]).ignored_includes == 1
    assert (
        PathFilter.from_rules([("+", "a"), ("-", "b"), ("+", "c"), ("+", "d")]).ignored_includes
        == 2
    )
    assert PathFilter.from_rules([("+", "a"), ("-", "**")]).ignored_includes == 0
    assert PathFilter.from_patterns(["*.jpg"]).ignored_includes == 0  # tar: only those


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="'\\+' or '-'"):
        PathFilter.from_rules([("include", "*.jpg")])
    with pytest.raises(ValueError, match="Empty path pattern"):
        PathFilter.from_rules([("-", "/")])
