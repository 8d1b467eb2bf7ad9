"""barecat 0.3.1's ``barecat.maintenance.rsync`` API over this package's sync.

``parse_path`` reports what an argument names with the reference's fields, and
``rsync(sources, dest, RsyncOptions(...))`` runs the very sync behind ``barecat rsync``
(:func:`barecat.transfer.sync.driver.sync`): same parsing, same rsync rules, same safety.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field

from barecat.glob import PathFilter
from barecat.transfer.sync.driver import SyncResult, sync
from barecat.transfer.sync.locations import Location, Place, parse_location
from barecat.transfer.sync.plan import Action, SyncOptions


class PathType(enum.Enum):
    """What a path names, with the reference's names and values."""

    LOCAL = "local"
    LOCAL_ARCHIVE = "local_archive"
    TAR_ZIP = "tar_zip"
    SSH = "ssh"
    SSH_ARCHIVE = "ssh_archive"
    BARECAT_SERVER = "barecat_server"


_TYPES = {
    Place.LOCAL: PathType.LOCAL,
    Place.ARCHIVE: PathType.LOCAL_ARCHIVE,
    Place.TAR_ZIP: PathType.TAR_ZIP,
    Place.SSH: PathType.SSH,
    Place.SSH_ARCHIVE: PathType.SSH_ARCHIVE,
    Place.SERVER: PathType.BARECAT_SERVER,
}


@dataclass
class ParsedPath:
    """One parsed source or destination, as the reference reported it."""

    path_type: PathType
    host: str | None
    """The SSH host, or the server's ``HOST:PORT``."""
    user: str | None
    filesystem_path: str
    """The local or remote path, without trailing slashes ('' for a server)."""
    archive_path: str | None
    """The archive (its path, or its name on a server); None for plain directories."""
    inner_path: str
    """The path inside the archive, without leading or trailing slashes."""
    trailing_slash: bool

    @property
    def contents_mode(self) -> bool:
        """True if the contents are sent rather than the directory itself."""
        return self.trailing_slash

    @property
    def is_archive(self) -> bool:
        """True for a barecat archive, here, over SSH or on a server."""
        return self.path_type in (
            PathType.LOCAL_ARCHIVE,
            PathType.SSH_ARCHIVE,
            PathType.BARECAT_SERVER,
        )

    @property
    def is_tar_zip(self) -> bool:
        """True for a tar or zip file read as a source."""
        return self.path_type is PathType.TAR_ZIP

    @property
    def is_remote(self) -> bool:
        """True for SSH paths and servers."""
        return self.path_type in (PathType.SSH, PathType.SSH_ARCHIVE, PathType.BARECAT_SERVER)

    @property
    def archive_basename(self) -> str:
        """The archive's file name without ``.barecat`` ('' for plain directories)."""
        if not self.archive_path:
            return ""
        name = self.archive_path.replace("\\", "/").rsplit("/", 1)[-1]
        return name.removesuffix("-sqlite-index").removesuffix(".barecat")


def _parsed(loc: Location) -> ParsedPath:
    if loc.place is Place.LOCAL or loc.place is Place.SSH:
        fs_path = loc.path.rstrip("/") or ("/" if loc.path.startswith("/") else "")
    elif loc.place is Place.SERVER:
        fs_path = ""
    else:
        fs_path = loc.archive or ""
    return ParsedPath(
        path_type=_TYPES[loc.place],
        host=loc.host,
        user=loc.user,
        filesystem_path=fs_path,
        archive_path=None if loc.place in (Place.LOCAL, Place.SSH) else loc.archive,
        inner_path=loc.path if loc.archive is not None else "",
        trailing_slash=loc.trailing_slash,
    )


def parse_path(path: str) -> ParsedPath:
    """What ``path`` names, by the rules of ``barecat rsync`` (read as a source).

    ``ARCHIVE::inner`` is a path in an archive (a tar/zip file by its name, on an SSH host
    as ``[user@]host:/path/ARCHIVE::inner``), ``barecat://host:port/NAME::inner`` one on a
    server, ``[user@]host:/path`` a directory over SSH, anything else local; ``\\::``
    and ``\\\\`` escape. ``ARCHIVE:inner`` with one colon also names a path in an
    existing archive (this package's own spelling).

    Args:
        path: a command-line argument.

    Returns:
        The parse, with the reference's fields.

    Raises:
        ValueError: a ``barecat://`` URL without an archive name.
    """
    return _parsed(parse_location(path))


@dataclass
class RsyncOptions:
    """rsync's options, as the reference named them."""

    delete: bool = False
    dry_run: bool = False
    verbose: bool = False
    progress: bool = False
    """Accepted for compatibility; progress is shown by the ``barecat rsync`` command."""
    checksum: bool = False
    update: bool = False
    ignore_existing: bool = False
    existing: bool = False
    size_only: bool = False
    times: bool = True
    """Modification times are always kept (rsync -a); False is refused."""
    max_size: int | None = None
    min_size: int | None = None
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    recursive: bool = True
    """Directories are always synced whole; False is refused."""

    def __post_init__(self) -> None:
        self.include = list(self.include or [])
        self.exclude = list(self.exclude or [])


def rsync(sources: list[str], dest: str, options: RsyncOptions | None = None) -> SyncResult:
    """Sync ``sources`` into ``dest`` as ``barecat rsync SOURCES... DEST`` does.

    With ``verbose`` or ``dry_run``, each change is printed as ``rsync -v`` lists it.

    Args:
        sources: paths as :func:`parse_path` reads them.
        dest: the destination; ``NAME::`` that does not exist yet is created.
        options: what to transfer; see :class:`RsyncOptions`.

    Returns:
        What was planned and done.

    Raises:
        FileNotFoundError: a source does not exist.
        ValueError: two local sides, a tar/zip destination, ``times`` or ``recursive``
            turned off.
        NotImplementedError: an SSH or server side.
        OSError: the first of the per-file failures, raised once everything else was
            synced (``barecat rsync`` reports them all).
    """
    options = options or RsyncOptions()
    if not options.times or not options.recursive:
        raise ValueError("barecat rsync always keeps mtimes and recurses (times, recursive)")
    path_filter = PathFilter.from_patterns(options.include, options.exclude)
    sync_options = SyncOptions.of(options)

    def report(action: Action, _nbytes: int) -> None:
        if action.display is not None:
            sys.stdout.write(action.display + "\n")

    result = sync(
        list(sources),
        dest,
        sync_options,
        path_filter=None if path_filter.selects_everything else path_filter,
        dry_run=options.dry_run,
        on_action=report if options.verbose or options.dry_run else None,
    )
    if result.failures:
        raise result.failures[0][1]
    return result


__all__ = ["ParsedPath", "PathType", "RsyncOptions", "parse_path", "rsync"]
