"""How names are shown on a terminal: escaped as GNU ``ls``, ``find`` and ``tree`` escape
them there, so that no name in an archive (``ESC ]0;title BEL`` retitling the terminal,
``CR ESC [2K`` erasing the line) talks to the terminal; in a pipe or a file, exactly as
they are, byte for byte, for scripts (and as barecat 0.3.1 printed them).

A character cannot be shown when glibc's ``iswprint`` says so in a UTF-8 locale: control
characters (C0, DEL, C1), line and paragraph separators, unassigned code points, and
bytes that are not UTF-8. On a terminal, ``ls`` quotes names as GNU ``ls`` 9 does by
default there (its ``shell-escape`` quoting: ``'a'$'\\033'']0;t'$'\\a''b'``, a name that
needs no quoting as it is, so any of them can be pasted into a shell), ``find`` (and
``du``, which GNU leaves raw) shows each such character as ``?``, ``tree`` as a
backslash and its code in octal (``\\033``), and the ``-v`` listings of ``create`` and
``extract`` show names as ``tar -v`` does (``new\\nline.txt``, ``\\033``, a backslash
doubled). Pure text functions; the one place that decides, from the stream, whether
names are escaped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import TextIO

Shown = Callable[[str], str]
"""How a name is shown: one of this module's styles, or as it is."""

_UNPRINTABLE = frozenset({"Cc", "Cs", "Cn", "Zl", "Zp"})
"""Unicode categories ``iswprint`` refuses in glibc's UTF-8 locales."""
_LS_SPECIAL = re.compile(r"""[ !"$&'()*;<=>?\[\\^`|]|^[#~]|^[{}]$""")
"""What makes GNU ``ls`` quote a name, printable as it is (gnulib's quotearg)."""
_LS_PLAIN = frozenset("%+,-./0123456789:@ABCDEFGHIJKLMNOPQRSTUVWXYZ]_abcdefghijklmnopqrstuvwxyz ")
_NAMED = {"\a": "a", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "\v": "v"}


def printable(char: str) -> bool:
    """Whether a terminal shows ``char`` as a character (glibc's ``iswprint``)."""
    return unicodedata.category(char) not in _UNPRINTABLE


def _all_printable(name: str) -> bool:
    return name.isprintable() if name.isascii() else all(map(printable, name))


def ls_quoted(name: str) -> str:
    """``name`` as GNU ``ls`` shows it on a terminal (``--quoting-style=shell-escape``):
    as it is if it needs no quoting, in double quotes if a ``'`` is its only trouble,
    else in single quotes with each unprintable character as ``$'\\ooo'`` (or ``$'\\n'``)."""
    if _all_printable(name) and not _LS_SPECIAL.search(name):
        return name
    if "'" in name and all(_compatible(char, i, name) for i, char in enumerate(name)):
        return f'"{name}"'
    quoted, pending = _single_quoted(name, False)
    if "'" in name:  # gnulib scans such a name twice, its last state carried over (''...)
        quoted, _ = _single_quoted(name, pending)
    return quoted


def _compatible(char: str, i: int, name: str) -> bool:
    """Whether ``char`` keeps a name with a ``'`` in gnulib's double-quoted form."""
    if char in _LS_PLAIN or char == "'":
        return True
    if char in "#~":
        return i == 0
    if char in "{}":
        return len(name) == 1
    return not char.isascii() and printable(char)


def _single_quoted(name: str, pending: bool) -> tuple[str, bool]:
    """gnulib's single-quoted form, starting as if a ``$'`` were open (``pending``);
    returns it and whether a ``$'`` is open at the end."""
    out = ["'"]
    for char in name:
        if char == "'":
            out.append("'\\''")
            pending = False
        elif char in _NAMED or not printable(char):
            if not pending:
                out.append("'$'")
                pending = True
            out.append("\\" + _NAMED[char] if char in _NAMED else _octal_bytes(char))
        else:
            if pending:
                out.append("''")
                pending = False
            out.append(char)
    out.append("'")
    return "".join(out), pending


def _octal_bytes(char: str) -> str:
    return "".join(f"\\{b:03o}" for b in char.encode("utf-8", "surrogateescape"))


def question_marks(name: str) -> str:
    """``name`` as GNU ``find`` shows it on a terminal: each unprintable character a ``?``."""
    if _all_printable(name):
        return name
    return "".join(char if printable(char) else "?" for char in name)


def octal_escaped(name: str) -> str:
    """``name`` as ``tree`` shows it: each unprintable character as a backslash and its
    code in octal (a byte that is not UTF-8: the byte's)."""
    if _all_printable(name):
        return name
    return "".join(char if printable(char) else _octal_code(char) for char in name)


def _octal_code(char: str) -> str:
    code = ord(char)
    return f"\\{code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else code:03o}"


def tar_escaped(name: str) -> str:
    """``name`` as GNU ``tar -v`` shows it (its ``escape`` quoting): a backslash doubled,
    ``\\n`` and the other C escapes for their characters, each byte of any other
    unprintable character as a backslash and three octal digits (``\\033``)."""
    if _all_printable(name) and "\\" not in name:
        return name
    return "".join(_tar_char(char) for char in name)


def _tar_char(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char in _NAMED:
        return "\\" + _NAMED[char]
    return char if printable(char) else _octal_bytes(char)


def as_is(name: str) -> str:
    return name


def shown_on(stream: TextIO, style: Shown) -> Shown:
    """``style`` if ``stream`` is a terminal, else names as they are."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # not a real stream, or closed
        terminal = False
    return style if terminal else as_is


__all__ = [
    "Shown",
    "as_is",
    "ls_quoted",
    "octal_escaped",
    "printable",
    "question_marks",
    "shown_on",
    "tar_escaped",
]
