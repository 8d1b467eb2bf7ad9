"""No symbolic link that extract, rsync into a directory or the shell's get/mget makes leads
outside the target directory, whatever links came before it.

A link is judged by where it leads on the real file system, not by its text: through
chains of links, links to links, links in intermediate directories, absolute targets,
links the same run makes and links already in the target directory. The property test
builds random archives of directories, files and links (relative and absolute targets,
``..`` included) over a target directory that may already hold links, extracts them into
a sandbox, and checks with ``os.path.realpath`` on the real file system that no link or
file made leads outside the target and that nothing outside it changed; then it
extracts the same archive with every link allowed and checks that each link that leads
inside there (and is no loop) was made by the guarded run too.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import barecat
from barecat.exceptions import BarecatError
from barecat.transfer import extract_to_directory
from barecat.transfer.sync.driver import sync
from helpers import Run

LINK = stat.S_IFLNK | 0o777
NAMES = ["a", "b", "c"]
"""Entry names; never ``target`` (the target directory's own name), so a walk that steps
out of the target can never come back into it (which the rule refuses, and realpath
would not)."""

Target = tuple[str, str]
"""A link target: ``("rel", text)``, or an absolute one under the target (``"root"``) or
the sandbox around it (``"sandbox"``), followed by ``text``."""
Entry = tuple[str, str, Target]
"""Path, kind (``dir``, ``file``, ``link``), and the target if a link."""

paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
relative_targets = st.lists(st.sampled_from([*NAMES, "..", "."]), min_size=1, max_size=5).map(
    lambda parts: ("rel", "/".join(parts))
)
absolute_targets = st.tuples(
    st.sampled_from(["root", "sandbox"]),
    st.lists(st.sampled_from([*NAMES, ".."]), max_size=3).map("/".join),
)
targets = st.one_of(relative_targets, relative_targets, absolute_targets)
entries = st.lists(
    st.tuples(paths, st.sampled_from(["dir", "file", "link", "link", "link"]), targets),
    max_size=12,
)
present = st.lists(st.tuples(paths, st.sampled_from(["dir", "file", "link"]), targets), max_size=4)


def text_of(target: Target, sandbox: Path) -> str:
    anchor, text = target
    if anchor == "rel":
        return text
    base = sandbox / "target" if anchor == "root" else sandbox
    return f"{base}/{text}" if text else str(base)


def build_archive(path: Path, items: list[Entry], sandbox: Path) -> dict[str, tuple[str, str]]:
    """The archive of ``items`` (those that do not clash with earlier ones); returns what
    it holds: path -> (kind, link target text or file contents)."""
    held: dict[str, tuple[str, str]] = {}
    with barecat.Barecat(str(path), readonly=False) as bc:
        for i, (where, kind, target) in enumerate(items):
            try:
                if kind == "dir":
                    bc.add(barecat.BarecatDirInfo(where), dir_exist_ok=True)
                elif kind == "file":
                    bc.add(where, data=f"file {i}".encode())
                else:
                    bc.add(where, data=os.fsencode(text_of(target, sandbox)), mode=LINK)
            except BarecatError:
                continue  # clashes with an earlier entry (a file where a directory is...)
            content = f"file {i}" if kind == "file" else text_of(target, sandbox)
            held[where] = (kind, "" if kind == "dir" else content)
    return held


def make_present(root: Path, items: list[Entry], sandbox: Path) -> None:
    """What the target directory holds before the run (clashing items left out)."""
    root.mkdir()
    for where, kind, target in items:
        path = root / where
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "dir":
                path.mkdir()
            elif kind == "file":
                path.write_bytes(b"was here")
            else:
                os.symlink(text_of(target, sandbox), path)
        except OSError:
            continue


def make_sandbox(sandbox: Path, present_items: list[Entry]) -> Path:
    """``sandbox`` with a secret beside the target directory; returns the target."""
    shutil.rmtree(sandbox, ignore_errors=True)
    sandbox.mkdir()
    (sandbox / "secret").write_bytes(b"secret")
    (sandbox / "a").mkdir()  # something outside for links to lead to
    root = sandbox / "target"
    make_present(root, present_items, sandbox)
    return root


def outside_state(sandbox: Path) -> dict[str, str]:
    """Everything in the sandbox but the target directory, links not followed."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(sandbox):
        if Path(dirpath) == sandbox:
            dirnames.remove("target")
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            state[str(path)] = (
                "link " + os.readlink(path)
                if path.is_symlink()
                else "dir"
                if path.is_dir()
                else path.read_text()
            )
    return state


def links_below(root: Path) -> dict[str, str]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                found[str(path.relative_to(root))] = os.readlink(path)
    return found


def leads_inside(path: Path, root: Path) -> bool:
    """Whether the link ``path`` resolves inside ``root`` on the real file system, by
    ``os.path.realpath`` (a loop, the kernel's ELOOP, leads nowhere: not inside)."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return False
    real = os.path.realpath(path)
    return real == str(root) or real.startswith(f"{root}/")


class RefusedError(Exception):
    pass


def walked(path: Path, root: Path) -> str:
    """Where the link ``path`` leads, walked on the real file system the way the rule
    says, written plainly: each component in turn, a link replaced by its target (more
    than 40 in all: ``loop``), a missing name walked through, ``..`` at the root or an
    absolute target elsewhere: ``outside``; else ``inside``."""
    hops = 0

    def follow(parts: list[str], target: str) -> list[str]:
        nonlocal hops
        if target.startswith("/"):
            if not (target + "/").startswith(f"{root}/"):
                raise RefusedError("outside")
            parts, target = [], target[len(str(root)) :]
        for name in target.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                if not parts:
                    raise RefusedError("outside")
                parts = parts[:-1]
                continue
            here = root.joinpath(*parts, name)
            if not here.is_symlink():
                parts = [*parts, name]
                continue
            hops += 1
            if hops > 40:
                raise RefusedError("loop")
            parts = follow(parts, os.readlink(here))
        return parts

    try:
        follow(list(path.relative_to(root).parts[:-1]), path.name)
    except RefusedError as e:
        return str(e)
    except RecursionError:
        return "loop"
    return "inside"


def check_safe(
    root: Path, held: dict[str, tuple[str, str]], before: dict[str, str], sandbox: Path
) -> dict[str, str]:
    """No link of the archive made below ``root`` leads outside it (a link that was there
    before with the same target is not one the run made), no file of the archive
    resolves outside it or is other than its bytes, nothing outside changed. Returns
    the archive's links that were made."""
    made = {}
    for where, target in links_below(root).items():
        kind, text = held.get(where, ("", ""))
        if kind == "link" and text == target and before.get(where) != target:
            assert leads_inside(root / where, root), (where, target, os.path.realpath(root / where))
            assert walked(root / where, root) == "inside", (where, target)
            made[where] = target
    for where, (kind, text) in held.items():
        path = root / where
        if kind == "file" and os.path.lexists(path) and not path.is_symlink():
            assert os.path.realpath(path) == str(path)
            if path.is_file():
                assert path.read_text() in (text, "was here")
    return made


@settings(max_examples=200, deadline=None, derandomize=True)
@given(items=entries, present_items=present)
@example(  # the case: d1/d2/l -> ../.. makes x -> d1/d2/l/../../secret lead out
    items=[("b/c/l", "link", ("rel", "../..")), ("x", "link", ("rel", "b/c/l/../../secret"))],
    present_items=[],
)
@example(  # the same, with the second link made first
    items=[("x", "link", ("rel", "b/c/l/../../secret")), ("b/c/l", "link", ("rel", "../.."))],
    present_items=[],
)
@example(  # through a link already in the target directory
    items=[("x", "link", ("rel", "b/../../secret"))],
    present_items=[("b", "link", ("rel", "c/a"))],
)
@example(  # a loop
    items=[("a", "link", ("rel", "b")), ("b", "link", ("rel", "a")), ("c", "link", ("rel", "a"))],
    present_items=[],
)
@pytest.mark.slow
def test_no_link_made_leads_outside(
    tmp_path_factory: pytest.TempPathFactory, items: list[Entry], present_items: list[Entry]
) -> None:
    work = tmp_path_factory.mktemp("links")
    sandbox = work / "sandbox"
    root = make_sandbox(sandbox, present_items)
    held = build_archive(work / "a.barecat", items, sandbox)
    before = links_below(root)
    outside = outside_state(sandbox)
    with barecat.Barecat(str(work / "a.barecat")) as bc:
        result = extract_to_directory(bc, str(root))
    made = check_safe(root, held, before, sandbox)
    assert outside_state(sandbox) == outside
    refused = {p for p, _ in result.outside_links} | {p for p, _ in result.failures}
    files = {p: (root / p).read_bytes() for p, (k, _) in held.items() if k == "file"
             if (root / p).is_file() and not (root / p).is_symlink()}  # fmt: skip

    # the same with every link allowed: each that leads inside there was made above
    root = make_sandbox(sandbox, present_items)
    with barecat.Barecat(str(work / "a.barecat")) as bc:
        extract_to_directory(bc, str(root), allow_outside_links=True)
    for where, (kind, text) in held.items():
        path = root / where
        if kind == "link" and path.is_symlink() and os.readlink(path) == text:
            if walked(path, root) == "inside":
                kept = made.get(where) == text or before.get(where) == text  # (already there)
                assert kept, f"{where} -> {text} leads inside but was not made"
            else:
                assert where not in made and (where in refused or before.get(where) == text)
    assert files == {p: (root / p).read_bytes() for p in files}

    # rsync into the directory keeps the same rule
    root = make_sandbox(sandbox, present_items)
    sync([f"{work / 'a.barecat'}::/"], f"{root}/")
    synced = check_safe(root, held, before, sandbox)
    assert outside_state(sandbox) == outside
    if not present_items:
        assert synced == made


def test_extract_refuses_a_link_led_out_by_an_earlier_one(run: Run, tmp_path: Path) -> None:
    """The issue's archive: ``d1/d2/l -> ../..`` is inside, ``x`` through it is not."""
    ar = str(tmp_path / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("d1/d2/l", data=b"../..", mode=LINK)
        bc.add("x", data=b"d1/d2/l/../../secret", mode=LINK)
        bc.add("d1/f.txt", data=b"kept")
    out = tmp_path / "out"
    code, _, err = run("extract", ar, "-C", str(out), "-v")
    assert code == 1
    assert "x: link to 'd1/d2/l/../../secret' not created: it points outside" in err
    assert os.readlink(out / "d1/d2/l") == "../.." and (out / "d1/f.txt").read_bytes() == b"kept"
    assert not os.path.lexists(out / "x")


def test_rsync_refuses_a_link_led_out_by_an_earlier_one(run: Run, tmp_path: Path) -> None:
    ar = str(tmp_path / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("x", data=b"d1/d2/l/../../secret", mode=LINK)
        bc.add("d1/d2/l", data=b"../..", mode=LINK)
        bc.add("f.txt", data=b"kept")
    out = tmp_path / "out"
    code, _, err = run("rsync", f"{ar}::/", f"{out}/")
    assert code == 1
    assert f"x: link to 'd1/d2/l/../../secret' points outside {out}" in err
    assert os.readlink(out / "d1/d2/l") == "../.." and (out / "f.txt").read_bytes() == b"kept"
    assert not os.path.lexists(out / "x")


def test_shell_mget_refuses_a_link_through_a_link_on_disk(run: Run, tmp_path: Path) -> None:
    """A link already in the local directory counts: ``up -> ..`` there turns
    ``x -> up/secret`` outward."""
    ar = str(tmp_path / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("d/x", data=b"up/secret", mode=LINK)
        bc.add("d/y", data=b"f.txt", mode=LINK)
        bc.add("d/f.txt", data=b"kept")
    local = tmp_path / "local"
    local.mkdir()
    os.symlink("..", local / "up")
    code, _, err = run("shell", "-c", f"lcd {local}; mget /d/*", ar)
    assert code == 1
    assert f"d/x: link to 'up/secret' not created: it points outside {local}" in err
    assert os.readlink(local / "y") == "f.txt" and (local / "f.txt").read_bytes() == b"kept"
    assert not os.path.lexists(local / "x")


def test_a_loop_of_links_is_refused_naming_each(run: Run, tmp_path: Path) -> None:
    ar = str(tmp_path / "a.barecat")
    with barecat.Barecat(ar, readonly=False) as bc:
        bc.add("a", data=b"b", mode=LINK)
        bc.add("b", data=b"a", mode=LINK)
        bc.add("ok", data=b"f", mode=LINK)
    out = tmp_path / "out"
    code, _, err = run("extract", ar, "-C", str(out))
    assert code == 1
    assert "a: link to 'b' not created: following it takes more than 40 links (a loop)" in err
    assert "b: link to 'a' not created" in err
    assert os.readlink(out / "ok") == "f"
