"""Path algebra inside an archive: normalization, parents, ancestors, names.

Archive paths are POSIX-style, relative, without leading or trailing slashes; the root
directory is the empty string. This module owns the single definition of a valid path,
so every entry point rejects ``..`` escapes, NUL bytes and names that are not UTF-8 the
same way, and refuses what is not a ``str`` (``bytes`` included) with a path type error;
``check_depth`` is the limit on components that writers apply. It imports only
``exceptions``.

Names that are not UTF-8 are legal on Linux; ``os.fsdecode`` turns each byte that is not
part of UTF-8 into a lone surrogate (U+DC80-U+DCFF). SQLite TEXT cannot hold such a string
through Python's driver, and a path stored as invalid UTF-8 bytes would make every query
of the reference (barecat 0.3.1) that reads it fail, so no representation is both lossless
and readable by it: such names are refused here, and :func:`shown` renders them for
messages with the bytes escaped (``bad\\xff.txt``).
"""

from __future__ import annotations

import posixpath
import re

from barecat.exceptions import InvalidPathBarecatError, PathTypeBarecatError

# Anything that might need normalizing or refusing: empty components, '.'/'..' components,
# leading or trailing '/', NUL. Paths without these (and without lone surrogates, see
# is_utf8) are already canonical.
_NEEDS_WORK = re.compile(r"//|^/|/$|\x00|(?:^|/)\.\.?(?:/|$)")
_SURROGATE = re.compile("[\ud800-\udfff]")

MAX_DEPTH = 999
"""Most components a stored path may have (a file 998 directories deep). The index's
triggers keep every directory's totals by updating each ancestor in turn, one level of
trigger recursion each, and SQLite stops at 1,000 levels; writers refuse deeper paths
(``check_depth``) up front. Reading deeper paths that exist (written by other tools)
works."""


def normalize(path: str) -> str:
    """Return the canonical archive form of ``path`` ('' for the root).

    Accepts what users type ('/a//b/', './a', 'a/./b', 'a/b/../c') the way the reference
    does, but refuses what cannot be stored safely: NUL bytes, '..' leaving the root, which
    the reference silently stores as a literal '..' directory, and names that are not
    UTF-8 (see the module doc).
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
        and (path.isascii() or is_utf8(path))
    ):
        return path
    if "\x00" in path:
        raise InvalidPathBarecatError(f"Path contains a NUL byte: {path!r}")
    if not is_utf8(path):
        raise InvalidPathBarecatError(f"Path is not valid UTF-8: '{shown(path)}'")
    norm = posixpath.normpath("/" + path)  # anchoring at '/' makes '..' clamp, so detect it
    if _climbs_above_root(path):
        raise InvalidPathBarecatError(f"Path escapes the archive root: {path!r}")
    return norm.strip("/")


def check_depth(path: str) -> str:
    """``path`` (normalized) if it has at most ``MAX_DEPTH`` components.

    Raises:
        InvalidPathBarecatError: naming the path (its start, if long) and the limit.
    """
    if path.count("/") >= MAX_DEPTH:
        short = path if len(path) <= 80 else f"{path[:60]}...{path[-15:]}"
        raise InvalidPathBarecatError(
            f"Path has {path.count('/') + 1} components, more than the {MAX_DEPTH} an "
            f"archive can hold: {short!r}"
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
        or not is_utf8(joined)
    ):
        return [normalize(p) for p in paths]
    return paths


def is_utf8(name: str) -> bool:
    """True if ``name`` can be stored as UTF-8 text: it holds no lone surrogate, which is
    what ``os.fsdecode`` makes of a name's bytes that are not UTF-8.

    Args:
        name: a path or a file name, as ``os`` functions return it.

    Returns:
        False if the name cannot be an archive path.
    """
    if name.isascii():
        return True
    try:
        name.encode("utf-8")  # faster than a search for the surrogates
    except UnicodeEncodeError:
        return False
    return True


def shown(name: str) -> str:
    """``name`` for a message: each byte that is not UTF-8 (a surrogate ``os.fsdecode``
    made) as ``\\xNN``, any other lone surrogate as ``\\uNNNN``; the rest as it is.

    Args:
        name: a path or file name, possibly from ``os.fsdecode``.

    Returns:
        Text that any terminal or log can print.
    """
    if is_utf8(name):
        return name
    return _SURROGATE.sub(_escape_surrogate, name)


def _escape_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


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
