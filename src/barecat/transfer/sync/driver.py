"""rsync between directories and archive subtrees: ``sync(["dir/"], "data.barecat:dir/")``.

Each source is listed the way rsync names it (``src/`` sends the contents, ``src`` the
directory under its own name; a tar or zip source is read into a temporary archive
first), the destination is listed only below the names the
sources send, :func:`~barecat.transfer.sync.plan.plan_sync` decides, and the
destination's tree applies the plan (or, in a dry run, nothing happens and the plan is
returned). Either side or both may be archives; at least one must be, since plain
directories are rsync's own job. Uses only the public :class:`Barecat` API; never prints.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

from barecat.archive import Barecat, IfEncrypted, Passphrase
from barecat.exceptions import BarecatError
from barecat.glob import PathFilter
from barecat.layout import base_path
from barecat.transfer.convert.formats import format_of_file
from barecat.transfer.convert.tar_zip_import import import_tar, import_zip
from barecat.transfer.sync.locations import (
    Location,
    Place,
    UnsupportedLocationBarecatError,
    parse_location,
)
from barecat.transfer.sync.plan import (
    Action,
    Entry,
    Kind,
    Listing,
    Op,
    SyncOptions,
    needs_checksum,
    plan_sync,
)
from barecat.transfer.sync.trees import (
    ArchiveDestination,
    DirectoryDestination,
    Sourced,
    archive_crc32c,
    list_archive,
    list_local,
    local_crc32c,
)

OnAction = Callable[[Action, int], None]


@dataclass(slots=True)
class SyncResult:
    """The plan, how much of it was carried out, and what failed (path, reason)."""

    actions: list[Action] = field(default_factory=list)
    done: int = 0
    bytes: int = 0
    failures: list[tuple[str, Exception]] = field(default_factory=list)


class _Archives:
    """Open archives by base path, so an archive named twice is opened once. Sources get
    the passphrase as given (a passphrase given says they are encrypted); the
    destination is asked for it only if it is encrypted, and a tar or zip file's staging
    archive never."""

    def __init__(self, stack: ExitStack, passphrase: Passphrase | None) -> None:
        self.stack = stack
        self.passphrase = passphrase
        self.open: dict[str, Barecat] = {}

    def get(self, path: str, writable: bool, passphrase: Passphrase | None = None) -> Barecat:
        key = os.path.realpath(base_path(path))
        bc = self.open.get(key)
        if bc is None:
            bc = self.stack.enter_context(
                Barecat(path, readonly=not writable, passphrase=passphrase)
            )
            self.open[key] = bc
        return bc

    def source(self, path: str) -> Barecat:
        return self.get(path, writable=False, passphrase=self.passphrase)

    def destination(self, path: str, writable: bool) -> Barecat:
        return self.get(path, writable, IfEncrypted.of(self.passphrase))

    def staged(self, path: str, skipped: list[tuple[str, Exception]]) -> Barecat:
        """A tar or zip file's members, stored in a temporary archive (under ``$TMPDIR``)
        that lives as long as the sync: tar streams cannot be read in any other order."""
        if not os.path.isfile(path):
            raise FileNotFoundError(2, "No such file or directory", path)
        tmp = self.stack.enter_context(tempfile.TemporaryDirectory(prefix="barecat-rsync-"))
        staging = os.path.join(tmp, "staged.barecat")
        with open(path, "rb") as f, Barecat(staging, readonly=False) as bc:
            zipped = format_of_file(path) == "zip"
            result = import_zip(bc, f) if zipped else import_tar(bc, f)
        skipped.extend((f"{path}::{name}", BarecatError(why)) for name, why in result.skipped)
        return self.get(staging, writable=False, passphrase=None)


def _unsupported(loc: Location) -> UnsupportedLocationBarecatError:
    if loc.place is Place.SERVER:
        where = f"the barecat server at {loc.host} (use barecat.connect('barecat://...'))"
    else:
        where = f"the SSH host {loc.host} (run barecat there, or copy the archive here)"
    return UnsupportedLocationBarecatError(f"barecat rsync cannot reach {where}")


def _source_listing(
    loc: Location,
    archives: _Archives,
    path_filter: PathFilter | None,
    bad_names: list[tuple[str, Exception]],
) -> tuple[Listing, Barecat | None]:
    rel = "" if loc.contents else loc.name
    if loc.place is Place.LOCAL:
        if not os.path.lexists(loc.path):
            raise FileNotFoundError(2, "No such file or directory", loc.path)
        listing = list_local(
            loc.path, rel, path_filter, follow_root=loc.contents, bad_names=bad_names
        )
        return listing, None
    assert loc.archive is not None
    if loc.place is Place.TAR_ZIP:
        bc = archives.staged(loc.archive, bad_names)
    else:
        bc = archives.source(loc.archive)
    if not bc.exists(loc.path):
        raise FileNotFoundError(2, "No such file or directory in the archive", loc.path)
    if loc.path and bc.isfile(loc.path):
        rel = loc.name
    return list_archive(bc, loc.path, rel, path_filter), bc


def _tops(listing: Listing) -> set[str]:
    if "" in listing:
        return {""}
    return {rel.split("/", 1)[0] for rel in listing}


def _dest_listing(
    loc: Location, bc: Barecat | None, tops: set[str], path_filter: PathFilter | None
) -> Listing:
    listing: Listing = {}
    for top in sorted(tops):
        if bc is None:
            disk = os.path.join(loc.path, top) if top else loc.path
            listing.update(list_local(disk, top, path_filter, follow_root=not top))
        elif bc is not None:
            inner = f"{loc.path}/{top}" if loc.path and top else loc.path or top
            listing.update(list_archive(bc, inner, top, path_filter))
    return listing


def _fill_checksums(
    src: Listing, origin: dict[str, Barecat | None], dst: Listing, dest_bc: Barecat | None,
    options: SyncOptions,
) -> None:  # fmt: skip
    for rel, s in src.items():
        d = dst.get(rel)
        if d is None or not needs_checksum(s, d, options):
            continue
        _fill(s, origin[rel])
        _fill(d, dest_bc)


def _fill(entry: Entry, bc: Barecat | None) -> None:
    if entry.crc32c is None and entry.kind is Kind.FILE:
        entry.crc32c = local_crc32c(entry.origin) if bc is None else archive_crc32c(bc, entry)


def _open_destination(loc: Location, archives: _Archives, dry_run: bool) -> Barecat | None:
    if loc.place is Place.LOCAL or loc.archive is None:
        return None
    if dry_run:
        return None if loc.creates_archive else archives.destination(loc.archive, False)
    return archives.destination(loc.archive, writable=True)


def _refuse_decrypting(
    sources: Iterable[Barecat | None], dest: Location, dest_bc: Barecat | None
) -> None:
    """An encrypted source's files go into an archive that is not encrypted only when
    asked for (``decrypt``): they would be stored there in plain text."""
    if dest.archive is None or (dest_bc is not None and dest_bc.encrypted):
        return
    for bc in sources:
        if bc is not None and bc.encrypted:
            raise BarecatError(
                f"{bc.path} is encrypted and {dest.archive} is not: its files would be "
                "stored there decrypted; ask for that (barecat rsync --decrypt, "
                "decrypt=True), or sync into an encrypted archive"
            )


def _reads_contents(action: Action) -> bool:
    return action.op in (Op.COPY, Op.UPDATE) and action.entry.kind is not Kind.DIR


def _check_digests(sources: Iterable[Barecat | None]) -> None:
    """Each encrypted source whose files are about to be read has its file rows checked
    against its index digest first (its key is needed then anyway), so a row put back
    there from an older index is refused, not copied."""
    checked: set[int] = set()
    for bc in sources:
        if bc is not None and bc.encrypted and id(bc) not in checked:
            checked.add(id(bc))
            bc.check_index_digest()


def _gather_sources(
    sources: Sequence[Location],
    archives: _Archives,
    path_filter: PathFilter | None,
    bad_names: list[tuple[str, Exception]],
) -> tuple[Listing, dict[str, Barecat | None]]:
    merged: Listing = {}
    origin: dict[str, Barecat | None] = {}
    for loc in sources:
        listing, bc = _source_listing(loc, archives, path_filter, bad_names)
        merged.update(listing)
        origin.update(dict.fromkeys(listing, bc))
    return merged, origin


def _check_places(sources: Sequence[Location], dest: Location) -> None:
    """Refuse what cannot be done before anything is opened or created."""
    for loc in (*sources, dest):
        if loc.place not in (Place.LOCAL, Place.ARCHIVE, Place.TAR_ZIP):
            raise _unsupported(loc)
    if dest.place is Place.TAR_ZIP:
        raise ValueError(
            f"{dest.archive}: tar and zip files can only be sources of barecat rsync "
            "(write one with barecat convert)"
        )
    if dest.place is Place.LOCAL and any(s.place is Place.LOCAL for s in sources):
        raise ValueError(
            "Use regular rsync for local-to-local directory sync "
            "(barecat rsync needs an archive on at least one side: ARCHIVE::path)"
        )


def sync(
    sources: Sequence[str | Location],
    dest: str | Location,
    options: SyncOptions | None = None,
    *,
    path_filter: PathFilter | None = None,
    dry_run: bool = False,
    on_action: OnAction | None = None,
    passphrase: Passphrase | None = None,
    decrypt: bool = False,
) -> SyncResult:
    """Make ``dest`` hold what ``sources`` name, as ``rsync -a`` would.

    Strings are parsed with :func:`~barecat.transfer.sync.locations.parse_location`.
    ``on_action`` is called after each change is made (in a dry run: for each planned
    change) with the bytes it moved. ``passphrase`` opens encrypted archives among them:
    a source archive given it must be encrypted (``IfEncrypted``: may be), the
    destination is asked for it only if it is encrypted. Files of an encrypted source go
    into a destination archive that is not encrypted only with ``decrypt`` (and into a
    directory always, as ``extract``); such a source's file rows are checked against its
    index digest before any of its files is read. Tar and zip sources are read once into
    a temporary archive under ``$TMPDIR``.

    Returns:
        The plan, how much of it was done, and what failed (per path; the run goes on).

    Raises:
        FileNotFoundError: a source does not exist (nothing is changed).
        ValueError: two local sides, or a tar/zip destination.
        UnsupportedLocationBarecatError: an SSH or server side.
        BarecatError: an encrypted source and a destination archive that is not,
            without ``decrypt`` (nothing is changed, nor a destination made).
        BarecatIntegrityError: an encrypted source's rows fail its index digest
            (nothing of it is copied).
    """
    options = options or SyncOptions()
    src_locs = [s if isinstance(s, Location) else parse_location(s) for s in sources]
    dst_loc = dest if isinstance(dest, Location) else parse_location(dest, destination=True)
    _check_places(src_locs, dst_loc)
    with ExitStack() as stack:
        archives = _Archives(stack, passphrase)
        dest_bc = _open_destination(dst_loc, archives, dry_run)  # first: it may be a source too
        bad_names: list[tuple[str, Exception]] = []  # local names that are not UTF-8
        src, origin = _gather_sources(src_locs, archives, path_filter, bad_names)
        if not decrypt:
            _refuse_decrypting(origin.values(), dst_loc, dest_bc)
        if dst_loc.place is not Place.LOCAL and dest_bc is None:
            dst: Listing = {}
        else:
            dst = _dest_listing(dst_loc, dest_bc, _tops(src), path_filter)
        if options.checksum:
            _check_digests(origin[rel] for rel in src if rel in dst)
        _fill_checksums(src, origin, dst, dest_bc, options)
        actions = plan_sync(src, dst, options)
        result = SyncResult(actions, failures=bad_names)
        if dry_run:
            for action in actions:
                if on_action is not None:
                    on_action(action, 0)
            return result
        plan = [Sourced(a, origin.get(a.path)) for a in actions]
        _check_digests(p.source for p in plan if _reads_contents(p.action))
        done = on_action or (lambda _a, _n: None)
        if dest_bc is not None:
            applied = ArchiveDestination(dest_bc, dst_loc.path, done).apply(plan)
        else:
            applied = DirectoryDestination(dst_loc.path, done).apply(plan)
    result.done, result.bytes = applied.done, applied.bytes
    result.failures += applied.failures
    return result


def iter_display(actions: Sequence[Action]) -> Iterator[str]:
    """The ``rsync -v`` lines of a plan."""
    for action in actions:
        if action.display is not None:
            yield action.display


__all__ = ["SyncOptions", "SyncResult", "iter_display", "parse_location", "sync"]
