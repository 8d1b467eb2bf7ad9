"""Path algebra inside an archive: normalization, parents, ancestors, names.

Archive paths are POSIX-style, relative, without leading or trailing slashes; the root
directory is the empty string. This module owns the single definition of a valid path,
so every entry point rejects ``..`` escapes, NUL bytes and text that is not Unicode
(lone surrogates) the same way, and refuses what is not a ``str`` (``bytes`` included)
with a path type error; ``check_depth`` is the limit on components that writers apply.
It imports only ``exceptions``.
"""

from __future__ import annotations

import posixpath
import re

from barecat.exceptions import InvalidPathBarecatError, PathTypeBarecatError

# Anything that might need normalizing or refusing: empty components, '.'/'..' components,
# leading or trailing '/', NUL. Paths without these are already canonical.
_NEEDS_WORK = re.compile(r"//|^/|/$|\x00|(?:^|/)\.\.?(?:/|$)")

MAX_DEPTH = 999
"""Most components a stored path may have (a file 998 directories deep). The index's
triggers keep every directory's totals by updating each ancestor in turn, one level of
trigger recursion each, and SQLite stops at 1,000 levels; writers refuse deeper paths
(``check_depth``) up front. Reading deeper paths that exist (written by other tools)
works."""


def normalize(path: str) -> str:
    """Return the canonical archive form of ``path`` ('' for the root).

    Accepts what users type ('/a//b/', './a', 'a/./b', 'a/b/../c') the way the reference
    does, but refuses what cannot be stored safely: NUL bytes and '..' leaving the root,
    which the reference silently stores as a literal '..' directory.
    """
    if path.__class__ is not str:
        path = _coerce(path)
    if (  # already canonical, the common case, told by C-speed substring tests first
        path
        and path[0] != "/"
        and path[-1] != "/"
        and "//" not in path
        and "\x00" not in path
        and ((path[0] != "." and "/." not in path) or _NEEDS_WORK.search(path) is None)
    ):
        return path if path.isascii() else _unicode(path)
    if "\x00" in path:
        raise InvalidPathBarecatError(f"Path contains a NUL byte: {path!r}")
    norm = posixpath.normpath("/" + path)  # anchoring at '/' makes '..' clamp, so detect it
    if _climbs_above_root(path):
        raise InvalidPathBarecatError(f"Path escapes the archive root: {path!r}")
    return _unicode(norm.strip("/"))


def _unicode(path: str) -> str:
    """``path``, if it is Unicode text: lone surrogates (what ``os.fsdecode`` makes of
    bytes that are not UTF-8) cannot be stored as UTF-8, the index's encoding."""
    if _is_unicode(path):
        return path
    raise InvalidPathBarecatError(
        f"Path is not Unicode text (it holds a lone surrogate, as os.fsdecode makes of "
        f"bytes that are not UTF-8): {path!r}"
    )


def check_depth(path: str) -> str:
    """``path`` (normalized) if it has at most ``MAX_DEPTH`` components.

    Raises:
        InvalidPathBarecatError: naming the path (its start, if long) and the limit.
    """
    if path.count("/") >= MAX_DEPTH:
        shown = path if len(path) <= 80 else f"{path[:60]}...{path[-15:]}"
        raise InvalidPathBarecatError(
            f"Path has {path.count('/') + 1} components, more than the {MAX_DEPTH} an "
            f"archive can hold: {shown!r}"
        )
    return path


_NEEDS_WORK_ANY_LINE = re.compile(_NEEDS_WORK.pattern, re.MULTILINE)


def normalize_many(paths: list[str]) -> list[str]:
    """``normalize`` over a batch; returns ``paths`` itself when all are already canonical.

    Told by substring tests over the joined batch, at C speed; the regex runs only if a
    '.' starts a component somewhere. A newline inside a path can only make these tests
    see trouble where there is none (then each path is normalized), never hide any.
    """
    if not all(p.__class__ is str and p for p in paths):
        return [normalize(p) for p in paths]
    joined = "\n" + "\n".join(paths) + "\n"
    if (
        "//" in joined
        or "\n/" in joined
        or "/\n" in joined
        or "\x00" in joined
        or (("/." in joined or "\n." in joined) and _NEEDS_WORK_ANY_LINE.search(joined))
        or not (joined.isascii() or _is_unicode(joined))
    ):
        return [normalize(p) for p in paths]
    return paths


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _coerce(path: object) -> str:
    """The ``str`` of a path-like object; anything else (``bytes`` too: archive paths are
    text) is a path type error."""
    fspath = getattr(path, "__fspath__", None)
    result = fspath() if fspath is not None else path
    if isinstance(result, str):
        return result
    raise PathTypeBarecatError(f"Archive paths are str, not {type(result).__name__}: {path!r:.80}")


def _climbs_above_root(path: str) -> bool:
    depth = 0
    for part in path.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def parent(path: str) -> str:
    """Parent of a normalized path; the root's parent is the root itself."""
    cut = path.rfind("/")
    return path[:cut] if cut >= 0 else ""


def basename(path: str) -> str:
    """Last component of a normalized path."""
    return path[path.rfind("/") + 1 :]


def join(directory: str, name: str) -> str:
    """Join a normalized directory and a child name."""
    return f"{directory}/{name}" if directory else name


def ancestors(path: str) -> list[str]:
    """Proper ancestors of a normalized path, nearest first, ending with the root ''."""
    result = []
    while path:
        path = parent(path)
        result.append(path)
    return result


def is_within(path: str, directory: str) -> bool:
    """True if ``path`` equals ``directory`` or lies beneath it."""
    return not directory or path == directory or path.startswith(directory + "/")


def subtree_bounds(directory: str) -> tuple[str, str]:
    """Half-open string range ``[lo, hi)`` that holds exactly the paths under ``directory``.

    '/' is the smallest byte that can follow the prefix in a child path, and '0' is the
    next character after '/', so a B-tree range scan on this interval visits only the subtree.
    """
    return (f"{directory}/", f"{directory}0")
