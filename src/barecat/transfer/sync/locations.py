"""What each ``barecat rsync`` argument names: a local path, a path inside an archive, a
tar or zip file read as a source, or a remote place (SSH, a ``barecat serve`` server).

The rules (docs/command-line.md documents them for users):

- ``barecat://HOST[:PORT]/NAME[::INNER]`` is archive NAME on a server (port 50003 if
  none is given);
- ``ARCHIVE::INNER`` (the first ``::`` not escaped) always names a path inside an
  archive: a tar or zip file when ARCHIVE's name says so (``.tar.gz``, ``.zip``, ...), an
  archive on an SSH host when ARCHIVE is ``[USER@]HOST:/PATH``, else a barecat archive
  (a destination that does not exist yet is created);
- ``ARCHIVE:INNER`` (one colon) names a path inside ARCHIVE when ARCHIVE is an existing
  barecat archive, or, for the destination only, a name ending in ``.barecat`` that does
  not exist yet;
- ``[USER@]HOST:/PATH`` is a directory on an SSH host;
- anything else is a local path.

Escapes: ``\\::`` is a literal ``::``, ``\\:`` a literal ``:``, ``\\\\`` a backslash; any
other backslash stays as it is. A trailing ``/`` sends a directory's contents instead of
the directory under its own name, as in rsync; an archive's root without one (``a.barecat::``)
is sent as a directory named after the archive (``a``), with one (``a.barecat::/``) as
its contents. Pure apart from checking whether a name is an existing archive.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, field

from barecat.exceptions import BarecatError
from barecat.layout import archive_exists, base_path, index_path, is_sqlite_file
from barecat.paths import normalize

ARCHIVE_SUFFIX = ".barecat"
"""A destination ``NAME.barecat:...`` names an archive to create even before it exists."""
SERVER_SCHEME = "barecat://"
DEFAULT_SERVER_PORT = 50003
TAR_ZIP_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz",
                    ".tar.zst", ".tzst", ".zip")  # fmt: skip
"""Names read as tar or zip files when followed by ``::``."""
_SSH_HEAD = re.compile(r"(?:([^@/:]+)@)?([^@/:]+)")
"""``[USER@]HOST`` before the ':' of an SSH path."""


class Place(enum.Enum):
    """Where one side of a sync is."""

    LOCAL = "local"
    ARCHIVE = "archive"
    TAR_ZIP = "tar_zip"
    SSH = "ssh"
    SSH_ARCHIVE = "ssh_archive"
    SERVER = "server"


class UnsupportedLocationBarecatError(BarecatError, NotImplementedError):
    """A sync side that ``barecat rsync`` recognizes but cannot reach or write."""


@dataclass(frozen=True, slots=True)
class Location:
    """One command-line side of a sync.

    ``path`` is the local (or remote) filesystem path for directories, and the
    normalized path inside the archive for the archive kinds. ``contents`` is rsync's
    trailing-slash rule: the directory's contents go to the destination, instead of the
    directory under its own name.
    """

    path: str
    archive: str | None = None
    """The archive: its local path, its path on the SSH host, or its name on the server."""
    contents: bool = False
    creates_archive: bool = field(default=False, compare=False)
    place: Place = Place.LOCAL
    host: str | None = None
    """The SSH host, or the server's ``HOST:PORT``."""
    user: str | None = None
    trailing_slash: bool = False

    @property
    def is_archive(self) -> bool:
        """True for a barecat archive on this machine."""
        return self.place is Place.ARCHIVE

    @property
    def is_local_tree(self) -> bool:
        """True for a directory or file on this machine."""
        return self.place is Place.LOCAL

    @property
    def archive_name(self) -> str:
        """The archive's file name without ``.barecat`` (or the tar/zip suffix)."""
        if not self.archive:
            return ""
        name = os.path.basename(self.archive.rstrip("/"))
        if self.place is Place.TAR_ZIP:
            lower = name.lower()
            for suffix in sorted(TAR_ZIP_SUFFIXES, key=len, reverse=True):
                if lower.endswith(suffix):
                    return name[: -len(suffix)]
        return name.removesuffix("-sqlite-index").removesuffix(ARCHIVE_SUFFIX)

    @property
    def name(self) -> str:
        """The name the entry takes at the destination when sent without a slash."""
        if self.place is Place.LOCAL:
            return os.path.basename(os.path.normpath(self.path))
        return self.path.rsplit("/", 1)[-1] if self.path else self.archive_name


def is_archive(path: str) -> bool:
    """True if ``path`` is an existing barecat archive (its index is an SQLite file)."""
    return bool(path) and archive_exists(path) and is_sqlite_file(index_path(base_path(path)))


def is_tar_zip_name(path: str) -> bool:
    """True if the name says tar or zip (``.tar.gz``, ``.tgz``, ``.zip``, ...)."""
    return path.lower().endswith(TAR_ZIP_SUFFIXES)


def _colons(arg: str) -> list[int]:
    """Positions of ':' not escaped (``\\:``, ``\\::``), skipping escaped backslashes."""
    out, i = [], 0
    while i < len(arg):
        if arg[i] == "\\" and arg.startswith("::", i + 1):
            i += 3
        elif arg[i] == "\\" and i + 1 < len(arg) and arg[i + 1] in "\\:":
            i += 2
        else:
            if arg[i] == ":":
                out.append(i)
            i += 1
    return out


def unescape(text: str) -> str:
    """``\\::`` to ``::``, ``\\:`` to ``:``, ``\\\\`` to ``\\``; other backslashes stay."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text.startswith("::", i + 1):
            out.append("::")
            i += 3
        elif text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "\\:":
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_location(arg: str, *, destination: bool = False) -> Location:
    """Decide what the command-line argument ``arg`` names (see the module's rules).

    Raises:
        ValueError: a ``barecat://`` URL without an archive name.
    """
    slash = arg.endswith("/")
    if arg.startswith(SERVER_SCHEME):
        return _server_location(arg, slash)
    colons = _colons(arg)
    for n, i in enumerate(colons):
        if n and colons[n - 1] == i - 1:
            continue  # the second half of a '::' already looked at
        head = unescape(arg[:i])
        if i + 1 in colons:
            return _double_colon_location(head, arg[i + 2 :], destination, slash)
        if is_archive(head):
            return _inner(Place.ARCHIVE, head, arg[i + 1 :], slash)
    if destination and colons:
        head = unescape(arg[: colons[0]])
        if head.endswith(ARCHIVE_SUFFIX) and not os.path.lexists(head):
            return _inner(Place.ARCHIVE, head, arg[colons[0] + 1 :], slash, creates=True)
    if colons:
        ssh = _ssh(unescape(arg[: colons[0]]), unescape(arg[colons[0] + 1 :]))
        if ssh is not None:
            user, host, remote = ssh
            return Location(remote, None, slash, place=Place.SSH, host=host, user=user,
                            trailing_slash=slash)  # fmt: skip
    local = unescape(arg)
    base = os.path.basename(os.path.normpath(local)) if local else ""
    return Location(local, None, slash or base in ("", ".", ".."), trailing_slash=slash)


def _ssh(head: str, rest: str) -> tuple[str | None, str, str] | None:
    """``(user, host, path)`` if ``head:rest`` is ``[USER@]HOST:/PATH``."""
    match = _SSH_HEAD.fullmatch(head)
    if match is None or not rest.startswith("/"):
        return None
    return match.group(1), match.group(2), rest


def _double_colon_location(head: str, inner: str, destination: bool, slash: bool) -> Location:
    at = head.find(":")
    ssh = _ssh(head[:at], head[at + 1 :]) if at > 0 and not is_archive(head) else None
    if ssh is not None:
        user, host, remote = ssh
        loc = _inner(Place.SSH_ARCHIVE, remote, inner, slash)
        return Location(loc.path, remote, loc.contents, place=Place.SSH_ARCHIVE, host=host,
                        user=user, trailing_slash=slash)  # fmt: skip
    if is_tar_zip_name(head) and not is_archive(head):
        return _inner(Place.TAR_ZIP, head, inner, slash)
    creates = destination and not os.path.lexists(head)
    return _inner(Place.ARCHIVE, head, inner, slash, creates=creates)


def _inner(place: Place, archive: str, raw: str, slash: bool, creates: bool = False) -> Location:
    """A path inside ``archive``; its root without a trailing slash is the archive itself."""
    inner = unescape(raw)
    stripped = inner.strip("/")
    path = normalize(stripped) if stripped else ""
    contents = slash or (bool(inner) and not path)  # 'a::/' and 'a::.': the contents
    return Location(path, archive, contents, creates, place, trailing_slash=slash)


def _server_location(arg: str, slash: bool) -> Location:
    rest = arg[len(SERVER_SCHEME) :]
    host, sep, rest = rest.partition("/")
    if not sep or not host or not rest.rstrip("/"):
        raise ValueError(
            f"Invalid barecat:// URL: {arg} (expected barecat://HOST[:PORT]/ARCHIVE[::PATH])"
        )
    colons = _colons(rest)
    at = next((i for i in colons if i + 1 in colons), -1)
    name, inner = (rest, "") if at < 0 else (rest[:at], rest[at + 2 :])
    loc = _inner(Place.SERVER, unescape(name).rstrip("/"), inner, slash)
    return Location(loc.path, loc.archive, loc.contents, place=Place.SERVER, host=host,
                    trailing_slash=slash)  # fmt: skip


def server_address(host: str) -> tuple[str, int]:
    """``HOST[:PORT]`` (IPv6 in brackets) as host and port, 50003 if none is given.

    Raises:
        ValueError: a port that is not a number.
    """
    if host.startswith("["):  # [IPv6] or [IPv6]:PORT
        end = host.find("]") + 1
        name, port = host[:end], host[end:].removeprefix(":")
    else:
        name, _, port = host.partition(":")
    if not port:
        return name, DEFAULT_SERVER_PORT
    if not port.isdigit():
        raise ValueError(f"Invalid port in {host!r}")
    return name, int(port)


__all__ = [
    "DEFAULT_SERVER_PORT",
    "Location",
    "Place",
    "UnsupportedLocationBarecatError",
    "is_archive",
    "is_tar_zip_name",
    "parse_location",
    "server_address",
    "unescape",
]
